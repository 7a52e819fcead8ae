#include "common/diagnostics.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace gw {

Diagnostics Diagnostics::read(const Lookup& lookup) {
  Diagnostics d;
  // The switch's value when it is set (and then listed in `set`), else null.
  const auto value_of = [&](const char* name) -> const char* {
    const char* value = lookup(name);
    if (value != nullptr) d.set.push_back(std::string(name) + "=" + value);
    return value;
  };
  if (const char* v = value_of("GW_DAEMON_TICK_LOG")) d.daemon_tick_log = v;
  if (const char* v = value_of("GW_ENGINE_BATCH_LOG")) d.engine_batch_log = v;
  if (value_of("GW_CUDA_STAGE_TIMES") != nullptr) d.cuda_stage_times = true;
  if (const char* v = value_of("GW_CUDA_DTW_PER_LANE")) {
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(v, &end, 10);
    if (end != v && *end == '\0' && errno == 0 && n >= 1 && n <= INT_MAX)
      d.cuda_dtw_candidates_per_lane = static_cast<int>(n);
    else
      d.ignored.push_back(std::string("GW_CUDA_DTW_PER_LANE=") + v + ": not a whole number >= 1");
  }
  return d;
}

const Diagnostics& diagnostics() {
  static const Diagnostics from_environment =
      Diagnostics::read([](const char* name) { return std::getenv(name); });
  return from_environment;
}

DiagnosticLog::DiagnosticLog(const std::string& path, std::string name)
    : name_(std::move(name)), path_(path) {
  if (path.empty()) return;
  file_ = std::fopen(path.c_str(), "a");
  if (file_ == nullptr)
    std::fprintf(stderr, "%s: cannot open '%s' (%s); no lines are written\n", name_.c_str(),
                 path_.c_str(), std::strerror(errno));
}

DiagnosticLog::~DiagnosticLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void DiagnosticLog::write(std::string_view text) {
  if (file_ == nullptr || text.empty()) return;
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size()) close_after_failure("write");
}

void DiagnosticLog::close_after_failure(const char* what) {
  const int error = errno;
  std::fclose(file_);
  file_ = nullptr;
  std::fprintf(stderr, "%s: %s to '%s' failed (%s); no more lines are written\n", name_.c_str(),
               what, path_.c_str(), std::strerror(error));
}

}  // namespace gw
