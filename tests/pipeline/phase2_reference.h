// A straightforward phase 2 (recomputed from scratch at every window end,
// allocating freely): the reference that the incremental PatternTracker and
// the allocation-free combination must match bit for bit
// (phase2_equivalence_test.cc). Kept independent of the production code on
// purpose. Test-only: not built into any library.
#pragma once

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "pipeline/detector.h"

namespace gw::pipeline::reference {

inline Combination combine_matches(const std::vector<DimCandidate>& candidates,
                            const std::vector<int>& home_channel, double alpha) {
  // One edge per (j, i): its best candidate.
  std::map<std::pair<int, int>, DimCandidate> best;
  for (const auto& c : candidates) {
    auto [it, inserted] = best.try_emplace({c.pattern_dim, c.stream_dim}, c);
    if (!inserted && (c.distance < it->second.distance ||
                      (c.distance == it->second.distance && c.end < it->second.end)))
      it->second = c;
  }
  std::vector<int> left, right;  // distinct pattern dims and stream dims, ascending
  for (const auto& [key, c] : best) {
    left.push_back(key.first);
    right.push_back(key.second);
  }
  left.erase(std::unique(left.begin(), left.end()), left.end());
  std::sort(right.begin(), right.end());
  right.erase(std::unique(right.begin(), right.end()), right.end());
  struct Edge {
    int l, r;
    double w;
    const DimCandidate* c;
  };
  std::vector<Edge> edges;
  std::vector<std::vector<int>> edges_of_left(left.size());
  for (const auto& [key, c] : best) {
    const int l =
        static_cast<int>(std::lower_bound(left.begin(), left.end(), key.first) - left.begin());
    const int r =
        static_cast<int>(std::lower_bound(right.begin(), right.end(), key.second) - right.begin());
    const bool home = c.stream_dim == home_channel[static_cast<std::size_t>(c.pattern_dim)];
    edges_of_left[static_cast<std::size_t>(l)].push_back(static_cast<int>(edges.size()));
    edges.push_back({l, r, c.distance * (home ? 1.0 : alpha), &c});
  }

  // Successive shortest augmenting paths: each augmentation along a
  // minimum-weight alternating path keeps the matching of minimum weight for
  // its size, and they run until no augmenting path is left (maximum size).
  // Shortest paths by label correction (Bellman-Ford with a queue): the graph
  // has at most k x (2 nr + 1) edges.
  const auto nl = left.size(), nr = right.size();
  std::vector<int> match_of_left(nl, -1), match_of_right(nr, -1);  // edge index
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // Path lengths are sums of weights; a change below this is rounding, not a shorter path.
  constexpr double kTolerance = 1e-12;
  for (;;) {
    std::vector<double> dist_left(nl, kInf), dist_right(nr, kInf);
    std::vector<int> via_right(nr, -1);  // edge that reached the right vertex
    std::deque<int> queue;
    std::vector<char> queued(nl, 0);
    for (std::size_t l = 0; l < nl; ++l)
      if (match_of_left[l] < 0) {
        dist_left[l] = 0;
        queue.push_back(static_cast<int>(l));
        queued[l] = 1;
      }
    while (!queue.empty()) {
      const int l = queue.front();
      queue.pop_front();
      queued[static_cast<std::size_t>(l)] = 0;
      for (const int e : edges_of_left[static_cast<std::size_t>(l)]) {
        if (match_of_left[static_cast<std::size_t>(l)] == e) continue;
        const Edge& edge = edges[static_cast<std::size_t>(e)];
        const double d = dist_left[static_cast<std::size_t>(l)] + edge.w;
        if (d < dist_right[static_cast<std::size_t>(edge.r)] - kTolerance) {
          dist_right[static_cast<std::size_t>(edge.r)] = d;
          via_right[static_cast<std::size_t>(edge.r)] = e;
          const int back = match_of_right[static_cast<std::size_t>(edge.r)];
          if (back >= 0) {  // continue through the matched edge, backwards
            const Edge& matched = edges[static_cast<std::size_t>(back)];
            const double dl = d - matched.w;
            if (dl < dist_left[static_cast<std::size_t>(matched.l)] - kTolerance) {
              dist_left[static_cast<std::size_t>(matched.l)] = dl;
              if (!queued[static_cast<std::size_t>(matched.l)]) {
                queue.push_back(matched.l);
                queued[static_cast<std::size_t>(matched.l)] = 1;
              }
            }
          }
        }
      }
    }
    int target = -1;
    for (std::size_t r = 0; r < nr; ++r)
      if (match_of_right[r] < 0 && dist_right[r] < kInf &&
          (target < 0 || dist_right[r] < dist_right[static_cast<std::size_t>(target)] - kTolerance))
        target = static_cast<int>(r);
    if (target < 0) break;
    // Flip the path: every edge that reached a right vertex becomes matched.
    int r = target;
    while (r >= 0) {
      const int e = via_right[static_cast<std::size_t>(r)];
      const Edge& edge = edges[static_cast<std::size_t>(e)];
      const int previous = match_of_left[static_cast<std::size_t>(edge.l)];
      match_of_left[static_cast<std::size_t>(edge.l)] = e;
      match_of_right[static_cast<std::size_t>(r)] = e;
      r = previous >= 0 ? edges[static_cast<std::size_t>(previous)].r : -1;
    }
  }
  Combination out;
  for (std::size_t l = 0; l < nl; ++l) {
    if (match_of_left[l] < 0) continue;
    const Edge& edge = edges[static_cast<std::size_t>(match_of_left[l])];
    out.edges.push_back(*edge.c);
    out.distance += edge.w;
  }
  return out;
}

inline Combination combine_with_exhausting(const std::vector<DimCandidate>& candidates,
                                    const std::vector<int>& home_channel, double alpha) {
  const bool any_loose = std::any_of(candidates.begin(), candidates.end(),
                                     [](const DimCandidate& c) { return c.loose; });
  if (!any_loose) return reference::combine_matches(candidates, home_channel, alpha);
  std::vector<DimCandidate> own, loose;
  for (const DimCandidate& c : candidates) (c.loose ? loose : own).push_back(c);
  Combination out = reference::combine_matches(own, home_channel, alpha);
  if (out.edges.empty() || out.edges.size() >= home_channel.size()) return out;
  // Only pattern dims the match misses, on stream dims it leaves free.
  auto used = [&out](const DimCandidate& c) {
    return std::any_of(out.edges.begin(), out.edges.end(), [&c](const DimCandidate& e) {
      return e.pattern_dim == c.pattern_dim || e.stream_dim == c.stream_dim;
    });
  };
  loose.erase(std::remove_if(loose.begin(), loose.end(), used), loose.end());
  if (loose.empty()) return out;
  const Combination extra = reference::combine_matches(loose, home_channel, alpha);
  out.edges.insert(out.edges.end(), extra.edges.begin(), extra.edges.end());
  std::sort(out.edges.begin(), out.edges.end(), [](const DimCandidate& a, const DimCandidate& b) {
    return a.pattern_dim < b.pattern_dim;
  });
  out.distance += extra.distance;
  out.recovered = static_cast<int>(extra.edges.size());
  return out;
}

inline Decision decide(const CompiledPattern& pattern, const std::vector<ExampleMatch>& per_example) {
  const config::PatternConfig& pc = pattern.config;
  const int dims = static_cast<int>(pattern.home_channel.size());
  const bool euclidean = pc.measure == gw::config::Measure::kEuclidean;
  const double unmatched = (euclidean ? 1.0 : pc.alpha) * pc.threshold;
  Decision decision;
  decision.positive.completed = dims * unmatched;
  decision.negative.completed = dims * unmatched;
  // Nearest = lowest completed distance; ties: more dims, then the earlier example.
  auto nearer = [](const ExampleMatch& a, const ExampleMatch& b) {
    if (a.completed != b.completed) return a.completed < b.completed;
    return a.combination.edges.size() > b.combination.edges.size();
  };
  for (const ExampleMatch& match : per_example) {
    if (match.example < 0) continue;
    const bool negative = pattern.examples[static_cast<std::size_t>(match.example)].negative;
    ExampleMatch& nearest = negative ? decision.negative : decision.positive;
    if (nearest.example < 0 || nearer(match, nearest)) nearest = match;
  }
  decision.evidence = decision.negative.completed - decision.positive.completed;
  const int needed = euclidean ? dims : pc.min_dims;
  decision.hold = decision.positive.example >= 0 &&
                  static_cast<int>(decision.positive.combination.edges.size()) >= needed &&
                  decision.evidence >= pc.margin;
  decision.enter = decision.hold && decision.evidence >= pc.margin + pc.hysteresis;
  return decision;
}

// PatternTracker as it was: a map of deques per example, every window walked
// at every end, the matching redone whenever a window changed.
class PatternTracker {
 public:
  using Detection = gw::pipeline::PatternTracker::Detection;
  std::vector<Detection> update(std::vector<std::vector<DimCandidate>> fresh,
                                std::int64_t first_end, std::int64_t searched_until,
                                const CompiledPattern& pattern, double sample_rate_hz);
  void reset();

 private:
  std::vector<std::map<std::pair<int, int>, std::deque<DimCandidate>>> windows_;
  std::vector<ExampleMatch> per_example_;
  Decision decision_;
  bool fresh_state_ = true;
  std::vector<DimCandidate> best_per_pair_;
  std::int64_t searched_until_ = -1;
  bool active_ = false;
  std::int64_t episode_start_ = 0;
  std::int64_t cooldown_until_ = 0;
};

namespace detail {

inline bool by_end(const DimCandidate& a, const DimCandidate& b) { return a.end < b.end; }

}  // namespace detail

inline std::vector<PatternTracker::Detection> PatternTracker::update(
    std::vector<std::vector<DimCandidate>> fresh, std::int64_t first_end,
    std::int64_t searched_until, const CompiledPattern& pattern, double sample_rate_hz) {
  const config::PatternConfig& pc = pattern.config;
  const bool euclidean = pc.measure == gw::config::Measure::kEuclidean;
  // A candidate ending at c takes part in the windows (t - span, t] with
  // c <= t < c + span: phase 2 pairs dims up to a pattern length apart; the
  // Euclidean baseline needs them at the same end.
  const std::int64_t span = euclidean ? 1 : pc.length;
  const std::size_t examples = pattern.examples.size();
  windows_.resize(examples);
  fresh.resize(examples);
  if (first_end != searched_until_) active_ = false;  // a gap (or the first search)
  for (auto& f : fresh) std::sort(f.begin(), f.end(), detail::by_end);
  std::vector<std::size_t> next(examples, 0);  // per example: first fresh match not yet pushed
  // per_example_ and decision_ are functions of windows_ alone, kept from
  // the last call: only an example whose window changes is matched again.
  if (per_example_.size() != examples) {
    per_example_.assign(examples, ExampleMatch{});
    fresh_state_ = true;
  }
  std::vector<ExampleMatch>& per_example = per_example_;
  Decision& decision = decision_;

  const auto min_duration =
      static_cast<std::int64_t>(std::llround(pc.min_duration_s * sample_rate_hz));
  const auto cooldown = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(std::llround(pc.cooldown_s * sample_rate_hz)));
  std::vector<Detection> alerts;
  std::vector<DimCandidate>& best_per_pair = best_per_pair_;
  for (std::int64_t t = first_end; t < searched_until; ++t) {
    // Slide every (example, pair) window to (t - span, t]: each keeps the
    // candidates that can still become its best (a monotonic queue: distances
    // increase from the front; of equal distances the earlier end stays).
    bool changed = false;
    for (std::size_t e = 0; e < examples; ++e) {
      auto& by_pair = windows_[e];
      bool example_changed = fresh_state_;
      for (; next[e] < fresh[e].size() && fresh[e][next[e]].end <= t; ++next[e]) {
        const DimCandidate& c = fresh[e][next[e]];
        if (euclidean &&
            c.stream_dim != pattern.home_channel[static_cast<std::size_t>(c.pattern_dim)])
          continue;
        auto& queue = by_pair[{c.pattern_dim, c.stream_dim}];
        // Loose (exhausting) candidates rank after the pattern's own ones.
        while (!queue.empty() && std::make_pair(queue.back().loose, queue.back().distance) >
                                     std::make_pair(c.loose, c.distance))
          queue.pop_back();
        queue.push_back(c);
        example_changed = true;
      }
      for (auto it = by_pair.begin(); it != by_pair.end();) {
        auto& queue = it->second;
        // Marks (wearer-scoped negatives) stay twice as long (pipeline/pattern_tracker.cc).
        const std::int64_t example_span =
            pattern.examples[e].negative && pattern.examples[e].wearer && !euclidean ? 2 * span
                                                                                      : span;
        while (!queue.empty() && queue.front().end <= t - example_span) {
          queue.pop_front();
          example_changed = true;
        }
        // An empty pair is dropped: it would be walked at every window end.
        it = queue.empty() ? by_pair.erase(it) : std::next(it);
      }
      if (!example_changed) continue;
      changed = true;
      // Only an example whose window changed needs its matching again.
      best_per_pair.clear();
      for (const auto& [pair, queue] : by_pair)
        if (!queue.empty()) best_per_pair.push_back(queue.front());
      ExampleMatch& match = per_example[e];
      match = ExampleMatch{};
      if (best_per_pair.empty()) continue;
      match.example = static_cast<int>(e);
      match.combination = reference::combine_with_exhausting(best_per_pair, pattern.home_channel, pc.alpha);
      const Combination& combination = match.combination;
      const double unmatched = (euclidean ? 1.0 : pc.alpha) * pc.threshold;
      const auto missing = pattern.home_channel.size() - combination.edges.size();
      match.completed = combination.distance + static_cast<double>(missing) * unmatched;
      // A recovered edge adds at most an unmatched dim's cost.
      if (combination.recovered > 0)
        for (const DimCandidate& e : combination.edges) {
          if (!e.loose) continue;
          const bool home = e.stream_dim == pattern.home_channel[static_cast<std::size_t>(e.pattern_dim)];
          const double weighted = e.distance * (home ? 1.0 : pc.alpha);
          match.completed -= weighted - std::min(weighted, unmatched);
        }
    }
    fresh_state_ = false;
    // At the first end of a search the decision is applied even when no
    // window changed: after a gap (active_ cleared) an episode may re-enter.
    if (changed || (t == first_end && examples > 0)) {
      decision = reference::decide(pattern, per_example);
      if (active_ && !decision.hold) active_ = false;
      if (!active_ && decision.enter) {
        active_ = true;
        episode_start_ = t;
      }
    }
    if (active_ && t >= episode_start_ + min_duration && t >= cooldown_until_) {
      alerts.push_back({t, decision});
      cooldown_until_ = t + cooldown;
    }
  }
  searched_until_ = searched_until;
  return alerts;
}

inline void PatternTracker::reset() {
  windows_.clear();
  per_example_.clear();
  decision_ = Decision{};
  fresh_state_ = true;
  searched_until_ = -1;
  active_ = false;
  episode_start_ = 0;
  cooldown_until_ = 0;
}

}  // namespace gw::pipeline::reference
