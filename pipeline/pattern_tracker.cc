#include "pipeline/pattern_tracker.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "common/error.h"

namespace gw::pipeline {

namespace {

bool by_end(const DimCandidate& a, const DimCandidate& b) { return a.end < b.end; }

}  // namespace

void PatternTracker::PairWindow::push(const DimCandidate& c) {
  if (empty()) {  // restart at the front of the storage
    items.clear();
    head = 0;
  }
  items.push_back(c);
}

void PatternTracker::PairWindow::pop_front() {
  ++head;
  // Keep the storage bounded while the pair never empties: drop the popped
  // prefix once it is most of the vector (amortised O(1) per item).
  if (head >= 32 && 2 * head >= items.size()) {
    items.erase(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(head));
    head = 0;
  }
}

PatternTracker::PairWindow& PatternTracker::ExampleWindows::pair(int pattern_dim, int stream_dim) {
  const auto live_end = pairs.begin() + static_cast<std::ptrdiff_t>(live);
  const auto at = std::lower_bound(pairs.begin(), live_end, std::make_pair(pattern_dim, stream_dim),
                                   [](const PairWindow& w, const std::pair<int, int>& key) {
                                     return std::make_pair(w.pattern_dim, w.stream_dim) < key;
                                   });
  if (at != live_end && at->pattern_dim == pattern_dim && at->stream_dim == stream_dim) return *at;
  // A new pair: a spare one (its storage kept) moved into place.
  const auto index = static_cast<std::size_t>(at - pairs.begin());
  if (live == pairs.size()) pairs.emplace_back();
  PairWindow& spare = pairs[live];
  spare.pattern_dim = pattern_dim;
  spare.stream_dim = stream_dim;
  spare.items.clear();
  spare.head = 0;
  std::rotate(pairs.begin() + static_cast<std::ptrdiff_t>(index),
              pairs.begin() + static_cast<std::ptrdiff_t>(live),
              pairs.begin() + static_cast<std::ptrdiff_t>(live) + 1);
  ++live;
  return pairs[index];
}

bool PatternTracker::ExampleWindows::expire(std::int64_t last_expired_end) {
  if (earliest_front_end > last_expired_end) return false;
  bool popped = false;
  std::size_t kept = 0;
  earliest_front_end = std::numeric_limits<std::int64_t>::max();
  for (std::size_t i = 0; i < live; ++i) {
    PairWindow& window = pairs[i];
    while (!window.empty() && window.front().end <= last_expired_end) {
      window.pop_front();
      popped = true;
    }
    // An empty pair leaves the live range: it would be walked at every change.
    if (window.empty()) continue;
    earliest_front_end = std::min(earliest_front_end, window.front().end);
    if (i != kept) std::swap(pairs[i], pairs[kept]);
    ++kept;
  }
  live = kept;
  return popped;
}

std::vector<PatternTracker::Detection> PatternTracker::update(
    std::vector<std::vector<DimCandidate>> fresh, std::int64_t first_end,
    std::int64_t searched_until, const CompiledPattern& pattern, double sample_rate_hz) {
  std::vector<Detection> alerts;
  update_into(fresh, first_end, searched_until, pattern, sample_rate_hz, alerts);
  return alerts;
}

void PatternTracker::update_into(std::vector<std::vector<DimCandidate>>& fresh,
                                 std::int64_t first_end, std::int64_t searched_until,
                                 const CompiledPattern& pattern, double sample_rate_hz,
                                 std::vector<Detection>& alerts) {
  const config::PatternConfig& pc = pattern.config;
  const bool euclidean = pc.measure == config::Measure::kEuclidean;
  // A candidate ending at c takes part in the windows (t - span, t] with
  // c <= t < c + span: phase 2 pairs dims up to a pattern length apart; the
  // Euclidean baseline needs them at the same end.
  const std::int64_t span = euclidean ? 1 : pc.length;
  // A carer's false mark (a negative scoped to one wearer) stays twice as
  // long: it was cut where the pattern alerted, so the positive matches of
  // the same movement go on a few samples after it, and it must outlast them
  // or the marked movement alerts after all. Shipped negatives keep the
  // pattern's span: held longer they would also answer positives of later,
  // different movements.
  const std::int64_t mark_span = euclidean ? 1 : 2 * pc.length;
  const auto span_of = [&](std::size_t e) {
    const CompiledExample& example = pattern.examples[e];
    return example.negative && example.wearer ? mark_span : span;
  };
  const std::size_t examples = pattern.examples.size();
  windows_.resize(examples);
  if (first_end != searched_until_) end_episode(searched_until_ - 1);  // a gap (or the first search)
  if (active_examples_.size() != examples) {
    active_examples_.resize(examples);
    for (std::size_t e = 0; e < examples; ++e)
      active_examples_[e] = wearer_ ? example_applies(pattern.examples[e], *wearer_)
                                    : !pattern.examples[e].wearer;
  }
  // Inactive examples' candidates are never taken in: their windows stay
  // empty, so they never match.
  const std::vector<char>& active = active_examples_;
  const std::size_t given = std::min(fresh.size(), examples);
  for (std::size_t e = 0; e < given; ++e)
    if (active[e]) std::sort(fresh[e].begin(), fresh[e].end(), by_end);
  // Per example: first fresh match not yet pushed (scratch kept per thread).
  thread_local std::vector<std::size_t> next;
  next.assign(examples, 0);
  // per_example_ and decision_ are functions of the windows' fronts (each
  // pair's best candidate) alone, kept from the last call: only an example
  // whose fronts change is matched again, and the decision is taken again
  // only then (taking an unchanged decision again changes nothing: after it
  // was taken, !hold implies !active_ and enter implies active_).
  if (per_example_.size() != examples) {
    per_example_.assign(examples, ExampleMatch{});
    fresh_state_ = true;
  }
  std::vector<ExampleMatch>& per_example = per_example_;
  DecisionSummary& decision = decision_;

  const auto min_duration =
      static_cast<std::int64_t>(std::llround(pc.min_duration_s * sample_rate_hz));
  const auto cooldown = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(std::llround(pc.cooldown_s * sample_rate_hz)));
  std::vector<DimCandidate>& best_per_pair = best_per_pair_;
  // The next window end after t where anything can happen: a fresh candidate
  // arrives, a front may expire, or the running episode may alert. At the
  // ends in between no window, hence no match and no decision, changes, and
  // no alert is due, so they are skipped.
  const auto next_event = [&](std::int64_t t) {
    std::int64_t event = searched_until;
    for (std::size_t e = 0; e < examples; ++e) {
      if (e < given && active[e] && next[e] < fresh[e].size())
        event = std::min(event, fresh[e][next[e]].end);
      const std::int64_t earliest = windows_[e].earliest_front_end;
      if (earliest != std::numeric_limits<std::int64_t>::max())
        event = std::min(event, earliest + span_of(e));
    }
    if (active_) event = std::min(event, std::max(episode_start_ + min_duration, cooldown_until_));
    return std::max(t + 1, event);
  };
  for (std::int64_t t = first_end; t < searched_until; t = next_event(t)) {
    // Slide every (example, pair) window to (t - span, t]: each keeps the
    // candidates that can still become its best (a monotonic queue: distances
    // increase from the front; of equal distances the earlier end stays).
    bool changed = false;
    for (std::size_t e = 0; e < examples; ++e) {
      ExampleWindows& windows = windows_[e];
      bool example_changed = fresh_state_;
      if (e < given && active[e]) {
        const std::vector<DimCandidate>& arrived = fresh[e];
        for (; next[e] < arrived.size() && arrived[next[e]].end <= t; ++next[e]) {
          const DimCandidate& c = arrived[next[e]];
          if (euclidean &&
              c.stream_dim != pattern.home_channel[static_cast<std::size_t>(c.pattern_dim)])
            continue;
          PairWindow& queue = windows.pair(c.pattern_dim, c.stream_dim);
          // Loose (exhausting) candidates rank after the pattern's own ones.
          while (!queue.empty() && std::make_pair(queue.back().loose, queue.back().distance) >
                                       std::make_pair(c.loose, c.distance))
            queue.pop_back();
          if (queue.empty()) {  // c becomes the pair's best
            example_changed = true;
            windows.earliest_front_end = std::min(windows.earliest_front_end, c.end);
          }
          queue.push(c);
        }
      }
      if (windows.expire(t - span_of(e))) example_changed = true;
      if (!example_changed) continue;
      changed = true;
      // Only an example whose window changed needs its matching again.
      best_per_pair.clear();
      for (std::size_t i = 0; i < windows.live; ++i) best_per_pair.push_back(windows.pairs[i].front());
      ExampleMatch& match = per_example[e];
      match.example = -1;
      match.completed = 0;
      if (best_per_pair.empty()) {
        match.combination.edges.clear();
        match.combination.distance = 0;
        match.combination.recovered = 0;
        continue;
      }
      match.example = static_cast<int>(e);
      combine_with_exhausting_into(best_per_pair, pattern.home_channel, pc.alpha, match.combination);
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
      decision = summarize_decision(pattern, per_example);
      if (recording_)
        trace_.push_back({t, decision_features(pattern, per_example), decision.evidence, decision.hold});
      // The hold held at every end since the last decision (none changed).
      if (active_ && !decision.hold) end_episode(t - 1);
      if (!active_ && decision.enter) {
        active_ = true;
        episode_start_ = t;
        episode_alerts_ = 0;
      }
    }
    if (active_ && t >= episode_start_ + min_duration && t >= cooldown_until_) {
      alerts.push_back({t, expand_decision(pattern, per_example, decision), episode_alerts_ == 0});
      if (episode_alerts_++ == 0) episode_first_alert_ = t;
      cooldown_until_ = t + cooldown;
    }
  }
  searched_until_ = searched_until;
}

void PatternTracker::end_episode(std::int64_t last_end) {
  if (active_ && episode_alerts_ > 0) ended_.push_back({episode_first_alert_, last_end, episode_alerts_});
  active_ = false;
  episode_alerts_ = 0;
}

void PatternTracker::reset() {
  active_examples_.clear();
  windows_.clear();
  per_example_.clear();
  decision_ = DecisionSummary{};
  fresh_state_ = true;
  searched_until_ = -1;
  active_ = false;
  episode_start_ = 0;
  cooldown_until_ = 0;
  episode_alerts_ = 0;
  ended_.clear();
}

}  // namespace gw::pipeline
