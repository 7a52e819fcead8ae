// Turns configured patterns into kernel patterns, and single-dimension matches
// into multi-dimensional detections (Moazeni 2013 §7.4.2 phase 2, §7.4.6 ranking),
// then into alerts (the decision between positive and negative examples, and
// the gating: minimum duration, hysteresis, cooldown). docs/detection.md
// describes the semantics.
//
// Everything here works on the backend's single-dim matches only, so every
// backend yields the same detections.
//
// Thread safety: none; owned by the pipeline thread (or one offline caller).
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "kernels/search.h"
#include "pipeline/transforms.h"

namespace gw::pipeline {

// What the backend searches for one device: its raw channels, or the output
// of one transform chain over some of its channels. Patterns with equal
// chains over equal channels share a view (one slice per stream and batch).
struct ChannelView {
  std::uint16_t device = 0;
  std::uint32_t profile = 0;  // kernel profile id: the device id for the raw view
  bool raw = true;            // the device's own channels, no transform
  std::vector<int> inputs;    // device channels the chain reads (transformed views)
  std::shared_ptr<const TransformChain> chain;  // null for the raw view
  std::vector<config::TransformStep> steps;     // the chain's steps (empty for the raw view)
  // Per-wearer normalisation of the chain's output (pipeline/baseline.h):
  // patterns that differ in it search different views, since the engine
  // normalises a view's samples before the search.
  config::NormaliseConfig normalise;
  std::vector<std::string> channel_names;
  int history = 0;  // raw samples before a view sample that it depends on
  int longest_pattern = 0;
};

struct CompiledExample {
  std::size_t kernel = 0;  // index into kernel_library->patterns
  bool negative = false;
  // The example's wearer scope (config::PatternExample::wearer): decisions
  // for other wearers' streams leave it out. Unset = every wearer.
  std::optional<std::uint32_t> wearer;
  // The wearer's baseline the example was normalised with (normalised
  // patterns only; pattern export writes it out).
  std::optional<config::ChannelBaseline> baseline;
  // Query segmentation (config `segments`): one kernel pattern per part of
  // the example, samples [begin, begin + length) of it, searched at
  // threshold * sqrt(length / m) so that its partial distance (below) stays
  // within the threshold.
  struct Segment {
    std::size_t kernel = 0;
    int begin = 0;
    int length = 0;
  };
  std::vector<Segment> segments;
  // Search exhausting (config `exhaust_factor`): the kernel pattern of the
  // looser search of the same shape; kNone when off.
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::size_t exhaust_kernel = kNone;
};

struct CompiledPattern {
  config::PatternConfig config;  // examples' raw values dropped (the kernels hold the shapes)
  std::size_t view = 0;          // index into CompiledLibrary::views
  // home_channel[j]: the view channel pattern dim j is named after (f = 1 there).
  std::vector<int> home_channel;
  std::vector<CompiledExample> examples;  // config order: positives, then negatives
};

struct CompiledLibrary {
  std::vector<ChannelView> views;
  std::vector<CompiledPattern> patterns;  // config order
  // One kernel pattern per distinct example: identical examples of different
  // patterns (e.g. the folds of a cross-validation) are searched once.
  std::shared_ptr<const kernels::PatternLibrary> kernel_library;
};

// The samples `view` searches for `rows` raw device samples (sample-major,
// `device_channels` values each), appended to `out`: the samples themselves
// for the raw view; else the transform chain over the view's input channels,
// which yields rows - view.history samples, the first belonging to raw row
// view.history (none when rows <= history).
void view_samples(const ChannelView& view, const float* raw, int rows, int device_channels,
                  std::vector<float>& out);

// Whether two views yield the same samples for the same stream: same device,
// inputs, transform steps and normalisation (a learned baseline of one holds
// for the other, e.g. across a reload).
bool same_view_samples(const ChannelView& a, const ChannelView& b);

// Pairs: dim j on view channel c is compared with channels c-nr..c+nr of the
// same channel group. Transformed examples are computed here from their raw
// values; a normalised pattern's examples are then normalised with their own
// wearer's baseline (PatternExample::baseline, or learned from its
// baseline_rows with learn_view_baseline). Throws gw::Error for inconsistent input (load_config has already
// validated a config, so that means a bug).
CompiledLibrary compile_library(const config::Config& config);

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

// The decision at one window end (docs/detection.md):
//   evidence = completed distance of the nearest negative - that of the
//              nearest positive, with negatives; without, dims * alpha *
//              threshold - completed distance of the nearest positive (how far
//              the positive lies inside the absolute threshold).
//   hold  = the nearest positive matches >= min_dims dims and evidence >= margin
//   enter = hold and evidence >= margin + hysteresis
struct Decision {
  ExampleMatch positive;
  ExampleMatch negative;
  double evidence = 0;
  bool hold = false;
  bool enter = false;
};
Decision decide(const CompiledPattern& pattern, const std::vector<ExampleMatch>& per_example);

// The inputs of a learned decision (config::DecisionFeature) at one window
// end, from the same per-example matches decide() takes. Completed distances
// are divided by dims * the unmatched dim's cost, so every feature lies in
// [0, 1] (vote5 in [-1, 1]) whatever the pattern's threshold and dims.
using DecisionFeatures = std::array<double, config::kDecisionFeatureCount>;
DecisionFeatures decision_features(const CompiledPattern& pattern,
                                   const std::vector<ExampleMatch>& per_example);
// bias + weights . features: the log-odds a learned decision compares with
// margin (hold) and margin + hysteresis (enter).
double learned_evidence(const config::LearnedDecision& decision, const DecisionFeatures& features);

// decide() in two steps, for PatternTracker, which decides again at every
// change of an example's match but needs the nearest matches themselves only
// for an alert: which entries of per_example are nearest (-1: none) and the
// verdict; then the Decision, as decide() gives it, of the same per_example.
struct DecisionSummary {
  int positive = -1;
  int negative = -1;
  double evidence = 0;
  bool hold = false;
  bool enter = false;
};
DecisionSummary summarize_decision(const CompiledPattern& pattern,
                                   const std::vector<ExampleMatch>& per_example);
Decision expand_decision(const CompiledPattern& pattern,
                         const std::vector<ExampleMatch>& per_example,
                         const DecisionSummary& summary);

// Whether `example` takes part in the decisions for a stream of `wearer`:
// unscoped examples do for every wearer, scoped ones for theirs only.
bool example_applies(const CompiledExample& example, std::uint32_t wearer);

// Per-(stream, pattern) phase-2 state across batches: recent single-dim
// matches of every example, the running detection episode and the cooldown.
// Alerts do not depend on how samples are split into batches.
//
// A tracker belongs to one wearer's stream: examples scoped to another wearer
// (example_applies) are left out of its decisions as if they had no match,
// whatever `fresh` holds for them; decide() sees the active examples only.
// A default-constructed tracker has no wearer: it uses the unscoped examples.
class PatternTracker {
 public:
  PatternTracker() = default;
  explicit PatternTracker(std::uint32_t wearer) : wearer_(wearer) {}
  struct Detection {
    std::int64_t end = 0;  // the window end that raised the alert
    Decision decision;
  };
  // `fresh[e]`: the new matches of example e in one search (any order), all
  // ending in [first_end, searched_until), the window ends just searched for
  // this pattern. A first_end later than the previous searched_until (a gap)
  // ends the running episode. Returns the alerts, in end order.
  std::vector<Detection> update(std::vector<std::vector<DimCandidate>> fresh,
                                std::int64_t first_end, std::int64_t searched_until,
                                const CompiledPattern& pattern, double sample_rate_hz);
  // update() without allocating once warm, for the engine's per-slice scratch:
  // sorts fresh[e] in place (by end) and otherwise leaves `fresh` as it is;
  // entries past the pattern's examples are ignored and missing ones count as
  // empty. Appends the alerts, in end order, to `alerts`.
  void update_into(std::vector<std::vector<DimCandidate>>& fresh, std::int64_t first_end,
                   std::int64_t searched_until, const CompiledPattern& pattern,
                   double sample_rate_hz, std::vector<Detection>& alerts);
  void reset();

  // Offline training (`gaitwatch train`): while on, every time the decision
  // is taken again its features are recorded. An entry holds from its end
  // until the next entry's end (the decision does not change in between).
  struct TracedDecision {
    std::int64_t end = 0;
    DecisionFeatures features{};
    double evidence = 0;
    bool hold = false;
  };
  void record_decisions(bool on) { recording_ = on; }
  std::vector<TracedDecision> take_decision_trace() { return std::exchange(trace_, {}); }

 private:
  // One (pattern dim, stream dim) window of one example: the candidates of the
  // current window that can still become the pair's best, best first (a
  // monotonic queue in items[head, size); popped items stay until compacted,
  // so that the storage is reused instead of a deque's blocks).
  struct PairWindow {
    int pattern_dim = 0;
    int stream_dim = 0;
    std::vector<DimCandidate> items;
    std::size_t head = 0;
    bool empty() const { return head == items.size(); }
    const DimCandidate& front() const { return items[head]; }
    const DimCandidate& back() const { return items.back(); }
    void pop_back() { items.pop_back(); }
    void push(const DimCandidate& c);
    void pop_front();
  };
  // The windows of one example. pairs[0, live): the non-empty ones, ascending
  // (pattern dim, stream dim); pairs[live, size): empty spares kept for their
  // storage.
  struct ExampleWindows {
    std::vector<PairWindow> pairs;
    std::size_t live = 0;
    // At most the end of every live pair's front: nothing expires while the
    // window's oldest end stays above it, so most ends skip the walk.
    std::int64_t earliest_front_end = std::numeric_limits<std::int64_t>::max();
    // The live window of (pattern_dim, stream_dim), created empty if new.
    PairWindow& pair(int pattern_dim, int stream_dim);
    // Pops every candidate ending at or before last_expired_end; pairs left
    // empty leave the live range. Returns whether any front changed.
    bool expire(std::int64_t last_expired_end);
  };
  // Per example of the pattern: whether it applies to this tracker's wearer
  // (worked out at the first update after a reset).
  std::optional<std::uint32_t> wearer_;
  std::vector<char> active_examples_;
  std::vector<ExampleWindows> windows_;
  // Per example: its best combination over windows_ as it is now; and the
  // decision over them (expanded for an alert only). fresh_state_: not
  // computed yet (the first update).
  std::vector<ExampleMatch> per_example_;
  DecisionSummary decision_;
  bool fresh_state_ = true;
  std::vector<DimCandidate> best_per_pair_;  // scratch, kept for its storage
  std::int64_t searched_until_ = -1;
  bool active_ = false;              // inside a detection episode (entered, still holding)
  std::int64_t episode_start_ = 0;   // window end the episode entered at
  std::int64_t cooldown_until_ = 0;  // first end index allowed to alert again
  bool recording_ = false;
  std::vector<TracedDecision> trace_;
};

}  // namespace gw::pipeline
