// The GW_* switches (common/diagnostics.h), read through a lookup over a map
// instead of the process's environment.
#include "common/diagnostics.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "tests/common/temp_dir.h"

namespace {

gw::Diagnostics read_from(const std::map<std::string, std::string>& environment) {
  return gw::Diagnostics::read([&](const char* name) -> const char* {
    const auto it = environment.find(name);
    return it == environment.end() ? nullptr : it->second.c_str();
  });
}

}  // namespace

TEST_CASE("diagnostics: nothing set leaves every switch off", "[diagnostics]") {
  const gw::Diagnostics d = read_from({{"GW_UNRELATED", "1"}});
  CHECK(d.daemon_tick_log.empty());
  CHECK(d.engine_batch_log.empty());
  CHECK_FALSE(d.cuda_stage_times);
  CHECK(d.cuda_dtw_candidates_per_lane == 0);
  CHECK(d.set.empty());
  CHECK(d.ignored.empty());
}

TEST_CASE("diagnostics: each switch sets its field and is listed", "[diagnostics]") {
  const gw::Diagnostics d = read_from({{"GW_DAEMON_TICK_LOG", "/tmp/tick.txt"},
                                       {"GW_ENGINE_BATCH_LOG", "/tmp/batches.txt"},
                                       {"GW_CUDA_STAGE_TIMES", "1"},
                                       {"GW_CUDA_DTW_PER_LANE", "4"}});
  CHECK(d.daemon_tick_log == "/tmp/tick.txt");
  CHECK(d.engine_batch_log == "/tmp/batches.txt");
  CHECK(d.cuda_stage_times);
  CHECK(d.cuda_dtw_candidates_per_lane == 4);
  CHECK(d.set == std::vector<std::string>{"GW_DAEMON_TICK_LOG=/tmp/tick.txt",
                                          "GW_ENGINE_BATCH_LOG=/tmp/batches.txt",
                                          "GW_CUDA_STAGE_TIMES=1", "GW_CUDA_DTW_PER_LANE=4"});
  CHECK(d.ignored.empty());
}

TEST_CASE("diagnostics: a stage-time switch set to any value is on", "[diagnostics]") {
  CHECK(read_from({{"GW_CUDA_STAGE_TIMES", ""}}).cuda_stage_times);
  CHECK(read_from({{"GW_CUDA_STAGE_TIMES", "0"}}).cuda_stage_times);
}

TEST_CASE("diagnostics: a per-lane count that is not a whole number >= 1 is ignored and named",
          "[diagnostics]") {
  for (const char* bad : {"0", "-2", "4x", "", "99999999999"}) {
    INFO("GW_CUDA_DTW_PER_LANE=" << bad);
    const gw::Diagnostics d = read_from({{"GW_CUDA_DTW_PER_LANE", bad}});
    CHECK(d.cuda_dtw_candidates_per_lane == 0);
    REQUIRE(d.ignored.size() == 1);
    CHECK(d.ignored[0].rfind(std::string("GW_CUDA_DTW_PER_LANE=") + bad + ":", 0) == 0);
    CHECK(d.set.size() == 1);
  }
}

TEST_CASE("diagnostics: the process's switches come from the environment, read once",
          "[diagnostics]") {
  // No other test case of this binary calls diagnostics(): this is its first call.
  setenv("GW_CUDA_DTW_PER_LANE", "7", 1);
  const gw::Diagnostics& first = gw::diagnostics();
  CHECK(first.cuda_dtw_candidates_per_lane == 7);
  setenv("GW_CUDA_DTW_PER_LANE", "9", 1);
  CHECK(&gw::diagnostics() == &first);
  CHECK(gw::diagnostics().cuda_dtw_candidates_per_lane == 7);
  unsetenv("GW_CUDA_DTW_PER_LANE");
}

TEST_CASE("DiagnosticLog: lines are appended, and a write that fails closes it and never throws",
          "[diagnostics]") {
  gw::test::TempDir dir("gw_diagnostic_log");
  const std::string path = (dir.path() / "tick.log").string();
  {
    gw::DiagnosticLog log(path, "GW_DAEMON_TICK_LOG");
    REQUIRE(static_cast<bool>(log));
    log.write("one\n");
  }
  {
    gw::DiagnosticLog log(path, "GW_DAEMON_TICK_LOG");
    log.write("two\n");
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == "one\ntwo\n");

  CHECK_FALSE(static_cast<bool>(gw::DiagnosticLog("", "GW_ENGINE_BATCH_LOG")));
  CHECK_FALSE(static_cast<bool>(
      gw::DiagnosticLog((dir.path() / "no" / "such.log").string(), "GW_ENGINE_BATCH_LOG")));

  // A full disk: /dev/full takes the open and refuses every write once the
  // stream's buffer is flushed.
  if (!std::filesystem::exists("/dev/full")) {
    WARN("skipped: no /dev/full here");
    return;
  }
  gw::DiagnosticLog full("/dev/full", "GW_DAEMON_TICK_LOG");
  REQUIRE(static_cast<bool>(full));
  const std::string line(1000, 'x');
  for (int i = 0; i < 1000 && full; ++i) CHECK_NOTHROW(full.write(line + "\n"));
  CHECK_FALSE(static_cast<bool>(full));
  CHECK_NOTHROW(full.write("after\n"));
}
