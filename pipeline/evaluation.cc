#include "pipeline/evaluation.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace gw::pipeline {

std::vector<Event> events_from_labels(const std::vector<int>& labels, int label) {
  std::vector<Event> out;
  for (std::size_t s = 0; s < labels.size(); ++s) {
    if (labels[s] != label) continue;
    std::size_t e = s;
    while (e < labels.size() && labels[e] == label) ++e;
    out.push_back({static_cast<std::int64_t>(s), static_cast<std::int64_t>(e)});
    s = e;
  }
  return out;
}

std::vector<Event> read_events(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot open events file '" + path + "'");
  std::vector<Event> out;
  std::string line;
  int number = 0;
  bool first_content = true;
  while (std::getline(in, line)) {
    ++number;
    const auto hash = line.find('#');
    if (hash != std::string::npos) line.erase(hash);
    std::replace(line.begin(), line.end(), ',', ' ');
    std::replace(line.begin(), line.end(), '\t', ' ');
    if (line.find_first_not_of(' ') == std::string::npos) continue;
    std::istringstream fields(line);
    long long start = 0, end = 0;
    std::string rest;
    const bool numbers = static_cast<bool>(fields >> start >> end) && !(fields >> rest);
    if (!numbers) {
      if (first_content) {  // a header
        first_content = false;
        continue;
      }
      throw Error(path + ":" + std::to_string(number) + ": expected START END sample indices");
    }
    first_content = false;
    if (start < 0 || end <= start)
      throw Error(path + ":" + std::to_string(number) + ": need 0 <= START < END");
    out.push_back({start, end});
  }
  std::sort(out.begin(), out.end(),
            [](const Event& a, const Event& b) { return a.start < b.start; });
  return out;
}

ScoredAlert scored_alert(const Alert& alert, double sample_rate_hz, std::int64_t offset) {
  const auto span =
      static_cast<std::int64_t>(std::llround((alert.t_end - alert.t_start) * sample_rate_hz));
  const std::int64_t last = offset + alert.end_index;
  return {last - span, last, alert.matched_dims, alert.distance};
}

nlohmann::json Score::to_json() const {
  nlohmann::json j = {{"pattern", pattern},
                      {"kind", kind},
                      {"events", events},
                      {"detected", detected},
                      {"true_alerts", true_alerts},
                      {"false_alerts", false_alerts},
                      {"precision", precision},
                      {"recall", recall},
                      {"median_latency_s", median_latency_s},
                      {"ndcg", ndcg},
                      {"ndcg_k", ndcg_k}};
  if (folds > 0) j["cv_folds"] = folds;
  nlohmann::json missed_json = nlohmann::json::array();
  for (const Event& e : missed) missed_json.push_back({e.start, e.end});
  j["missed"] = missed_json;
  return j;
}

double ndcg_at(const std::vector<bool>& relevance_in_rank_order, int k, int ideal_relevant) {
  double dcg = 0, ideal = 0;
  for (int i = 0; i < k && i < static_cast<int>(relevance_in_rank_order.size()); ++i)
    if (relevance_in_rank_order[static_cast<std::size_t>(i)]) dcg += 1.0 / std::log2(i + 2.0);
  for (int i = 0; i < std::min(k, ideal_relevant); ++i) ideal += 1.0 / std::log2(i + 2.0);
  return ideal > 0 ? dcg / ideal : 0.0;
}

namespace {

bool overlaps(const ScoredAlert& a, const Event& e, std::int64_t tolerance) {
  return a.first <= e.end - 1 + tolerance && a.last >= e.start - tolerance;
}

// §7.4.6 order: more matched dims first, then lower distance.
std::vector<ScoredAlert> ranked(std::vector<ScoredAlert> alerts) {
  std::stable_sort(alerts.begin(), alerts.end(), [](const ScoredAlert& a, const ScoredAlert& b) {
    if (a.matched_dims != b.matched_dims) return a.matched_dims > b.matched_dims;
    return a.distance < b.distance;
  });
  return alerts;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// The first alert (by completing sample) overlapping `event`, or nullptr.
const ScoredAlert* first_on(const std::vector<ScoredAlert>& alerts, const Event& event,
                            std::int64_t tolerance) {
  const ScoredAlert* first = nullptr;
  for (const auto& a : alerts)
    if (overlaps(a, event, tolerance) && (!first || a.last < first->last)) first = &a;
  return first;
}

void finish(Score& s) {
  s.precision =
      s.true_alerts + s.false_alerts > 0 ? s.true_alerts / (s.true_alerts + s.false_alerts) : 0;
  s.recall = s.events > 0 ? static_cast<double>(s.detected) / s.events : 0;
}

}  // namespace

Score score_alerts(const std::vector<ScoredAlert>& alerts, const std::vector<Event>& events,
                   std::int64_t tolerance, double sample_rate_hz, int ndcg_k) {
  Score s;
  s.events = static_cast<int>(events.size());
  s.ndcg_k = ndcg_k;
  std::vector<double> latencies;
  for (const auto& e : events) {
    if (const ScoredAlert* a = first_on(alerts, e, tolerance)) {
      ++s.detected;
      latencies.push_back(static_cast<double>(a->last - e.start) / sample_rate_hz);
    } else {
      s.missed.push_back(e);
    }
  }
  std::vector<bool> relevance;
  for (const auto& a : ranked(alerts)) {
    const bool on_event = std::any_of(events.begin(), events.end(),
                                      [&](const Event& e) { return overlaps(a, e, tolerance); });
    relevance.push_back(on_event);
    (on_event ? s.true_alerts : s.false_alerts) += 1;
  }
  s.median_latency_s = median(latencies);
  s.ndcg = ndcg_at(relevance, ndcg_k,
                   std::max(static_cast<int>(s.true_alerts), static_cast<int>(events.size())));
  finish(s);
  return s;
}

Score score_cross_validated(const std::vector<std::vector<ScoredAlert>>& fold_alerts,
                            const std::vector<Event>& events, std::int64_t tolerance,
                            double sample_rate_hz, int ndcg_k) {
  if (fold_alerts.size() != events.size())
    throw Error("cross-validation: one fold per event expected");
  Score s;
  s.events = static_cast<int>(events.size());
  s.ndcg_k = ndcg_k;
  std::vector<double> latencies;
  double false_sum = 0, ndcg_sum = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const auto& alerts = fold_alerts[i];
    if (const ScoredAlert* a = first_on(alerts, events[i], tolerance)) {
      ++s.detected;
      latencies.push_back(static_cast<double>(a->last - events[i].start) / sample_rate_hz);
    } else {
      s.missed.push_back(events[i]);
    }
    std::vector<bool> relevance;
    int on_own = 0;
    for (const auto& a : ranked(alerts)) {
      if (overlaps(a, events[i], tolerance)) {
        relevance.push_back(true);
        ++on_own;
        continue;
      }
      const bool on_other = std::any_of(events.begin(), events.end(),
                                        [&](const Event& e) { return overlaps(a, e, tolerance); });
      if (on_other) continue;  // another event: possibly a training example of this fold
      relevance.push_back(false);
      false_sum += 1;
    }
    s.true_alerts += on_own;
    ndcg_sum += ndcg_at(relevance, ndcg_k, std::max(on_own, 1));
  }
  if (!events.empty()) {
    s.false_alerts = false_sum / static_cast<double>(events.size());
    s.ndcg = ndcg_sum / static_cast<double>(events.size());
  }
  s.median_latency_s = median(latencies);
  finish(s);
  return s;
}

Folds leave_one_episode_out(const config::PatternConfig& pattern, const std::string& recording_file,
                            const std::vector<Event>& events) {
  namespace fs = std::filesystem;
  std::error_code ignored;
  const fs::path recording = fs::weakly_canonical(recording_file, ignored);
  auto from_recording = [&](const config::PatternExample& e) {
    return !e.negative && e.source && fs::weakly_canonical(e.source->file, ignored) == recording;
  };
  Folds folds;
  for (std::size_t i = 0; i < events.size(); ++i) {
    config::PatternConfig fold = pattern;
    fold.examples.clear();
    bool left_out = false;
    for (const auto& example : pattern.examples) {
      // The example's shape depends on its window and on the lead-in its
      // transforms read: it belongs to every event that support touches.
      const bool on_event = from_recording(example) &&
                            example.source->start - example.lead_in < events[i].end &&
                            example.source->end > events[i].start;
      if (on_event) {
        left_out = true;
        continue;
      }
      fold.examples.push_back(example);
    }
    if (!left_out) {
      folds.fold_of_event.push_back(-1);
      continue;
    }
    const bool any_positive =
        std::any_of(fold.examples.begin(), fold.examples.end(),
                    [](const config::PatternExample& e) { return !e.negative; });
    if (!any_positive) ++folds.left_without_positives;
    fold.name = pattern.name + "@cv" + std::to_string(i);
    folds.fold_of_event.push_back(static_cast<int>(folds.patterns.size()));
    folds.patterns.push_back(std::move(fold));
  }
  return folds;
}

config::PatternConfig locate_template_examples(const config::PatternConfig& pattern,
                                               const sensors::Recording& recording,
                                               const std::string& recording_file,
                                               const std::string& format) {
  config::PatternConfig out = pattern;
  std::vector<std::size_t> columns;
  for (const std::string& channel : pattern.channels) {
    const auto it =
        std::find(recording.channel_names.begin(), recording.channel_names.end(), channel);
    if (it == recording.channel_names.end()) return out;
    columns.push_back(static_cast<std::size_t>(it - recording.channel_names.begin()));
  }
  if (columns.empty()) return out;
  const std::size_t samples = recording.samples();
  for (auto& example : out.examples) {
    if (example.source || example.raw.empty()) continue;
    const std::size_t rows = example.raw.size() / columns.size();
    if (rows == 0 || rows > samples) continue;
    auto matches_at = [&](std::size_t first) {
      for (std::size_t d = 0; d < columns.size(); ++d)
        for (std::size_t s = 0; s < rows; ++s)
          if (recording.at(first + s, columns[d]) != example.raw[d * rows + s]) return false;
      return true;
    };
    for (std::size_t first = 0; first + rows <= samples; ++first) {
      if (recording.at(first, columns[0]) != example.raw[0] || !matches_at(first)) continue;
      const auto start = static_cast<std::int64_t>(first) + example.lead_in;
      example.source = config::ExampleSource{recording_file, format, start,
                                             start + static_cast<std::int64_t>(pattern.length)};
      break;
    }
  }
  return out;
}

}  // namespace gw::pipeline
