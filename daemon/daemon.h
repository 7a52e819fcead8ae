// The gaitwatchd process: ingest (I/O thread), pipeline (batcher + search +
// phase 2), and the alert sink (SQLite writer + ZeroMQ publisher), wired to
// signals and systemd notifications.
//
// Signals: SIGTERM/SIGINT close every socket and connection (ingest, metrics),
// drain the frame queue and the deferred windows through final batches,
// commit and publish the alerts, then run() returns 0, all within
// daemon.stop_timeout_s: what is not searched or committed by then is counted
// and logged (docs/reliability.md, "Stopping"). SIGHUP re-reads
// the config file; an invalid file is logged and the running config stays.
#pragma once

#include <string>

namespace gw::daemon {

// Loads the config (throws gw::Error / config::ConfigError) and runs until a
// stop signal. Returns the process exit code.
int run_daemon(const std::string& config_path);

}  // namespace gw::daemon
