// gaitwatch detect: runs the daemon's detection engine over a recording,
// offline, and prints the alerts it would raise: a table (as `gaitwatch hits`
// prints one), or with --json one JSON object per alert per line
// (pipeline::alert_to_json). The recording is read as the device takes it
// (RecordingSource::read_for: its channels, resampled to its rate).
#include <iostream>

#include "common/error.h"
#include "daemon/cli/cli.h"

namespace gw::cli {
namespace {

struct DetectOptions {
  std::string config_path;
  RecordingSource source;
  OfflineRun run;
  bool json = false;
};

int run(const DetectOptions& o) {
  const config::Config cfg = config::load_config(o.config_path);
  const sensors::Recording rec = o.source.read_for(o.run.device_of(cfg));
  // The table's header comes with the first row, or at the end when there is
  // none, so that a run that fails prints no table.
  bool header_printed = o.json;
  const auto print_header_once = [&header_printed] {
    if (!header_printed) print_hits_header();
    header_printed = true;
  };
  const auto stats = o.run.run(cfg, rec, [&](const std::vector<pipeline::Alert>& alerts) {
    for (const auto& a : alerts) {
      if (o.json) {
        std::cout << pipeline::alert_to_json(a).dump() << "\n";
      } else {
        print_header_once();
        std::cout << hit_row(a) << "\n";
      }
    }
    std::cout.flush();
  });
  print_header_once();
  std::cerr << "detect: " << stats.dump() << "\n";
  return 0;
}

}  // namespace

void add_detect(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<DetectOptions>();
  auto* cmd = app.add_subcommand(
      "detect", "run the daemon's detector over a recording offline and print its alerts");
  add_engine_flags(*cmd, options->config_path, options->source, options->run);
  cmd->add_flag("--json", options->json, "one JSON object per alert per line (default: a table)");
  on_run(*cmd, exit_code, [options] { return run(*options); });
}

}  // namespace gw::cli
