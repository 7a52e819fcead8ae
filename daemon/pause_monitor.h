// Pauses of the daemon process, seen from inside it. A thread of its own
// sleeps a short period at a time and does nothing else; a wake-up much
// later than due means the host did not run it for that long: every core
// busy (with the daemon's work or another's), a virtual machine held, memory
// reclaim or compaction, or a lock on the process's memory map that page
// faults queue behind. Deadline misses at such a moment have a cause outside
// the tick's own work, and the log line and the counters (stats "process",
// /metrics gaitwatch_process_pauses_total and _pause_seconds_*) say so.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

namespace gw::daemon {

struct PauseCounters {
  std::uint64_t pauses = 0;  // late wake-ups counted
  double total_ms = 0;       // their lateness, summed
  double max_ms = 0;         // the longest one
};

// The bookkeeping alone (no thread, no clock of its own). Not thread-safe.
class PauseTally {
 public:
  explicit PauseTally(std::chrono::milliseconds report_after) : report_after_(report_after) {}

  // A sleep meant to end at `due` ended at `woke`. Returns how late it woke,
  // in ms, when that is `report_after` or more (then counted as a pause);
  // nullopt otherwise.
  std::optional<double> observe(std::chrono::steady_clock::time_point due,
                                std::chrono::steady_clock::time_point woke);

  const PauseCounters& counters() const { return counters_; }

 private:
  std::chrono::milliseconds report_after_;
  PauseCounters counters_;
};

// Runs the sleeping thread ("gw-pause-watch") from construction to
// destruction. A pause logs a warning, at most one line per `log_every`
// (the line counts the pauses it stands for). Thread-safe.
class PauseMonitor {
 public:
  explicit PauseMonitor(std::chrono::milliseconds period = std::chrono::milliseconds(10),
                        std::chrono::milliseconds report_after = std::chrono::milliseconds(50),
                        std::chrono::seconds log_every = std::chrono::seconds(10));
  ~PauseMonitor();
  PauseMonitor(const PauseMonitor&) = delete;
  PauseMonitor& operator=(const PauseMonitor&) = delete;

  PauseCounters counters() const;
  // {"pauses": n, "pause_ms_total": x, "pause_ms_max": y}
  nlohmann::json to_json() const;

 private:
  void run(std::chrono::milliseconds period, std::chrono::seconds log_every);

  mutable std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  PauseTally tally_;
  std::thread thread_;
};

}  // namespace gw::daemon
