#include "gait/monitor.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <memory>

#include "tests/gait/synthetic_walk.h"

namespace gw::gait {
namespace {

using testing::SyntheticWalk;

constexpr std::uint16_t kPair = 6, kLeft = 2, kRight = 3;

std::map<std::uint16_t, std::vector<FootSource>> devices() {
  std::map<std::uint16_t, std::vector<FootSource>> d;
  d[kPair] = {FootSource{Foot::kLeft, {0}, {}}, FootSource{Foot::kRight, {1}, {}}};
  d[kLeft] = {FootSource{Foot::kLeft, {0}, {}}};
  d[kRight] = {FootSource{Foot::kRight, {0}, {}}};
  return d;
}

FootLoad load_of(float value) {
  FootLoad l;
  l.load = value;
  return l;
}

// Sends the synthetic walk of `w` to `monitor` as wearer 7: from one device
// carrying both feet, or from two insoles whose frames arrive in `frame`
// sample pieces, the right insole's `right_delay` frames behind.
void send(GaitMonitor& monitor, const SyntheticWalk& w, bool two_devices, int frame = 10, int right_delay = 0) {
  const long n = static_cast<long>(w.duration_s * w.rate_hz);
  std::vector<FootLoad> both, left, right;
  std::vector<std::pair<long, std::vector<FootLoad>>> delayed;
  for (long first = 0; first < n; first += frame) {
    both.clear();
    left.clear();
    right.clear();
    for (long s = first; s < std::min(n, first + frame); ++s) {
      const double t = s / w.rate_hz;
      const FootLoad l = load_of(testing::synthetic_load(w, 0, t)), r = load_of(testing::synthetic_load(w, 1, t));
      both.push_back(l);
      both.push_back(r);
      left.push_back(l);
      right.push_back(r);
    }
    const int count = static_cast<int>(left.size());
    if (!two_devices) {
      monitor.on_frame(7, kPair, first / w.rate_hz, w.rate_hz, count, both.data(), 0);
      continue;
    }
    monitor.on_frame(7, kLeft, first / w.rate_hz, w.rate_hz, count, left.data(), 0);
    delayed.emplace_back(first, right);
    if (static_cast<int>(delayed.size()) > right_delay) {
      const auto& [at, loads] = delayed.front();
      monitor.on_frame(7, kRight, at / w.rate_hz, w.rate_hz, static_cast<int>(loads.size()), loads.data(), 0);
      delayed.erase(delayed.begin());
    }
  }
  for (const auto& [at, loads] : delayed)
    monitor.on_frame(7, kRight, at / w.rate_hz, w.rate_hz, static_cast<int>(loads.size()), loads.data(), 0);
}

TEST_CASE("a device's feet come from its kind or its channel names", "[gait]") {
  const auto left = device_feet(sensors::DeviceKind::kPressureInsoleLeft, std::vector<std::string>(99, "p"));
  REQUIRE(left.size() == 1);
  CHECK(left[0].foot == Foot::kLeft);
  CHECK(left[0].cells.size() == 99);
  CHECK(left[0].layout.x.size() == 99);
  const auto pair = device_feet(sensors::DeviceKind::kGeneric,
                                {"R1", "R2", "R3", "R4", "R5", "R6", "R7", "R8", "x", "L1", "L2", "L3", "L4",
                                 "L5", "L6", "L7", "L8"});
  REQUIRE(pair.size() == 2);
  CHECK(pair[0].foot == Foot::kLeft);
  CHECK(pair[0].cells.front() == 9);
  CHECK(pair[1].cells.front() == 0);
  CHECK(device_feet(sensors::DeviceKind::kAccelerometer3, {"x", "y", "z"}).empty());
  CHECK(device_feet(sensors::DeviceKind::kGeneric, {"L1", "L2"}).empty());

  sensors::Frame frame;
  frame.channels = 3;
  frame.samples = 2;
  frame.values = {1, 2, 3, 4, 5, 6};
  std::vector<FootLoad> out;
  reduce_foot_loads({FootSource{Foot::kLeft, {0, 2}, {}}, FootSource{Foot::kRight, {1, 7}, {}}}, frame, out);
  REQUIRE(out.size() == 4);
  CHECK(out[0].load == 4);   // sample 0, left: channels 0 and 2
  CHECK(out[1].load == 2);   // sample 0, right: channel 1 (7 is beyond the frame: zero)
  CHECK(out[2].load == 10);
  CHECK(out[3].load == 5);
}

TEST_CASE("two insoles joined by device time give the strides one device carrying both feet gives", "[gait]") {
  SyntheticWalk w;
  w.duration_s = 150;
  MonitorOptions options;
  options.minute_s = 60;
  GaitMonitor one(options, devices()), two(options, devices());
  send(one, w, false);
  send(two, w, true, 10, 5);  // the right insole half a second behind
  CHECK(two.counters().unpaired_samples == 0);
  CHECK(two.counters().samples == one.counters().samples);
  CHECK(two.counters().strides == one.counters().strides);
  const auto a = one.take_minutes(), b = two.take_minutes();
  // 150 s of 1.1-s strides: two minutes of the left foot's walking.
  REQUIRE(a.size() == 2);
  REQUIRE(b.size() == 2);
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].wearer == 7);
    CHECK(b[i].metrics.strides == a[i].metrics.strides);
    CHECK(b[i].metrics.stride_time_median_s == a[i].metrics.stride_time_median_s);
    CHECK(b[i].t_start == a[i].t_start);
    CHECK(a[i].metrics.walking_s >= 60);
    CHECK(a[i].metrics.stride_time_median_s == Approx(1.1).margin(0.01));
    CHECK(std::isnan(a[i].abnormal_score));  // no library
  }
  CHECK(one.last_minute(7) != nullptr);
  CHECK(one.last_minute(8) == nullptr);
  CHECK(one.take_minutes().empty());
}

TEST_CASE("a foot whose partner insole sends nothing is dropped and counted, not held", "[gait]") {
  SyntheticWalk w;
  w.duration_s = 20;
  GaitMonitor monitor(MonitorOptions{}, devices());
  std::vector<FootLoad> left(100);
  for (int second = 0; second < 20; ++second)
    monitor.on_frame(7, kLeft, second, 100, 100, left.data(), 0);
  // max_join_lag_s = 2: all but the last 2 s (+ one sample) are gone.
  CHECK(monitor.counters().unpaired_samples >= 1700);
  CHECK(monitor.counters().unpaired_samples <= 1800);
  CHECK(monitor.counters().samples == 0);
  CHECK(monitor.counters().strides == 0);
}

TEST_CASE("an abnormal walking bout raises one alert, then none within the cooldown", "[gait]") {
  SyntheticWalk w;
  w.duration_s = 200;
  // The library: this walk's own stride shape as abnormal, another shape
  // (swing far longer) as normal.
  StrideTracker tracker(CycleParams{});
  const std::vector<Stride> own = testing::track(w, tracker);
  SyntheticWalk other = w;
  other.swing_s[0] = other.swing_s[1] = 0.6;
  StrideTracker other_tracker(CycleParams{});
  const std::vector<Stride> normal = testing::track(other, other_tracker);
  AbnormalParams params;
  params.k = 3;
  auto library = std::make_shared<StrideLibrary>(CycleParams{}.curve_points, params);
  for (int i = 0; i < 5; ++i) {
    library->add({own[static_cast<std::size_t>(i)].curve, true, "a"});
    library->add({normal[static_cast<std::size_t>(i)].curve, false, "b"});
  }
  MonitorOptions options;
  options.library = library;
  options.bout_strides = 20;
  options.cooldown_s = 100;
  GaitMonitor monitor(options, devices());
  send(monitor, w, false);
  const auto bouts = monitor.take_abnormal();
  // The first after 20 strides (about 11 s of both feet), the second once
  // 100 s of device time passed.
  REQUIRE(bouts.size() == 2);
  CHECK(bouts[0].wearer == 7);
  CHECK(bouts[0].device == kPair);
  CHECK(bouts[0].strides == 20);
  CHECK(bouts[0].score == Approx(1));
  CHECK(bouts[0].t_end < 15);
  CHECK(bouts[0].t_start < bouts[0].t_end - 9);
  CHECK(bouts[1].t_end - bouts[0].t_end >= 100);
  CHECK(monitor.counters().scored_strides == monitor.counters().strides);

  // Scoring off (a monitor that is behind): strides measured, none scored, no bout.
  GaitMonitor unscored(options, devices());
  unscored.set_scoring(false);
  send(unscored, w, false);
  CHECK(unscored.counters().strides == monitor.counters().strides);
  CHECK(unscored.counters().scored_strides == 0);
  CHECK(unscored.take_abnormal().empty());

  // The normal walk raises none.
  GaitMonitor normal_monitor(options, devices());
  send(normal_monitor, other, false);
  CHECK(normal_monitor.take_abnormal().empty());
  CHECK(normal_monitor.counters().strides > 300);
}

}  // namespace
}  // namespace gw::gait
