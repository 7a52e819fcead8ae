// gaitwatch gait: gait cycles and metrics of insole recordings, and how
// abnormal each walk's strides look against labelled example walks
// (gait/, docs/gait.md).
//
//   gaitwatch gait --file W [--file W2 ...] [--config C] [--json]   the pack's examples
//   gaitwatch gait --file W ... --reference R [--reference ...]      these walks' strides
//   gaitwatch gait --loso --file W --file W2 ... [--json]
//   gaitwatch gait --file W ... --export-examples FILE               a pack's example file
//   gaitwatch gait --change --file W --file W2 ...   change against a wearer's own baseline
//   gaitwatch gait --file W --minutes [--json]    the minutes of walking the daemon would store
//   gaitwatch gait --wearer N [--since T] [--json]   the minutes a running daemon stored
//
// A walk's label comes from its file name (gaitpdb: Co = control = normal,
// Pt = patient = abnormal) or `--label FILE=normal|abnormal`; its subject
// from pipeline/evaluation.h's recording names. With --loso each walk is
// scored against the other given walks' strides, none of its subject's.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "daemon/cli/cli.h"
#include "daemon/cli/usage.h"
#include "gait/abnormal.h"
#include "gait/baseline.h"
#include "gait/examples.h"
#include "gait/metrics.h"
#include "gait/walk.h"
#include "common/time_text.h"
#include "daemon/gait_job.h"
#include "pipeline/evaluation.h"

namespace gw::cli {
namespace {

struct GaitOptions {
  std::string config_path;
  long wearer = -1;      // >= 0: ask the running daemon
  std::string since;
  long limit = 0;
  bool minutes = false;
  ControlTarget target;
  std::string export_examples;
  RecordingSource source;
  std::vector<std::string> files;
  std::vector<std::string> references;
  std::vector<std::string> labels;  // FILE=normal|abnormal
  bool loso = false;
  bool change = false;               // evaluate the own-baseline change
  gait::BaselineParams baseline{45, 24, 5, 0.1, 1.6};
  int bout_strides = 20;
  bool json = false;
  int examples_per_walk = 40;
  gait::AbnormalParams abnormal;
  CLI::Option* k_flag = nullptr;  // given: overrides the pack's
  CLI::Option* band_flag = nullptr;
  CLI::Option* threshold_flag = nullptr;
};

struct Walk {
  std::string file;
  pipeline::RecordingName name;
  std::optional<bool> abnormal;  // the label, when known
  std::vector<gait::Stride> strides;
  gait::GaitMetrics metrics;
  double score = std::numeric_limits<double>::quiet_NaN();
};

std::optional<bool> label_of(const std::string& file, const pipeline::RecordingName& name,
                             const GaitOptions& o) {
  for (const std::string& item : o.labels) {
    const auto eq = item.rfind('=');
    if (eq == std::string::npos) throw UsageError("--label " + item + ": expected FILE=normal|abnormal");
    if (item.substr(0, eq) != file) continue;
    const std::string value = item.substr(eq + 1);
    if (value == "normal") return false;
    if (value == "abnormal") return true;
    throw UsageError("--label " + item + ": expected normal or abnormal after '='");
  }
  if (name.known && name.subject.size() >= 4) {
    const std::string group = name.subject.substr(2, 2);
    if (group == "Co") return false;
    if (group == "Pt") return true;
  }
  return std::nullopt;
}

Walk read_walk(const std::string& file, const GaitOptions& o) {
  RecordingSource source = o.source;
  source.file = file;
  Walk walk;
  walk.file = file;
  walk.name = pipeline::recording_name(file);
  walk.abnormal = label_of(file, walk.name, o);
  try {
    walk.strides = gait::walk_strides(source.read());
  } catch (const Error& e) {
    throw Error(file + ": " + e.what());
  }
  walk.metrics = gait::summarise(walk.strides);
  return walk;
}


nlohmann::json walk_json(const Walk& w, double threshold) {
  nlohmann::json j{{"file", w.file}, {"walk", w.name.recording}, {"subject", w.name.subject}};
  j.update(gait::metrics_json(w.metrics));
  j["abnormal_score"] = gait::metric_json(w.score);
  j["abnormal"] = std::isnan(w.score) ? nlohmann::json(nullptr) : nlohmann::json(w.score >= threshold);
  if (w.abnormal) j["label"] = *w.abnormal ? "abnormal" : "normal";
  return j;
}

void add_examples(gait::StrideLibrary& library, const Walk& w, int per_walk) {
  if (!w.abnormal) throw UsageError(w.file + ": no label (name it like gaitpdb's Co/Pt walks, or --label FILE=...)");
  for (const gait::Stride& s : gait::evenly_spaced(w.strides, per_walk))
    library.add({s.curve, *w.abnormal, w.name.subject});
}

// Balanced accuracy of `predicted` against `truth` (mean of sensitivity and
// specificity); NaN without both classes.
double balanced_accuracy(const std::vector<bool>& predicted, const std::vector<bool>& truth) {
  int tp = 0, p = 0, tn = 0, n = 0;
  for (std::size_t i = 0; i < truth.size(); ++i) {
    if (truth[i]) {
      ++p;
      tp += predicted[i] ? 1 : 0;
    } else {
      ++n;
      tn += predicted[i] ? 0 : 1;
    }
  }
  if (!p || !n) return std::numeric_limits<double>::quiet_NaN();
  return 0.5 * (static_cast<double>(tp) / p + static_cast<double>(tn) / n);
}

// The threshold on `values` (midway between neighbouring values; a value at
// or above it says true) with the best balanced accuracy against `truth`.
double best_threshold(const std::vector<double>& values, const std::vector<bool>& truth) {
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  double chosen = 0, best = -1;
  for (std::size_t k = 0; k + 1 < sorted.size(); ++k) {
    const double threshold = (sorted[k] + sorted[k + 1]) / 2;
    std::vector<bool> pred;
    for (double x : values) pred.push_back(x >= threshold);
    const double ba = balanced_accuracy(pred, truth);
    if (ba > best) {
      best = ba;
      chosen = threshold;
    }
  }
  return chosen;
}

// Each walk classified by `values` against a threshold chosen on the other
// subjects' walks alone (best_threshold): leave-one-subject-out.
std::vector<bool> loso_threshold_predictions(const std::vector<Walk>& walks, const std::vector<double>& values) {
  std::vector<bool> predicted(walks.size(), false);
  for (std::size_t i = 0; i < walks.size(); ++i) {
    std::vector<double> v;
    std::vector<bool> truth;
    for (std::size_t j = 0; j < walks.size(); ++j) {
      if (walks[j].name.subject == walks[i].name.subject || std::isnan(values[j])) continue;
      v.push_back(values[j]);
      truth.push_back(*walks[j].abnormal);
    }
    predicted[i] = values[i] >= best_threshold(v, truth);
  }
  return predicted;
}

// Change against the wearer's own baseline (docs/gait.md): each walk's
// first `learn_walking_s` of walking teaches a baseline, as the daemon
// learns one; what follows is scored against it, and so is what follows the
// same point of every other subject's walk (the stand-in for a gait that
// changed). A case is flagged when some run of `bout` consecutive strides
// has a mean change at or above the threshold, the threshold chosen on the
// cases of the other subjects alone.
struct ChangeCase {
  std::size_t baseline_walk = 0, test_walk = 0;
  bool changed = false;
  double max_bout = 0;  // the largest mean change of `bout` consecutive strides
};

// Index of the first stride after the baseline of `strides` is learned
// (strides.size() when it never is).
std::size_t learned_after(gait::StrideBaseline& baseline, const std::vector<gait::Stride>& strides) {
  for (std::size_t i = 0; i < strides.size(); ++i)
    if (baseline.offer(strides[i])) return i + 1;
  return strides.size();
}

double max_bout_change(const gait::StrideBaseline& baseline, const std::vector<gait::Stride>& strides,
                       std::size_t from, int bout) {
  std::vector<double> change;
  for (std::size_t i = from; i < strides.size(); ++i) change.push_back(baseline.change(strides[i].curve));
  double best = std::numeric_limits<double>::quiet_NaN();
  for (std::size_t end = static_cast<std::size_t>(bout); end <= change.size(); ++end) {
    double sum = 0;
    for (std::size_t i = end - static_cast<std::size_t>(bout); i < end; ++i) sum += change[i];
    const double mean = sum / bout;
    if (std::isnan(best) || mean > best) best = mean;
  }
  return best;
}

int run_change_evaluation(const std::vector<Walk>& walks, const GaitOptions& o) {
  const int points = gait::CycleParams{}.curve_points;
  std::vector<std::unique_ptr<gait::StrideBaseline>> baselines;
  std::vector<std::size_t> tested_from;
  for (const Walk& w : walks) {
    baselines.push_back(std::make_unique<gait::StrideBaseline>(points, o.baseline));
    tested_from.push_back(learned_after(*baselines.back(), w.strides));
  }
  std::vector<ChangeCase> cases;
  for (std::size_t b = 0; b < walks.size(); ++b) {
    if (!baselines[b]->learned()) {
      std::cerr << walks[b].name.recording << ": shorter than the learning time, left out\n";
      continue;
    }
    for (std::size_t t = 0; t < walks.size(); ++t) {
      if (t != b && walks[t].name.subject == walks[b].name.subject) continue;
      const double value = max_bout_change(*baselines[b], walks[t].strides, tested_from[t], o.bout_strides);
      if (std::isnan(value)) continue;
      cases.push_back({b, t, t != b, value});
    }
  }
  // Leave out every case that involves either subject of the one judged.
  const auto subject = [&](std::size_t walk) { return walks[walk].name.subject; };
  int same = 0, same_flagged = 0, changed = 0, changed_flagged = 0;
  std::map<std::size_t, std::pair<double, std::vector<double>>> per_walk;  // same value, changed values
  std::vector<double> values;
  std::vector<bool> truth;
  for (const ChangeCase& c : cases) {
    values.push_back(c.max_bout);
    truth.push_back(c.changed);
    std::vector<double> v;
    std::vector<bool> t;
    for (const ChangeCase& other : cases) {
      const std::string sb = subject(other.baseline_walk), st = subject(other.test_walk);
      if (sb == subject(c.baseline_walk) || sb == subject(c.test_walk) || st == subject(c.baseline_walk) ||
          st == subject(c.test_walk))
        continue;
      v.push_back(other.max_bout);
      t.push_back(other.changed);
    }
    const bool flagged = c.max_bout >= best_threshold(v, t);
    if (c.changed) {
      ++changed;
      changed_flagged += flagged ? 1 : 0;
      per_walk[c.baseline_walk].second.push_back(c.max_bout);
    } else {
      ++same;
      same_flagged += flagged ? 1 : 0;
      per_walk[c.baseline_walk].first = c.max_bout;
    }
  }
  std::cout << fmt::format("change against the wearer's own baseline: {:.0f} s of walking learned ({} strides "
                           "kept, k {}), bouts of {} strides; value: the largest mean change of a bout\n",
                           o.baseline.learn_walking_s, o.baseline.strides, o.baseline.k, o.bout_strides);
  std::cout << fmt::format("{:<12} {:>8} {:>12} {:>12}\n", "baseline", "same", "others_min", "others_median");
  for (const auto& [walk, v] : per_walk) {
    std::vector<double> others = v.second;
    std::sort(others.begin(), others.end());
    std::cout << fmt::format("{:<12} {:>8.3f} {:>12.3f} {:>12.3f}\n", walks[walk].name.recording, v.first,
                             others.empty() ? std::nan("") : others.front(),
                             others.empty() ? std::nan("") : others[others.size() / 2]);
  }
  std::cout << fmt::format("\nsame walk after learning: {} of {} flagged (false change alerts)\n", same_flagged,
                           same);
  std::cout << fmt::format("another subject's walk: {} of {} flagged\n", changed_flagged, changed);
  std::cout << fmt::format("AUC of the value {:.3f}; threshold on all cases {:.3f} (each case above was judged by "
                           "one chosen without its subjects)\n",
                           gait::roc_auc(values, truth), best_threshold(values, truth));
  return 0;
}

void print_summary(const std::vector<Walk>& walks, bool loso, double threshold) {
  std::vector<Walk> labelled;
  for (const Walk& w : walks)
    if (w.abnormal && !std::isnan(w.score)) labelled.push_back(w);
  if (labelled.empty()) return;
  std::vector<bool> truth;
  std::vector<double> scores, cvs;
  std::vector<bool> by_score;
  for (const Walk& w : labelled) {
    truth.push_back(*w.abnormal);
    scores.push_back(w.score);
    cvs.push_back(w.metrics.stride_time_cv);
    by_score.push_back(w.score >= threshold);
  }
  const std::vector<bool> by_cv = loso_threshold_predictions(labelled, cvs);
  std::cout << fmt::format("\n{} labelled walks ({} abnormal){}\n", labelled.size(),
                           std::count(truth.begin(), truth.end(), true),
                           loso ? ", leave-one-subject-out" : "");
  int tp = 0, tn = 0, p = 0;
  for (std::size_t i = 0; i < truth.size(); ++i) {
    p += truth[i] ? 1 : 0;
    tp += truth[i] && by_score[i] ? 1 : 0;
    tn += !truth[i] && !by_score[i] ? 1 : 0;
  }
  const auto n = static_cast<int>(truth.size()) - p;
  std::cout << fmt::format("  abnormal_score   AUC {:.3f}  balanced accuracy {:.3f} (threshold {}; sensitivity "
                           "{}/{}, specificity {}/{})\n",
                           gait::roc_auc(scores, truth), balanced_accuracy(by_score, truth), threshold, tp, p,
                           tn, n);
  std::cout << fmt::format("  stride_time_cv   AUC {:.3f}  balanced accuracy {:.3f} (threshold chosen on the "
                           "other subjects)\n",
                           gait::roc_auc(cvs, truth), balanced_accuracy(by_cv, truth));
}

// One minute of walking as `--minutes` and `--wearer` print it: the
// gait_minute event's details with its wearer.
void print_minute(const nlohmann::json& minute, bool json) {
  if (json) {
    std::cout << minute.dump() << "\n";
    return;
  }
  const auto value = [&](const char* key, const char* format) {
    const nlohmann::json& v = minute.value(key, nlohmann::json(nullptr));
    return v.is_number() ? fmt::format(fmt::runtime(format), v.get<double>()) : std::string("-");
  };
  std::cout << fmt::format("{:>7} {:>10} {:>10} {:>7} {:>8} {:>7} {:>8} {:>7} {:>7} {:>7} {:>8}\n",
                           minute.value("wearer", 0), value("t_start", "{:.2f}"), value("t_end", "{:.2f}"),
                           minute.value("strides", 0), value("stride_time_median_s", "{:.3f}"),
                           value("stride_time_cv", "{:.4f}"), value("cadence_steps_per_min", "{:.1f}"),
                           value("stance_fraction", "{:.3f}"), value("double_support_fraction", "{:.3f}"),
                           value("swing_asymmetry", "{:.3f}"), value("abnormal_score", "{:.3f}"));
}

void print_minutes_header() {
  std::cout << fmt::format("{:>7} {:>10} {:>10} {:>7} {:>8} {:>7} {:>8} {:>7} {:>7} {:>7} {:>8}\n", "wearer",
                           "t_start", "t_end", "strides", "stride_s", "cv", "cadence", "stance", "dsupp",
                           "asym", "abnormal");
}

// The minutes a running daemon stored (gait_minute events), oldest first.
int run_online(const GaitOptions& o) {
  ControlTarget target = o.target;
  target.config = o.config_path;
  target = target.resolved();
  nlohmann::json args = {{"type", "gait_minute"}, {"wearer", o.wearer}};
  if (!o.since.empty()) args["since"] = parse_time_text(o.since, unix_time_now());
  if (!o.json) print_minutes_header();
  long printed = 0;
  std::uint64_t after_id = 0;
  for (;;) {
    args["after_id"] = after_id;
    args["limit"] = o.limit > 0 ? std::min<long>(1000, o.limit - printed) : 1000;
    const nlohmann::json result = control_result(control_request(target, "events.list", args));
    for (const nlohmann::json& event : result["events"]) {
      nlohmann::json minute = event["details"];
      minute["wearer"] = event["wearer"];
      minute["at"] = event["at"];
      print_minute(minute, o.json);
      ++printed;
    }
    after_id = result["last_id"].get<std::uint64_t>();
    if (!result["more"].get<bool>() || (o.limit > 0 && printed >= o.limit)) break;
  }
  return 0;
}

// The monitor's options as the config's gait section and pack set them
// (defaults without a config or a gait section).
gait::MonitorOptions monitor_options_of(const std::string& config_path) {
  const std::string path = client_config_path(config_path);
  if (path.empty()) return {};
  const config::Config cfg = config::load_config(path);
  return cfg.gait.enabled ? daemon::gait_monitor_options(cfg.gait) : gait::MonitorOptions{};
}

int run(const GaitOptions& o) {
  if (o.wearer >= 0) {
    if (!o.files.empty()) throw UsageError("--wearer asks the running daemon; it takes no --file");
    return run_online(o);
  }
  if (o.files.empty()) throw UsageError("--file (or --wearer) is required");
  if (o.minutes) {
    const gait::MonitorOptions options = monitor_options_of(o.config_path);
    if (!o.json) print_minutes_header();
    for (const std::string& file : o.files) {
      RecordingSource source = o.source;
      source.file = file;
      const sensors::Recording rec = source.read();
      for (const gait::GaitMinute& m :
           gait::walk_minutes(rec, options, default_frame_samples(rec.sample_rate_hz)).minutes) {
        nlohmann::json minute = daemon::gait_minute_event(m, 0).details;
        minute["wearer"] = m.wearer;
        print_minute(minute, o.json);
      }
    }
    return 0;
  }
  std::vector<Walk> walks;
  for (const std::string& file : o.files) walks.push_back(read_walk(file, o));
  if (o.change) return run_change_evaluation(walks, o);

  const int points = gait::CycleParams{}.curve_points;
  gait::AbnormalParams used = o.abnormal;
  if (!o.export_examples.empty()) {
    gait::StrideLibrary library(points, o.abnormal);
    for (const Walk& w : walks) add_examples(library, w, o.examples_per_walk);
    std::string comment = "gaitwatch stride examples: " + std::to_string(o.examples_per_walk) +
                          " evenly spaced strides of each walk (both feet), from";
    for (const Walk& w : walks) comment += "\n  " + w.name.recording + (*w.abnormal ? " abnormal" : " normal");
    gait::write_stride_examples(o.export_examples, library.examples(), comment);
    std::cerr << "wrote " << library.examples().size() << " stride examples to " << o.export_examples << "\n";
    return 0;
  }
  if (o.loso || !o.references.empty()) {
    gait::StrideLibrary library(points, o.abnormal);
    if (o.loso) {
      for (const Walk& w : walks) add_examples(library, w, o.examples_per_walk);
    }
    for (const std::string& file : o.references) add_examples(library, read_walk(file, o), o.examples_per_walk);
    for (Walk& w : walks) w.score = library.score(w.strides, o.loso ? w.name.subject : std::string());
  } else if (const std::string path = client_config_path(o.config_path); !path.empty()) {
    // The pack's examples and rule, any flag given overriding it.
    const config::Config cfg = config::load_config(path);
    if (!cfg.gait.examples_file.empty()) {
      gait::AbnormalParams params{cfg.gait.k, cfg.gait.band, cfg.gait.threshold};
      if (o.k_flag->count()) params.k = o.abnormal.k;
      if (o.band_flag->count()) params.band_fraction = o.abnormal.band_fraction;
      if (o.threshold_flag->count()) params.threshold = o.abnormal.threshold;
      gait::StrideLibrary library(points, params);
      for (gait::StrideExample& e : gait::read_stride_examples(cfg.gait.examples_file, points))
        library.add(std::move(e));
      for (Walk& w : walks) w.score = library.score(w.strides);
      used = params;
    }
  }

  if (o.json) {
    for (const Walk& w : walks) std::cout << walk_json(w, used.threshold).dump() << "\n";
    return 0;
  }
  std::cout << fmt::format("{:<12} {:>7} {:>8} {:>7} {:>8} {:>7} {:>7} {:>7} {:>8} {:>8} {:>9}\n", "walk",
                           "strides", "stride_s", "cv", "cadence", "stance", "dsupp", "asym", "cop_path",
                           "abnormal", "label");
  for (const Walk& w : walks) {
    const gait::GaitMetrics& m = w.metrics;
    std::cout << fmt::format("{:<12} {:>7} {:>8.3f} {:>7.4f} {:>8.1f} {:>7.3f} {:>7.3f} {:>7.3f} {:>8.1f} {:>8} {:>9}\n",
                             w.name.recording, m.strides, m.stride_time_median_s, m.stride_time_cv,
                             m.cadence_steps_per_min, m.stance_fraction, m.double_support_fraction,
                             m.swing_asymmetry, m.cop_path_per_step,
                             std::isnan(w.score) ? std::string("-") : fmt::format("{:.3f}", w.score),
                             w.abnormal ? (*w.abnormal ? "abnormal" : "normal") : "?");
  }
  print_summary(walks, o.loso, used.threshold);
  return 0;
}

}  // namespace

void add_gait(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<GaitOptions>();
  auto* cmd = app.add_subcommand(
      "gait",
      "gait cycles and metrics of insole recordings (gaitpdb force insoles, W1 pressure insoles), and "
      "how abnormal each walk's strides look against labelled example walks");
  o->source.add_flags(*cmd, true, false, &o->files);
  cmd->add_option("--reference", o->references,
                  "a labelled walk whose strides are examples (repeat); labels as --label says");
  cmd->add_option("--label", o->labels,
                  "FILE=normal|abnormal (default from gaitpdb names: Co normal, Pt abnormal)");
  cmd->add_flag("--loso", o->loso,
                "score each --file walk against the other --file walks' strides, none of its subject's");
  cmd->add_flag("--change", o->change,
                "evaluate the change against a wearer's own baseline: each walk's first --learn-s of walking "
                "learned, the rest of it and of every other subject's walk scored (docs/gait.md)");
  cmd->add_option("--learn-s", o->baseline.learn_walking_s, "with --change: walking time the baseline learns from")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--baseline-strides", o->baseline.strides, "with --change: stride curves a baseline keeps")
      ->check(CLI::Range(2, 10000));
  cmd->add_option("--baseline-k", o->baseline.k, "with --change: nearest baseline strides averaged")
      ->check(CLI::Range(1, 10000));
  cmd->add_option("--bout-strides", o->bout_strides, "with --change: strides of a bout")->check(CLI::Range(1, 10000));
  cmd->add_flag("--json", o->json, "one JSON object per walk");
  cmd->add_option("--examples-per-walk", o->examples_per_walk, "strides a labelled walk contributes")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--config", o->config_path,
                  "config whose gait pack scores the walks when neither --loso nor --reference is given "
                  "(default: the installed config)");
  cmd->add_option("--export-examples", o->export_examples,
                  "write the --file walks' strides (evenly spaced, --examples-per-walk each) as a gait "
                  "pack's example file, and nothing else");
  o->k_flag = cmd->add_option("--k", o->abnormal.k, "nearest examples voting per stride")->check(CLI::Range(1, 100000));
  o->band_flag = cmd->add_option("--band", o->abnormal.band_fraction, "DTW band, a fraction of the curve length")
      ->check(CLI::Range(0.0, 1.0));
  o->threshold_flag = cmd->add_option("--threshold", o->abnormal.threshold, "mean stride score at or above it: abnormal")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--wearer", o->wearer,
                  "print the minutes of walking a running daemon stored for this wearer (control "
                  "interface)")
      ->check(CLI::Range(0L, 4294967295L));
  cmd->add_option("--since", o->since, std::string("with --wearer: minutes stored at or after T: ") + kTimeTextForms);
  cmd->add_option("--limit", o->limit, "with --wearer: at most this many minutes (0 = all)");
  cmd->add_flag("--minutes", o->minutes,
                "print the minutes of walking the daemon would store for each --file (sent as wearer 1), "
                "with the config's gait pack scoring them");
  o->target.add_flags(*cmd, "", /*with_config_flag=*/false);
  on_run(*cmd, exit_code, [o] { return run(*o); });
}

}  // namespace gw::cli
