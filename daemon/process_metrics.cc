#include "daemon/process_metrics.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace gw::daemon {
namespace {

// The fields of /proc/self/stat after the command name (proc(5): field 3,
// the state, is [0]); empty when unreadable. The name is skipped up to its
// last ')', since it may itself hold spaces and parentheses.
std::vector<std::string> self_stat_fields() {
  std::ifstream in("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(text.substr(close + 1));
  std::vector<std::string> fields;
  for (std::string field; rest >> field;) fields.push_back(field);
  return fields;
}

// The boot time (unix s) from /proc/stat's btime line.
std::optional<double> boot_time() {
  std::ifstream in("/proc/stat");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("btime ", 0) == 0) return std::stod(line.substr(6));
  return std::nullopt;
}

void render(const char* name, const char* type, const char* help,
            const std::optional<double>& value, std::string& out) {
  if (!value) return;
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, *value);
}

}  // namespace

ProcessStats read_process_stats() {
  ProcessStats s;
  // proc(5) fields 14 utime, 15 stime, 22 starttime (clock ticks), 23 vsize
  // (bytes), 24 rss (pages); [0] is field 3.
  const std::vector<std::string> f = self_stat_fields();
  const long ticks = ::sysconf(_SC_CLK_TCK);
  const long page = ::sysconf(_SC_PAGESIZE);
  try {
    if (f.size() > 21 && ticks > 0 && page > 0) {
      s.cpu_seconds = (std::stod(f[11]) + std::stod(f[12])) / static_cast<double>(ticks);
      if (const auto boot = boot_time())
        s.start_time_seconds = *boot + std::stod(f[19]) / static_cast<double>(ticks);
      s.virtual_bytes = std::stod(f[20]);
      s.resident_bytes = std::stod(f[21]) * static_cast<double>(page);
    }
  } catch (const std::exception&) {
    // A malformed /proc: those metrics stay out.
  }
  std::error_code ec;
  std::size_t fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec))
    ++fds;
  if (!ec && fds > 0) s.open_fds = static_cast<double>(fds);
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    s.max_fds = static_cast<double>(limit.rlim_cur);
  return s;
}

void render_process_metrics(const ProcessStats& s, std::string& out) {
  render("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
         s.cpu_seconds, out);
  render("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
         s.resident_bytes, out);
  render("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", s.virtual_bytes,
         out);
  render("process_open_fds", "gauge", "Number of open file descriptors.", s.open_fds, out);
  render("process_max_fds", "gauge", "Maximum number of open file descriptors.", s.max_fds, out);
  render("process_start_time_seconds", "gauge",
         "Start time of the process since unix epoch in seconds.", s.start_time_seconds, out);
}

}  // namespace gw::daemon
