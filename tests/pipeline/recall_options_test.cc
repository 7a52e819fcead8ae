// Query segmentation (Moazeni 2013, §7.4.4) and search exhausting (§7.4.5) on
// synthetic 3-dim series through the engine and the CPU backend: each finds a
// planted match the plain search misses, both are off by default and change
// nothing then, and alerts do not depend on how samples are batched.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "config/config.h"
#include "kernels/search.h"
#include "pipeline/detector.h"
#include "pipeline/engine.h"
#include "tests/pipeline/synthetic_query.h"

using gw::pipeline::Alert;
using gw::pipeline::DimCandidate;
using gw::test::query_shape;

namespace {

constexpr int kDims = 3;
constexpr int kLength = gw::test::kQueryLength;
constexpr int kSamples = 1400;
constexpr double kThreshold = 3.0;

// Where the planted copies start.
constexpr int kHalfAt = 300;   // only the second half of the query, on every dim
constexpr int kNoisyAt = 900;  // dims 0 and 1 exact, dim 2 with noise (beyond the threshold)
constexpr double kNoisySd = 0.45;

std::vector<float> series() {
  std::mt19937 rng(744);
  std::normal_distribution<double> noise(0.0, 1.0);
  std::vector<float> v(static_cast<std::size_t>(kSamples) * kDims);
  for (auto& x : v) x = static_cast<float>(noise(rng));
  for (int d = 0; d < kDims; ++d)
    for (int s = 0; s < kLength; ++s) {
      if (s >= kLength / 2)
        v[static_cast<std::size_t>(kHalfAt + s) * kDims + d] = static_cast<float>(query_shape(d, s));
      v[static_cast<std::size_t>(kNoisyAt + s) * kDims + d] =
          static_cast<float>(query_shape(d, s) + (d == 2 ? kNoisySd * noise(rng) : 0.0));
    }
  return v;
}

// The pattern keys of these tests (all dims must match) and `extra`.
gw::config::Config query_config(const gw::test::SyntheticQuery& query, const std::string& extra) {
  return query.config("    band: 0.1\n    min_dims: 3\n" + extra);
}

std::vector<Alert> detect(const gw::config::Config& config, const std::vector<float>& v,
                          int frame = 10) {
  return gw::test::detect_in_frames(config, v, kDims, frame);
}

// Alerts whose completing sample lies near the copy planted at `at`.
std::vector<Alert> near(const std::vector<Alert>& alerts, int at) {
  std::vector<Alert> out;
  for (const auto& a : alerts)
    if (a.end_index >= at + kLength / 2 - 10 && a.end_index <= at + 2 * kLength) out.push_back(a);
  return out;
}

bool same_alerts(const std::vector<Alert>& a, const std::vector<Alert>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].end_index != b[i].end_index || a[i].distance != b[i].distance ||
        a[i].matched_dims != b[i].matched_dims)
      return false;
  return true;
}

// The lowest distance of query dim `dim` against stream dim `dim` over window
// ends in [from, to), with the pattern's band and z-normalisation.
double best_distance(const std::vector<float>& v, int dim, int from, int to) {
  gw::kernels::Pattern p;
  p.profile = 1;
  p.length = kLength;
  p.band = static_cast<int>(0.1 * kLength);
  p.dim_count = 1;
  for (int s = 0; s < kLength; ++s) p.dims.push_back(static_cast<float>(query_shape(dim, s)));
  p.pairs = {{0, static_cast<std::uint16_t>(dim)}};
  auto library = std::make_shared<gw::kernels::PatternLibrary>();
  library->patterns.push_back(p);
  auto backend = gw::kernels::make_cpu_backend(1);
  backend->set_library(library);
  gw::kernels::SearchBatch batch;
  batch.add_slice(1, kDims, v.data(), kSamples, 0, 0);
  double best = std::numeric_limits<double>::infinity();
  for (const auto& m : backend->search(batch).matches)
    if (m.end >= from && m.end < to) best = std::min(best, static_cast<double>(m.distance));
  return best;
}

}  // namespace

TEST_CASE("the planted copies are what the tests below assume", "[recall]") {
  const auto v = series();
  // The half copy: every dim's whole-query distance is beyond the threshold.
  for (int d = 0; d < kDims; ++d) CHECK(best_distance(v, d, kHalfAt, kHalfAt + 2 * kLength) > kThreshold);
  // The noisy copy: dims 0 and 1 exact, dim 2 beyond the threshold but within twice it.
  CHECK(best_distance(v, 0, kNoisyAt, kNoisyAt + 2 * kLength) < 1e-3);
  CHECK(best_distance(v, 1, kNoisyAt, kNoisyAt + 2 * kLength) < 1e-3);
  const double noisy = best_distance(v, 2, kNoisyAt, kNoisyAt + 2 * kLength);
  CHECK(noisy > kThreshold);
  CHECK(noisy < 2 * kThreshold);
}

TEST_CASE("both options are off by default and change nothing when off", "[recall]") {
  const gw::test::SyntheticQuery fx("gw_recall_options_test", kDims);
  const auto v = series();
  const auto plain_config = query_config(fx, "");
  CHECK(plain_config.patterns[0].segments == 0);
  CHECK(plain_config.patterns[0].exhaust_factor == 0);
  const auto plain = detect(plain_config, v);
  const auto off = detect(query_config(fx, "    segments: 0\n    exhaust_factor: 0\n"), v);
  CHECK(same_alerts(plain, off));
  // Without them, neither planted copy alerts (and nothing else does).
  CHECK(plain.empty());
  const auto library = gw::pipeline::compile_library(plain_config);
  CHECK(library.kernel_library->patterns.size() == 1);
  CHECK(library.patterns[0].examples[0].segments.empty());
  CHECK(library.patterns[0].examples[0].exhaust_kernel ==
        gw::pipeline::CompiledExample::kNone);
}

TEST_CASE("query segmentation finds a copy of only part of the query", "[recall]") {
  const gw::test::SyntheticQuery fx("gw_recall_options_test", kDims);
  const auto v = series();
  const auto config = query_config(fx, "    segments: 2\n");
  const auto library = gw::pipeline::compile_library(config);
  REQUIRE(library.patterns[0].examples[0].segments.size() == 2);
  const auto& kernels = library.kernel_library->patterns;
  const auto& second = library.patterns[0].examples[0].segments[1];
  CHECK(second.begin == kLength / 2);
  CHECK(kernels[second.kernel].length == kLength / 2);
  CHECK(kernels[second.kernel].threshold == Approx(kThreshold * std::sqrt(0.5)));

  const auto alerts = detect(config, v);
  const auto half = near(alerts, kHalfAt);
  REQUIRE(half.size() == 1);
  CHECK(half[0].matched_dims == 3);
  // A partial match lies inside the threshold, but no nearer than the rest
  // of the query counted at the threshold's rate: sqrt(3^2 / 2) per dim.
  CHECK(half[0].distance >= kDims * kThreshold * std::sqrt(0.5) - 1e-3);
  CHECK(half[0].distance <= kDims * kThreshold);
  // It completes with the matched half (the band lets a window a few
  // samples early match too).
  CHECK(half[0].end_index <= kHalfAt + kLength - 1);
  CHECK(half[0].end_index >= kHalfAt + kLength - 1 - 6);
  // Nothing but the planted copies.
  CHECK(near(alerts, kHalfAt).size() + near(alerts, kNoisyAt).size() == alerts.size());
  // The same alerts however the samples are batched.
  CHECK(same_alerts(alerts, detect(config, v, 7)));
  CHECK(same_alerts(alerts, detect(config, v, 50)));
}

TEST_CASE("search exhausting recovers a dim missed at the threshold", "[recall]") {
  const gw::test::SyntheticQuery fx("gw_recall_options_test", kDims);
  const auto v = series();
  const auto config = query_config(fx, "    exhaust_factor: 2\n");
  const auto library = gw::pipeline::compile_library(config);
  const auto exhaust = library.patterns[0].examples[0].exhaust_kernel;
  REQUIRE(exhaust != gw::pipeline::CompiledExample::kNone);
  CHECK(library.kernel_library->patterns[exhaust].threshold == Approx(2 * kThreshold));

  const auto alerts = detect(config, v);
  const auto noisy = near(alerts, kNoisyAt);
  REQUIRE(noisy.size() == 1);
  CHECK(noisy[0].matched_dims == 3);
  // The recovered dim is the noisy one, at its real distance.
  REQUIRE(noisy[0].dims.size() == 3);
  CHECK(noisy[0].dims[2].pattern_dim == 2);
  CHECK(noisy[0].dims[2].distance > kThreshold);
  // The half copy matches no dim within the threshold: nothing to exhaust.
  CHECK(near(alerts, kHalfAt).empty());
  CHECK(alerts.size() == 1);
  CHECK(same_alerts(alerts, detect(config, v, 7)));

  // A wider band alone (factor 1) is a looser search too.
  const auto library_band = gw::pipeline::compile_library(
      query_config(fx, "    exhaust_factor: 1\n    exhaust_band: 0.3\n"));
  const auto& band_kernel =
      library_band.kernel_library->patterns[library_band.patterns[0].examples[0].exhaust_kernel];
  CHECK(band_kernel.band == static_cast<int>(0.3 * kLength));
  CHECK(band_kernel.threshold == Approx(kThreshold));
}

TEST_CASE("exhausting fills only missing dims on free stream dims", "[recall][combine]") {
  const std::vector<int> home = {0, 1, 2};
  auto loose = [](DimCandidate c) {
    c.loose = true;
    return c;
  };
  SECTION("a missing dim is recovered and counted") {
    const auto c = gw::pipeline::combine_with_exhausting(
        {{10, 0, 0, 1.0, 0}, {10, 1, 1, 1.5, 0}, loose({12, 2, 2, 4.0, 0})}, home, 1.5);
    REQUIRE(c.edges.size() == 3);
    CHECK(c.recovered == 1);
    CHECK(c.edges[2].loose);
    CHECK(c.distance == Approx(6.5));
  }
  SECTION("a loose candidate never replaces an own one, nor takes a used stream dim") {
    const auto c = gw::pipeline::combine_with_exhausting(
        {{10, 0, 0, 2.0, 0}, loose({10, 0, 0, 0.5, 0}), loose({11, 2, 0, 0.5, 0})}, home, 1.5);
    REQUIRE(c.edges.size() == 1);
    CHECK(c.recovered == 0);
    CHECK(c.distance == Approx(2.0));
  }
  SECTION("nothing to exhaust without a feasible match") {
    const auto c = gw::pipeline::combine_with_exhausting(
        {loose({10, 0, 0, 4.0, 0}), loose({10, 1, 1, 4.0, 0})}, home, 1.5);
    CHECK(c.edges.empty());
  }
  SECTION("without loose candidates it is combine_matches") {
    const std::vector<DimCandidate> own = {{10, 0, 1, 1.0, 0}, {10, 1, 0, 1.0, 0}, {9, 1, 1, 0.2, 0}};
    const auto a = gw::pipeline::combine_with_exhausting(own, home, 1.5);
    const auto b = gw::pipeline::combine_matches(own, home, 1.5);
    CHECK(a.distance == b.distance);
    CHECK(a.edges.size() == b.edges.size());
    CHECK(a.recovered == 0);
  }
}
