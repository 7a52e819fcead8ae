// The daemon's engine over a recording, offline: the one code path behind
// `gaitwatch detect`, `eval` and `plot`. Frames are cut exactly as `gaitwatch
// replay` cuts them, so for the same recording, config and frame size the
// daemon raises the same alerts (seq, detected_at and latency_ms aside).
#include <algorithm>
#include <iostream>

#include "common/error.h"
#include "daemon/cli/cli.h"
#include "kernels/search.h"
#include "jobs/daemon_jobs.h"
#include "pipeline/engine.h"

namespace gw::cli {

void on_run(CLI::App& cmd, int& exit_code, std::function<int()> body) {
  cmd.callback([&cmd, &exit_code, body = std::move(body)] {
    try {
      exit_code = body();
    } catch (const CLI::ParseError&) {
      throw;  // a usage error: parse_command_line reports it (exit 2)
    } catch (const std::exception& e) {
      std::cerr << "gaitwatch " << cmd.get_name() << ": " << e.what() << "\n";
      exit_code = 1;
    }
  });
}

void add_engine_flags(CLI::App& cmd, std::string& config_path, RecordingSource& source,
                      OfflineRun& run) {
  cmd.add_option("--config", config_path, "daemon config file")->required();
  source.add_flags(cmd);
  run.add_flags(cmd);
}

void OfflineRun::add_flags(CLI::App& cmd) {
  cmd.add_option("--device", device, "device profile name (default: the first)");
  cmd.add_option("--wearer", wearer, "wearer id (default 1)");
  cmd.add_option("--frame-samples", frame_samples, "samples per frame (default rate/10)");
  cmd.add_option("--batch-frames", batch_frames,
                 "frames per search batch (default " + std::to_string(batch_frames) + ")");
  cmd.add_option("--start", start, "first sample index");
  cmd.add_option("--end", end, "end sample index, exclusive");
  cmd.add_flag("--int16", int16, "quantise like replay --int16");
  add_choice_option<config::BackendKind>(cmd, "--backend", backend, "override search.backend");
  cmd.add_flag("--no-dedup", no_dedup,
               "keep repeated detections of one event (the daemon's dedup.enabled: false)");
}

const config::DeviceProfile& OfflineRun::device_of(const config::Config& cfg) const {
  const config::DeviceProfile* profile =
      device.empty() ? (cfg.devices.empty() ? nullptr : &cfg.devices.front())
                     : cfg.device_by_name(device);
  if (!profile) throw Error("no device '" + device + "' in " + cfg.source_file);
  return *profile;
}

nlohmann::json OfflineRun::run(
    config::Config cfg, const sensors::Recording& rec,
    const std::function<void(std::vector<pipeline::Alert>)>& on_alerts) const {
  if (backend) cfg.search.backend = *backend;
  const config::DeviceProfile& profile = device_of(cfg);
  if (rec.channels() != profile.channels.size())
    throw Error("the recording has " + std::to_string(rec.channels()) + " channels, device '" +
                profile.name + "' has " + std::to_string(profile.channels.size()));
  const std::size_t stop = end < 0 ? rec.samples() : static_cast<std::size_t>(end);
  const int samples_per_frame =
      frame_samples > 0 ? frame_samples : default_frame_samples(rec.sample_rate_hz);
  const auto frames =
      frames_from_recording(rec, wearer, profile.id, profile.kind, samples_per_frame,
                            static_cast<std::size_t>(start), stop, int16);
  // The per-pair cap of search.max_matches_per_pair is a safety bound that
  // never binds in the daemon (it exceeds the samples of a tick); a batch of
  // many frames must not make it bind either, or the alerts would depend on
  // the batch size.
  // Likewise the ring: a batch's samples, plus the longest pattern and its
  // transforms' history before them, must still be in it when it is searched.
  const int batch_samples = samples_per_frame * std::max(1, batch_frames);
  cfg.search.max_matches_per_pair = std::max(cfg.search.max_matches_per_pair, batch_samples);
  std::size_t reach = 0;
  for (const auto& p : cfg.patterns)
    if (p.device == profile.name)
      reach = std::max<std::size_t>(
          reach, static_cast<std::size_t>(
                     p.length + config::transform_history(p.transforms, profile.sample_rate_hz)));
  cfg.ingest.ring_capacity_samples = std::max(cfg.ingest.ring_capacity_samples,
                                              static_cast<std::size_t>(batch_samples) + reach + 1);
  // Every alert keeps its window (what a mark would turn into an example,
  // eval --simulate-marks), whatever the config says: the budget bounds what
  // a live alert storm costs, and offline it would make the windows depend
  // on how fast the recording is read.
  cfg.marks.alert_windows = true;
  cfg.marks.window_budget_mb_per_s = 0;
  std::string note;
  pipeline::Engine engine(cfg,
                          kernels::make_backend(config::name(cfg.search.backend),
                                                cfg.search.threads, cfg.search.devices, &note));
  // The daemon's de-duplication, so that the same samples give the same
  // published alerts.
  if (no_dedup) cfg.dedup.enabled = false;
  const std::unique_ptr<pipeline::AlertDeduplicator> dedup =
      pipeline::make_alert_deduplicator(cfg, &note);
  const auto clock = [] { return 0.0; };
  const auto search = [&] {
    std::vector<pipeline::Alert> alerts = engine.run_batch(clock);
    on_alerts(dedup ? pipeline::admit_new_alerts(*dedup, engine.batch_stream_clocks(), std::move(alerts))
                    : std::move(alerts));
  };
  if (on_decision_traces) engine.record_decisions(true);
  for (std::size_t i = 0; i < frames.size(); ++i) {
    engine.on_frame(frames[i], 0.0);
    if ((i + 1) % static_cast<std::size_t>(std::max(1, batch_frames)) == 0) search();
  }
  search();
  if (on_decision_traces) {
    std::vector<std::vector<pipeline::PatternTracker::TracedDecision>> traces;
    for (std::size_t p = 0; p < cfg.patterns.size(); ++p)
      traces.push_back(engine.take_decision_trace(wearer, profile.id, p));
    on_decision_traces(std::move(traces));
  }
  nlohmann::json stats = engine.stats_json();
  if (dedup)
    stats["dedup"] = {{"admitted", dedup->counters().admitted},
                      {"duplicates", dedup->counters().duplicates}};
  return stats;
}

}  // namespace gw::cli
