#include "daemon/log.h"

#include <memory>

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

spdlog::level::level_enum parse_level(const std::string& level) {
  if (level == "trace") return spdlog::level::trace;
  if (level == "debug") return spdlog::level::debug;
  if (level == "info") return spdlog::level::info;
  if (level == "warn") return spdlog::level::warn;
  if (level == "error") return spdlog::level::err;
  throw Error("unknown log level '" + level + "' (trace, debug, info, warn, error)");
}

}  // namespace

void setup_logging(const std::string& level) {
  auto logger = std::make_shared<spdlog::logger>(
      "gaitwatchd", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<JournalPriorityFlag>('*').set_pattern("%*%v");
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
