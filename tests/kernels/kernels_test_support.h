// Shared helpers of the kernels tests: test series (random walks, real Daphnet
// channels) and the check that a search returned exactly the brute-force
// reference's top-p windows within the threshold.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/search.h"

namespace gw::kernels::testing {

// A pattern of dim-major series (all of one length).
inline Pattern make_pattern(std::uint32_t profile, const std::vector<std::vector<float>>& dims,
                            int band, bool znorm, float threshold, int max_matches,
                            std::vector<DimPair> pairs, SearchMode mode = SearchMode::kWindow) {
  Pattern pattern;
  pattern.profile = profile;
  pattern.length = static_cast<int>(dims.at(0).size());
  pattern.band = band;
  pattern.znorm = znorm;
  pattern.mode = mode;
  pattern.threshold = threshold;
  pattern.max_matches_per_pair = max_matches;
  pattern.dim_count = static_cast<int>(dims.size());
  for (const std::vector<float>& dim : dims)
    pattern.dims.insert(pattern.dims.end(), dim.begin(), dim.end());
  pattern.pairs = std::move(pairs);
  return pattern;
}

// Pairs (j, i) with |i - j| <= neighbour_range, j < pattern_dims, i < stream_dims.
inline std::vector<DimPair> neighbour_pairs(int pattern_dims, int stream_dims,
                                            int neighbour_range) {
  std::vector<DimPair> pairs;
  for (int j = 0; j < pattern_dims; ++j) {
    for (int i = std::max(0, j - neighbour_range);
         i <= std::min(stream_dims - 1, j + neighbour_range); ++i) {
      pairs.push_back({static_cast<std::uint16_t>(j), static_cast<std::uint16_t>(i)});
    }
  }
  return pairs;
}

// Gaussian random walk; deterministic for a seed on one standard library.
inline std::vector<float> random_walk(int n, std::uint64_t seed, double step = 1.0,
                                      double noise = 0.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> gauss(0.0, 1.0);
  std::vector<float> out(n);
  double level = 0;
  for (int k = 0; k < n; ++k) {
    level += step * gauss(rng);
    out[k] = static_cast<float>(level + noise * gauss(rng));
  }
  return out;
}

// Columns of data/daphnet/S02R01.txt: 0 time [ms], 1..9 accelerations [mg]
// (ankle, thigh, trunk; forward/vertical/lateral each), 10 annotation.
// Loaded once; a tiny local parser because the sensors library is separate.
inline const std::vector<std::vector<float>>& daphnet_columns() {
  static const std::vector<std::vector<float>> columns = [] {
    std::vector<std::vector<float>> cols(11);
    const std::string path = std::string(GW_DATA_DIR) + "/daphnet/S02R01.txt";
    std::ifstream in(path);
    REQUIRE(in.good());
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      double value;
      for (int c = 0; c < 11 && (fields >> value); ++c)
        cols[c].push_back(static_cast<float>(value));
    }
    return cols;
  }();
  return columns;
}

// `count` samples of one Daphnet acceleration channel (1..9) from `begin`.
inline std::vector<float> daphnet_channel(int column, int begin, int count) {
  const std::vector<float>& all = daphnet_columns().at(column);
  REQUIRE(static_cast<std::size_t>(begin + count) <= all.size());
  return std::vector<float>(all.begin() + begin, all.begin() + begin + count);
}

struct FoundWindow {
  std::int64_t end = 0;  // in the reference's coordinates (window end index in the series)
  double distance = 0;
};

struct ExpectedSearch {
  std::vector<double> reference;  // sliding_dtw_reference() output
  std::int64_t first_end = 0;     // the window end of reference[0]
  double threshold = 0;
  int max_matches = 1;
};

// A threshold below which about the given fraction of the values lie, halfway
// between two neighbouring values so that no value sits on it.
inline double quantile(std::vector<double> values, double fraction) {
  REQUIRE(values.size() >= 2);
  std::sort(values.begin(), values.end());
  const std::size_t k =
      std::min(values.size() - 2, static_cast<std::size_t>(fraction * values.size()));
  return 0.5 * (values[k] + values[k + 1]);
}

// Checks `found` against the brute force: same windows as the reference's
// best max_matches windows with distance <= threshold, ordered by (distance,
// end), each distance within `distance_tolerance` (relative, absolute below 1)
// of the reference. Windows whose reference distances are equal up to
// `tie_tolerance` (relative) may be exchanged at the top-p or threshold
// boundary, since two implementations may round such ties differently.
// Returns true when the end sets are exactly the reference's.
inline bool check_against_reference(const std::vector<FoundWindow>& found,
                                    const ExpectedSearch& expected, double distance_tolerance,
                                    double tie_tolerance = 1e-9) {
  const auto& ref = expected.reference;
  const std::int64_t last_end = expected.first_end + static_cast<std::int64_t>(ref.size()) - 1;
  REQUIRE(found.size() <= static_cast<std::size_t>(expected.max_matches));
  std::set<std::int64_t> found_ends;
  double worst_found = -1;
  for (std::size_t k = 0; k < found.size(); ++k) {
    const FoundWindow& f = found[k];
    INFO("found end " << f.end << " distance " << f.distance);
    REQUIRE(f.end >= expected.first_end);
    REQUIRE(f.end <= last_end);
    REQUIRE(found_ends.insert(f.end).second);
    const double want = ref[f.end - expected.first_end];
    CHECK(std::fabs(f.distance - want) <= distance_tolerance * std::max(1.0, want));
    CHECK(want <= expected.threshold * (1 + tie_tolerance) + tie_tolerance);
    worst_found = std::max(worst_found, want);
    // Ordered by distance; the order among equal distances is each caller's
    // to check (it depends on the precision the distances are reported in).
    if (k > 0) CHECK(found[k - 1].distance <= f.distance);
  }
  const bool full = found.size() == static_cast<std::size_t>(expected.max_matches);
  for (std::size_t k = 0; k < ref.size(); ++k) {
    const std::int64_t end = expected.first_end + static_cast<std::int64_t>(k);
    if (found_ends.count(end) != 0) continue;
    // A window left out must fail the threshold or lose to every kept window.
    const bool over_threshold = ref[k] >= expected.threshold * (1 - tie_tolerance) - tie_tolerance;
    const bool outranked = full && ref[k] >= worst_found * (1 - tie_tolerance) - tie_tolerance;
    INFO("missing end " << end << " reference distance " << ref[k] << " threshold "
                        << expected.threshold << " worst kept " << worst_found);
    CHECK((over_threshold || outranked));
  }

  // The exact top-p of the reference, ties broken by end.
  std::vector<std::pair<double, std::int64_t>> ranked;
  for (std::size_t k = 0; k < ref.size(); ++k) {
    if (ref[k] <= expected.threshold) {
      ranked.emplace_back(ref[k], expected.first_end + static_cast<std::int64_t>(k));
    }
  }
  std::sort(ranked.begin(), ranked.end());
  if (ranked.size() > static_cast<std::size_t>(expected.max_matches)) {
    ranked.resize(expected.max_matches);
  }
  std::set<std::int64_t> reference_ends;
  for (const auto& entry : ranked) reference_ends.insert(entry.second);
  return reference_ends == found_ends;
}

}  // namespace gw::kernels::testing
