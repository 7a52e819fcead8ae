// The gaitwatchd process: ingest (I/O thread), pipeline (batcher + search +
// phase 2), and the alert sink (SQLite writer + ZeroMQ publisher), wired to
// signals and systemd notifications.
//
// Signals: SIGTERM/SIGINT stop ingest, drain the frame queue through a final
// batch, commit and publish everything, then run() returns 0. SIGHUP re-reads
// the config file; an invalid file is logged and the running config stays.
#pragma once

#include <string>

namespace gw::daemon {

// Loads the config (throws gw::Error / config::ConfigError) and runs until a
// stop signal. Returns the process exit code.
int run_daemon(const std::string& config_path);

}  // namespace gw::daemon
