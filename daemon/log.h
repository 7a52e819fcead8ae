// Logging: spdlog to stderr in one of two line formats, chosen at start-up.
//   stderr is the journal (systemd's $JOURNAL_STREAM names stderr's device
//   and inode): each line prefixed with its journald priority ("<3>" error
//   ... "<7>" debug) so systemd-journald files it at the right level; no time
//   stamp (the journal stamps every line).
//   otherwise (a terminal, a file): "2026-11-27T15:04:05.123+01:00 INFO text",
//   ISO 8601 local time with its UTC offset, then the level.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include <spdlog/spdlog.h>

namespace gw::daemon {

// Whether stderr is connected to systemd-journald: $JOURNAL_STREAM
// ("DEVICE:INODE", set by systemd for a service's stdout/stderr stream)
// matches fstat(2) of stderr. A child that inherits the variable but writes
// elsewhere is not.
bool stderr_is_journal();

// Installs the stderr logger as spdlog's default, in the format stderr calls
// for (above). Throws gw::Error for an unknown level name (trace, debug, info,
// warn, error).
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
