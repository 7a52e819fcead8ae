// The W1 workload's shape and pattern library for the benchmarks
// (docs/ARCHITECTURE.md, "Workload W1"), shared by search_bench (the search
// alone) and e2e_bench (the whole daemon), so that both measure the same
// library: 16 patterns spanning all 201 dims, m = 128, band 12, neighbour
// range 3 inside each insole and 2 on the accelerometer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/search.h"

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

}  // namespace gw::bench
