// gaitwatchd: the detector daemon.
//   gaitwatchd --config FILE         run until SIGTERM (SIGHUP reloads FILE)
//   gaitwatchd --gateway --config FILE   take frames and publish them to the
//                                    config's NATS JetStream stream (daemon/gateway.h)
//   gaitwatchd --check-config FILE   validate FILE; exit 0 when valid, 1 otherwise
//     [--gateway]                    for the gateway: FILE must also name a nats: stream
//     [--against RUNNING]            also warn about the keys that differ from the
//                                    config RUNNING and that a reload would not apply
// Exit codes: 0 stopped cleanly (also --help, --version), 1 a start-up or
// runtime error (logged), 2 a usage error (daemon/cli/usage.h).
#include <iostream>

#include <CLI/CLI.hpp>

#include "config/config.h"
#include "config/reload_rules.h"
#include "daemon/cli/usage.h"
#include "daemon/daemon.h"
#include "daemon/gateway.h"
#include "daemon/log.h"
#include "daemon/preflight.h"

int main(int argc, char** argv) {
  CLI::App app{"gaitwatchd - streaming abnormal-gait detector daemon"};
  std::string config_path, check_path, running_path;
  auto* run_opt = app.add_option("--config", config_path, "run with this config file");
  auto* check_opt = app.add_option("--check-config", check_path, "validate a config file and exit");
  run_opt->excludes(check_opt);
  app.add_option("--against", running_path,
                 "with --check-config: the config the daemon runs; warn about the changes from "
                 "it that a reload (SIGHUP) keeps at their running values")
      ->needs(check_opt);
  bool gateway = false;
  app.add_flag("--gateway", gateway,
               "with --config: only take frames and publish them to the config's nats: stream "
               "(docs/scale.md); detect nothing. With --check-config: check the file for that");
  app.set_version_flag("--version", "gaitwatchd 0.1.0");
  if (const auto code = gw::cli::parse_command_line(app, argc, argv)) return *code;
  if (config_path.empty() && check_path.empty()) {
    std::cerr << "--config FILE or --check-config FILE is required\n"
                 "Run with --help for more information.\n";
    return gw::cli::kExitUsage;
  }

  if (!check_path.empty()) {
    try {
      const auto config = gw::config::load_config(check_path);
      // What the file cannot say alone: addresses, endpoints, directories.
      auto issues = gw::daemon::preflight_checks(
          config, gateway ? gw::daemon::PreflightRole::kGateway : gw::daemon::PreflightRole::kDaemon);
      if (!issues.empty()) throw gw::config::ConfigError(check_path, std::move(issues));
      if (gateway) gw::daemon::require_gateway_config(config, check_path);
      if (config.patterns.empty() && !gateway)
        std::cerr << check_path << ": warning: patterns: [] - this config detects nothing\n";
      if (!running_path.empty()) {
        const auto running = gw::config::load_config(running_path);
        for (const std::string& key : gw::config::restart_only_differences(running, config))
          std::cerr << check_path << ": warning: " << key << ": differs from " << running_path
                    << " and needs a restart; a reload keeps the running value\n";
      }
      std::cout << check_path << ": ok (" << config.devices.size() << " devices, "
                << config.patterns.size() << " patterns)\n";
      return 0;
    } catch (const std::exception& e) {
      std::cerr << e.what() << "\n";
      return 1;
    }
  }
  // Start-up errors (an invalid config, a port in use) go out in the log's
  // format; run_daemon sets the config's level once the config is read.
  gw::daemon::setup_logging("info");
  try {
    return gateway ? gw::daemon::run_gateway(config_path) : gw::daemon::run_daemon(config_path);
  } catch (const std::exception& e) {
    spdlog::critical("gaitwatchd: {}", e.what());
    return 1;
  }
}
