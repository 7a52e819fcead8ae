// gaitwatch eval: runs the daemon's engine over an annotated recording (the
// same code as `detect`) and scores each pattern's alerts against the
// annotated events: event-level precision, recall, median latency and nDCG@k
// (pipeline/evaluation.h, docs/detection.md). --cv scores each event with a
// pattern built without the positive examples cut from it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>

#include "common/error.h"
#include "daemon/cli/cli.h"
#include "pipeline/evaluation.h"

namespace gw::cli {
namespace {

struct EvalOptions {
  std::string config_path;
  RecordingSource source;
  OfflineRun run;
  std::string events_file;
  std::string pattern;  // empty = every pattern of the device
  bool cv = false;
  bool json = false;
  int ndcg_k = 20;
  double tolerance_s = 1.0;
};

int run(const EvalOptions& o) {
  const config::Config cfg = config::load_config(o.config_path);
  const sensors::Recording rec = o.source.read_for(o.run.device_of(cfg));
  const config::DeviceProfile& device = o.run.device_of(cfg);
  const std::int64_t first = o.run.start;
  const std::int64_t stop = o.run.end < 0 ? static_cast<std::int64_t>(rec.samples()) : o.run.end;

  std::vector<pipeline::Event> events;
  if (!o.events_file.empty()) {
    events = pipeline::read_events(o.events_file);
  } else if (!rec.labels.empty()) {
    events = pipeline::events_from_labels(rec.labels, 2);  // Daphnet: 2 = freeze
  } else {
    throw Error("'" + o.source.file + "' carries no annotations: give --events FILE");
  }
  // Only the events inside the evaluated range count.
  events.erase(
      std::remove_if(events.begin(), events.end(),
                     [&](const pipeline::Event& e) { return e.start < first || e.end > stop; }),
      events.end());

  std::vector<const config::PatternConfig*> evaluated;
  for (const auto& p : cfg.patterns)
    if (p.device == device.name && (o.pattern.empty() || p.name == o.pattern))
      evaluated.push_back(&p);
  if (evaluated.empty())
    throw Error("no pattern " + (o.pattern.empty() ? "" : "'" + o.pattern + "' ") + "for device '" +
                device.name + "' in " + o.config_path);

  // With --cv, the folds join the config as patterns of their own; identical
  // examples are searched once (pipeline/detector.h), so this is one pass.
  config::Config run_cfg = cfg;
  std::map<std::string, pipeline::Folds> folds;
  if (o.cv) {
    for (const auto* p : evaluated) {
      // Templates exported from this recording's windows count as those windows.
      const config::PatternConfig located =
          pipeline::locate_template_examples(*p, rec, o.source.file, o.source.format);
      auto f = pipeline::leave_one_episode_out(located, o.source.file, events);
      for (const auto& fold : f.patterns) run_cfg.patterns.push_back(fold);
      folds.emplace(p->name, std::move(f));
    }
  }
  // Daphnet's label 0 marks samples outside the experiment: nobody annotated
  // freezes there, so alerts completed there are neither true nor false.
  const std::vector<pipeline::Event> unannotated = o.events_file.empty()
                                                       ? pipeline::events_from_labels(rec.labels, 0)
                                                       : std::vector<pipeline::Event>{};
  std::map<std::string, std::vector<pipeline::ScoredAlert>> alerts_of;
  std::map<std::string, int> ignored_of;
  o.run.run(run_cfg, rec, [&](const std::vector<pipeline::Alert>& alerts) {
    for (const auto& a : alerts) {
      const auto scored = pipeline::scored_alert(a, rec.sample_rate_hz, first);
      const bool outside = std::any_of(unannotated.begin(), unannotated.end(), [&](const auto& u) {
        return scored.last >= u.start && scored.last < u.end;
      });
      if (outside) {
        ++ignored_of[a.pattern];
        continue;
      }
      alerts_of[a.pattern].push_back(scored);
    }
  });

  const auto tolerance =
      static_cast<std::int64_t>(std::llround(o.tolerance_s * rec.sample_rate_hz));
  for (const auto* p : evaluated) {
    pipeline::Score score;
    if (o.cv) {
      const pipeline::Folds& f = folds.at(p->name);
      std::vector<std::vector<pipeline::ScoredAlert>> per_event;
      for (const int fold : f.fold_of_event)
        per_event.push_back(
            alerts_of[fold < 0 ? p->name : f.patterns[static_cast<std::size_t>(fold)].name]);
      score = pipeline::score_cross_validated(per_event, events, tolerance, rec.sample_rate_hz,
                                              o.ndcg_k);
      score.folds = static_cast<int>(f.patterns.size());
    } else {
      score = pipeline::score_alerts(alerts_of[p->name], events, tolerance, rec.sample_rate_hz,
                                     o.ndcg_k);
    }
    score.pattern = p->name;
    score.kind = p->kind;
    const int ignored = ignored_of[p->name];
    if (o.json) {
      auto j = score.to_json();
      j["unannotated_alerts"] = ignored;
      std::cout << j.dump() << "\n";
      continue;
    }
    std::printf(
        "%s (%s)%s: %d events, %d detected, %.4g true alerts, %.4g false alerts\n"
        "  precision %.3f  recall %.3f  median latency %.2f s  nDCG@%d %.3f\n",
        p->name.c_str(), p->kind.c_str(),
        o.cv ? (" cross-validated, " + std::to_string(score.folds) + " folds").c_str() : "",
        score.events, score.detected, score.true_alerts, score.false_alerts, score.precision,
        score.recall, score.median_latency_s, score.ndcg_k, score.ndcg);
    for (const auto& e : score.missed)
      std::printf("  missed: samples %lld..%lld (%.2f s .. %.2f s)\n",
                  static_cast<long long>(e.start), static_cast<long long>(e.end),
                  static_cast<double>(e.start) / rec.sample_rate_hz,
                  static_cast<double>(e.end) / rec.sample_rate_hz);
    if (ignored > 0)
      std::printf("  (%d alerts outside the annotated experiment, label 0, not scored)\n", ignored);
  }
  return 0;
}

}  // namespace

void add_eval(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<EvalOptions>();
  options->run.batch_frames = 200;  // whole recordings: fewer, larger batches, same alerts
  auto* cmd = app.add_subcommand(
      "eval", "score each pattern's alerts on an annotated recording (precision, recall, latency)");
  add_engine_flags(*cmd, options->config_path, options->source, options->run);
  cmd->add_option("--events", options->events_file,
                  "events file: START END sample indices per line (default: the recording's "
                  "annotation, Daphnet column 11 == 2)");
  cmd->add_option("--pattern", options->pattern, "evaluate only this pattern");
  cmd->add_flag("--cv", options->cv, "leave-one-episode-out cross-validation");
  cmd->add_flag("--json", options->json, "one JSON object per pattern");
  cmd->add_option("--ndcg-k", options->ndcg_k, "k of nDCG@k (default 20)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--tolerance", options->tolerance_s,
                  "seconds an alert may lie outside an event and still overlap it (default 1)");
  on_run(*cmd, exit_code, [options] { return run(*options); });
}

}  // namespace gw::cli
