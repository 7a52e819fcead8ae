// The JetStream paths in a build without libnats (CMake found no NATS C
// client): a config that asks for them is refused with the reason.
#include "common/error.h"
#include "daemon/nats_paths.h"

namespace gw::daemon {

std::unique_ptr<StreamFrameSource> make_stream_frame_source(const config::NatsConfig&, Ingest&) {
  throw Error("ingest.nats: this gaitwatchd was built without libnats (libnats-dev)");
}

std::unique_ptr<StreamAlertOutput> make_stream_alert_output(const config::NatsConfig& nats, double) {
  if (!nats.enabled || nats.alerts_stream.empty()) return nullptr;
  throw Error("nats.alerts_stream: this gaitwatchd was built without libnats (libnats-dev); set it to \"\"");
}

}  // namespace gw::daemon
