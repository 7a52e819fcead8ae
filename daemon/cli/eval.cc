// gaitwatch eval: runs the daemon's engine over annotated recordings (the
// same code as `detect`) and scores each pattern's alerts against the
// annotated events: event-level precision, recall, median latency and nDCG@k
// (pipeline/evaluation.h, docs/detection.md).
//
// One file or many (--file A --file B ...), grouped by subject (from the file
// name, pipeline::recording_name, or --subject FILE=ID). --loso scores each
// subject with a library that holds none of that subject's examples;
// --leave-out recording leaves out the scored recording's examples only.
// --cv (one file) scores each event with a pattern built without the
// positive examples cut from it. Trial-labelled recordings (SisFall) are
// scored per trial: a fall trial is detected when any alert falls in it, an
// everyday trial's alerts are false alerts.
//
// --simulate-marks K: after the first K false alerts of each subject a carer
// marks them false; their windows join that subject's library as negative
// examples, and the subject's recordings are run again: the false alerts
// after the K-th mark, with and without the marks, say what marking buys.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>

#include "common/error.h"
#include "daemon/cli/cli.h"
#include "daemon/cli/eval.h"
#include "pipeline/evaluation.h"
#include "pipeline/marks.h"

namespace gw::cli {
namespace {

namespace fs = std::filesystem;

// The alerts of one pattern on one file, scored where they can be.
struct FileAlerts {
  std::vector<pipeline::ScoredAlert> scored;
  std::vector<pipeline::Alert> raw;  // same order
  int unannotated = 0;
};

}  // namespace

pipeline::LeaveOut leave_out_of(const EvalOptions& o) {
  if (o.loso || o.leave_out == "subject") return pipeline::LeaveOut::kSubject;
  if (o.leave_out == "recording") return pipeline::LeaveOut::kRecording;
  return pipeline::LeaveOut::kNothing;
}

ScoredFile load_file(const EvalOptions& o, const config::DeviceProfile& device,
                     const std::string& file, bool single) {
  ScoredFile f;
  f.file = file;
  f.name = pipeline::recording_name(file);
  for (const std::string& item : o.subjects) {
    const auto eq = item.rfind('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      throw UsageError("--subject '" + item + "': expected FILE=ID");
    const std::string named = item.substr(0, eq);
    if (named == file || fs::path(named).filename() == fs::path(file).filename())
      f.name.subject = item.substr(eq + 1);
  }
  RecordingSource source = o.source;
  source.file = file;
  f.rec = source.read_for(device);
  f.first = single ? o.run.start : 0;
  f.stop = single && o.run.end >= 0 ? o.run.end : static_cast<std::int64_t>(f.rec.samples());
  std::string events_file;
  for (const std::string& item : o.events_files) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) {
      if (!single) throw UsageError("--events " + item + ": with several files give FILE=EVENTS");
      events_file = item;
    } else if (item.substr(0, eq) == file ||
               fs::path(item.substr(0, eq)).filename() == fs::path(file).filename()) {
      events_file = item.substr(eq + 1);
    }
  }
  if (!events_file.empty()) {
    f.events = pipeline::read_events(events_file);
  } else if (!f.rec.labels.empty()) {
    f.events = pipeline::events_from_labels(f.rec.labels, 2);  // Daphnet: 2 = freeze
    // Daphnet's label 0 marks samples outside the experiment: nobody
    // annotated freezes there, so alerts completed there are neither true
    // nor false.
    f.unannotated = pipeline::events_from_labels(f.rec.labels, 0);
  } else if (!f.name.activity.empty()) {
    f.trial = true;
    if (f.name.activity[0] == 'F') f.events.push_back({f.first, f.stop});
  } else {
    throw Error("'" + file +
                "' carries no annotations: give --events FILE (one recording) or a "
                "trial-labelled file (SisFall names)");
  }
  // Only the events inside the evaluated range count.
  f.events.erase(std::remove_if(f.events.begin(), f.events.end(),
                                [&](const pipeline::LabelledEvent& e) {
                                  return e.start < f.first || e.end > f.stop;
                                }),
                 f.events.end());
  return f;
}

namespace {

// Samples of the recording that are scored: the range minus unannotated stretches.
double scored_hours(const ScoredFile& f) {
  std::int64_t samples = f.stop - f.first;
  for (const auto& u : f.unannotated)
    samples -= std::max<std::int64_t>(0, std::min(u.end, f.stop) - std::max(u.start, f.first));
  return static_cast<double>(samples) / f.rec.sample_rate_hz / 3600.0;
}

// Runs `patterns` over one file; the alerts per pattern name.
// The views `patterns` agree with (docs/detection.md §7), and theirs in
// turn, taken from `cfg` and left out like the evaluated patterns: they
// raise no alerts of their own but decide which of the evaluated ones do.
// Appended unless a pattern of that name is there already.
void add_agreeing_views(const config::Config& cfg, pipeline::LeaveOut leave_out,
                        const std::string& group, std::vector<config::PatternConfig>& patterns) {
  for (std::size_t i = 0; i < patterns.size(); ++i) {  // grows while it runs
    const std::vector<std::string> views = patterns[i].agree.with;
    for (const std::string& name : views) {
      const auto named = [&](const config::PatternConfig& p) { return p.name == name; };
      if (std::any_of(patterns.begin(), patterns.end(), named)) continue;
      const auto view = std::find_if(cfg.patterns.begin(), cfg.patterns.end(), named);
      if (view == cfg.patterns.end())
        throw Error("pattern '" + patterns[i].name + "' agrees with '" + name + "', not in " +
                    cfg.source_file);
      patterns.push_back(pipeline::without_group(*view, leave_out, group));
    }
  }
}

// The patterns' alerts on one file. Their views are added as the whole
// config holds them, unless the caller added them (left out) already.
std::map<std::string, FileAlerts> run_file(const EvalOptions& o, const config::Config& cfg,
                                           std::vector<config::PatternConfig> patterns,
                                           const ScoredFile& f) {
  add_agreeing_views(cfg, pipeline::LeaveOut::kNothing, "", patterns);
  config::Config run_cfg = cfg;
  run_cfg.patterns = std::move(patterns);
  OfflineRun run = o.run;
  run.start = f.first;
  run.end = f.stop;
  std::map<std::string, FileAlerts> out;
  run.run(run_cfg, f.rec, [&](const std::vector<pipeline::Alert>& alerts) {
    for (const auto& a : alerts) {
      const auto scored = pipeline::scored_alert(a, f.rec.sample_rate_hz, f.first);
      FileAlerts& mine = out[a.pattern];
      const bool outside =
          std::any_of(f.unannotated.begin(), f.unannotated.end(), [&](const auto& u) {
            return scored.last >= u.start && scored.last < u.end;
          });
      if (outside) {
        ++mine.unannotated;
        continue;
      }
      mine.scored.push_back(scored);
      mine.raw.push_back(a);
    }
  });
  return out;
}

bool on_event(const pipeline::ScoredAlert& a, const pipeline::LabelledEvent& e, std::int64_t tolerance) {
  return a.first <= e.end - 1 + tolerance && a.last >= e.start - tolerance;
}

bool is_false_alert(const pipeline::ScoredAlert& a, const ScoredFile& f, std::int64_t tolerance) {
  return std::none_of(f.events.begin(), f.events.end(),
                      [&](const pipeline::LabelledEvent& e) { return on_event(a, e, tolerance); });
}

std::int64_t tolerance_of(const EvalOptions& o, const ScoredFile& f) {
  return static_cast<std::int64_t>(std::llround(o.tolerance_s * f.rec.sample_rate_hz));
}

// A negative example of `pattern` from the window of `alert`, which
// completed at `last` (a recording index): the pattern's channels, lead-in
// first; scoped to `wearer` when given (a simulated carer's mark). The
// window the engine cut, as the daemon stores it (with the stream's
// baseline for a normalised pattern); cut from the recording when the
// engine kept none.
config::PatternExample window_example(const config::PatternConfig& pattern, const ScoredFile& f,
                                      const pipeline::Alert& alert, std::int64_t last,
                                      const config::DeviceProfile& device,
                                      std::optional<std::uint32_t> wearer = std::nullopt) {
  const pipeline::AlertWindow window =
      alert.window ? *alert.window
                   : pipeline::window_from_recording(pattern, device, f.rec, last, wearer.value_or(0));
  config::PatternExample example = pipeline::example_from_window(
      pattern, device.sample_rate_hz, window, pipeline::MarkVerdict::kFalse);
  const std::int64_t start = last + 1 - pattern.length;
  example.source = config::ExampleSource{f.file, "", start, last + 1};
  example.subject = f.name.subject;
  // Scoped like a carer's mark when a wearer is given; a mined negative is not.
  example.wearer = wearer;
  return example;
}

void print_score(const char* label, const pipeline::Score& s) {
  std::printf(
      "  %-14s %3d events %3d detected %6.4g true %6.4g false  precision %.3f  recall %.3f  "
      "median latency %.2f s",
      label, s.events, s.detected, s.true_alerts, s.false_alerts, s.precision, s.recall,
      s.median_latency_s);
  if (s.hours > 0) std::printf("  %.1f false/h over %.2f h", s.false_alerts / s.hours, s.hours);
  std::printf("\n");
}

void print_trials(const pipeline::TrialSummary& t) {
  std::printf("  falls: %d/%d fall trials alerted (recall %.3f); %d false alerts on %d everyday "
              "trials (%.3f per trial)\n",
              t.fall_trials_detected, t.fall_trials, t.fall_recall, t.everyday_alerts,
              t.everyday_trials, t.false_alerts_per_everyday_trial);
  for (const auto& a : t.activities)
    std::printf("    %s %-8s %d/%d trials alerted, %d alerts\n", a.activity.c_str(),
                a.fall ? "fall" : "everyday", a.trials_alerted, a.trials, a.alerts);
}

// The library `pattern` scores `group` with: without the group's examples
// (leave_out), then refitted when the options say so (`gaitwatch train`).
config::PatternConfig fold_for(const EvalOptions& o, const config::PatternConfig& pattern,
                               pipeline::LeaveOut leave_out, const std::string& group,
                               int* removed = nullptr) {
  config::PatternConfig fold = pipeline::without_group(pattern, leave_out, group, removed);
  if (o.refit) fold = o.refit(fold, group);
  return fold;
}

int run_single_cv(const EvalOptions& o, const config::Config& cfg,
                  const std::vector<const config::PatternConfig*>& evaluated, const ScoredFile& f) {
  // The folds join the config as patterns of their own; identical examples
  // are searched once (pipeline/detector.h), so this is one pass.
  std::vector<config::PatternConfig> patterns;
  std::map<std::string, pipeline::Folds> folds;
  for (const auto* p : evaluated) {
    patterns.push_back(*p);
    // Templates exported from this recording's windows count as those windows.
    const config::PatternConfig located =
        pipeline::locate_template_examples(*p, f.rec, f.file, o.source.format_for(f.file));
    auto fold = pipeline::leave_one_episode_out(located, f.file, f.events);
    for (const auto& fp : fold.patterns) patterns.push_back(fp);
    folds.emplace(p->name, std::move(fold));
  }
  auto alerts_of = run_file(o, cfg, patterns, f);
  for (const auto* p : evaluated) {
    const pipeline::Folds& fold = folds.at(p->name);
    std::vector<std::vector<pipeline::ScoredAlert>> per_event;
    for (const int i : fold.fold_of_event)
      per_event.push_back(
          alerts_of[i < 0 ? p->name : fold.patterns[static_cast<std::size_t>(i)].name].scored);
    pipeline::Score score = pipeline::score_cross_validated(
        per_event, f.events, tolerance_of(o, f), f.rec.sample_rate_hz, o.ndcg_k);
    score.folds = static_cast<int>(fold.patterns.size());
    score.pattern = p->name;
    score.kind = p->kind;
    score.hours = scored_hours(f);
    const int ignored = alerts_of[p->name].unannotated;
    if (o.json) {
      auto j = score.to_json();
      j["unannotated_alerts"] = ignored;
      std::cout << j.dump() << "\n";
      continue;
    }
    std::printf("%s (%s) cross-validated, %d folds:\n", p->name.c_str(), p->kind.c_str(),
                score.folds);
    print_score(f.name.recording.c_str(), score);
    for (const auto& e : score.missed)
      std::printf("  missed: samples %lld..%lld (%.2f s .. %.2f s)\n",
                  static_cast<long long>(e.start), static_cast<long long>(e.end),
                  static_cast<double>(e.start) / f.rec.sample_rate_hz,
                  static_cast<double>(e.end) / f.rec.sample_rate_hz);
  }
  return 0;
}

// What marking the first K false alerts of one subject changed afterwards.
struct MarksOutcome {
  int marks = 0;
  int false_after_without = 0;
  int false_after_with = 0;
  int detected_after_without = 0;
  int detected_after_with = 0;
};

// The JSON rows' name of what was left out of the library.
const char* leave_out_name(pipeline::LeaveOut leave_out) {
  switch (leave_out) {
    case pipeline::LeaveOut::kSubject: return "subject";
    case pipeline::LeaveOut::kRecording: return "recording";
    case pipeline::LeaveOut::kNothing: break;
  }
  return "nothing";
}

// Several published patterns of one kind on trial-labelled files (e.g. two
// fall patterns that catch different falls): what a carer gets from the
// kind, a trial counted as alerted when any of them alerted on it and every
// alert of each on an everyday trial a false alert. Nothing when no kind
// has two patterns or no file is a trial.
void print_kinds_on_trials(
    const EvalOptions& o, pipeline::LeaveOut leave_out,
    const std::vector<const config::PatternConfig*>& evaluated, const std::vector<ScoredFile>& scored,
    const std::function<const pipeline::TrialOutcome&(const std::string&, std::size_t)>& trial_of) {
  std::map<std::string, std::vector<std::string>> patterns_of_kind;
  for (const auto* p : evaluated) patterns_of_kind[p->kind].push_back(p->name);
  for (const auto& [kind, patterns] : patterns_of_kind) {
    if (patterns.size() < 2) continue;
    std::vector<pipeline::TrialOutcome> trials;
    std::vector<std::string> subjects;
    for (std::size_t i = 0; i < scored.size(); ++i) {
      if (!scored[i].trial) continue;
      pipeline::TrialOutcome combined = trial_of(patterns.front(), i);
      combined.alerts = 0;
      for (const std::string& pattern : patterns) combined.alerts += trial_of(pattern, i).alerts;
      trials.push_back(combined);
      if (std::find(subjects.begin(), subjects.end(), combined.subject) == subjects.end())
        subjects.push_back(combined.subject);
    }
    if (trials.empty()) continue;
    auto trials_of = [&](const std::string& subject) {
      std::vector<pipeline::TrialOutcome> mine;
      for (const auto& t : trials)
        if (t.subject == subject) mine.push_back(t);
      return mine;
    };
    if (o.json) {
      nlohmann::json rows = nlohmann::json::array();
      for (const std::string& subject : subjects)
        rows.push_back({{"subject", subject}, {"trials", pipeline::summarize_trials(trials_of(subject)).to_json()}});
      nlohmann::json j = {{"kind", kind},
                          {"patterns", patterns},
                          {"leave_out", leave_out_name(leave_out)},
                          {"trials", pipeline::summarize_trials(trials).to_json()},
                          {"subjects", rows}};
      std::cout << j.dump() << "\n";
      continue;
    }
    std::string names;
    for (const std::string& pattern : patterns) names += (names.empty() ? "" : ", ") + pattern;
    std::printf("kind %s, any of its %zu patterns (%s):\n", kind.c_str(), patterns.size(), names.c_str());
    for (const std::string& subject : subjects) {
      std::printf("  %s:\n", subject.c_str());
      print_trials(pipeline::summarize_trials(trials_of(subject)));
    }
    if (subjects.size() > 1) {
      std::printf("  all trials:\n");
      print_trials(pipeline::summarize_trials(trials));
    }
  }
}

}  // namespace

int run_eval(const EvalOptions& o) {
  const config::Config cfg = config::load_config(o.config_path);
  const config::DeviceProfile& device = o.run.device_of(cfg);
  std::vector<std::string> files = o.files;
  if (files.empty()) throw UsageError("eval needs --file (one or more)");
  const bool single = files.size() == 1;
  if (!single && (o.run.start != 0 || o.run.end >= 0))
    throw UsageError("--start/--end apply to one recording; give one --file");
  if (o.cv && !single) throw UsageError("--cv scores one recording; for several use --loso");
  if (o.cv && (o.loso || !o.leave_out.empty()))
    throw UsageError("--cv and --loso/--leave-out are different experiments: pick one");
  const pipeline::LeaveOut leave_out = leave_out_of(o);

  std::vector<const config::PatternConfig*> evaluated;
  // Views (publish: false) raise no alerts to score; they run beside the
  // patterns that agree with them.
  for (const auto& p : cfg.patterns)
    if (p.device == device.name && p.publish && (o.pattern.empty() || p.name == o.pattern))
      evaluated.push_back(&p);
  if (evaluated.empty())
    throw Error("no pattern " + (o.pattern.empty() ? "" : "'" + o.pattern + "' ") +
                "for device '" + device.name + "' in " + o.config_path);

  if (leave_out != pipeline::LeaveOut::kNothing && !o.refit)
    for (const auto* p : evaluated)
      if (p->learned_decision)
        std::cerr << "eval: note: pattern '" << p->name << "' decides with "
                  << p->learned_decision->file
                  << ", fitted on whatever recordings it was trained on; leaving out examples "
                     "does not leave out that fit (gaitwatch train --evaluate scores each "
                     "subject with a decision fitted without it)\n";
  std::vector<ScoredFile> scored;
  for (const auto& file : files) scored.push_back(load_file(o, device, file, single));
  if (o.cv) return run_single_cv(o, cfg, evaluated, scored.front());

  // Per pattern: per file its score (event files) or trial outcome.
  struct PerFile {
    pipeline::Score score;
    pipeline::TrialOutcome trial;
    int unannotated = 0;
    int left_out = 0;
    bool can_alert = true;
  };
  std::map<std::string, std::vector<PerFile>> results;  // pattern -> per file, file order
  std::map<std::string, std::map<std::string, std::vector<config::PatternExample>>> mined;
  std::map<std::string, std::map<std::string, MarksOutcome>> marks;  // pattern -> subject
  for (const ScoredFile& f : scored) {
    const std::string group =
        leave_out == pipeline::LeaveOut::kSubject ? f.name.subject : f.name.recording;
    std::vector<config::PatternConfig> folds;
    std::vector<int> left;
    for (const auto* p : evaluated) {
      int removed = 0;
      folds.push_back(fold_for(o, *p, leave_out, group, &removed));
      left.push_back(removed);
    }
    std::vector<config::PatternConfig> run_patterns = folds;
    add_agreeing_views(cfg, leave_out, group, run_patterns);
    auto alerts_of = run_file(o, cfg, run_patterns, f);
    for (std::size_t i = 0; i < evaluated.size(); ++i) {
      const auto* p = evaluated[i];
      const FileAlerts& a = alerts_of[p->name];
      PerFile r;
      r.left_out = left[i];
      r.can_alert = std::any_of(folds[i].examples.begin(), folds[i].examples.end(),
                                [](const config::PatternExample& e) { return !e.negative; });
      r.unannotated = a.unannotated;
      r.score = pipeline::score_alerts(a.scored, f.events, tolerance_of(o, f),
                                       f.rec.sample_rate_hz, o.ndcg_k);
      r.score.pattern = p->name;
      r.score.kind = p->kind;
      r.score.hours = f.trial ? 0 : scored_hours(f);
      if (f.trial) {
        r.trial = {f.name.recording, f.name.subject, f.name.activity,
                   f.name.activity[0] == 'F', static_cast<int>(a.scored.size())};
      }
      if (!o.mine_negatives.empty())
        for (std::size_t k = 0; k < a.scored.size(); ++k)
          if (is_false_alert(a.scored[k], f, tolerance_of(o, f)))
            mined[p->name][f.name.recording].push_back(
                window_example(*p, f, a.raw[k], a.scored[k].last, device));
      results[p->name].push_back(std::move(r));
    }
  }

  if (o.simulate_marks > 0) {
    // Per subject, in file order: the first K false alerts become negatives.
    std::map<std::string, std::vector<std::size_t>> files_of;
    for (std::size_t i = 0; i < scored.size(); ++i)
      files_of[scored[i].name.subject].push_back(i);
    for (const auto* p : evaluated) {
      for (const auto& [subject, indices] : files_of) {
        // Pass 1 again (its alerts were not kept): cheap next to clarity.
        std::vector<config::PatternExample> negatives;
        std::size_t mark_file = 0;
        std::int64_t mark_last = -1;
        std::vector<std::map<std::string, FileAlerts>> before;
        for (const std::size_t i : indices) {
          const ScoredFile& f = scored[i];
          const std::string group =
              leave_out == pipeline::LeaveOut::kSubject ? f.name.subject : f.name.recording;
          std::vector<config::PatternConfig> fold = {fold_for(o, *p, leave_out, group)};
          add_agreeing_views(cfg, leave_out, group, fold);
          before.push_back(run_file(o, cfg, fold, f));
          const FileAlerts& alerts = before.back()[p->name];
          for (std::size_t k = 0; k < alerts.scored.size(); ++k) {
            const pipeline::ScoredAlert& s = alerts.scored[k];
            if (static_cast<int>(negatives.size()) >= o.simulate_marks) break;
            if (!is_false_alert(s, f, tolerance_of(o, f))) continue;
            negatives.push_back(window_example(*p, f, alerts.raw[k], s.last, device, o.run.wearer));
            mark_file = i;
            mark_last = s.last;
          }
        }
        MarksOutcome& m = marks[p->name][subject];
        m.marks = static_cast<int>(negatives.size());
        for (std::size_t k = 0; k < indices.size(); ++k) {
          const std::size_t i = indices[k];
          const ScoredFile& f = scored[i];
          if (i < mark_file) continue;
          const std::string group =
              leave_out == pipeline::LeaveOut::kSubject ? f.name.subject : f.name.recording;
          std::vector<config::PatternConfig> marked = {fold_for(o, *p, leave_out, group)};
          marked.front().examples.insert(marked.front().examples.end(), negatives.begin(),
                                         negatives.end());
          add_agreeing_views(cfg, leave_out, group, marked);
          auto after = run_file(o, cfg, marked, f);
          auto count = [&](const FileAlerts& a, int& falses, int& detected) {
            std::vector<pipeline::ScoredAlert> later;
            for (const auto& s : a.scored)
              if (i > mark_file || s.last > mark_last) later.push_back(s);
            for (const auto& s : later)
              if (is_false_alert(s, f, tolerance_of(o, f))) ++falses;
            for (const auto& e : f.events) {
              if (i == mark_file && e.end <= mark_last) continue;
              if (std::any_of(later.begin(), later.end(), [&](const pipeline::ScoredAlert& s) {
                    return on_event(s, e, tolerance_of(o, f));
                  }))
                ++detected;
            }
          };
          count(before[k][p->name], m.false_after_without, m.detected_after_without);
          count(after[p->name], m.false_after_with, m.detected_after_with);
        }
      }
    }
  }

  if (!o.mine_negatives.empty()) {
    std::error_code ec;
    fs::create_directories(o.mine_negatives, ec);
    if (ec) throw Error("cannot create " + o.mine_negatives + ": " + ec.message());
    for (const auto* p : evaluated) {
      int written = 0;
      // The items for a pattern's `negatives:`, each with the subject it came
      // from (so that --loso leaves it out with that subject) and, for a
      // normalised pattern, the baseline its window was normalised with.
      const fs::path items_file = fs::path(o.mine_negatives) / (p->name + "_hard.yaml");
      std::ofstream items(items_file, std::ios::trunc);
      items << "# False alerts of '" << p->name << "' mined by gaitwatch eval, as items of the\n"
            << "# pattern's `negatives:`; template paths are relative to this file's folder.\n";
      for (const auto& [recording, examples] : mined[p->name]) {
        for (std::size_t n = 0; n < examples.size(); ++n) {
          const auto& e = examples[n];
          const std::string name =
              p->name + "_hard_" + recording + "_" + std::to_string(e.source->start) + ".csv";
          write_template_csv((fs::path(o.mine_negatives) / name).string(), *p, e);
          items << "- "
                << example_item_yaml(name, e.subject, e.baseline ? &*e.baseline : nullptr,
                                     p->normalise, e.source)
                << "\n";
          ++written;
        }
      }
      items.close();
      if (!items) throw Error("cannot write " + items_file.string());
      std::cerr << "eval: " << written << " false-alert windows of '" << p->name
                << "' written to " << o.mine_negatives << " (items in " << items_file.string()
                << ")\n";
    }
  }

  for (const auto* p : evaluated) {
    const auto& per_file = results[p->name];
    // Subjects in order of first appearance.
    std::vector<std::string> subjects;
    for (const auto& f : scored)
      if (std::find(subjects.begin(), subjects.end(), f.name.subject) == subjects.end())
        subjects.push_back(f.name.subject);
    std::vector<pipeline::Score> subject_scores;
    std::map<std::string, pipeline::Score> score_of_subject;
    std::vector<pipeline::TrialOutcome> trials;
    nlohmann::json subject_rows = nlohmann::json::array();
    int unannotated = 0, cannot_alert = 0;
    for (const std::string& subject : subjects) {
      std::vector<pipeline::Score> parts;
      std::vector<pipeline::TrialOutcome> subject_trials;
      int left_out = 0, files_of_subject = 0;
      for (std::size_t i = 0; i < scored.size(); ++i) {
        if (scored[i].name.subject != subject) continue;
        ++files_of_subject;
        const PerFile& r = per_file[i];
        unannotated += r.unannotated;
        left_out = std::max(left_out, r.left_out);
        if (!r.can_alert) ++cannot_alert;
        if (scored[i].trial) subject_trials.push_back(r.trial);
        else parts.push_back(r.score);
      }
      trials.insert(trials.end(), subject_trials.begin(), subject_trials.end());
      nlohmann::json row = {{"subject", subject}, {"files", files_of_subject},
                            {"examples_left_out", left_out}};
      if (!parts.empty()) {
        pipeline::Score s = pipeline::pooled_score(parts);
        subject_scores.push_back(s);
        score_of_subject[subject] = s;
        auto j = s.to_json();
        for (auto it = j.begin(); it != j.end(); ++it)
          if (it.key() != "pattern" && it.key() != "kind") row[it.key()] = it.value();
      }
      if (!subject_trials.empty()) row["trials"] = pipeline::summarize_trials(subject_trials).to_json();
      if (marks.count(p->name) && marks[p->name].count(subject)) {
        const MarksOutcome& m = marks[p->name][subject];
        row["simulated_marks"] = {{"marks", m.marks},
                                  {"false_alerts_after_without_marks", m.false_after_without},
                                  {"false_alerts_after_with_marks", m.false_after_with},
                                  {"detected_after_without_marks", m.detected_after_without},
                                  {"detected_after_with_marks", m.detected_after_with}};
      }
      subject_rows.push_back(row);
    }
    const pipeline::Score pooled = pipeline::pooled_score(subject_scores);
    const pipeline::TrialSummary trial_summary = pipeline::summarize_trials(trials);
    if (o.json) {
      nlohmann::json j = subject_scores.empty() ? nlohmann::json{{"pattern", p->name},
                                                                 {"kind", p->kind}}
                                                : pooled.to_json();
      j["pattern"] = p->name;
      j["kind"] = p->kind;
      j["leave_out"] = leave_out_name(leave_out);
      j["unannotated_alerts"] = unannotated;
      if (!trials.empty()) j["trials"] = trial_summary.to_json();
      if (!single) j["subjects"] = subject_rows;
      std::cout << j.dump() << "\n";
      continue;
    }
    std::printf("%s (%s)%s:\n", p->name.c_str(), p->kind.c_str(),
                leave_out == pipeline::LeaveOut::kSubject
                    ? " leave-one-subject-out"
                    : leave_out == pipeline::LeaveOut::kRecording ? " leave-one-recording-out"
                                                                  : "");
    for (std::size_t s = 0; s < subjects.size(); ++s) {
      const auto& row = subject_rows[s];
      if (score_of_subject.count(subjects[s]))
        print_score(subjects[s].c_str(), score_of_subject.at(subjects[s]));
      if (row.contains("trials")) {
        std::printf("  %s:\n", subjects[s].c_str());
        std::vector<pipeline::TrialOutcome> mine;
        for (const auto& tr : trials)
          if (tr.subject == subjects[s]) mine.push_back(tr);
        print_trials(pipeline::summarize_trials(mine));
      }
      if (row.contains("simulated_marks")) {
        const auto& m = row["simulated_marks"];
        std::printf("    marks %d: after the last mark %d false alerts without, %d with marks; "
                    "events detected %d without, %d with\n",
                    m["marks"].get<int>(), m["false_alerts_after_without_marks"].get<int>(),
                    m["false_alerts_after_with_marks"].get<int>(),
                    m["detected_after_without_marks"].get<int>(),
                    m["detected_after_with_marks"].get<int>());
      }
      if (leave_out != pipeline::LeaveOut::kNothing)
        std::printf("    (%d examples left out)\n", row["examples_left_out"].get<int>());
    }
    if (subjects.size() > 1 && !subject_scores.empty()) print_score("pooled", pooled);
    if (subjects.size() > 1 && !trials.empty()) {
      std::printf("  all trials:\n");
      print_trials(trial_summary);
    }
    if (single)
      for (const auto& e : pooled.missed)
        std::printf("  missed: samples %lld..%lld\n", static_cast<long long>(e.start),
                    static_cast<long long>(e.end));
    if (unannotated > 0)
      std::printf("  (%d alerts outside the annotated experiment, label 0, not scored)\n",
                  unannotated);
    if (cannot_alert > 0)
      std::printf("  (%d recordings scored with no positive example left: they cannot alert)\n",
                  cannot_alert);
  }
  print_kinds_on_trials(o, leave_out, evaluated, scored, [&](const std::string& pattern, std::size_t file) -> const pipeline::TrialOutcome& {
    return results[pattern][file].trial;
  });
  return 0;
}

void add_scoring_flags(CLI::App& cmd, EvalOptions& options) {
  cmd.add_option("--config", options.config_path, "daemon config file")->required();
  options.source.add_flags(cmd, true, true, &options.files);
  options.run.add_flags(cmd);
  cmd.add_option("--subject", options.subjects,
                 "FILE=ID: the subject of a recording (default: from its name, "
                 "docs/detection.md)");
  cmd.add_option("--events", options.events_files,
                 "events file: START END sample indices per line; with several files "
                 "FILE=EVENTS, repeated (default: the recording's annotation, Daphnet column "
                 "11 == 2; SisFall: F trials are falls)");
  cmd.add_option("--pattern", options.pattern, "evaluate only this pattern");
  cmd.add_flag("--loso", options.loso,
               "leave-one-subject-out: score each subject without its own examples");
  cmd.add_option("--leave-out", options.leave_out,
                 "what to leave out of the library while scoring a recording: subject "
                 "(= --loso) or recording")
      ->check(CLI::IsMember({"subject", "recording"}));
  cmd.add_flag("--json", options.json, "one JSON object per pattern");
  cmd.add_option("--tolerance", options.tolerance_s,
                 "seconds an alert may lie outside an event and still overlap it (default 1)");
}

void add_eval(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<EvalOptions>();
  options->run.batch_frames = 200;  // whole recordings: fewer, larger batches, same alerts
  auto* cmd = app.add_subcommand(
      "eval", "score each pattern's alerts on annotated recordings (precision, recall, latency)");
  add_scoring_flags(*cmd, *options);
  cmd->add_flag("--cv", options->cv, "leave-one-episode-out cross-validation (one recording)");
  cmd->add_option("--ndcg-k", options->ndcg_k, "k of nDCG@k (default 20)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--simulate-marks", options->simulate_marks,
                  "mark each subject's first K false alerts false and count the false alerts "
                  "after them again")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--mine-negatives", options->mine_negatives,
                  "write every false alert's window as a template CSV into this directory "
                  "(hard negatives), and PATTERN_hard.yaml: the items for the pattern's "
                  "negatives, with subject and baseline");
  on_run(*cmd, exit_code, [options] { return run_eval(*options); });
}

}  // namespace gw::cli
