// gaitwatch train: fits a pattern's learned decision (config::LearnedDecision,
// docs/detection.md "A learned decision") on annotated recordings and writes
// the decision file the pattern's `decision: {learned: FILE}` names.
//
// Each recording is run through the daemon's engine with a library that holds
// none of its own group's examples (--leave-out subject, the default, or
// recording), so its features look as they will for a wearer the patterns
// never saw; the decision's features are sampled every --step-s at window
// ends inside events (positive) and away from them (negative) and a logistic
// regression is fitted over all of them. --evaluate then scores each group
// exactly as `eval --loso` does, with a decision fitted without that group's
// recordings.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "common/error.h"
#include "daemon/cli/cli.h"
#include "daemon/cli/eval.h"
#include "pipeline/decision_fit.h"

namespace gw::cli {
namespace {

struct TrainOptions {
  EvalOptions eval;
  std::string out;
  double step_s = 0.1;
  double l2 = 1e-3;
  bool balance = false;
  bool evaluate = false;
  double margin = std::nan("");      // overrides the pattern's for --evaluate
  double hysteresis = std::nan("");
  std::string command_line;
};

// Which window ends of a file train the decision, and how (nullopt: unused).
// LabelledEvent files: an end whose window (t - m, t] lies at least half inside an
// event is positive; one whose window, widened by the tolerance on both
// sides, touches no event is negative; windows in unannotated parts are
// unused. Trial files: every end of an everyday trial is negative; in a fall
// trial the ends that place the largest acceleration 40-80 % into the window
// (where the fall pack's windows put it) are positive, the rest unused (when
// the fall happened is not annotated).
std::function<std::optional<bool>(std::int64_t)> labeller(const ScoredFile& f, int length,
                                                          std::int64_t tolerance) {
  if (f.trial) {
    if (f.events.empty()) return [](std::int64_t) { return std::optional<bool>(false); };
    std::int64_t peak = f.first;
    double peak_value = -1;
    const std::size_t channels = f.rec.channels();
    for (std::int64_t i = f.first; i < f.stop; ++i) {
      double sum = 0;
      for (std::size_t c = 0; c < channels; ++c) {
        const double v = f.rec.at(static_cast<std::size_t>(i), c);
        sum += v * v;
      }
      if (sum > peak_value) {
        peak_value = sum;
        peak = i;
      }
    }
    const std::int64_t lo = peak + static_cast<std::int64_t>(0.2 * length);
    const std::int64_t hi = peak + static_cast<std::int64_t>(0.6 * length);
    return [lo, hi](std::int64_t t) -> std::optional<bool> {
      if (t >= lo && t <= hi) return true;
      return std::nullopt;
    };
  }
  return [&f, length, tolerance](std::int64_t t) -> std::optional<bool> {
    const std::int64_t begin = t - length + 1, end = t + 1;  // the window [begin, end)
    for (const auto& u : f.unannotated)
      if (begin < u.end && end > u.start) return std::nullopt;
    bool near = false;
    for (const auto& e : f.events) {
      const std::int64_t overlap = std::min(end, e.end) - std::max(begin, e.start);
      if (2 * overlap >= length) return true;
      if (begin - tolerance < e.end && end + tolerance > e.start) near = true;
    }
    if (near) return std::nullopt;
    return false;
  };
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", v);
  return text;
}

void write_decision_file(const std::string& path, const TrainOptions& o,
                         const config::PatternConfig& pattern, const pipeline::FitResult& fit,
                         const std::vector<std::string>& files, const std::string& leave_out) {
  std::ostringstream y;
  y << "# A learned decision for pattern '" << pattern.name << "', written by gaitwatch train.\n"
    << "# The pattern uses it with `decision: {learned: " << std::filesystem::path(path).filename().string()
    << "}`; docs/detection.md explains the features.\n"
    << "rule: logistic\n"
    << "bias: " << number(fit.decision.bias) << "\n"
    << "weights:\n";
  for (std::size_t f = 0; f < config::kDecisionFeatureCount; ++f)
    y << "  " << config::kDecisionFeatureNames[f] << ": " << number(fit.decision.weights[f]) << "\n";
  y << "trained:\n"
    << "  pattern: " << pattern.name << "\n"
    << "  leave_out: " << leave_out << "   # each file's features computed without its own "
    << leave_out << "'s examples\n"
    << "  step_s: " << number(o.step_s) << "\n"
    << "  l2: " << number(o.l2) << "\n"
    << "  classes_balanced: " << (o.balance ? "true" : "false") << "\n"
    << "  positives: " << fit.positives << "\n"
    << "  negatives: " << fit.negatives << "\n"
    << "  mean_log_loss: " << number(fit.mean_loss) << "\n"
    << "  files:\n";
  for (const auto& f : files) y << "    - " << std::filesystem::path(f).filename().string() << "\n";
  y << "command: \"" << o.command_line << "\"\n";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << y.str();
  out.close();
  if (!out) throw Error("cannot write " + path);
}

int run_train(TrainOptions& o) {
  EvalOptions& e = o.eval;
  const config::Config cfg = config::load_config(e.config_path);
  const config::DeviceProfile& device = e.run.device_of(cfg);
  if (e.files.empty()) throw UsageError("train needs --file (one or more)");
  std::vector<const config::PatternConfig*> candidates;
  for (const auto& p : cfg.patterns)
    if (p.device == device.name && (e.pattern.empty() || p.name == e.pattern)) candidates.push_back(&p);
  if (candidates.size() != 1)
    throw UsageError(candidates.empty()
                         ? "no pattern " + (e.pattern.empty() ? "" : "'" + e.pattern + "' ") +
                               "for device '" + device.name + "'"
                         : "device '" + device.name + "' has several patterns: name one with --pattern");
  const config::PatternConfig& pattern = *candidates.front();
  if (o.out.empty()) {
    if (!pattern.learned_decision)
      throw UsageError("--out FILE is needed: pattern '" + pattern.name +
                       "' names no decision file (decision: {learned: FILE})");
    o.out = pattern.learned_decision->file;
  }
  if (e.leave_out.empty() && !e.loso) e.leave_out = "subject";
  const pipeline::LeaveOut leave_out = leave_out_of(e);
  const std::string leave_out_name = leave_out == pipeline::LeaveOut::kRecording ? "recording" : "subject";

  // Per file: its group and its samples.
  struct FileSamples {
    std::string group;
    std::vector<pipeline::TrainingSample> samples;
  };
  std::vector<FileSamples> per_file;
  const bool single = e.files.size() == 1;
  for (const std::string& file : e.files) {
    const ScoredFile f = load_file(e, device, file, single);
    const std::string group = leave_out == pipeline::LeaveOut::kRecording ? f.name.recording : f.name.subject;
    config::Config run_cfg = cfg;
    run_cfg.patterns = {pipeline::without_group(pattern, leave_out, group)};
    OfflineRun run = e.run;
    run.start = f.first;
    run.end = f.stop;
    std::vector<pipeline::PatternTracker::TracedDecision> trace;
    run.on_decision_traces = [&](auto traces) { trace = std::move(traces.front()); };
    run.run(run_cfg, f.rec, [](const std::vector<pipeline::Alert>&) {});
    // Trace ends count from the stream's first sample, which is f.first.
    for (auto& entry : trace) entry.end += f.first;
    const auto step = std::max<std::int64_t>(1, std::llround(o.step_s * f.rec.sample_rate_hz));
    const auto tolerance = static_cast<std::int64_t>(std::llround(e.tolerance_s * f.rec.sample_rate_hz));
    FileSamples fs{group, pipeline::sample_trace(trace, f.first, f.stop, step,
                                                 labeller(f, pattern.length, tolerance))};
    int positives = 0;
    for (const auto& s : fs.samples) positives += s.positive;
    std::cerr << "train: " << file << " (" << leave_out_name << " " << group << "): "
              << positives << " window ends inside events, " << fs.samples.size() - positives
              << " outside\n";
    per_file.push_back(std::move(fs));
  }
  const auto fit_without = [&](const std::string& left_out) {
    std::vector<pipeline::TrainingSample> samples;
    for (const auto& f : per_file)
      if (f.group != left_out) samples.insert(samples.end(), f.samples.begin(), f.samples.end());
    pipeline::FitOptions fit_options;
    fit_options.l2 = o.l2;
    fit_options.balance_classes = o.balance;
    return pipeline::fit_logistic(samples, fit_options);
  };
  const pipeline::FitResult fit = fit_without("");
  write_decision_file(o.out, o, pattern, fit, e.files, leave_out_name);
  std::cerr << "train: wrote " << o.out << " (" << fit.positives << " positive and "
            << fit.negatives << " negative window ends, " << fit.iterations << " iterations)\n";
  if (!o.evaluate) return 0;

  // Every group scored with a decision fitted without its recordings.
  std::map<std::string, config::LearnedDecision> fitted;
  EvalOptions scoring = e;
  scoring.pattern = pattern.name;
  scoring.refit = [&](const config::PatternConfig& fold, const std::string& group) {
    auto known = fitted.find(group);
    if (known == fitted.end()) {
      config::LearnedDecision d = fit_without(group).decision;
      d.file = "(fitted without " + group + ")";
      known = fitted.emplace(group, d).first;
    }
    config::PatternConfig refitted = fold;
    refitted.neighbours = 0;
    refitted.learned_decision = known->second;
    if (!std::isnan(o.margin)) refitted.margin = o.margin;
    if (!std::isnan(o.hysteresis)) refitted.hysteresis = o.hysteresis;
    return refitted;
  };
  return run_eval(scoring);
}

}  // namespace

void add_train(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<TrainOptions>();
  options->eval.run.batch_frames = 200;
  auto* cmd = app.add_subcommand(
      "train", "fit a pattern's learned decision on annotated recordings and write its file");
  add_scoring_flags(*cmd, options->eval);
  cmd->add_option("--out", options->out,
                  "decision file to write (default: the one the pattern's decision.learned names)");
  cmd->add_option("--step-s", options->step_s, "seconds between sampled window ends (default 0.1)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--l2", options->l2, "weight penalty of the fit (default 0.001)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--balance", options->balance,
                "weigh window ends inside and outside events equally (default: as they occur, "
                "so that log-odds 0 means as likely as not at the recordings' own rate)");
  cmd->add_flag("--evaluate", options->evaluate,
                "then score every subject (recording with --leave-out recording) with a decision "
                "fitted without it, as eval --loso prints it");
  cmd->add_option("--margin", options->margin, "margin (log-odds) for --evaluate");
  cmd->add_option("--hysteresis", options->hysteresis, "hysteresis (log-odds) for --evaluate")
      ->check(CLI::NonNegativeNumber);
  on_run(*cmd, exit_code, [options, cmd] {
    options->command_line = "gaitwatch train";
    for (const auto* opt : cmd->get_options())
      for (const auto& value : opt->results())
        if (opt->get_name() != "--help")
          options->command_line += " " + opt->get_name() + (value.empty() ? "" : " " + value);
    return run_train(*options);
  });
}

}  // namespace gw::cli
