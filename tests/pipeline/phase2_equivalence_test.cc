// The optimised phase 2 (allocation-free combination, PatternTracker's flat
// windows that redo an example's matching only when a pair's best changes)
// against the code it replaced (phase2_reference.h), bit for bit, on random
// candidate streams: ties in distance and end, loose (exhausting) candidates,
// several positive and negative examples, the Euclidean baseline, random
// search lengths, gaps, and the reused scratch of update_into.
#include <catch2/catch.hpp>
#include <random>

#include "pipeline/detector.h"
#include "tests/pipeline/phase2_reference.h"

using gw::pipeline::Combination;
using gw::pipeline::CompiledPattern;
using gw::pipeline::Decision;
using gw::pipeline::DimCandidate;
using gw::pipeline::ExampleMatch;
using gw::pipeline::PatternTracker;
namespace reference = gw::pipeline::reference;

namespace {

bool same_candidate(const DimCandidate& a, const DimCandidate& b) {
  return a.end == b.end && a.pattern_dim == b.pattern_dim && a.stream_dim == b.stream_dim &&
         a.distance == b.distance && a.start == b.start && a.loose == b.loose;
}

bool same_combination(const Combination& a, const Combination& b) {
  if (a.edges.size() != b.edges.size() || a.distance != b.distance || a.recovered != b.recovered)
    return false;
  for (std::size_t i = 0; i < a.edges.size(); ++i)
    if (!same_candidate(a.edges[i], b.edges[i])) return false;
  return true;
}

bool same_match(const ExampleMatch& a, const ExampleMatch& b) {
  return a.example == b.example && a.completed == b.completed &&
         same_combination(a.combination, b.combination);
}

bool same_decision(const Decision& a, const Decision& b) {
  return same_match(a.positive, b.positive) && same_match(a.negative, b.negative) &&
         a.evidence == b.evidence && a.hold == b.hold && a.enter == b.enter;
}

// Distances from a small set, so that equal distances (and equal weighted
// path lengths) are common: the tie rules are where a rewrite slips.
double tied_distance(std::mt19937& rng) {
  static const double kValues[] = {0.25, 0.5, 1.0, 1.0, 1.5, 2.0, 2.5, 3.0, 0.1 + 0.2};
  return kValues[std::uniform_int_distribution<int>(0, 8)(rng)];
}

DimCandidate random_candidate(std::mt19937& rng, int dims, std::int64_t end, double loose_rate) {
  std::uniform_int_distribution<int> dim(0, dims - 1), shift(-1, 1), length(3, 12);
  DimCandidate c;
  c.end = end;
  c.pattern_dim = dim(rng);
  c.stream_dim = std::clamp(c.pattern_dim + shift(rng), 0, dims - 1);
  c.distance = tied_distance(rng);
  c.start = end - length(rng);
  c.loose = std::bernoulli_distribution(loose_rate)(rng);
  return c;
}

CompiledPattern random_pattern(std::mt19937& rng, int dims, int examples, bool euclidean) {
  CompiledPattern p;
  p.config.length = std::uniform_int_distribution<int>(4, 20)(rng);
  p.config.measure = euclidean ? gw::config::Measure::kEuclidean : gw::config::Measure::kDtw;
  p.config.threshold = 3.0;
  p.config.alpha = std::bernoulli_distribution(0.5)(rng) ? 1.0 : 1.5;
  p.config.min_dims = std::uniform_int_distribution<int>(1, dims)(rng);
  p.config.margin = std::uniform_real_distribution<double>(-0.5, 1.0)(rng);
  p.config.hysteresis = std::uniform_real_distribution<double>(0.0, 0.5)(rng);
  p.config.min_duration_s = std::uniform_int_distribution<int>(0, 3)(rng) * 0.1;
  p.config.cooldown_s = std::uniform_int_distribution<int>(0, 8)(rng) * 0.1;
  for (int j = 0; j < dims; ++j) p.home_channel.push_back(j);
  for (int e = 0; e < examples; ++e) {
    gw::pipeline::CompiledExample example;
    example.kernel = static_cast<std::size_t>(e);
    example.negative = e > 0 && std::bernoulli_distribution(0.4)(rng);
    p.examples.push_back(example);
  }
  return p;
}

}  // namespace

TEST_CASE("combine_matches and combine_with_exhausting match the reference bit for bit",
          "[combine][phase2-equivalence]") {
  std::mt19937 rng(11);
  int recovered = 0;
  for (int round = 0; round < 4000; ++round) {
    const int dims = std::uniform_int_distribution<int>(1, 7)(rng);
    const int count = std::uniform_int_distribution<int>(0, 30)(rng);
    const double alpha = std::bernoulli_distribution(0.5)(rng) ? 1.0 : 1.25;
    std::vector<int> home;
    for (int j = 0; j < dims; ++j) home.push_back(j);
    std::vector<DimCandidate> candidates;
    for (int i = 0; i < count; ++i)
      candidates.push_back(
          random_candidate(rng, dims, std::uniform_int_distribution<int>(0, 5)(rng), 0.3));
    // Sorted input with distinct keys takes another path (PatternTracker's).
    if (round % 3 == 0) {
      std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
        return std::make_pair(a.pattern_dim, a.stream_dim) < std::make_pair(b.pattern_dim, b.stream_dim);
      });
      candidates.erase(std::unique(candidates.begin(), candidates.end(),
                                   [](const auto& a, const auto& b) {
                                     return a.pattern_dim == b.pattern_dim &&
                                            a.stream_dim == b.stream_dim;
                                   }),
                       candidates.end());
    }
    INFO("round " << round);
    CHECK(same_combination(gw::pipeline::combine_matches(candidates, home, alpha),
                           reference::combine_matches(candidates, home, alpha)));
    const Combination got = gw::pipeline::combine_with_exhausting(candidates, home, alpha);
    CHECK(same_combination(got, reference::combine_with_exhausting(candidates, home, alpha)));
    recovered += got.recovered;
  }
  CHECK(recovered > 0);  // the exhausting path ran
}

TEST_CASE("PatternTracker matches the reference tracker bit for bit on random streams",
          "[track][phase2-equivalence]") {
  std::mt19937 rng(23);
  std::size_t alerts = 0, gaps = 0;
  for (int round = 0; round < 300; ++round) {
    INFO("round " << round);
    const int dims = std::uniform_int_distribution<int>(1, 5)(rng);
    const int examples = std::uniform_int_distribution<int>(1, 3)(rng);
    const bool euclidean = round % 5 == 4;
    const CompiledPattern p = random_pattern(rng, dims, examples, euclidean);
    const double loose_rate = round % 2 == 0 ? 0.0 : 0.3;
    const double density = std::uniform_real_distribution<double>(0.05, 1.5)(rng);
    reference::PatternTracker expected_tracker;
    PatternTracker by_value;  // update(): a fresh vector per call
    PatternTracker in_place;  // update_into(): one scratch for every call
    // Sized past the examples, with stale entries: update_into must ignore them.
    std::vector<std::vector<DimCandidate>> scratch(4, {DimCandidate{-5, 0, 0, 0.0}});
    std::vector<PatternTracker::Detection> got_in_place;
    std::int64_t from = 0;
    for (int search = 0; search < 40; ++search) {
      if (std::bernoulli_distribution(0.08)(rng)) {  // a gap: ends never searched
        from += std::uniform_int_distribution<int>(1, 30)(rng);
        ++gaps;
      }
      const std::int64_t to = from + std::uniform_int_distribution<int>(0, 25)(rng);
      std::vector<std::vector<DimCandidate>> fresh(static_cast<std::size_t>(examples));
      for (std::int64_t end = from; end < to; ++end)
        for (auto& f : fresh)
          for (int n = std::poisson_distribution<int>(density)(rng); n > 0; --n)
            f.push_back(random_candidate(rng, dims, end, loose_rate));
      for (auto& f : fresh) std::shuffle(f.begin(), f.end(), rng);  // "any order"
      for (std::size_t e = 0; e < fresh.size(); ++e) scratch[e] = fresh[e];
      const auto expected = expected_tracker.update(fresh, from, to, p, 10.0);
      const auto got = by_value.update(fresh, from, to, p, 10.0);
      got_in_place.clear();
      in_place.update_into(scratch, from, to, p, 10.0, got_in_place);
      REQUIRE(got.size() == expected.size());
      REQUIRE(got_in_place.size() == expected.size());
      for (std::size_t i = 0; i < expected.size(); ++i) {
        CHECK(got[i].end == expected[i].end);
        CHECK(same_decision(got[i].decision, expected[i].decision));
        CHECK(got_in_place[i].end == expected[i].end);
        CHECK(same_decision(got_in_place[i].decision, expected[i].decision));
      }
      alerts += expected.size();
      from = to;
    }
  }
  CHECK(alerts > 100);  // the streams exercise the gating, not only silence
  CHECK(gaps > 0);
}
