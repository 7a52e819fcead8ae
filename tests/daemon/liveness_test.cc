// The sensor liveness state machine on a stepped clock: online -> stale ->
// offline (reported once per silence) -> recovery; a restart from persisted
// last frames; the stream's sample count.
#include <catch2/catch.hpp>

#include "daemon/liveness.h"

using gw::daemon::DeviceLiveness;
using gw::daemon::Liveness;
using gw::daemon::LivenessSettings;
using gw::daemon::LivenessTracker;

namespace {

constexpr double kStart = 1'000'000;  // unix s of the tracker's start
const LivenessSettings kSettings{/*stale_after_s=*/5, /*offline_after_s=*/30, /*stream_idle_s=*/600};

const DeviceLiveness& device(const LivenessTracker& t, std::uint32_t wearer, std::uint16_t dev) {
  return t.devices().at({wearer, dev});
}

// One frame of 10 samples at 100 Hz whose first sample is at device time `t0`.
auto frame(LivenessTracker& t, std::uint32_t wearer, std::uint16_t dev, double arrival,
           double t0 = 50) {
  return t.on_frame(wearer, dev, arrival, t0, 10, 100);
}

}  // namespace

TEST_CASE("a silent device goes online, stale, offline, is reported once and recovers",
          "[liveness]") {
  LivenessTracker t(kSettings, kStart);
  CHECK_FALSE(frame(t, 7, 1, kStart + 1).has_value());
  const DeviceLiveness& d = device(t, 7, 1);
  CHECK(d.last_device_time == Approx(50.09));
  CHECK(d.last_index == 9);

  CHECK(t.state(d, kStart + 1 + 4.9) == Liveness::kOnline);
  CHECK(t.state(d, kStart + 1 + 5) == Liveness::kStale);
  CHECK(t.check(kStart + 1 + 29.9).empty());
  CHECK(t.state(d, kStart + 1 + 29.9) == Liveness::kStale);

  const auto offline = t.check(kStart + 1 + 30);
  REQUIRE(offline.size() == 1);
  CHECK(offline[0]->wearer == 7);
  CHECK(offline[0]->device == 1);
  CHECK(t.state(d, kStart + 1 + 30) == Liveness::kOffline);
  CHECK(t.check(kStart + 1 + 31).empty());  // one report per silence
  CHECK(t.check(kStart + 1 + 300).empty());
  t.mark_alerted(7, 1, kStart + 1 + 30);

  const auto recovery = frame(t, 7, 1, kStart + 101, 150);
  REQUIRE(recovery.has_value());
  CHECK(recovery->silent_s == Approx(100));
  CHECK(recovery->offline_since == Approx(kStart + 31));
  CHECK(t.state(d, kStart + 101) == Liveness::kOnline);
  CHECK(d.last_index == 19);  // the stream goes on: the engine kept it
  CHECK_FALSE(frame(t, 7, 1, kStart + 102, 151).has_value());

  // The next silence is reported again.
  REQUIRE(t.check(kStart + 102 + 30).size() == 1);
}

TEST_CASE("a device reported offline without an alert recovers without a recovery",
          "[liveness]") {
  // What an inactive wearer's device (or offline_alerts: false) goes through:
  // the caller does not mark it alerted.
  LivenessTracker t(kSettings, kStart);
  frame(t, 3, 2, kStart);
  REQUIRE(t.check(kStart + 30).size() == 1);
  CHECK(t.state(device(t, 3, 2), kStart + 31) == Liveness::kOffline);
  CHECK_FALSE(frame(t, 3, 2, kStart + 40).has_value());
  CHECK(t.state(device(t, 3, 2), kStart + 40) == Liveness::kOnline);
}

TEST_CASE("devices are counted by state and each has its own silence", "[liveness]") {
  LivenessTracker t(kSettings, kStart);
  frame(t, 1, 1, kStart);
  frame(t, 1, 2, kStart + 10);
  frame(t, 2, 1, kStart + 27);
  const auto counts = t.count_by_state(kStart + 31);
  CHECK(counts[static_cast<int>(Liveness::kOnline)] == 1);   // 2/1: 4 s
  CHECK(counts[static_cast<int>(Liveness::kStale)] == 1);    // 1/2: 21 s
  CHECK(counts[static_cast<int>(Liveness::kOffline)] == 1);  // 1/1: 31 s
  const auto offline = t.check(kStart + 31);
  REQUIRE(offline.size() == 1);
  CHECK(offline[0]->device == 1);
  CHECK(offline[0]->wearer == 1);
}

TEST_CASE("after a restart a silent device goes offline offline_after_s after the start",
          "[liveness]") {
  LivenessTracker before(kSettings, kStart);
  frame(before, 7, 1, kStart + 1, 80);
  frame(before, 8, 1, kStart + 2, 90);
  REQUIRE(before.check(kStart + 40).size() == 2);
  before.mark_alerted(8, 1, kStart + 40);  // wearer 8's alert stands at the stop
  const auto persisted = before.take_changed();
  REQUIRE(persisted.size() == 2);
  CHECK(before.take_changed().empty());  // nothing changed since

  // The daemon comes back an hour later; nothing has come since.
  const double restart = kStart + 3600;
  LivenessTracker after(kSettings, restart);
  after.restore(persisted);
  const DeviceLiveness& seven = device(after, 7, 1);
  CHECK(seven.last_device_time == Approx(80.09));
  CHECK(after.state(seven, restart + 1) == Liveness::kOnline);  // silence counts from the start
  CHECK(after.state(seven, restart + 5) == Liveness::kStale);
  CHECK(after.check(restart + 29).empty());
  const auto offline = after.check(restart + 30);
  REQUIRE(offline.size() == 1);  // wearer 8's silence was reported before the stop
  CHECK(offline[0]->wearer == 7);
  CHECK(offline[0]->last_index == 9);  // the last sample before the stop
  CHECK(after.state(device(after, 8, 1), restart) == Liveness::kOffline);

  // Wearer 8's device sends again: recovery of the alert raised before the stop,
  // and its samples count from 0 in the engine's new stream.
  const auto recovery = frame(after, 8, 1, restart + 100, 5000);
  REQUIRE(recovery.has_value());
  CHECK(recovery->offline_since == Approx(kStart + 40));
  CHECK(device(after, 8, 1).last_index == 9);
}

TEST_CASE("a stream the engine dropped counts its samples from 0 again", "[liveness]") {
  LivenessSettings settings = kSettings;
  settings.stream_idle_s = 60;
  LivenessTracker t(settings, kStart);
  frame(t, 1, 1, kStart);
  frame(t, 1, 1, kStart + 1);
  CHECK(device(t, 1, 1).last_index == 19);
  frame(t, 1, 1, kStart + 1 + 59);
  CHECK(device(t, 1, 1).last_index == 29);
  frame(t, 1, 1, kStart + 1 + 59 + 60);
  CHECK(device(t, 1, 1).last_index == 9);
}

TEST_CASE("new settings apply to the next check, and a reported device stays offline",
          "[liveness]") {
  LivenessTracker t(kSettings, kStart);
  frame(t, 1, 1, kStart);
  frame(t, 2, 1, kStart + 20);
  REQUIRE(t.check(kStart + 30).size() == 1);
  LivenessSettings longer = kSettings;
  longer.offline_after_s = 120;
  t.set_settings(longer);
  CHECK(t.state(device(t, 1, 1), kStart + 31) == Liveness::kOffline);
  CHECK(t.check(kStart + 60).empty());  // device 2/1: 40 s, below the new limit
  CHECK(t.state(device(t, 2, 1), kStart + 60) == Liveness::kStale);
}
