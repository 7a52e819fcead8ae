// systemd notifications through $NOTIFY_SOCKET (libsystemd's sd_notify); each
// call is a no-op when the daemon does not run under systemd.
#pragma once

#include <chrono>
#include <string>

namespace gw::daemon {

void notify_ready(const std::string& status);
void notify_status(const std::string& status);
void notify_stopping();
void notify_watchdog();
// The interval at which to send WATCHDOG=1: half of systemd's WatchdogSec when
// it set one, else half of `configured_s` (0 = none), in which case it also
// tells systemd that timeout. Returns zero when no watchdog is wanted.
std::chrono::milliseconds watchdog_ping_interval(double configured_s);

}  // namespace gw::daemon
