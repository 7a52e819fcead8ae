// gaitwatchd --gateway: a base station's side of the JetStream frame path
// (docs/scale.md). It takes frames as the daemon does (daemon/ingest.h: UDP
// and TCP, the same decoding, admission and profile checks, counted the same
// way) and publishes each accepted frame, re-encoded without its MAC (the
// gateway verified it), to the config's `nats:` stream on
// `<frames_subject>.<partition>.<wearer>` (cluster/frame_publisher.h). It
// detects nothing and stores nothing.
//
// It logs "gaitwatchd gateway ready" with its ports and the stream once it
// takes frames, its counters every 10 s, and runs until SIGTERM or SIGINT;
// then it stops taking frames, publishes what was queued, waits up to 5 s
// for the acknowledgements and prints its final counters as one JSON line on
// standard output: {"gateway": {"ingest": {...}, "publisher": {published,
// acked, failed, dropped, pending}}}.
#pragma once

#include <string>

namespace gw::daemon {

// Returns the exit code: 0 after a clean stop. Throws gw::Error (an invalid
// config, a config without `nats:`, a port in use, NATS or the stream not
// reachable), and when built without libnats.
int run_gateway(const std::string& config_path);

}  // namespace gw::daemon
