// Process metrics of the running daemon as Prometheus client libraries name
// them (process_cpu_seconds_total, process_resident_memory_bytes, ...), read
// from /proc/self at each scrape. Linux only: elsewhere, and for any file
// that cannot be read, the metric is left out. Safe from any thread.
#pragma once

#include <optional>
#include <string>

namespace gw::daemon {

struct ProcessStats {
  std::optional<double> cpu_seconds;  // user + system
  std::optional<double> resident_bytes;
  std::optional<double> virtual_bytes;
  std::optional<double> open_fds;
  std::optional<double> max_fds;             // soft RLIMIT_NOFILE; absent when unlimited
  std::optional<double> start_time_seconds;  // unix time
};

ProcessStats read_process_stats();

// Appends the present ones (HELP, TYPE, sample) to `out`.
void render_process_metrics(const ProcessStats& stats, std::string& out);

}  // namespace gw::daemon
