// Per-(stream, pattern) phase-2 state across batches: single-dim matches in,
// alerts out, with the gating (minimum duration, hysteresis, cooldown).
// docs/detection.md describes the semantics.
//
// Thread safety: none; one tracker is owned by one caller at a time.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "pipeline/combination.h"
#include "pipeline/decision.h"
#include "pipeline/library.h"

namespace gw::pipeline {

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
    bool opens_episode = false;  // the episode's first alert
  };
  // An episode that raised at least one alert and has ended: its hold
  // failed, or a gap in the stream cut it. An episode that never alerted
  // (shorter than min_duration_s) is not reported.
  struct EndedEpisode {
    std::int64_t first_alert_end = 0;  // window end of its first alert
    std::int64_t last_end = 0;         // the last window end it held at
    int alerts = 0;
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
  // The episodes that ended since the last call, in order. reset() drops a
  // running episode without reporting it.
  std::vector<EndedEpisode> take_ended_episodes() { return std::exchange(ended_, {}); }
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
  // The running episode's alerts so far and its first one's window end.
  int episode_alerts_ = 0;
  std::int64_t episode_first_alert_ = 0;
  std::vector<EndedEpisode> ended_;
  // Ends the running episode; `last_end`: the last window end it held at.
  void end_episode(std::int64_t last_end);
  bool recording_ = false;
  std::vector<TracedDecision> trace_;
};

}  // namespace gw::pipeline
