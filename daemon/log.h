// Logging: spdlog to stderr, each line prefixed with its journald priority
// ("<3>" error ... "<7>" debug) so systemd-journald files it at the right level.
#pragma once

#include <string>

#include <spdlog/spdlog.h>

namespace gw::daemon {

// Installs the stderr logger as spdlog's default. Throws gw::Error for an
// unknown level name (trace, debug, info, warn, error).
void setup_logging(const std::string& level);
void set_log_level(const std::string& level);

}  // namespace gw::daemon
