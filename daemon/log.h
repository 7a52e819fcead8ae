// Logging: spdlog to stderr, each line prefixed with its journald priority
// ("<3>" error ... "<7>" debug) so systemd-journald files it at the right level.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include <spdlog/spdlog.h>

namespace gw::daemon {

// Installs the stderr logger as spdlog's default. Throws gw::Error for an
// unknown level name (trace, debug, info, warn, error).
void setup_logging(const std::string& level);
void set_log_level(const std::string& level);

// Paces the log line of one kind of resource trouble (refused streams,
// refused connections, failed accepts...): at most one line per interval,
// saying how many events came since the line before, so that a flood is
// visible without flooding the journal. Thread-safe.
class LogThrottle {
 public:
  explicit LogThrottle(std::chrono::steady_clock::duration interval = std::chrono::seconds(10))
      : interval_(interval) {}
  // `total`: the kind's counter now (events so far). Returns the events
  // since the last line when one is due now (some came and the interval has
  // passed since the last line), nullopt otherwise; a caller that gets a
  // value logs its line.
  std::optional<std::uint64_t> due(std::uint64_t total);

 private:
  std::mutex mu_;
  std::chrono::steady_clock::duration interval_;
  std::chrono::steady_clock::time_point last_line_{};
  bool logged_ = false;
  std::uint64_t logged_total_ = 0;
};

}  // namespace gw::daemon
