// The W1 workload's shape and pattern library for the benchmarks
// (docs/search.md, "Workload W1"), shared by search_bench (the search
// alone) and e2e_bench (the whole daemon), so that both measure the same
// library: 16 patterns spanning all 201 dims, m = 128, band 12, neighbour
// range 3 inside each insole and 2 on the accelerometer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/search.h"
#include "sensors/recording.h"

namespace gw::bench {

inline constexpr int kSampleRateHz = 100;
inline constexpr int kW1Dims = 201;
inline constexpr int kW1Patterns = 16;
inline constexpr int kW1Length = 128;
inline constexpr int kW1Band = 12;  // floor(0.1 * m)

// A group of adjacent stream dims whose channels may be swapped by up to
// `neighbour_range` positions (one insole, or the accelerometer).
struct DimGroup {
  int begin = 0;
  int end = 0;  // exclusive
  int neighbour_range = 0;
};

// W1's layout generalised to other dim counts: the last 3 dims are the
// accelerometer (nr 2), the rest split into a left and a right insole (nr 3);
// fewer than 9 dims are one group with nr 2.
std::vector<DimGroup> w1_layout(int dims);

// Every (pattern dim, stream dim) pair the layout compares.
std::vector<kernels::DimPair> w1_pairs(int dims);

// `dims` independent random walks (unit Gaussian steps) plus white noise
// (std 0.5), sample-major: out[s * dims + d]. Synthetic, not sensor data.
std::vector<float> random_walks(int dims, int length, std::uint64_t seed);

// Pattern `index` of the random-walk library for generator seed `seed`:
// m samples cut from the middle of a 3m-sample walk (so it does not start at
// level 0), dim-major: out[d * m + s].
std::vector<float> random_walk_pattern(int dims, int m, std::uint64_t seed, int index);

// Wearer counts from a comma-separated list ("1,2,4"), in the order given;
// throws std::invalid_argument naming `option` for an item that is not an
// integer >= 1, or for an empty list.
std::vector<int> parse_counts(const std::string& text, const std::string& option);

// ---- The W1 daemon configuration (e2e_bench: the whole daemon;
// engine_host_bench: pipeline::Engine alone). The W1 wearer is one generic
// device of 201 channels (left insole 0..98, right insole 99..197,
// accelerometer 198..200; three channel groups), so that the 16 patterns span
// all 201 dims (a pattern reads one device).

// Channel c's name in the W1 device profile: l0..l98, r0..r98, ax, ay, az.
std::string w1_channel_name(int c);
// "[name(first), ..., name(end - 1)]" (a YAML flow list).
std::string w1_name_list(int first, int end);

// The 16 W1 patterns, dim-major [d * m + s], and the default threshold and
// min_dims of their source.
struct W1PatternSet {
  std::vector<std::vector<float>> values;
  double threshold = 0;
  int min_dims = 1;
};
// source "random-walk": search_bench's library (random_walk_pattern, threshold
// 2.0); "synthetic": windows of other synthetic wearers made from `base` (a
// gaitpdb recording) with seed + 1000 (threshold 4.0). Throws
// std::invalid_argument for another source.
W1PatternSet w1_patterns(const sensors::Recording& base, const std::string& source,
                         std::uint64_t seed);
// Writes pattern p as `dir`/w1_pNN.csv (a header of channel names, then m
// rows); throws gw::Error when it cannot.
void write_w1_templates(const W1PatternSet& set, const std::filesystem::path& dir);

// The YAML `devices:` section with the W1 device (id `device_id`, 100 Hz).
std::string w1_devices_yaml(int device_id);
// The YAML `patterns:` section: one window-mode pattern per template in
// `templates` (write_w1_templates), m = 128, band 0.1, nr 3 (which covers the
// 3-channel accelerometer group whole, i.e. W1's nr 2 there), z-normalised.
std::string w1_patterns_yaml(std::size_t patterns, const std::filesystem::path& templates,
                             double threshold, int min_dims);

}  // namespace gw::bench
