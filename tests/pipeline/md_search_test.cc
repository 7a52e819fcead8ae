// The synthetic experiment of Moazeni 2013 (§7.5.3, Fig. 58): a 4-dim query
// planted in a 4-dim noise series as an exact copy, with a time lag between
// dims, with a dim missing, scaled with noise, and with two dims switched.
// MD-DTW (phase 1 on the CPU backend, phase 2 in the pipeline) finds all five
// and ranks them by §7.4.6; the Euclidean baseline (EDT) finds only the
// synchronous ones.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "config/config.h"
#include "kernels/search.h"
#include "pipeline/detector.h"
#include "pipeline/engine.h"
#include "tests/pipeline/synthetic_query.h"

using gw::pipeline::Alert;
using gw::pipeline::Combination;
using gw::pipeline::DimCandidate;
using gw::test::query_shape;

namespace {

constexpr int kDims = 4;
constexpr int kLength = gw::test::kQueryLength;
constexpr int kSamples = 2300;

// Where each scenario starts, and what it does.
enum Scenario { kExact, kLagged, kMissing, kScaled, kSwitched, kScenarios };
constexpr int kPlantAt[kScenarios] = {300, 700, 1100, 1500, 1900};
constexpr int kLag[kDims] = {0, 6, -5, 10};  // per dim, in the lagged scenario

// Sample-major series: Gaussian noise with the scenarios planted.
std::vector<float> synthetic_series() {
  std::mt19937 rng(58);
  std::normal_distribution<double> noise(0.0, 1.0);
  std::vector<float> v(static_cast<std::size_t>(kSamples) * kDims);
  for (auto& x : v) x = static_cast<float>(noise(rng));
  auto plant = [&](int at, int stream_dim, int pattern_dim, double scale, double offset,
                   double noise_sd) {
    for (int s = 0; s < kLength; ++s)
      v[static_cast<std::size_t>(at + s) * kDims + stream_dim] =
          static_cast<float>(scale * query_shape(pattern_dim, s) + offset + noise_sd * noise(rng));
  };
  for (int d = 0; d < kDims; ++d) {
    plant(kPlantAt[kExact], d, d, 1, 0, 0);
    plant(kPlantAt[kLagged] + kLag[d], d, d, 1, 0, 0);
    if (d != 3) plant(kPlantAt[kMissing], d, d, 1, 0, 0);
    plant(kPlantAt[kScaled], d, d, 3, 5, 0.3);
    const int switched = d == 0 ? 1 : d == 1 ? 0 : d;
    plant(kPlantAt[kSwitched], switched, d, 1, 0, 0.05);
  }
  return v;
}

// The pattern keys of MD-DTW and of the Euclidean baseline.
std::string keys(gw::config::Measure measure) {
  return measure == gw::config::Measure::kDtw
             ? "    band: 0.1\n    nr: 1\n    min_dims: 3\n    alpha: 1.5\n"
             : "    measure: euclidean\n";
}

std::vector<Alert> detect(const gw::config::Config& config, const std::vector<float>& v) {
  return gw::test::detect_in_frames(config, v, kDims);
}

// The scenario whose planted windows end near `end`, or -1.
int scenario_at(std::int64_t end) {
  for (int s = 0; s < kScenarios; ++s) {
    const int lo = kPlantAt[s] + kLength - 1 - 10, hi = kPlantAt[s] + kLength - 1 + 20;
    if (end >= lo && end <= hi) return s;
  }
  return -1;
}

std::vector<int> scenarios_alerted(const std::vector<Alert>& alerts) {
  std::vector<int> out;
  for (const auto& a : alerts) out.push_back(scenario_at(a.end_index));
  return out;
}

// §7.4.6 order: more matched dims first, then lower distance.
bool ranks_before(const Combination& a, const Combination& b) {
  if (a.edges.size() != b.edges.size()) return a.edges.size() > b.edges.size();
  return a.distance < b.distance;
}

}  // namespace

TEST_CASE("MD-DTW alerts on all five planted scenarios, EDT only on the synchronous ones",
          "[md_search]") {
  const gw::test::SyntheticQuery fx("gw_md_search_test", kDims);
  const auto series = synthetic_series();
  const auto md = detect(fx.config(keys(gw::config::Measure::kDtw)), series);
  CHECK(scenarios_alerted(md) == std::vector<int>{kExact, kLagged, kMissing, kScaled, kSwitched});
  const auto edt = detect(fx.config(keys(gw::config::Measure::kEuclidean)), series);
  CHECK(scenarios_alerted(edt) == std::vector<int>{kExact, kScaled});
  for (const auto& a : edt) CHECK(a.matched_dims == kDims);
}

TEST_CASE("phase 2 reassembles each scenario and ranks them by dims, then distance",
          "[md_search]") {
  const gw::test::SyntheticQuery fx("gw_md_search_test", kDims);
  const auto series = synthetic_series();
  const auto library = gw::pipeline::compile_library(fx.config(keys(gw::config::Measure::kDtw)));
  const auto& pattern = library.patterns.at(0);
  auto backend = gw::kernels::make_cpu_backend(2);
  backend->set_library(library.kernel_library);
  gw::kernels::SearchBatch batch;
  batch.add_slice(1, kDims, series.data(), kSamples, 0, 0);
  const auto result = backend->search(batch);
  std::vector<DimCandidate> candidates;
  for (const auto& m : result.matches)
    candidates.push_back({m.end, m.pattern_dim, m.stream_dim, m.distance, m.start});

  // The best-ranked combination over the window ends around each scenario.
  std::vector<Combination> best(kScenarios);
  for (int s = 0; s < kScenarios; ++s) {
    bool any = false;
    for (std::int64_t t = kPlantAt[s]; t <= kPlantAt[s] + 2 * kLength; ++t) {
      std::vector<DimCandidate> window;
      for (const auto& c : candidates)
        if (c.end > t - kLength && c.end <= t) window.push_back(c);
      if (window.empty()) continue;
      const auto combo = gw::pipeline::combine_matches(window, pattern.home_channel, 1.5);
      if (!any || ranks_before(combo, best[s])) best[s] = combo;
      any = true;
    }
    INFO("scenario " << s);
    REQUIRE(any);
  }
  CHECK(best[kExact].edges.size() == 4);
  CHECK(best[kExact].distance == Approx(0).margin(1e-3));
  // Lagged: every dim matched exactly, each at its own lagged end.
  REQUIRE(best[kLagged].edges.size() == 4);
  CHECK(best[kLagged].distance == Approx(0).margin(1e-3));
  for (const auto& e : best[kLagged].edges)
    CHECK(e.end == kPlantAt[kLagged] + kLag[e.pattern_dim] + kLength - 1);
  // Missing: only three dims.
  CHECK(best[kMissing].edges.size() == 3);
  // Scaled and noisy: all dims, at a cost.
  CHECK(best[kScaled].edges.size() == 4);
  CHECK(best[kScaled].distance > 0.5);
  // Switched: dims 0 and 1 found on each other's channel, weighted by alpha.
  REQUIRE(best[kSwitched].edges.size() == 4);
  double raw_sum = 0, weighted = 0;
  for (const auto& e : best[kSwitched].edges) {
    const int expected_channel = e.pattern_dim == 0 ? 1 : e.pattern_dim == 1 ? 0 : e.pattern_dim;
    CHECK(e.stream_dim == expected_channel);
    raw_sum += e.distance;
    weighted += e.distance * (e.pattern_dim < 2 ? 1.5 : 1.0);
  }
  CHECK(best[kSwitched].distance == Approx(weighted));
  CHECK(best[kSwitched].distance > raw_sum);

  // The ranking: all four-dim matches before the three-dim one, however
  // small its distance; among them by distance (the exact copy first).
  std::vector<int> order = {kExact, kLagged, kMissing, kScaled, kSwitched};
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return ranks_before(best[a], best[b]); });
  CHECK(order.back() == kMissing);
  CHECK(best[kMissing].distance < best[kScaled].distance);
  CHECK((order.front() == kExact || best[order.front()].distance == Approx(0).margin(1e-3)));
  CHECK(std::find(order.begin(), order.end(), kScaled) - order.begin() == 3);
}
