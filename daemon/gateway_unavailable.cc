// gaitwatchd --gateway in a build without libnats (CMake found no NATS C
// client): it says so instead of starting.
#include "common/error.h"
#include "daemon/gateway.h"

namespace gw::daemon {
namespace {
constexpr const char* kNoGateway = "this gaitwatchd was built without libnats (libnats-dev): no JetStream gateway";
}  // namespace

void require_gateway_config(const config::Config&, const std::string&) { throw Error(kNoGateway); }

int run_gateway(const std::string&) { throw Error(kNoGateway); }

}  // namespace gw::daemon
