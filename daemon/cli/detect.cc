// gaitwatch detect: runs the daemon's detection engine over a recording,
// offline, and prints the alerts it would raise (one JSON object per line).
// The frames are cut exactly as `gaitwatch replay` cuts them, so for the same
// recording, config and frame size the daemon raises the same alerts
// (seq, detected_at and latency_ms aside).
#include <iostream>

#include "common/error.h"
#include "config/config.h"
#include "daemon/cli/cli.h"
#include "kernels/search.h"
#include "pipeline/engine.h"

namespace gw::cli {
namespace {

struct DetectOptions {
  std::string config_path;
  RecordingSource source;
  std::string device;
  std::uint32_t wearer = 1;
  int frame_samples = 0;
  int batch_frames = 1;
  std::int64_t start = 0;
  std::int64_t end = -1;
  bool int16 = false;
  std::string backend;
};

int run(const DetectOptions& o) {
  config::Config cfg = config::load_config(o.config_path);
  if (!o.backend.empty()) cfg.search.backend = o.backend;
  const config::DeviceProfile* device =
      o.device.empty() ? (cfg.devices.empty() ? nullptr : &cfg.devices.front())
                       : cfg.device_by_name(o.device);
  if (!device) throw Error("no device '" + o.device + "' in " + o.config_path);
  const sensors::Recording rec = o.source.read();
  if (rec.channels() != device->channels.size())
    throw Error("the recording has " + std::to_string(rec.channels()) + " channels, device '" +
                device->name + "' has " + std::to_string(device->channels.size()));
  const std::size_t end = o.end < 0 ? rec.samples() : static_cast<std::size_t>(o.end);
  const int frame_samples =
      o.frame_samples > 0 ? o.frame_samples : default_frame_samples(rec.sample_rate_hz);
  const auto frames = frames_from_recording(rec, o.wearer, device->id, device->kind, frame_samples,
                                            static_cast<std::size_t>(o.start), end, o.int16);
  std::string note;
  pipeline::Engine engine(cfg, kernels::make_backend(cfg.search.backend, cfg.search.threads, &note));
  const auto clock = [] { return 0.0; };
  auto emit = [](const std::vector<pipeline::Alert>& alerts) {
    for (const auto& a : alerts) std::cout << pipeline::alert_to_json(a).dump() << "\n";
  };
  for (std::size_t i = 0; i < frames.size(); ++i) {
    engine.on_frame(frames[i], 0.0);
    if ((i + 1) % static_cast<std::size_t>(std::max(1, o.batch_frames)) == 0)
      emit(engine.run_batch(clock));
  }
  emit(engine.run_batch(clock));
  std::cerr << "detect: " << engine.stats_json().dump() << "\n";
  return 0;
}

}  // namespace

void add_detect(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<DetectOptions>();
  auto* cmd = app.add_subcommand(
      "detect", "run the daemon's detector over a recording offline and print its alerts");
  cmd->add_option("--config", options->config_path, "daemon config file")->required();
  options->source.add_flags(*cmd);
  cmd->add_option("--device", options->device, "device profile name (default: the first)");
  cmd->add_option("--wearer", options->wearer, "wearer id (default 1)");
  cmd->add_option("--frame-samples", options->frame_samples, "samples per frame (default rate/10)");
  cmd->add_option("--batch-frames", options->batch_frames, "frames per search batch (default 1)");
  cmd->add_option("--start", options->start, "first sample index");
  cmd->add_option("--end", options->end, "end sample index, exclusive");
  cmd->add_flag("--int16", options->int16, "quantise like replay --int16");
  cmd->add_option("--backend", options->backend, "override search.backend");
  cmd->callback([options, &exit_code] {
    try {
      exit_code = run(*options);
    } catch (const std::exception& e) {
      std::cerr << "gaitwatch detect: " << e.what() << "\n";
      exit_code = 1;
    }
  });
}

}  // namespace gw::cli
