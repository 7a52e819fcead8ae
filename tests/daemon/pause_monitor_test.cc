// The pause monitor's bookkeeping on a stepped clock (daemon/pause_monitor.h):
// only wake-ups at least the threshold late count, their lateness adds up
// and the longest is kept. The thread itself is exercised on the real
// daemon, held still with SIGSTOP (metrics_process_test.cc).
#include <catch2/catch.hpp>

#include "daemon/pause_monitor.h"

using gw::daemon::PauseTally;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

TEST_CASE("PauseTally counts only wake-ups at least the threshold late", "[daemon]") {
  PauseTally tally(milliseconds(50));
  const Clock::time_point due = Clock::time_point{} + std::chrono::seconds(100);

  CHECK_FALSE(tally.observe(due, due));
  CHECK_FALSE(tally.observe(due, due - milliseconds(3)));  // woke early
  CHECK_FALSE(tally.observe(due, due + milliseconds(49)));
  CHECK(tally.counters().pauses == 0);
  CHECK(tally.counters().total_ms == 0);

  const auto first = tally.observe(due, due + milliseconds(50));
  REQUIRE(first);
  CHECK(*first == Approx(50));
  const auto second = tally.observe(due, due + milliseconds(400));
  REQUIRE(second);
  CHECK(*second == Approx(400));
  CHECK_FALSE(tally.observe(due, due + milliseconds(10)));
  const auto third = tally.observe(due, due + milliseconds(120));
  REQUIRE(third);

  CHECK(tally.counters().pauses == 3);
  CHECK(tally.counters().total_ms == Approx(570));
  CHECK(tally.counters().max_ms == Approx(400));
}

TEST_CASE("PauseMonitor starts at zero and reports its counters as JSON", "[daemon]") {
  const gw::daemon::PauseMonitor monitor(milliseconds(5), milliseconds(1000));
  const nlohmann::json counters = monitor.to_json();
  CHECK(counters["pauses"] == 0);
  CHECK(counters["pause_ms_total"] == 0.0);
  CHECK(counters["pause_ms_max"] == 0.0);
}
