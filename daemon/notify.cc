#include "daemon/notify.h"

#include <cstdint>

#include <systemd/sd-daemon.h>

namespace gw::daemon {

void notify_ready(const std::string& status) {
  sd_notify(0, ("READY=1\nSTATUS=" + status).c_str());
}
void notify_status(const std::string& status) { sd_notify(0, ("STATUS=" + status).c_str()); }
void notify_stopping() { sd_notify(0, "STOPPING=1\nSTATUS=draining queues"); }
void notify_watchdog() { sd_notify(0, "WATCHDOG=1"); }

std::chrono::milliseconds watchdog_ping_interval(double configured_s) {
  std::uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0)
    return std::chrono::milliseconds(usec / 2000);
  if (configured_s <= 0) return std::chrono::milliseconds(0);
  const auto timeout_us = static_cast<std::uint64_t>(configured_s * 1e6);
  sd_notify(0, ("WATCHDOG_USEC=" + std::to_string(timeout_us)).c_str());
  return std::chrono::milliseconds(timeout_us / 2000);
}

}  // namespace gw::daemon
