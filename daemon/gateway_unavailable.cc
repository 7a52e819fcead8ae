// gaitwatchd --gateway in a build without libnats (CMake found no NATS C
// client): it says so instead of starting.
#include "common/error.h"
#include "daemon/gateway.h"

namespace gw::daemon {

int run_gateway(const std::string&) {
  throw Error("this gaitwatchd was built without libnats (libnats-dev): no JetStream gateway");
}

}  // namespace gw::daemon
