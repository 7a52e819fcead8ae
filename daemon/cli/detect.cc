// gaitwatch detect: runs the daemon's detection engine over a recording,
// offline, and prints the alerts it would raise (one JSON object per line).
#include <iostream>

#include "common/error.h"
#include "daemon/cli/cli.h"

namespace gw::cli {
namespace {

struct DetectOptions {
  std::string config_path;
  RecordingSource source;
  OfflineRun run;
};

int run(const DetectOptions& o) {
  const config::Config cfg = config::load_config(o.config_path);
  const auto stats =
      o.run.run(cfg, o.source.read(), [](const std::vector<pipeline::Alert>& alerts) {
        for (const auto& a : alerts) std::cout << pipeline::alert_to_json(a).dump() << "\n";
      });
  std::cerr << "detect: " << stats.dump() << "\n";
  return 0;
}

}  // namespace

void add_detect(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<DetectOptions>();
  auto* cmd = app.add_subcommand(
      "detect", "run the daemon's detector over a recording offline and print its alerts");
  add_engine_flags(*cmd, options->config_path, options->source, options->run);
  on_run(*cmd, exit_code, [options] { return run(*options); });
}

}  // namespace gw::cli
