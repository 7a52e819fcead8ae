// Phase 2 (Moazeni 2013, §7.4.2, §7.4.6), the positive/negative decision and
// the alert gating, on hand-made single-dim matches.
#include "pipeline/detector.h"

#include <catch2/catch.hpp>
#include <functional>
#include <random>

using gw::pipeline::Combination;
using gw::pipeline::combine_matches;
using gw::pipeline::CompiledPattern;
using gw::pipeline::DimCandidate;
using gw::pipeline::PatternTracker;

namespace {

// Every maximal set of independent edges (one candidate per (j, i) pair, the
// best) and the best of them by §7.4.6: most edges, then least weighted
// distance. The brute-force reading of Moazeni 2013, Fig. 57.
struct Ranked {
  std::size_t edges = 0;
  double distance = 0;
};
Ranked best_by_enumeration(const std::vector<DimCandidate>& candidates,
                           const std::vector<int>& home, double alpha) {
  std::map<std::pair<int, int>, double> best;
  for (const auto& c : candidates) {
    auto [it, inserted] = best.try_emplace({c.pattern_dim, c.stream_dim}, c.distance);
    if (!inserted) it->second = std::min(it->second, c.distance);
  }
  std::vector<std::tuple<int, int, double>> edges;
  for (const auto& [key, d] : best)
    edges.emplace_back(key.first, key.second, d * (key.second == home[key.first] ? 1.0 : alpha));
  Ranked top;
  bool any = false;
  std::vector<int> chosen;
  std::function<void(std::size_t)> walk = [&](std::size_t next) {
    if (next == edges.size()) {
      // Maximal: no unchosen edge is independent of every chosen one.
      for (std::size_t e = 0; e < edges.size(); ++e) {
        if (std::find(chosen.begin(), chosen.end(), static_cast<int>(e)) != chosen.end()) continue;
        bool independent = true;
        for (const int c : chosen)
          if (std::get<0>(edges[c]) == std::get<0>(edges[e]) ||
              std::get<1>(edges[c]) == std::get<1>(edges[e]))
            independent = false;
        if (independent) return;
      }
      double distance = 0;
      for (const int c : chosen) distance += std::get<2>(edges[c]);
      if (!any || chosen.size() > top.edges ||
          (chosen.size() == top.edges && distance < top.distance - 1e-12))
        top = {chosen.size(), distance};
      any = true;
      return;
    }
    walk(next + 1);  // without edge `next`
    for (const int c : chosen)
      if (std::get<0>(edges[c]) == std::get<0>(edges[next]) ||
          std::get<1>(edges[c]) == std::get<1>(edges[next]))
        return;
    chosen.push_back(static_cast<int>(next));
    walk(next + 1);
    chosen.pop_back();
  };
  walk(0);
  return top;
}

bool independent(const Combination& combo) {
  for (std::size_t a = 0; a < combo.edges.size(); ++a)
    for (std::size_t b = a + 1; b < combo.edges.size(); ++b)
      if (combo.edges[a].pattern_dim == combo.edges[b].pattern_dim ||
          combo.edges[a].stream_dim == combo.edges[b].stream_dim)
        return false;
  return true;
}

// A pattern of `dims` dims on channels 0..dims-1 with these examples (true = negative).
CompiledPattern make_pattern(int dims, std::vector<bool> negative, double threshold) {
  CompiledPattern p;
  p.config.length = 10;
  p.config.threshold = threshold;
  p.config.min_dims = dims;
  p.config.alpha = 1.0;
  p.config.cooldown_s = 0;
  for (int j = 0; j < dims; ++j) p.home_channel.push_back(j);
  for (std::size_t e = 0; e < negative.size(); ++e) {
    gw::pipeline::CompiledExample example;
    example.kernel = e;
    example.negative = negative[e];
    p.examples.push_back(example);
  }
  return p;
}

}  // namespace

TEST_CASE("phase 2 takes the largest set of independent edges, not the greedy one", "[combine]") {
  // Pattern dims 0,1,2 live on channels 0,1,2. Greedy by distance would take
  // (2,1) 0.1 first and then only (0,0): 2 dims. Three independent edges exist.
  const std::vector<int> home = {0, 1, 2};
  std::vector<DimCandidate> c = {
      {10, 0, 0, 3.0}, {11, 0, 1, 1.0}, {12, 1, 1, 0.5}, {9, 2, 2, 2.0}, {12, 2, 1, 0.1}};
  const auto combo = combine_matches(c, home, 1.0);
  REQUIRE(combo.edges.size() == 3);
  CHECK(combo.distance == Approx(3.0 + 0.5 + 2.0));
  for (std::size_t j = 0; j < 3; ++j) CHECK(combo.edges[j].stream_dim == static_cast<int>(j));
}

TEST_CASE("among matchings of equal size the least weighted distance wins", "[combine]") {
  const std::vector<int> home = {0, 1};
  // {(0,0) 1, (1,1) 5} = 6 against {(0,1) 2, (1,0) 2} = 4 (alpha 1), or 6 with alpha 1.5.
  std::vector<DimCandidate> c = {{5, 0, 0, 1.0}, {5, 1, 1, 5.0}, {5, 0, 1, 2.0}, {5, 1, 0, 2.0}};
  const auto switched = combine_matches(c, home, 1.0);
  REQUIRE(switched.edges.size() == 2);
  CHECK(switched.distance == Approx(4.0));
  CHECK(switched.edges[0].stream_dim == 1);
  const auto penalised = combine_matches(c, home, 1.6);
  CHECK(penalised.distance == Approx(6.0));
  CHECK(penalised.edges[0].stream_dim == 0);
}

TEST_CASE("alpha penalises switched dims in the ranking distance", "[combine]") {
  const std::vector<int> home = {0, 1};
  std::vector<DimCandidate> c = {{5, 0, 1, 1.0}, {5, 1, 0, 1.0}};
  CHECK(combine_matches(c, home, 1.0).distance == Approx(2.0));
  CHECK(combine_matches(c, home, 1.5).distance == Approx(3.0));
  // With a penalty the same-dim edge wins over a slightly better switched one.
  std::vector<DimCandidate> d = {{5, 0, 0, 1.2}, {5, 0, 1, 1.0}};
  const auto combo = combine_matches(d, home, 1.5);
  REQUIRE(combo.edges.size() == 1);
  CHECK(combo.edges[0].stream_dim == 0);
}

TEST_CASE("the best candidate per pair is used", "[combine]") {
  const std::vector<int> home = {0};
  std::vector<DimCandidate> c = {{5, 0, 0, 4.0}, {6, 0, 0, 2.0}, {7, 0, 0, 3.0}};
  const auto combo = combine_matches(c, home, 1.0);
  REQUIRE(combo.edges.size() == 1);
  CHECK(combo.edges[0].end == 6);
  CHECK(combo.distance == Approx(2.0));
}

TEST_CASE("phase 2 equals the top of the enumerated maximal independent sets", "[combine]") {
  // Random graphs of k <= 6 dims with neighbour range nr <= 2.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    const int k = 1 + static_cast<int>(rng() % 6);
    const int nr = static_cast<int>(rng() % 3);
    const double alpha = 1.0 + (rng() % 3) * 0.5;
    std::vector<int> home;
    for (int j = 0; j < k; ++j) home.push_back(j);
    std::vector<DimCandidate> c;
    std::uniform_real_distribution<double> distance(0.0, 4.0);
    for (int j = 0; j < k; ++j)
      for (int i = std::max(0, j - nr); i < std::min(k, j + nr + 1); ++i)
        for (int copies = static_cast<int>(rng() % 3); copies > 0; --copies)
          c.push_back({static_cast<std::int64_t>(rng() % 20), j, i, distance(rng)});
    const auto combo = combine_matches(c, home, alpha);
    const auto expected = best_by_enumeration(c, home, alpha);
    INFO("trial " << trial << " k " << k << " nr " << nr << " candidates " << c.size());
    CHECK(independent(combo));
    REQUIRE(combo.edges.size() == expected.edges);
    CHECK(combo.distance == Approx(expected.distance).margin(1e-9));
  }
}

TEST_CASE("the decision: absolute threshold without negatives, margin with them", "[decide]") {
  using gw::pipeline::ExampleMatch;
  CompiledPattern alone = make_pattern(2, {false}, 5.0);
  alone.config.min_dims = 1;
  ExampleMatch one_dim{0, combine_matches({{3, 0, 0, 4.0}}, alone.home_channel, 1.0), 0};
  one_dim.completed = 4.0 + 5.0;  // the unmatched dim counts as alpha * threshold
  auto d = gw::pipeline::decide(alone, {one_dim});
  CHECK(d.hold);
  CHECK(d.evidence == Approx(2 * 5.0 - 9.0));
  alone.config.min_dims = 2;
  CHECK_FALSE(gw::pipeline::decide(alone, {one_dim}).hold);

  // A negative that is nearer than the positive suppresses; one farther by
  // less than the margin too; one farther by more lets the alert through.
  CompiledPattern both = make_pattern(1, {false, true}, 5.0);
  both.config.min_dims = 1;
  both.config.margin = 1.0;
  auto match = [&](int example, double distance) {
    ExampleMatch m{example, combine_matches({{3, 0, 0, distance}}, both.home_channel, 1.0), 0};
    m.completed = distance;
    return m;
  };
  CHECK_FALSE(gw::pipeline::decide(both, {match(0, 2.0), match(1, 1.5)}).hold);
  CHECK_FALSE(gw::pipeline::decide(both, {match(0, 2.0), match(1, 2.5)}).hold);
  const auto clear = gw::pipeline::decide(both, {match(0, 2.0), match(1, 3.5)});
  CHECK(clear.hold);
  CHECK(clear.evidence == Approx(1.5));
  CHECK(clear.positive.example == 0);
  CHECK(clear.negative.example == 1);
  // No negative within the threshold: it counts as at the threshold.
  CHECK(gw::pipeline::decide(both, {match(0, 2.0), ExampleMatch{}}).evidence == Approx(3.0));
  // Hysteresis: entering needs margin + hysteresis, holding only the margin.
  both.config.hysteresis = 1.0;
  const auto weak = gw::pipeline::decide(both, {match(0, 2.0), match(1, 3.5)});
  CHECK(weak.hold);
  CHECK_FALSE(weak.enter);
}

TEST_CASE("the decision by k nearest examples: a vote of the matched ones", "[decide]") {
  using gw::pipeline::ExampleMatch;
  // Examples 0..2 positive, 3..5 negative.
  CompiledPattern p = make_pattern(1, {false, false, false, true, true, true}, 5.0);
  p.config.min_dims = 1;
  p.config.neighbours = 3;
  auto match = [&](int example, double distance) {
    ExampleMatch m{example, combine_matches({{3, 0, 0, distance}}, p.home_channel, 1.0), 0};
    m.completed = distance;
    return m;
  };
  // The nearest is a negative, but two of the three nearest are positives:
  // the nearest-against-nearest rule would suppress, the vote holds.
  const std::vector<ExampleMatch> mostly_positive = {match(0, 2.0), match(1, 2.2), match(2, 4.0),
                                                     match(3, 1.9), match(4, 3.0), match(5, 3.5)};
  const auto voted = gw::pipeline::decide(p, mostly_positive);
  CHECK(voted.evidence == Approx(1.0));  // 2 positive - 1 negative votes
  CHECK(voted.hold);
  CHECK(voted.negative.example == 3);
  p.config.neighbours = 0;
  CHECK_FALSE(gw::pipeline::decide(p, mostly_positive).hold);
  // Two negatives among the three nearest outvote the nearest positive.
  p.config.neighbours = 3;
  const auto outvoted = gw::pipeline::decide(
      p, {match(0, 1.0), match(1, 4.0), match(2, 4.5), match(3, 1.5), match(4, 2.0), match(5, 3.0)});
  CHECK(outvoted.evidence == Approx(-1.0));
  CHECK_FALSE(outvoted.hold);
  // Examples nothing matched do not vote: one matched positive holds alone,
  // and the hysteresis counts votes.
  const auto alone = gw::pipeline::decide(
      p, {match(0, 2.0), ExampleMatch{}, ExampleMatch{}, ExampleMatch{}, ExampleMatch{}, ExampleMatch{}});
  CHECK(alone.evidence == Approx(1.0));
  CHECK(alone.hold);
  p.config.hysteresis = 2;
  CHECK_FALSE(gw::pipeline::decide(p, mostly_positive).enter);
}

TEST_CASE("tracker alerts once min_dims is reached, then respects the cooldown", "[track]") {
  CompiledPattern p = make_pattern(2, {false}, 5.0);
  p.config.cooldown_s = 1.0;  // 10 samples at 10 Hz
  PatternTracker tracker;
  // Dim 0 matches at 20; dim 1 only at 25 -> the combination completes at 25.
  auto alerts = tracker.update({{{20, 0, 0, 1.0}}}, 0, 21, p, 10.0);
  CHECK(alerts.empty());
  alerts = tracker.update({{{25, 1, 1, 1.0}}}, 21, 26, p, 10.0);
  REQUIRE(alerts.size() == 1);
  CHECK(alerts[0].end == 25);
  CHECK(alerts[0].decision.positive.combination.edges.size() == 2);
  // Both stay in the window until 29: no second alert within the cooldown.
  // Fresh matches at 33 and 34 hold from 34; the cooldown ends at 35.
  alerts = tracker.update({{{33, 0, 0, 1.0}, {34, 1, 1, 1.0}}}, 26, 35, p, 10.0);
  CHECK(alerts.empty());
  alerts = tracker.update({}, 35, 37, p, 10.0);
  REQUIRE(alerts.size() == 1);
  CHECK(alerts[0].end == 35);
}

TEST_CASE("tracker forgets matches older than one pattern length", "[track]") {
  CompiledPattern p = make_pattern(2, {false}, 5.0);
  PatternTracker tracker;
  CHECK(tracker.update({{{20, 0, 0, 1.0}}}, 0, 21, p, 10.0).empty());
  // 30 - 10 = 20 is not inside (20, 30]: the dims are too far apart.
  CHECK(tracker.update({{{30, 1, 1, 1.0}}}, 21, 31, p, 10.0).empty());
  const auto alerts = tracker.update({{{39, 0, 0, 1.0}}}, 31, 40, p, 10.0);
  REQUIRE(alerts.size() == 1);
  CHECK(alerts[0].end == 39);
}

TEST_CASE("minimum duration: the decision must hold that long before an alert", "[track]") {
  CompiledPattern p = make_pattern(1, {false}, 5.0);
  p.config.min_dims = 1;
  p.config.min_duration_s = 1.5;  // 15 samples at 10 Hz; the pattern length is 10
  p.config.cooldown_s = 100;
  SECTION("a lone match holds 10 window ends: too short") {
    PatternTracker tracker;
    CHECK(tracker.update({{{20, 0, 0, 1.0}}}, 0, 100, p, 10.0).empty());
  }
  SECTION("matches that keep coming hold long enough; batching does not matter") {
    std::vector<DimCandidate> matches = {{20, 0, 0, 1.0}, {28, 0, 0, 1.0}, {36, 0, 0, 1.0}};
    PatternTracker whole;
    const auto at_once = whole.update({matches}, 0, 100, p, 10.0);
    REQUIRE(at_once.size() == 1);
    CHECK(at_once[0].end == 35);  // entered at 20, 15 samples later
    PatternTracker split;
    std::vector<PatternTracker::Detection> pieces;
    for (std::int64_t from = 0; from < 100; from += 7) {
      std::vector<DimCandidate> fresh;
      for (const auto& m : matches)
        if (m.end >= from && m.end < from + 7) fresh.push_back(m);
      for (auto& d : split.update({fresh}, from, from + 7, p, 10.0)) pieces.push_back(d);
    }
    REQUIRE(pieces.size() == 1);
    CHECK(pieces[0].end == 35);
  }
  SECTION("a gap in the searched ends restarts the episode") {
    PatternTracker tracker;
    CHECK(tracker.update({{{20, 0, 0, 1.0}, {28, 0, 0, 1.0}}}, 0, 30, p, 10.0).empty());
    CHECK(tracker.update({{{45, 0, 0, 1.0}}}, 40, 50, p, 10.0).empty());
  }
}

TEST_CASE("after a gap a still-holding window enters a new episode at the first end", "[track]") {
  CompiledPattern p = make_pattern(1, {false}, 5.0);
  p.config.min_dims = 1;
  p.config.cooldown_s = 0.5;  // 5 samples at 10 Hz
  PatternTracker tracker;
  auto alerts = tracker.update({{{20, 0, 0, 1.0}}}, 0, 25, p, 10.0);
  REQUIRE(alerts.size() == 1);
  CHECK(alerts[0].end == 20);
  // Ends 25 and 26 were never searched; nothing new arrives, but the match
  // at 20 is still in the window (until 29): the episode re-enters at 27.
  alerts = tracker.update({}, 27, 29, p, 10.0);
  REQUIRE(alerts.size() == 1);
  CHECK(alerts[0].end == 27);
}

TEST_CASE("an episode that alerted is reported once when it ends", "[track][episode]") {
  CompiledPattern p = make_pattern(1, {false}, 5.0);
  p.config.min_dims = 1;
  p.config.cooldown_s = 0.5;  // 5 samples at 10 Hz
  // Matches at 20 and 28 hold the decision through end 37 (the window is
  // 10 ends long): alerts at 20, 25, 30, 35, then the episode ends.
  const std::vector<DimCandidate> matches = {{20, 0, 0, 1.0}, {28, 0, 0, 1.0}};
  SECTION("in one search or in pieces") {
    for (const std::int64_t piece : {100, 7, 1}) {
      PatternTracker tracker;
      std::vector<PatternTracker::Detection> alerts;
      std::vector<PatternTracker::EndedEpisode> ended;
      for (std::int64_t from = 0; from < 100; from += piece) {
        std::vector<DimCandidate> fresh;
        for (const auto& m : matches)
          if (m.end >= from && m.end < from + piece) fresh.push_back(m);
        for (auto& d : tracker.update({fresh}, from, from + piece, p, 10.0)) alerts.push_back(d);
        for (auto& e : tracker.take_ended_episodes()) ended.push_back(e);
      }
      REQUIRE(alerts.size() == 4);
      CHECK(alerts[0].opens_episode);
      CHECK_FALSE(alerts[1].opens_episode);
      CHECK_FALSE(alerts[3].opens_episode);
      REQUIRE(ended.size() == 1);
      CHECK(ended[0].first_alert_end == 20);
      CHECK(ended[0].last_end == 37);
      CHECK(ended[0].alerts == 4);
    }
  }
  SECTION("a gap ends it at the last end searched") {
    PatternTracker tracker;
    REQUIRE(tracker.update({{{20, 0, 0, 1.0}}}, 0, 25, p, 10.0).size() == 1);
    CHECK(tracker.take_ended_episodes().empty());
    tracker.update({}, 27, 29, p, 10.0);  // 25 and 26 never searched
    const auto ended = tracker.take_ended_episodes();
    REQUIRE(ended.size() == 1);
    CHECK(ended[0].first_alert_end == 20);
    CHECK(ended[0].last_end == 24);
    CHECK(ended[0].alerts == 1);
  }
  SECTION("an episode that never alerted is not reported") {
    p.config.min_duration_s = 1.5;  // longer than the lone match holds
    PatternTracker tracker;
    CHECK(tracker.update({{{20, 0, 0, 1.0}}}, 0, 100, p, 10.0).empty());
    CHECK(tracker.take_ended_episodes().empty());
  }
}

TEST_CASE("tracker alerts do not depend on how the window ends are split into searches",
          "[track]") {
  // Random single-dim matches of two positive and one negative example over
  // three dims, tracked in one search and in searches of random lengths.
  std::mt19937 rng(7);
  std::size_t alerts = 0;
  for (int round = 0; round < 20; ++round) {
    CompiledPattern p = make_pattern(3, {false, false, true}, 5.0);
    p.config.min_dims = 2;
    p.config.margin = 0.3;
    p.config.hysteresis = 0.4;
    p.config.min_duration_s = 0.3;
    p.config.cooldown_s = 0.7;
    std::vector<std::vector<DimCandidate>> matches(3);
    std::uniform_int_distribution<int> end(0, 399), dim(0, 2), example(0, 2);
    std::uniform_real_distribution<double> distance(0.2, 5.0);
    for (int m = 0; m < 120; ++m)
      matches[static_cast<std::size_t>(example(rng))].push_back(
          {end(rng), dim(rng), dim(rng), distance(rng)});
    PatternTracker whole;
    const auto expected = whole.update(matches, 0, 400, p, 10.0);
    alerts += expected.size();
    PatternTracker split;
    std::vector<PatternTracker::Detection> got;
    std::uniform_int_distribution<int> step(1, 25);
    for (std::int64_t from = 0; from < 400;) {
      const std::int64_t to = std::min<std::int64_t>(400, from + step(rng));
      std::vector<std::vector<DimCandidate>> fresh(3);
      for (std::size_t e = 0; e < 3; ++e)
        for (const auto& c : matches[e])
          if (c.end >= from && c.end < to) fresh[e].push_back(c);
      for (auto& d : split.update(fresh, from, to, p, 10.0)) got.push_back(d);
      from = to;
    }
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      CHECK(got[i].end == expected[i].end);
      CHECK(got[i].decision.evidence == expected[i].decision.evidence);
      CHECK(got[i].decision.positive.example == expected[i].decision.positive.example);
    }
  }
  CHECK(alerts > 20);  // the case exercises the gating, not only silence
}

TEST_CASE("hysteresis: a strong match starts an episode, a weaker one keeps it", "[track]") {
  CompiledPattern p = make_pattern(1, {false}, 5.0);
  p.config.min_dims = 1;
  p.config.hysteresis = 2.0;  // enter needs distance <= 3, hold needs <= 5
  p.config.cooldown_s = 1.0;
  PatternTracker weak_only;
  CHECK(weak_only.update({{{20, 0, 0, 4.0}, {28, 0, 0, 4.0}}}, 0, 60, p, 10.0).empty());
  PatternTracker strong_then_weak;
  // Strong at 20 enters; weak matches at 28, 36 keep it until 45; the
  // cooldown (10) lets it alert again at 30 and 40.
  const auto alerts = strong_then_weak.update({{{20, 0, 0, 2.0}, {28, 0, 0, 4.0}, {36, 0, 0, 4.0}}},
                                              0, 60, p, 10.0);
  REQUIRE(alerts.size() == 3);
  CHECK(alerts[0].end == 20);
  CHECK(alerts[1].end == 30);
  CHECK(alerts[2].end == 40);
}

TEST_CASE("a nearer negative example suppresses the alert", "[track]") {
  CompiledPattern p = make_pattern(1, {false, true}, 5.0);
  p.config.min_dims = 1;
  p.config.margin = 0.5;
  p.config.cooldown_s = 100;
  PatternTracker tracker;
  // Example 0 (positive) at 1.0 and example 1 (negative) at 1.2 at 20: not
  // clear by the margin. At 60 the negative is far: alert.
  const auto alerts = tracker.update(
      {{{20, 0, 0, 1.0}, {60, 0, 0, 1.0}}, {{20, 0, 0, 1.2}, {60, 0, 0, 4.0}}}, 0, 100, p, 10.0);
  REQUIRE(alerts.size() == 1);
  CHECK(alerts[0].end == 60);
  CHECK(alerts[0].decision.evidence == Approx(3.0));
}

TEST_CASE("the Euclidean measure needs every dim on its own channel at the same end", "[track]") {
  CompiledPattern p = make_pattern(2, {false}, 5.0);
  p.config.measure = gw::config::Measure::kEuclidean;
  p.config.min_dims = 1;  // does not apply: every dim is needed
  PatternTracker tracker;
  // Lagged by one sample, and switched: neither is a synchronous match.
  CHECK(tracker
            .update({{{20, 0, 0, 1.0}, {21, 1, 1, 1.0}, {40, 0, 1, 1.0}, {40, 1, 0, 1.0}}}, 0, 50,
                    p, 10.0)
            .empty());
  const auto alerts = tracker.update({{{60, 0, 0, 1.0}, {60, 1, 1, 2.0}}}, 50, 70, p, 10.0);
  REQUIRE(alerts.size() == 1);
  CHECK(alerts[0].end == 60);
  CHECK(alerts[0].decision.positive.combination.distance == Approx(3.0));
}

TEST_CASE("a wearer's negative example suppresses that wearer's alert only", "[track][marks]") {
  // Example 0: a shared positive. Example 1: a negative scoped to wearer 2,
  // matching exactly where the positive does (its window equal to the
  // stream's).
  CompiledPattern p = make_pattern(1, {false, true}, 5.0);
  p.config.cooldown_s = 100;
  p.examples[1].wearer = 2;
  const std::vector<std::vector<DimCandidate>> fresh = {{{40, 0, 0, 1.0}}, {{40, 0, 0, 0.0}}};

  PatternTracker wearer1(1);
  const auto for_wearer1 = wearer1.update(fresh, 0, 100, p, 10.0);
  REQUIRE(for_wearer1.size() == 1);
  CHECK(for_wearer1[0].end == 40);
  CHECK(for_wearer1[0].decision.negative.example == -1);  // wearer 2's negative took no part

  PatternTracker wearer2(2);
  CHECK(wearer2.update(fresh, 0, 100, p, 10.0).empty());

  // A tracker without a wearer uses the unscoped examples only.
  PatternTracker anyone;
  CHECK(anyone.update(fresh, 0, 100, p, 10.0).size() == 1);
  // After a reset the scope is worked out again for the pattern given.
  wearer2.reset();
  p.examples[1].wearer = 3;
  CHECK(wearer2.update(fresh, 0, 100, p, 10.0).size() == 1);
}

TEST_CASE("the learned decision's features and its log-odds", "[decide][learned]") {
  using gw::config::DecisionFeature;
  using gw::pipeline::ExampleMatch;
  // Examples 0..3 positive, 4..6 negative; one dim, threshold 5: every
  // completed distance is divided by 5.
  CompiledPattern p = make_pattern(1, {false, false, false, false, true, true, true}, 5.0);
  p.config.min_dims = 1;
  auto match = [&](int example, double distance) {
    ExampleMatch m{example, combine_matches({{3, 0, 0, distance}}, p.home_channel, 1.0), 0};
    m.completed = distance;
    return m;
  };
  const std::vector<ExampleMatch> matches = {match(0, 1.0), match(1, 2.0), ExampleMatch{},
                                             match(3, 4.5), match(4, 0.5), ExampleMatch{},
                                             ExampleMatch{}};
  const auto f = gw::pipeline::decision_features(p, matches);
  const auto at = [&](DecisionFeature k) { return f[static_cast<std::size_t>(k)]; };
  CHECK(at(DecisionFeature::kNearestPositive) == Approx(0.2));
  CHECK(at(DecisionFeature::kNearestNegative) == Approx(0.1));
  CHECK(at(DecisionFeature::kPositiveMean3) == Approx((0.2 + 0.4 + 0.9) / 3));
  // One negative matched: the two missing count as unmatched (1).
  CHECK(at(DecisionFeature::kNegativeMean3) == Approx((0.1 + 1 + 1) / 3));
  CHECK(at(DecisionFeature::kPositiveDims) == Approx(1.0));
  // The 5 nearest: only 4 matched (3 positive, 1 negative) vote.
  CHECK(at(DecisionFeature::kVote5) == Approx((3 - 1) / 5.0));
  // Nothing matched at all: every distance feature is 1, no dims, no votes.
  const auto none = gw::pipeline::decision_features(p, std::vector<ExampleMatch>(7));
  CHECK(none[0] == 1.0);
  CHECK(none[3] == 1.0);
  CHECK(none[4] == 0.0);
  CHECK(none[5] == 0.0);

  // The decision: bias + weights . features against margin and hysteresis.
  gw::config::LearnedDecision learned;
  learned.bias = 1.0;
  learned.weights[static_cast<std::size_t>(DecisionFeature::kNearestPositive)] = -10;
  learned.weights[static_cast<std::size_t>(DecisionFeature::kNearestNegative)] = 10;
  p.config.learned_decision = learned;
  const auto d = gw::pipeline::decide(p, matches);
  CHECK(d.evidence == Approx(1.0 - 10 * 0.2 + 10 * 0.1));
  CHECK(d.hold);  // margin 0 <= 0.0
  CHECK(d.positive.example == 0);
  p.config.margin = 0.5;
  CHECK_FALSE(gw::pipeline::decide(p, matches).hold);
  p.config.margin = -0.5;
  p.config.hysteresis = 1.0;
  const auto weak = gw::pipeline::decide(p, matches);
  CHECK(weak.hold);
  CHECK_FALSE(weak.enter);
  // Without a matched positive nothing holds, whatever the log-odds.
  learned.bias = 100;
  p.config.learned_decision = learned;
  CHECK_FALSE(gw::pipeline::decide(p, std::vector<ExampleMatch>(7)).hold);
}

TEST_CASE("a recording tracker traces every decision it takes again", "[track][learned]") {
  CompiledPattern p = make_pattern(1, {false}, 5.0);
  p.config.min_dims = 1;
  PatternTracker tracker;
  tracker.record_decisions(true);
  std::vector<std::vector<DimCandidate>> fresh(1);
  fresh[0] = {{12, 0, 0, 2.0}, {30, 0, 0, 1.0}};
  tracker.update(fresh, 0, 50, p, 100.0);
  const auto trace = tracker.take_decision_trace();
  // The first end, the arrival at 12, its expiry at 22, the arrival at 30 and its expiry at 40.
  REQUIRE(trace.size() == 5);
  CHECK(trace[0].end == 0);
  CHECK(trace[1].end == 12);
  CHECK(trace[1].features[0] == Approx(0.4));
  CHECK(trace[1].hold);
  CHECK(trace[2].end == 22);
  CHECK_FALSE(trace[2].hold);
  CHECK(trace[3].features[0] == Approx(0.2));
  CHECK(tracker.take_decision_trace().empty());
  tracker.record_decisions(false);
  tracker.update(fresh, 50, 100, p, 100.0);
  CHECK(tracker.take_decision_trace().empty());
}
