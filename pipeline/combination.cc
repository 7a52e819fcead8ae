#include "pipeline/combination.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "common/error.h"

namespace gw::pipeline {

namespace {

// The reusable storage of combine_matches and combine_with_exhausting: phase 2
// redoes an example's combination whenever its window's best candidates
// change, so these must not allocate once warm. One per thread (the engine
// runs phase 2 of different slices on its host workers); not reentrant, and
// the functions below never call each other while a scratch is in use except
// where stated.
struct CombineScratch {
  struct Edge {
    int l, r;
    double w;
    const DimCandidate* c;
  };
  std::vector<const DimCandidate*> keyed;  // the candidates, by (pattern dim, stream dim)
  std::vector<const DimCandidate*> best;   // one per (j, i), ascending key
  std::vector<int> left, right;            // distinct pattern dims and stream dims, ascending
  std::vector<Edge> edges;                 // key order: the edges of one left vertex are adjacent
  std::vector<int> first_edge_of_left;     // edges of left l: [first[l], first[l + 1])
  std::vector<int> match_of_left, match_of_right;  // edge index, -1: unmatched
  std::vector<double> dist_left, dist_right;
  std::vector<int> via_right;  // edge that reached the right vertex
  std::vector<int> queue;      // FIFO: queue[queue_head..]
  std::vector<char> queued;
  // combine_with_exhausting's split of the candidates, and its second matching.
  std::vector<DimCandidate> own, loose;
  Combination extra;
};

CombineScratch& combine_scratch() {
  thread_local CombineScratch scratch;
  return scratch;
}

bool key_less(const DimCandidate* a, const DimCandidate* b) {
  return a->pattern_dim != b->pattern_dim ? a->pattern_dim < b->pattern_dim
                                          : a->stream_dim < b->stream_dim;
}

// combine_matches into `out` (its storage reused). Uses scratch's matching
// fields, not own/loose/extra. `out.edges` copies the candidates, so
// `candidates` may live in the scratch's own/loose.
void combine_matches_into(const std::vector<DimCandidate>& candidates,
                          const std::vector<int>& home_channel, double alpha, CombineScratch& s,
                          Combination& out) {
  // One edge per (j, i): its best candidate (lowest distance, then earliest
  // end; of equal ones the first given). Grouped by a stable sort, skipped
  // when the candidates come sorted with distinct keys (PatternTracker's).
  s.keyed.clear();
  for (const DimCandidate& c : candidates) s.keyed.push_back(&c);
  bool sorted_distinct = true;
  for (std::size_t i = 1; i < s.keyed.size() && sorted_distinct; ++i)
    sorted_distinct = key_less(s.keyed[i - 1], s.keyed[i]);
  if (!sorted_distinct) std::stable_sort(s.keyed.begin(), s.keyed.end(), key_less);
  s.best.clear();
  for (const DimCandidate* c : s.keyed) {
    if (!s.best.empty() && !key_less(s.best.back(), c)) {  // same key
      const DimCandidate*& kept = s.best.back();
      if (c->distance < kept->distance || (c->distance == kept->distance && c->end < kept->end))
        kept = c;
      continue;
    }
    s.best.push_back(c);
  }
  s.left.clear();
  s.right.clear();
  for (const DimCandidate* c : s.best) {
    if (s.left.empty() || s.left.back() != c->pattern_dim) s.left.push_back(c->pattern_dim);
    s.right.push_back(c->stream_dim);
  }
  std::sort(s.right.begin(), s.right.end());
  s.right.erase(std::unique(s.right.begin(), s.right.end()), s.right.end());
  s.edges.clear();
  s.first_edge_of_left.clear();
  for (const DimCandidate* c : s.best) {
    if (s.first_edge_of_left.empty() || s.left[s.first_edge_of_left.size() - 1] != c->pattern_dim)
      s.first_edge_of_left.push_back(static_cast<int>(s.edges.size()));
    const int l = static_cast<int>(s.first_edge_of_left.size()) - 1;
    const int r = static_cast<int>(std::lower_bound(s.right.begin(), s.right.end(), c->stream_dim) -
                                   s.right.begin());
    const bool home = c->stream_dim == home_channel[static_cast<std::size_t>(c->pattern_dim)];
    s.edges.push_back({l, r, c->distance * (home ? 1.0 : alpha), c});
  }
  s.first_edge_of_left.push_back(static_cast<int>(s.edges.size()));

  // Successive shortest augmenting paths: each augmentation along a
  // minimum-weight alternating path keeps the matching of minimum weight for
  // its size, and they run until no augmenting path is left (maximum size).
  // Shortest paths by label correction (Bellman-Ford with a queue): the graph
  // has at most k x (2 nr + 1) edges.
  const auto nl = s.left.size(), nr = s.right.size();
  s.match_of_left.assign(nl, -1);
  s.match_of_right.assign(nr, -1);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // Path lengths are sums of weights; a change below this is rounding, not a shorter path.
  constexpr double kTolerance = 1e-12;
  for (;;) {
    s.dist_left.assign(nl, kInf);
    s.dist_right.assign(nr, kInf);
    s.via_right.assign(nr, -1);
    s.queue.clear();
    std::size_t queue_head = 0;
    s.queued.assign(nl, 0);
    for (std::size_t l = 0; l < nl; ++l)
      if (s.match_of_left[l] < 0) {
        s.dist_left[l] = 0;
        s.queue.push_back(static_cast<int>(l));
        s.queued[l] = 1;
      }
    while (queue_head < s.queue.size()) {
      const auto l = static_cast<std::size_t>(s.queue[queue_head++]);
      s.queued[l] = 0;
      for (int e = s.first_edge_of_left[l]; e < s.first_edge_of_left[l + 1]; ++e) {
        if (s.match_of_left[l] == e) continue;
        const CombineScratch::Edge& edge = s.edges[static_cast<std::size_t>(e)];
        const auto r = static_cast<std::size_t>(edge.r);
        const double d = s.dist_left[l] + edge.w;
        if (d < s.dist_right[r] - kTolerance) {
          s.dist_right[r] = d;
          s.via_right[r] = e;
          const int back = s.match_of_right[r];
          if (back >= 0) {  // continue through the matched edge, backwards
            const CombineScratch::Edge& matched = s.edges[static_cast<std::size_t>(back)];
            const auto ml = static_cast<std::size_t>(matched.l);
            const double dl = d - matched.w;
            if (dl < s.dist_left[ml] - kTolerance) {
              s.dist_left[ml] = dl;
              if (!s.queued[ml]) {
                s.queue.push_back(matched.l);
                s.queued[ml] = 1;
              }
            }
          }
        }
      }
    }
    int target = -1;
    for (std::size_t r = 0; r < nr; ++r)
      if (s.match_of_right[r] < 0 && s.dist_right[r] < kInf &&
          (target < 0 || s.dist_right[r] < s.dist_right[static_cast<std::size_t>(target)] - kTolerance))
        target = static_cast<int>(r);
    if (target < 0) break;
    // Flip the path: every edge that reached a right vertex becomes matched.
    int r = target;
    while (r >= 0) {
      const int e = s.via_right[static_cast<std::size_t>(r)];
      const CombineScratch::Edge& edge = s.edges[static_cast<std::size_t>(e)];
      const int previous = s.match_of_left[static_cast<std::size_t>(edge.l)];
      s.match_of_left[static_cast<std::size_t>(edge.l)] = e;
      s.match_of_right[static_cast<std::size_t>(r)] = e;
      r = previous >= 0 ? s.edges[static_cast<std::size_t>(previous)].r : -1;
    }
  }
  out.edges.clear();
  out.distance = 0;
  out.recovered = 0;
  for (std::size_t l = 0; l < nl; ++l) {
    if (s.match_of_left[l] < 0) continue;
    const CombineScratch::Edge& edge = s.edges[static_cast<std::size_t>(s.match_of_left[l])];
    out.edges.push_back(*edge.c);
    out.distance += edge.w;
  }
}

// combine_with_exhausting into `out` (its storage reused).
void combine_with_exhausting_into(const std::vector<DimCandidate>& candidates,
                                  const std::vector<int>& home_channel, double alpha,
                                  CombineScratch& s, Combination& out) {
  const bool any_loose = std::any_of(candidates.begin(), candidates.end(),
                                     [](const DimCandidate& c) { return c.loose; });
  if (!any_loose) return combine_matches_into(candidates, home_channel, alpha, s, out);
  s.own.clear();
  s.loose.clear();
  for (const DimCandidate& c : candidates) (c.loose ? s.loose : s.own).push_back(c);
  combine_matches_into(s.own, home_channel, alpha, s, out);
  if (out.edges.empty() || out.edges.size() >= home_channel.size()) return;
  // Only pattern dims the match misses, on stream dims it leaves free.
  auto used = [&out](const DimCandidate& c) {
    return std::any_of(out.edges.begin(), out.edges.end(), [&c](const DimCandidate& e) {
      return e.pattern_dim == c.pattern_dim || e.stream_dim == c.stream_dim;
    });
  };
  s.loose.erase(std::remove_if(s.loose.begin(), s.loose.end(), used), s.loose.end());
  if (s.loose.empty()) return;
  combine_matches_into(s.loose, home_channel, alpha, s, s.extra);
  const Combination& extra = s.extra;
  out.edges.insert(out.edges.end(), extra.edges.begin(), extra.edges.end());
  std::sort(out.edges.begin(), out.edges.end(), [](const DimCandidate& a, const DimCandidate& b) {
    return a.pattern_dim < b.pattern_dim;
  });
  out.distance += extra.distance;
  out.recovered = static_cast<int>(extra.edges.size());
}

}  // namespace

Combination combine_matches(const std::vector<DimCandidate>& candidates,
                            const std::vector<int>& home_channel, double alpha) {
  Combination out;
  combine_matches_into(candidates, home_channel, alpha, combine_scratch(), out);
  return out;
}

void example_candidates(const CompiledPattern& pattern, const CompiledExample& example,
                        const std::vector<std::vector<DimCandidate>>& by_kernel,
                        std::int64_t first_end, std::vector<DimCandidate>& out) {
  for (const DimCandidate& c : by_kernel[example.kernel])
    if (c.end >= first_end) out.push_back(c);
  const double threshold = pattern.config.threshold;
  const double m = pattern.config.length;
  for (const CompiledExample::Segment& segment : example.segments) {
    const double rest = threshold * threshold * (m - segment.length) / m;
    for (DimCandidate c : by_kernel[segment.kernel]) {
      if (c.end < first_end) continue;
      // The part passed threshold * sqrt(length / m): only rounding can put
      // the partial distance above the threshold.
      c.distance = std::min(threshold, std::sqrt(c.distance * c.distance + rest));
      out.push_back(c);
    }
  }
  if (example.exhaust_kernel == CompiledExample::kNone) return;
  for (DimCandidate c : by_kernel[example.exhaust_kernel]) {
    if (c.end < first_end) continue;
    c.loose = true;
    out.push_back(c);
  }
}

Combination combine_with_exhausting(const std::vector<DimCandidate>& candidates,
                                    const std::vector<int>& home_channel, double alpha) {
  Combination out;
  combine_with_exhausting_into(candidates, home_channel, alpha, combine_scratch(), out);
  return out;
}

void combine_with_exhausting_into(const std::vector<DimCandidate>& candidates,
                                  const std::vector<int>& home_channel, double alpha,
                                  Combination& out) {
  combine_with_exhausting_into(candidates, home_channel, alpha, combine_scratch(), out);
}

}  // namespace gw::pipeline
