// gaitwatchd --gateway: a base station's side of the JetStream frame path
// (docs/scale.md). It takes frames as the daemon does (daemon/ingest.h: UDP
// and TCP, the same decoding, admission and profile checks, counted the same
// way) and publishes each accepted frame, re-encoded without its MAC (the
// gateway verified it), to the config's `nats:` stream on
// `<frames_subject>.<partition>.<wearer>` (cluster/frame_publisher.h). It
// detects nothing and stores nothing.
//
// It logs "gaitwatchd gateway ready" with its ports and the stream once it
// takes frames (and tells systemd READY=1), its counters every 10 s (and
// systemd its STATUS), pings systemd's watchdog while its publishing loop
// turns (systemd/gaitwatch-gateway.service), and runs until SIGTERM or SIGINT;
// then it stops taking frames, publishes what was queued, waits up to 5 s
// for the acknowledgements and prints its final counters as one JSON line on
// standard output: {"gateway": {"ingest": {...}, "publisher": {published,
// acked, failed, dropped, pending}}}.
#pragma once

#include <string>

#include "config/config.h"

namespace gw::daemon {

// Throws gw::Error naming `config_path` when `config` cannot run a gateway:
// it has no `nats:` section. `gaitwatchd --gateway --check-config` and
// run_gateway share it.
void require_gateway_config(const config::Config& config, const std::string& config_path);

// Returns the exit code: 0 after a clean stop. Throws gw::Error (an invalid
// config, a config without `nats:`, a port in use, NATS or the stream not
// reachable), and when built without libnats.
int run_gateway(const std::string& config_path);

}  // namespace gw::daemon
