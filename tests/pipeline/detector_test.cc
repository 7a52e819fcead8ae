#include "pipeline/detector.h"

#include <catch2/catch.hpp>

using gw::pipeline::combine_matches;
using gw::pipeline::DimCandidate;
using gw::pipeline::PatternTracker;

TEST_CASE("combination keeps one edge per pattern dim and per stream dim", "[combine]") {
  // Pattern dims 0,1,2 live on channels 0,1,2. Dim 0 matches channel 1 better
  // than its own channel, but channel 1 belongs to dim 1's best edge.
  const std::vector<int> home = {0, 1, 2};
  std::vector<DimCandidate> c = {
      {10, 0, 0, 3.0}, {11, 0, 1, 1.0}, {12, 1, 1, 0.5}, {9, 2, 2, 2.0}, {12, 2, 1, 0.1}};
  const auto combo = combine_matches(c, home, 1.0);
  REQUIRE(combo.edges.size() == 2);
  // Greedy by distance: (2,1) 0.1 first; then (1,1) and (0,1) conflict on
  // stream dim 1 and (2,2) on pattern dim 2, so (0,0) 3.0; dim 1 stays unmatched.
  CHECK(combo.edges[0].pattern_dim == 2);
  CHECK(combo.edges[0].stream_dim == 1);
  CHECK(combo.distance == Approx(0.1 + 3.0));
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

TEST_CASE("tracker alerts once min_dims is reached, then respects the cooldown", "[combine]") {
  gw::config::PatternConfig p;
  p.length = 10;
  p.min_dims = 2;
  p.alpha = 1.0;
  p.cooldown_s = 1.0;  // 10 samples at 10 Hz
  const std::vector<int> home = {0, 1};
  PatternTracker tracker;
  // Dim 0 matches at 20; dim 1 only at 25 -> the combination completes at 25.
  auto alerts = tracker.update({{20, 0, 0, 1.0}}, 21, p, home, 10.0);
  CHECK(alerts.empty());
  alerts = tracker.update({{25, 1, 1, 1.0}}, 26, p, home, 10.0);
  REQUIRE(alerts.size() == 1);
  CHECK(alerts[0].first == 25);
  CHECK(alerts[0].second.edges.size() == 2);
  // Within the cooldown: nothing. After it: a new alert.
  alerts = tracker.update({{30, 0, 0, 1.0}, {31, 1, 1, 1.0}}, 32, p, home, 10.0);
  CHECK(alerts.empty());
  alerts = tracker.update({{36, 0, 0, 1.0}, {36, 1, 1, 1.0}}, 37, p, home, 10.0);
  REQUIRE(alerts.size() == 1);
  CHECK(alerts[0].first == 36);
}

TEST_CASE("tracker forgets matches older than one pattern length", "[combine]") {
  gw::config::PatternConfig p;
  p.length = 10;
  p.min_dims = 2;
  p.cooldown_s = 0;
  const std::vector<int> home = {0, 1};
  PatternTracker tracker;
  CHECK(tracker.update({{20, 0, 0, 1.0}}, 21, p, home, 10.0).empty());
  // 30 - 10 = 20 is not inside (20, 30]: the dims are too far apart.
  CHECK(tracker.update({{30, 1, 1, 1.0}}, 31, p, home, 10.0).empty());
  CHECK(tracker.update({{39, 0, 0, 1.0}}, 40, p, home, 10.0).size() == 1);
}
