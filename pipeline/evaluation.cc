#include "pipeline/evaluation.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "common/error.h"

namespace gw::pipeline {

std::vector<LabelledEvent> events_from_labels(const std::vector<int>& labels, int label) {
  std::vector<LabelledEvent> out;
  for (std::size_t s = 0; s < labels.size(); ++s) {
    if (labels[s] != label) continue;
    std::size_t e = s;
    while (e < labels.size() && labels[e] == label) ++e;
    out.push_back({static_cast<std::int64_t>(s), static_cast<std::int64_t>(e)});
    s = e;
  }
  return out;
}

std::vector<LabelledEvent> read_events(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot open events file '" + path + "'");
  std::vector<LabelledEvent> out;
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
            [](const LabelledEvent& a, const LabelledEvent& b) { return a.start < b.start; });
  return out;
}

ScoredAlert scored_alert(const Alert& alert, double sample_rate_hz, std::int64_t offset) {
  const auto span =
      static_cast<std::int64_t>(std::llround((alert.t_end - alert.t_start) * sample_rate_hz));
  const std::int64_t last = offset + alert.end_index;
  return {last - span, last, alert.matched_dims, alert.distance};
}

namespace {

// A count that is whole as an integer, a mean of counts as a number.
nlohmann::json count_json(double value) {
  if (value == std::floor(value) && std::fabs(value) < 1e15)
    return static_cast<std::int64_t>(value);
  return value;
}

}  // namespace

nlohmann::json Score::to_json() const {
  nlohmann::json j = {{"pattern", pattern},
                      {"kind", kind},
                      {"events", events},
                      {"detected", detected},
                      {"true_alerts", count_json(true_alerts)},
                      {"false_alerts", count_json(false_alerts)},
                      {"precision", precision},
                      {"recall", recall},
                      {"median_latency_s", median_latency_s},
                      {"ndcg", ndcg},
                      {"ndcg_k", ndcg_k}};
  if (hours > 0) {
    j["hours"] = hours;
    j["false_alerts_per_hour"] = false_alerts / hours;
  }
  if (folds > 0) j["cv_folds"] = folds;
  nlohmann::json missed_json = nlohmann::json::array();
  for (const LabelledEvent& e : missed) missed_json.push_back({e.start, e.end});
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

bool overlaps(const ScoredAlert& a, const LabelledEvent& e, std::int64_t tolerance) {
  return a.first <= e.end - 1 + tolerance && a.last >= e.start - tolerance;
}

// Moazeni 2013, §7.4.6 order: more matched dims first, then lower distance.
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
const ScoredAlert* first_on(const std::vector<ScoredAlert>& alerts, const LabelledEvent& event,
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

Score score_alerts(const std::vector<ScoredAlert>& alerts, const std::vector<LabelledEvent>& events,
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
                                      [&](const LabelledEvent& e) { return overlaps(a, e, tolerance); });
    relevance.push_back(on_event);
    (on_event ? s.true_alerts : s.false_alerts) += 1;
  }
  s.median_latency_s = median(latencies);
  s.latencies_s = latencies;
  s.ndcg = ndcg_at(relevance, ndcg_k,
                   std::max(static_cast<int>(s.true_alerts), static_cast<int>(events.size())));
  finish(s);
  return s;
}

Score score_cross_validated(const std::vector<std::vector<ScoredAlert>>& fold_alerts,
                            const std::vector<LabelledEvent>& events, std::int64_t tolerance,
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
                                        [&](const LabelledEvent& e) { return overlaps(a, e, tolerance); });
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
  s.latencies_s = latencies;
  finish(s);
  return s;
}

Score pooled_score(const std::vector<Score>& parts) {
  Score s;
  if (parts.empty()) return s;
  s.pattern = parts.front().pattern;
  s.kind = parts.front().kind;
  s.ndcg_k = parts.front().ndcg_k;
  double ndcg_weighted = 0;
  for (const Score& p : parts) {
    s.events += p.events;
    s.detected += p.detected;
    s.true_alerts += p.true_alerts;
    s.false_alerts += p.false_alerts;
    s.hours += p.hours;
    s.folds += p.folds;
    s.latencies_s.insert(s.latencies_s.end(), p.latencies_s.begin(), p.latencies_s.end());
    s.missed.insert(s.missed.end(), p.missed.begin(), p.missed.end());
    ndcg_weighted += p.ndcg * p.events;
  }
  s.ndcg = s.events > 0 ? ndcg_weighted / s.events : 0;
  s.median_latency_s = median(s.latencies_s);
  finish(s);
  return s;
}

RecordingName recording_name(const std::string& file) {
  namespace fs = std::filesystem;
  std::string name = fs::path(file).filename().string();
  static const std::regex sisfall(R"(([DF]\d\d)_(S[AE]\d\d)_R\d\d)");
  static const std::regex daphnet(R"((S\d\d)R\d\d)");
  static const std::regex gaitpdb(R"(((?:Ga|Ju|Si)(?:Co|Pt)\d\d)_\d\d)");
  std::smatch m;
  RecordingName out;
  if (std::regex_search(name, m, sisfall)) {
    out = {m[0].str(), m[2].str(), m[1].str(), true};
  } else if (std::regex_search(name, m, gaitpdb)) {
    out = {m[0].str(), m[1].str(), {}, true};
  } else if (std::regex_search(name, m, daphnet)) {
    out = {m[0].str(), m[1].str(), {}, true};
  } else {
    if (name.size() > 3 && name.compare(name.size() - 3, 3, ".gz") == 0)
      name.resize(name.size() - 3);
    const std::string stem = fs::path(name).stem().string();
    out = {stem, stem, {}, false};
  }
  return out;
}

std::string example_group(const config::PatternExample& example, LeaveOut leave_out) {
  if (leave_out == LeaveOut::kNothing) return {};
  if (leave_out == LeaveOut::kSubject && !example.subject.empty()) return example.subject;
  const std::string& file = example.source ? example.source->file : example.template_file;
  if (file.empty()) return {};
  const RecordingName name = recording_name(file);
  return leave_out == LeaveOut::kSubject ? name.subject : name.recording;
}

config::PatternConfig without_group(const config::PatternConfig& pattern, LeaveOut leave_out,
                                    const std::string& group, int* left_out) {
  config::PatternConfig out = pattern;
  out.examples.clear();
  int removed = 0;
  for (const auto& example : pattern.examples) {
    if (leave_out != LeaveOut::kNothing && example_group(example, leave_out) == group) {
      ++removed;
      continue;
    }
    out.examples.push_back(example);
  }
  if (left_out) *left_out = removed;
  return out;
}

nlohmann::json TrialSummary::to_json() const {
  nlohmann::json rows = nlohmann::json::array();
  for (const ActivityRow& a : activities)
    rows.push_back({{"activity", a.activity},
                    {"fall", a.fall},
                    {"trials", a.trials},
                    {"trials_alerted", a.trials_alerted},
                    {"alerts", a.alerts}});
  return {{"fall_trials", fall_trials},
          {"fall_trials_detected", fall_trials_detected},
          {"fall_recall", fall_recall},
          {"everyday_trials", everyday_trials},
          {"everyday_alerts", everyday_alerts},
          {"false_alerts_per_everyday_trial", false_alerts_per_everyday_trial},
          {"activities", rows}};
}

TrialSummary summarize_trials(const std::vector<TrialOutcome>& trials) {
  TrialSummary s;
  std::map<std::string, ActivityRow> rows;
  for (const TrialOutcome& t : trials) {
    ActivityRow& row = rows[t.activity];
    row.activity = t.activity;
    row.fall = t.fall;
    ++row.trials;
    row.alerts += t.alerts;
    if (t.alerts > 0) ++row.trials_alerted;
    if (t.fall) {
      ++s.fall_trials;
      if (t.alerts > 0) ++s.fall_trials_detected;
    } else {
      ++s.everyday_trials;
      s.everyday_alerts += t.alerts;
    }
  }
  for (auto& [code, row] : rows) s.activities.push_back(row);
  s.fall_recall = s.fall_trials > 0 ? static_cast<double>(s.fall_trials_detected) / s.fall_trials : 0;
  s.false_alerts_per_everyday_trial =
      s.everyday_trials > 0 ? static_cast<double>(s.everyday_alerts) / s.everyday_trials : 0;
  return s;
}

Folds leave_one_episode_out(const config::PatternConfig& pattern, const std::string& recording_file,
                            const std::vector<LabelledEvent>& events) {
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
