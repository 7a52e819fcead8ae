// The single-channel UCR search (private kernels/ucr_search.h) against the
// brute-force sliding_dtw_reference, in double precision.
#include "kernels/ucr_search.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/dtw.h"
#include "kernels_test_support.h"

namespace gw::kernels {
namespace {

using testing::ExpectedSearch;
using testing::FoundWindow;

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<FoundWindow> run_search(const PreparedQuery& query, const std::vector<float>& series,
                                    int first_end, double threshold, int max_hits,
                                    const PruningOptions& pruning, SearchStats* stats) {
  WindowSearcher searcher;
  std::vector<WindowHit> hits;
  searcher.search(query, series.data(), static_cast<int>(series.size()), first_end, threshold,
                  max_hits, pruning, &hits, stats);
  std::vector<FoundWindow> found;
  for (std::size_t k = 0; k < hits.size(); ++k) {
    if (k > 0) {  // ordered by (distance_sq, end)
      CHECK((hits[k - 1].distance_sq < hits[k].distance_sq ||
             (hits[k - 1].distance_sq == hits[k].distance_sq && hits[k - 1].end < hits[k].end)));
    }
    found.push_back({hits[k].end, std::sqrt(hits[k].distance_sq)});
  }
  return found;
}

TEST_CASE("sliding_envelope equals the brute-force max/min over +-r", "[ucr]") {
  const std::vector<float> x = testing::random_walk(300, 9);
  std::vector<int> scratch;
  for (int radius : {0, 1, 5, 40, 299, 400}) {
    std::vector<float> upper(300), lower(300);
    sliding_envelope(x.data(), 300, radius, upper.data(), lower.data(), &scratch);
    for (int k = 0; k < 300; ++k) {
      double hi = -kInf, lo = kInf;
      for (int l = std::max(0, k - radius); l <= std::min(299, k + radius); ++l) {
        hi = std::max<double>(hi, x[l]);
        lo = std::min<double>(lo, x[l]);
      }
      INFO("radius " << radius << " k " << k);
      REQUIRE(upper[k] == hi);
      REQUIRE(lower[k] == lo);
    }
  }
}

TEST_CASE("prepare_query normalises, envelopes and orders the query", "[ucr]") {
  const std::vector<float> raw = testing::random_walk(64, 4);
  const PreparedQuery q = prepare_query(raw.data(), 64, 6, true);
  const std::vector<double> z = znormalize(raw.data(), 64);
  REQUIRE(q.values == z);
  for (int k = 1; k < 64; ++k) {
    CHECK(std::fabs(q.sorted_values[k - 1]) >= std::fabs(q.sorted_values[k]));
  }
  for (int k = 0; k < 64; ++k) {
    CHECK(q.lower[k] <= q.values[k]);
    CHECK(q.values[k] <= q.upper[k]);
  }
  // LB_Kim layers only where start and end layers cannot share a cell.
  CHECK(prepare_query(raw.data(), 2, 0, true).kim_layers == 1);
  CHECK(prepare_query(raw.data(), 3, 0, true).kim_layers == 1);
  CHECK(prepare_query(raw.data(), 4, 0, true).kim_layers == 2);
  CHECK(prepare_query(raw.data(), 5, 0, true).kim_layers == 2);
  CHECK(prepare_query(raw.data(), 6, 0, true).kim_layers == 3);
}

struct Source {
  std::string name;
  std::vector<float> series;
  std::vector<float> query_source;  // the query is cut from here
  bool exact_ties_expected;         // real data can hold windows with equal distances
};

std::vector<Source> sources() {
  std::vector<Source> out;
  out.push_back({"random walk", testing::random_walk(1300, 101, 1.0, 0.3),
                 testing::random_walk(400, 202, 1.0, 0.3), false});
  // Ankle forward acceleration during the walking part of the recording; the
  // query is a stretch of the same channel from elsewhere.
  out.push_back({"daphnet ankle forward", testing::daphnet_channel(1, 20000, 1300),
                 testing::daphnet_channel(1, 30000, 400), true});
  return out;
}

TEST_CASE("UCR search equals brute force over m, band, znorm, p and threshold", "[ucr]") {
  int exact_cases = 0, cases = 0;
  for (const Source& source : sources()) {
    for (int m : {16, 64, 128}) {
      for (double band_fraction : {0.0, 0.05, 0.1, 0.5}) {
        const int band = static_cast<int>(std::floor(band_fraction * m));
        for (bool znorm : {true, false}) {
          const float* query_raw = source.query_source.data() + 37;
          const int n = static_cast<int>(source.series.size());
          const std::vector<double> reference =
              sliding_dtw_reference(query_raw, m, source.series.data(), n, 0, band, znorm);
          const PreparedQuery query = prepare_query(query_raw, m, band, znorm);
          const double tight = testing::quantile(reference, 0.03);
          for (int max_hits : {3, 100000}) {
            for (double threshold : {tight, kInf}) {
              INFO(source.name << " m " << m << " band " << band << " znorm " << znorm << " p "
                               << max_hits << " threshold " << threshold);
              SearchStats stats;
              const auto found = run_search(query, source.series, 0, threshold, max_hits,
                                            PruningOptions{}, &stats);
              ExpectedSearch expected{reference, m - 1, threshold, max_hits};
              const bool exact = testing::check_against_reference(found, expected, 1e-9);
              if (!source.exact_ties_expected) CHECK(exact);
              exact_cases += exact;
              ++cases;
              CHECK(stats.windows == reference.size());
              CHECK(stats.windows == stats.pruned_kim + stats.pruned_keogh_eq +
                                         stats.pruned_keogh_ec + stats.dtw_full +
                                         stats.dtw_abandoned);
              if (threshold == kInf && max_hits > n) {
                CHECK(found.size() == reference.size());  // nothing may be pruned
              }
            }
          }
        }
      }
    }
  }
  // Real data may tie only occasionally; nearly every case must agree exactly.
  CHECK(exact_cases >= cases - 4);
}

TEST_CASE("UCR search is exact for the shortest queries", "[ucr]") {
  // Lengths where LB_Kim may use only some layers, every band up to m-1.
  const std::vector<float> series = testing::random_walk(300, 61, 1.0, 0.5);
  const std::vector<float> source = testing::random_walk(50, 62, 1.0, 0.5);
  for (int m = 2; m <= 7; ++m) {
    for (int band = 0; band < m; ++band) {
      for (bool znorm : {true, false}) {
        const std::vector<double> reference =
            sliding_dtw_reference(source.data() + 9, m, series.data(), 300, 0, band, znorm);
        const PreparedQuery query = prepare_query(source.data() + 9, m, band, znorm);
        for (double fraction : {0.01, 0.2}) {
          const double threshold = testing::quantile(reference, fraction);
          INFO("m " << m << " band " << band << " znorm " << znorm << " fraction " << fraction);
          SearchStats stats;
          const auto found = run_search(query, series, 0, threshold, 5, PruningOptions{}, &stats);
          const bool exact =
              testing::check_against_reference(found, {reference, m - 1, threshold, 5}, 1e-9);
          // A z-normalised 2-sample window is (-1, 1) or (1, -1): distances
          // tie exactly, so only the tie-tolerant check applies.
          if (m > 2 || !znorm) CHECK(exact);
        }
      }
    }
  }
}

TEST_CASE("UCR search prunes most windows at a tight threshold", "[ucr]") {
  const std::vector<float> series = testing::random_walk(3000, 7, 1.0, 0.3);
  const std::vector<float> source = testing::random_walk(300, 8, 1.0, 0.3);
  const std::vector<double> reference =
      sliding_dtw_reference(source.data(), 128, series.data(), 3000, 0, 12, true);
  const PreparedQuery query = prepare_query(source.data(), 128, 12, true);
  SearchStats stats;
  const double threshold = testing::quantile(reference, 0.01);
  const auto found = run_search(query, series, 0, threshold, 64, PruningOptions{}, &stats);
  CHECK(testing::check_against_reference(found, {reference, 127, threshold, 64}, 1e-9));
  const std::uint64_t pruned = stats.pruned_kim + stats.pruned_keogh_eq + stats.pruned_keogh_ec;
  CHECK(pruned + stats.dtw_abandoned > stats.windows / 2);
  CHECK(stats.cells < stats.windows * 128ull * 25 / 2);
}

TEST_CASE("UCR search starts at first_end and never before m-1", "[ucr]") {
  const std::vector<float> series = testing::random_walk(500, 31);
  const std::vector<float> source = testing::random_walk(100, 32);
  const PreparedQuery query = prepare_query(source.data(), 32, 3, true);
  for (int first_end : {-5, 0, 31, 32, 250, 499}) {
    SearchStats stats;
    const auto found = run_search(query, series, first_end, kInf, 1000, PruningOptions{}, &stats);
    const int first = std::max(first_end, 31);
    INFO("first_end " << first_end);
    CHECK(found.size() == static_cast<std::size_t>(500 - first));
    CHECK(stats.windows == static_cast<std::uint64_t>(500 - first));
    const std::vector<double> reference =
        sliding_dtw_reference(source.data(), 32, series.data(), 500, first_end, 3, true);
    CHECK(testing::check_against_reference(found, {reference, first, kInf, 1000}, 1e-9));
  }
  SearchStats stats;
  CHECK(run_search(query, series, 500, kInf, 10, PruningOptions{}, &stats).empty());
  CHECK(stats.windows == 0);
}

TEST_CASE("UCR search with a shared whole-series envelope finds the same windows", "[ucr]") {
  const std::vector<float> series = testing::random_walk(800, 51, 1.0, 0.3);
  const std::vector<float> source = testing::random_walk(200, 52, 1.0, 0.3);
  const PreparedQuery query = prepare_query(source.data() + 30, 64, 6, true);
  std::vector<float> upper(800), lower(800);
  std::vector<int> scratch;
  sliding_envelope(series.data(), 800, 6, upper.data(), lower.data(), &scratch);
  for (int first_end : {0, 300}) {
    const std::vector<double> reference =
        sliding_dtw_reference(source.data() + 30, 64, series.data(), 800, first_end, 6, true);
    const double threshold = testing::quantile(reference, 0.05);
    WindowSearcher searcher;
    std::vector<WindowHit> own, shared;
    SearchStats own_stats, shared_stats;
    searcher.search(query, series.data(), 800, first_end, threshold, 10, PruningOptions{}, &own,
                    &own_stats);
    searcher.search(query, series.data(), 800, first_end, threshold, 10, PruningOptions{}, &shared,
                    &shared_stats, upper.data(), lower.data());
    REQUIRE(own.size() == shared.size());
    for (std::size_t k = 0; k < own.size(); ++k) {
      CHECK(own[k].end == shared[k].end);
      CHECK(own[k].distance_sq == shared[k].distance_sq);
    }
    CHECK(shared_stats.pruned_keogh_ec > 0);
    CHECK(own_stats.windows == shared_stats.windows);
  }
}

TEST_CASE("UCR search with a negative threshold finds nothing", "[ucr]") {
  const std::vector<float> series = testing::random_walk(200, 41);
  const PreparedQuery query = prepare_query(series.data() + 20, 16, 1, true);
  SearchStats stats;
  CHECK(run_search(query, series, 0, -1.0, 10, PruningOptions{}, &stats).empty());
  CHECK(run_search(query, series, 0, 0.0, 10, PruningOptions{}, &stats).size() <= 1);
}

}  // namespace
}  // namespace gw::kernels
