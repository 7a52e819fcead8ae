// LabelledEvent-level scoring of alerts against annotated events (docs/detection.md):
// what `gaitwatch eval` reports per pattern, with or without leave-one-
// episode-out cross-validation.
//
// Conventions: sample indices are 0-based indices into the evaluated
// recording; an event is [start, end). An alert spans the samples
// [end_index - span, end_index] of the window that raised it. It overlaps an
// event when the two intersect once the event is widened by `tolerance`
// samples on both sides (1 s). Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "sinks/alert.h"
#include "sensors/recording.h"

namespace gw::pipeline {

// A labelled episode of a recording (a freeze, a fall), in sample indices.
struct LabelledEvent {
  std::int64_t start = 0;
  std::int64_t end = 0;  // exclusive
};

// Runs of `label` in per-sample labels (Daphnet column 11: 2 = freeze).
std::vector<LabelledEvent> events_from_labels(const std::vector<int>& labels, int label);

// An events file: one event per line, "START END" (0-based sample indices,
// END exclusive, blank- or comma-separated); '#' starts a comment; a first
// line that is not two numbers is a header. Throws gw::Error naming the line.
std::vector<LabelledEvent> read_events(const std::string& path);

// One alert as scored: the samples it covers and its rank keys.
struct ScoredAlert {
  std::int64_t first = 0;  // first sample of the matched window
  std::int64_t last = 0;   // the sample that completed the match (end_index)
  int matched_dims = 0;
  double distance = 0;
};
// `offset`: the recording index of the stream's sample 0 (detect --start).
ScoredAlert scored_alert(const Alert& alert, double sample_rate_hz, std::int64_t offset);

struct Score {
  std::string pattern;
  std::string kind;
  int events = 0;
  int detected = 0;             // events overlapped by at least one alert
  double true_alerts = 0;       // alerts overlapping an event
  double false_alerts = 0;      // alerts overlapping none (with --cv: mean per fold)
  double precision = 0;         // true / (true + false); 0 without alerts
  double recall = 0;            // detected / events; 0 without events
  double median_latency_s = 0;  // first overlapping alert's end minus the event onset
  double ndcg = 0;              // nDCG@k of the alerts ranked by §7.4.6 (Moazeni 2013, §7.5.2)
  int ndcg_k = 0;
  int folds = 0;              // --cv: patterns built (0 without --cv)
  std::vector<LabelledEvent> missed;  // the events no (fold's) alert overlapped
  std::vector<double> latencies_s;  // per detected event, for pooling medians
  double hours = 0;                 // scored (annotated) recording time
  // Integers stay integers in JSON where the counts are whole (no --cv).
  nlohmann::json to_json() const;
};

// Several scores as one: events, detections, alerts, hours and latencies
// summed (the median over all detected events); nDCG the events-weighted
// mean. Names from the first.
Score pooled_score(const std::vector<Score>& parts);

// Who and what a recording is, from its file name (docs/detection.md):
//   Daphnet  S<NN>R<NN>                  recording S02R01, subject S02
//   SisFall  <D|F><NN>_<SA|SE><NN>_R<NN> recording F01_SA01_R01, subject SA01,
//                                        activity F01 (a fall when F)
//   gaitpdb  <Ga|Ju|Si><Co|Pt><NN>_<NN>  recording GaPt03_01, subject GaPt03
// A token may stand anywhere in the name, so a template exported from a
// recording ("positive_01_S02R01_54552.csv") names its recording. Any other
// name: the file's stem (no directory, .gz or extension) is recording and
// subject, `known` false.
struct RecordingName {
  std::string recording;
  std::string subject;
  std::string activity;  // SisFall only
  bool known = false;
};
RecordingName recording_name(const std::string& file);

// What an evaluation leaves out of the library while it scores a recording.
enum class LeaveOut {
  kNothing,
  kSubject,    // every example of the scored recording's subject
  kRecording,  // every example cut from the scored recording
};

// The group an example belongs to under `leave_out`: its `subject:`, else
// the subject (or recording) named by its source recording's or its
// template's file name. Empty for kNothing.
std::string example_group(const config::PatternExample& example, LeaveOut leave_out);

// The pattern without its examples of `group` (same name). `left_out`
// counts them; a result without positives cannot alert.
config::PatternConfig without_group(const config::PatternConfig& pattern, LeaveOut leave_out,
                                    const std::string& group, int* left_out = nullptr);

// Trial-labelled recordings (SisFall): a trial is a fall when its activity
// code starts with F. What one pattern raised on each trial, and the summary
// the fall targets are stated in.
struct TrialOutcome {
  std::string recording;
  std::string subject;
  std::string activity;
  bool fall = false;
  int alerts = 0;
};
struct ActivityRow {
  std::string activity;
  bool fall = false;
  int trials = 0;
  int trials_alerted = 0;
  int alerts = 0;
};
struct TrialSummary {
  int fall_trials = 0;
  int fall_trials_detected = 0;
  int everyday_trials = 0;
  int everyday_alerts = 0;
  double fall_recall = 0;                   // detected / fall trials
  double false_alerts_per_everyday_trial = 0;
  std::vector<ActivityRow> activities;      // by activity code
  nlohmann::json to_json() const;
};
TrialSummary summarize_trials(const std::vector<TrialOutcome>& trials);

// nDCG@k (Moazeni 2013, §7.5.2, binary relevance): DCG = sum over the first k
// results of rel_i / log2(i + 1); the ideal list has min(k, ideal_relevant)
// relevant results first.
double ndcg_at(const std::vector<bool>& relevance_in_rank_order, int k, int ideal_relevant);

// Scores one pattern's alerts against the events. The ranked list for nDCG
// holds every alert, relevant when it overlaps an event; the ideal has
// max(relevant alerts, events) relevant results.
Score score_alerts(const std::vector<ScoredAlert>& alerts, const std::vector<LabelledEvent>& events,
                   std::int64_t tolerance, double sample_rate_hz, int ndcg_k);

// Leave-one-episode-out: event i is scored with the alerts of the pattern
// built without the positive examples that overlap event i (fold_alerts[i]).
// Alerts of a fold on other events are not counted (those events may have
// trained it); its alerts on no event are its false alerts. Counts:
// true alerts = sum over events of fold i's alerts on event i; false alerts =
// mean over events of fold i's false alerts (one recording's worth, like the
// true alerts); nDCG = mean over events of fold i's nDCG on its own event.
Score score_cross_validated(const std::vector<std::vector<ScoredAlert>>& fold_alerts,
                            const std::vector<LabelledEvent>& events, std::int64_t tolerance,
                            double sample_rate_hz, int ndcg_k);

// The folds of leave-one-episode-out for one pattern: fold i is the pattern
// without its positive examples that come from `recording_file` and whose
// support (the window and the transforms' lead-in before it) overlaps event i
// (events in recording indices, as the examples' start/end). An event
// that no positive example overlaps is scored with the pattern itself.
// Returns the fold patterns, named "<name>@cv<i>", and per event the index of
// its fold in the returned list (-1: the pattern itself).
struct Folds {
  std::vector<config::PatternConfig> patterns;
  std::vector<int> fold_of_event;
  int left_without_positives = 0;  // folds that had no positive example left (cannot alert)
};
Folds leave_one_episode_out(const config::PatternConfig& pattern, const std::string& recording_file,
                            const std::vector<LabelledEvent>& events);

// Template examples do not say where they were cut. A template example whose
// raw values (every pattern channel, the transforms' lead-in included) occur
// verbatim in `recording` is taken to be that window of `recording_file`
// (`gaitwatch pattern export` writes exactly those values), so that
// leave_one_episode_out leaves it out like the window it came from. Returns
// the pattern with `source` set on those examples (format `format`); every
// other example, and a recording lacking a pattern channel, is left as it is.
config::PatternConfig locate_template_examples(const config::PatternConfig& pattern,
                                               const sensors::Recording& recording,
                                               const std::string& recording_file,
                                               const std::string& format);

}  // namespace gw::pipeline
