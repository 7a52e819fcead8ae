// gaitwatch gait: gait cycles and metrics of insole recordings, and how
// abnormal each walk's strides look against labelled example walks
// (gait/, docs/gait.md).
//
//   gaitwatch gait --file W [--file W2 ...] --reference R [--reference ...] [--json]
//   gaitwatch gait --loso --file W --file W2 ... [--json]
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
#include "gait/metrics.h"
#include "gait/walk.h"
#include "pipeline/evaluation.h"

namespace gw::cli {
namespace {

struct GaitOptions {
  RecordingSource source;
  std::vector<std::string> files;
  std::vector<std::string> references;
  std::vector<std::string> labels;  // FILE=normal|abnormal
  bool loso = false;
  bool json = false;
  int examples_per_walk = 40;
  gait::AbnormalParams abnormal;
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

// NaN as JSON null.
nlohmann::json number(double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); }

nlohmann::json walk_json(const Walk& w, double threshold) {
  const gait::GaitMetrics& m = w.metrics;
  nlohmann::json j{{"file", w.file},
                   {"walk", w.name.recording},
                   {"subject", w.name.subject},
                   {"strides", m.strides},
                   {"left_strides", m.left_strides},
                   {"right_strides", m.right_strides},
                   {"walking_s", m.walking_s},
                   {"stride_time_median_s", number(m.stride_time_median_s)},
                   {"stride_time_cv", number(m.stride_time_cv)},
                   {"cadence_steps_per_min", number(m.cadence_steps_per_min)},
                   {"stance_fraction", number(m.stance_fraction)},
                   {"swing_fraction", number(m.swing_fraction)},
                   {"double_support_fraction", number(m.double_support_fraction)},
                   {"swing_asymmetry", number(m.swing_asymmetry)},
                   {"cop_path_per_step", number(m.cop_path_per_step)},
                   {"abnormal_score", number(w.score)},
                   {"abnormal", std::isnan(w.score) ? nlohmann::json(nullptr)
                                                    : nlohmann::json(w.score >= threshold)}};
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

// Each walk classified by `values` against a threshold chosen on the other
// subjects' walks alone (the one with the best balanced accuracy there,
// midway between neighbouring values): leave-one-subject-out.
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
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    double best_threshold = 0, best = -1;
    for (std::size_t k = 0; k + 1 < sorted.size(); ++k) {
      const double threshold = (sorted[k] + sorted[k + 1]) / 2;
      std::vector<bool> pred;
      for (double x : v) pred.push_back(x >= threshold);
      const double ba = balanced_accuracy(pred, truth);
      if (ba > best) {
        best = ba;
        best_threshold = threshold;
      }
    }
    predicted[i] = values[i] >= best_threshold;
  }
  return predicted;
}

void print_summary(const std::vector<Walk>& walks, const GaitOptions& o) {
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
    by_score.push_back(w.score >= o.abnormal.threshold);
  }
  const std::vector<bool> by_cv = loso_threshold_predictions(labelled, cvs);
  std::cout << fmt::format("\n{} labelled walks ({} abnormal){}\n", labelled.size(),
                           std::count(truth.begin(), truth.end(), true),
                           o.loso ? ", leave-one-subject-out" : "");
  std::cout << fmt::format("  abnormal_score   AUC {:.3f}  balanced accuracy {:.3f} (threshold {})\n",
                           gait::roc_auc(scores, truth), balanced_accuracy(by_score, truth),
                           o.abnormal.threshold);
  std::cout << fmt::format("  stride_time_cv   AUC {:.3f}  balanced accuracy {:.3f} (threshold chosen on the "
                           "other subjects)\n",
                           gait::roc_auc(cvs, truth), balanced_accuracy(by_cv, truth));
}

int run(const GaitOptions& o) {
  if (o.files.empty()) throw UsageError("--file is required");
  std::vector<Walk> walks;
  for (const std::string& file : o.files) walks.push_back(read_walk(file, o));

  const int points = gait::CycleParams{}.curve_points;
  if (o.loso || !o.references.empty()) {
    gait::StrideLibrary library(points, o.abnormal);
    if (o.loso) {
      for (const Walk& w : walks) add_examples(library, w, o.examples_per_walk);
    }
    for (const std::string& file : o.references) add_examples(library, read_walk(file, o), o.examples_per_walk);
    for (Walk& w : walks) w.score = library.score(w.strides, o.loso ? w.name.subject : std::string());
  }

  if (o.json) {
    for (const Walk& w : walks) std::cout << walk_json(w, o.abnormal.threshold).dump() << "\n";
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
  print_summary(walks, o);
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
  cmd->add_flag("--json", o->json, "one JSON object per walk");
  cmd->add_option("--examples-per-walk", o->examples_per_walk, "strides a labelled walk contributes")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--k", o->abnormal.k, "nearest examples voting per stride")->check(CLI::Range(1, 100000));
  cmd->add_option("--band", o->abnormal.band_fraction, "DTW band, a fraction of the curve length")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--threshold", o->abnormal.threshold, "mean stride score at or above it: abnormal")
      ->check(CLI::Range(0.0, 1.0));
  on_run(*cmd, exit_code, [o] { return run(*o); });
}

}  // namespace gw::cli
