#include "daemon/pause_monitor.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/thread_name.h"

namespace gw::daemon {

std::optional<double> PauseTally::observe(std::chrono::steady_clock::time_point due,
                                          std::chrono::steady_clock::time_point woke) {
  if (woke - due < report_after_) return std::nullopt;
  const double late_ms = std::chrono::duration<double, std::milli>(woke - due).count();
  ++counters_.pauses;
  counters_.total_ms += late_ms;
  if (late_ms > counters_.max_ms) counters_.max_ms = late_ms;
  return late_ms;
}

PauseMonitor::PauseMonitor(std::chrono::milliseconds period, std::chrono::milliseconds report_after,
                           std::chrono::seconds log_every)
    : tally_(report_after) {
  thread_ = std::thread([this, period, log_every] { run(period, log_every); });
}

PauseMonitor::~PauseMonitor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

PauseCounters PauseMonitor::counters() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return tally_.counters();
}

nlohmann::json PauseMonitor::to_json() const {
  const PauseCounters c = counters();
  return {{"pauses", c.pauses}, {"pause_ms_total", c.total_ms}, {"pause_ms_max", c.max_ms}};
}

void PauseMonitor::run(std::chrono::milliseconds period, std::chrono::seconds log_every) {
  set_thread_name("gw-pause-watch");
  using Clock = std::chrono::steady_clock;
  std::unique_lock<std::mutex> lock(mutex_);
  std::optional<Clock::time_point> last_line;
  std::uint64_t unlogged = 0;
  double unlogged_max_ms = 0;
  // Each sleep is due a period after the previous wake-up, not after the
  // bookkeeping and logging that followed it: a pause that falls there is
  // counted too.
  Clock::time_point due = Clock::now() + period;
  while (!stopping_) {
    if (stop_cv_.wait_until(lock, due, [this] { return stopping_; })) break;
    const Clock::time_point woke = Clock::now();
    const Clock::time_point planned = due;
    due = woke + period;
    const std::optional<double> late_ms = tally_.observe(planned, woke);
    if (!late_ms) continue;
    ++unlogged;
    unlogged_max_ms = std::max(unlogged_max_ms, *late_ms);
    if (last_line && woke - *last_line < log_every) continue;
    last_line = woke;
    // Logged without the lock: counters() is read on the pipeline thread.
    lock.unlock();
    spdlog::warn("process paused: a {}-ms sleep woke {:.0f} ms late ({} such pauses since the last line, the "
                 "longest {:.0f} ms): the host did not run the daemon's pause watch meanwhile (every core busy with "
                 "this work or another's, a held virtual machine, memory reclaim, or a lock on the process's "
                 "memory map)",
                 period.count(), *late_ms, unlogged, unlogged_max_ms);
    lock.lock();
    unlogged = 0;
    unlogged_max_ms = 0;
  }
}

}  // namespace gw::daemon
