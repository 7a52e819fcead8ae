// Phase 2's combination (Moazeni 2013 §7.4.2, §7.4.6 ranking): single-dimension
// matches of one example into its best feasible multi-dimensional match.
// Everything here works on the backend's single-dim matches only, so every
// backend yields the same combinations.
//
// Thread safety: the functions may run on several threads at once (each keeps
// its reusable storage per thread).
#pragma once

#include <cstdint>
#include <vector>

#include "pipeline/library.h"

namespace gw::pipeline {

// One single-dimension match as the combiner sees it.
struct DimCandidate {
  std::int64_t end = 0;
  int pattern_dim = 0;
  int stream_dim = 0;
  double distance = 0;
  std::int64_t start = 0;  // first sample of the match (window mode: end - m + 1)
  // Found by the exhausting search only (beyond what the pattern's own
  // threshold and band accept): fills a dim a feasible match misses, never
  // competes with the pattern's own matches.
  bool loose = false;
};

// The single-dim candidates of one example among the matches of one search
// (`by_kernel[k]`: the matches of kernel pattern k of the compiled library),
// ending at or after `first_end`: the example's own matches; with
// segmentation, each part's match as a partial match of the whole, at
// distance sqrt(d² + threshold² (m - length) / m) (the rest of the query
// counted at the threshold's rate per sample), so a part within its own
// threshold stays within the pattern's; with exhausting, the looser search's
// matches flagged `loose`. Appended to `out`.
void example_candidates(const CompiledPattern& pattern, const CompiledExample& example,
                        const std::vector<std::vector<DimCandidate>>& by_kernel,
                        std::int64_t first_end, std::vector<DimCandidate>& out);

// A feasible multi-dimensional match (Moazeni 2013 §7.4.2): independent edges, no
// pattern dim and no stream dim used twice. distance = sum of f * d with f = 1
// when the stream dim is the pattern dim's home channel and alpha otherwise.
struct Combination {
  std::vector<DimCandidate> edges;  // sorted by pattern dim
  double distance = 0;
  int recovered = 0;  // edges filled in by search exhausting (loose candidates)
};

// The best-ranked feasible match among `candidates` (Moazeni 2013 §7.4.6: more matched
// dims first, then lower distance): the bipartite graph pattern dims x stream
// dims gets one edge per (j, i), its best candidate (lowest distance, then
// earliest end), weighted f * d; the result is a maximum-cardinality matching
// of minimum total weight (exact: successive shortest augmenting paths).
// Every maximum matching is maximal, so this is the top of the thesis's ranking
// of all maximal independent edge sets. Deterministic for equal weights.
Combination combine_matches(const std::vector<DimCandidate>& candidates,
                            const std::vector<int>& home_channel, double alpha);

// The best-ranked feasible match of the pattern's own candidates (those not
// `loose`), and then, when it matches some dims but not all, search
// exhausting (Moazeni 2013 §7.4.5): the missing pattern dims are matched among the
// loose candidates on stream dims the match leaves free (again a
// maximum-cardinality matching of minimum weight); those edges are added and
// counted in `recovered`. Without loose candidates this is combine_matches().
Combination combine_with_exhausting(const std::vector<DimCandidate>& candidates,
                                    const std::vector<int>& home_channel, double alpha);
// combine_with_exhausting into `out`, its storage reused: no allocation once
// warm (phase 2 combines again at every change of an example's window).
void combine_with_exhausting_into(const std::vector<DimCandidate>& candidates,
                                  const std::vector<int>& home_channel, double alpha,
                                  Combination& out);

// The best combination of one pattern example at a window end, and its
// completed distance: the distance plus alpha * threshold for every unmatched
// pattern dim (an unmatched dim is at least that far: the search found no
// window within the threshold), so examples matching different numbers of
// dims compare on one scale. A dim recovered by search exhausting lies beyond
// the threshold too: it counts as matched (min_dims, the ranking) but adds
// min(f * d, alpha * threshold) to the completed distance, so exhausting
// changes which dims count, not how near an example looks.
struct ExampleMatch {
  int example = -1;  // index into CompiledPattern::examples; -1 = none matched
  Combination combination;
  double completed = 0;
};

}  // namespace gw::pipeline
