// gaitwatch subscribe --nats in a build without libnats.
#include "common/error.h"
#include "daemon/cli/cli.h"

namespace gw::cli {

int subscribe_alert_stream(const AlertStreamSubscription&) {
  throw Error("subscribe --nats: this gaitwatch was built without libnats (libnats-dev)");
}

}  // namespace gw::cli
