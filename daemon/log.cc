#include "daemon/log.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include "common/error.h"

namespace gw::daemon {
namespace {

// sd-daemon(3) priority prefix for a spdlog level.
class JournalPriorityFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    static constexpr const char* kPrefix[] = {"<7>", "<7>", "<6>", "<4>", "<3>", "<2>", "<6>"};
    const char* prefix = kPrefix[static_cast<int>(msg.level)];
    dest.append(prefix, prefix + 3);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JournalPriorityFlag>();
  }
};

// The level in capitals, as syslog-style tools show it.
class LevelNameFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    static constexpr const char* kName[] = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "CRIT", "INFO"};
    const std::string_view name = kName[static_cast<int>(msg.level)];
    dest.append(name.data(), name.data() + name.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<LevelNameFlag>();
  }
};

spdlog::level::level_enum parse_level(const std::string& level) {
  if (level == "trace") return spdlog::level::trace;
  if (level == "debug") return spdlog::level::debug;
  if (level == "info") return spdlog::level::info;
  if (level == "warn") return spdlog::level::warn;
  if (level == "error") return spdlog::level::err;
  throw Error("unknown log level '" + level + "' (trace, debug, info, warn, error)");
}

}  // namespace

bool stderr_is_journal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (!stream) return false;
  unsigned long long device = 0, inode = 0;
  if (std::sscanf(stream, "%llu:%llu", &device, &inode) != 2) return false;
  struct stat st {};
  if (::fstat(STDERR_FILENO, &st) != 0) return false;
  return static_cast<unsigned long long>(st.st_dev) == device &&
         static_cast<unsigned long long>(st.st_ino) == inode;
}

void setup_logging(const std::string& level) {
  auto logger = std::make_shared<spdlog::logger>(
      "gaitwatchd", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  if (stderr_is_journal())
    formatter->add_flag<JournalPriorityFlag>('*').set_pattern("%*%v");
  else
    formatter->add_flag<LevelNameFlag>('*').set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %* %v");
  logger->set_formatter(std::move(formatter));
  logger->set_level(parse_level(level));
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
}

void set_log_level(const std::string& level) { spdlog::set_level(parse_level(level)); }

std::optional<std::uint64_t> LogThrottle::due(std::uint64_t total) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  if (total <= logged_total_ || (logged_ && now - last_line_ < interval_)) return std::nullopt;
  const std::uint64_t since = total - logged_total_;
  logged_total_ = total;
  last_line_ = now;
  logged_ = true;
  return since;
}

}  // namespace gw::daemon
