#include "gait/hotspot_monitor.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "sensors/recording.h"

namespace gw::gait {
namespace {

// The gaitpdb pair as the daemon's device: channels L1..L8, R1..R8.
struct Walk {
  std::vector<std::string> channels;
  std::vector<FootSource> feet;
  double rate_hz = 100;
  std::size_t samples = 0;
  std::vector<float> values;  // sample-major, channels.size() per sample
};

constexpr int kR6 = 8 + 5;

// GaCo01_01 with `extra` added to R6 while the right foot is loaded, from
// `from_s` to `to_s`.
Walk planted_walk(double from_s, double to_s, float extra) {
  sensors::Recording rec =
      sensors::read_gaitpdb(std::string(GW_DATA_DIR) + "/gaitpdb/GaCo01_01.txt");
  Walk w;
  for (int f = 0; f < 2; ++f)
    for (int i = 1; i <= 8; ++i) w.channels.push_back((f ? "R" : "L") + std::to_string(i));
  w.feet = device_feet(sensors::DeviceKind::kGeneric, w.channels);
  REQUIRE(w.feet.size() == 2);
  w.rate_hz = rec.sample_rate_hz;
  w.samples = rec.samples();
  for (std::size_t s = 0; s < w.samples; ++s) {
    const double t = static_cast<double>(s) / w.rate_hz;
    float right = 0;
    for (int c = 8; c < 16; ++c) right += rec.at(s, static_cast<std::size_t>(c));
    for (int c = 0; c < 16; ++c) {
      float v = rec.at(s, static_cast<std::size_t>(c));
      if (c == kR6 && t >= from_s && t < to_s && right > 50) v += extra;
      w.values.push_back(v);
    }
  }
  return w;
}

// The walk cut into frames of `frame_samples`, each reduced as the ingest
// threads do and fed to `monitor` (device 6), device time from `t0_s`.
void feed(HotspotMonitor& monitor, const Walk& w, std::uint32_t wearer, double t0_s,
          double arrival_s, std::size_t frame_samples = 10) {
  std::vector<FootLoad> loads;
  std::vector<float> pressures;
  for (std::size_t first = 0; first + frame_samples <= w.samples; first += frame_samples) {
    sensors::Frame frame;
    frame.channels = static_cast<std::uint16_t>(w.channels.size());
    frame.samples = static_cast<std::uint16_t>(frame_samples);
    frame.values.assign(
        w.values.begin() + static_cast<long>(first * w.channels.size()),
        w.values.begin() + static_cast<long>((first + frame_samples) * w.channels.size()));
    reduce_foot_loads(w.feet, frame, loads);
    reduce_region_pressures(w.feet, frame, pressures);
    REQUIRE(pressures.size() == frame_samples * region_count(w.feet));
    monitor.on_frame(wearer, 6, t0_s + static_cast<double>(first) / w.rate_hz, w.rate_hz,
                     static_cast<int>(frame_samples), loads.data(), pressures.data(), arrival_s);
  }
}

std::map<std::uint16_t, HotspotSource> device_6(const Walk& w) {
  return {{6, HotspotSource{w.feet, hotspot_defaults_force_insole()}}};
}

}  // namespace

TEST_CASE("region pressures: each region's largest cell, per sample and foot", "[gait]") {
  const std::vector<std::string> channels = {"L1", "L2", "L3", "L4", "L5", "L6", "L7", "L8",
                                             "R1", "R2", "R3", "R4", "R5", "R6", "R7", "R8"};
  const std::vector<FootSource> feet = device_feet(sensors::DeviceKind::kGeneric, channels);
  REQUIRE(region_count(feet) == 16);
  sensors::Frame frame;
  frame.channels = 16;
  frame.samples = 2;
  for (int i = 0; i < 32; ++i) frame.values.push_back(static_cast<float>(i));
  frame.values[3] = -7;  // counts as zero
  std::vector<float> out;
  reduce_region_pressures(feet, frame, out);
  REQUIRE(out.size() == 32);
  for (int i = 0; i < 32; ++i)
    CHECK(out[static_cast<std::size_t>(i)] == (i == 3 ? 0.0f : static_cast<float>(i)));

  // The 99-cell insole: a region is the largest of its block.
  const std::vector<FootSource> grid =
      device_feet(sensors::DeviceKind::kPressureInsoleLeft, std::vector<std::string>(99, "p"));
  REQUIRE(grid.size() == 1);
  CHECK(grid[0].form == InsoleForm::kPressureGrid);
  const std::vector<InsoleRegion> regions = pressure_grid_regions();
  sensors::Frame cells;
  cells.channels = 99;
  cells.samples = 1;
  cells.values.assign(99, 1.0f);
  cells.values[static_cast<std::size_t>(regions[4].cells.back())] = 9;
  reduce_region_pressures(grid, cells, out);
  REQUIRE(out.size() == regions.size());
  for (std::size_t r = 0; r < regions.size(); ++r) CHECK(out[r] == (r == 4 ? 9.0f : 1.0f));
}

TEST_CASE("the hotspot monitor fed reduced frames finds what a tracker fed the cells finds",
          "[gait]") {
  const Walk w = planted_walk(20, 65, 600);
  // The reference: one tracker per foot, fed every sample's cells.
  std::vector<HotspotEvent> expected;
  for (const FootSource& foot : w.feet) {
    HotspotTracker tracker(foot.foot, insole_regions(foot.form), hotspot_defaults_force_insole(),
                           w.rate_hz);
    std::vector<float> cells(8);
    for (std::size_t s = 0; s < w.samples; ++s) {
      for (std::size_t c = 0; c < 8; ++c)
        cells[c] = w.values[s * 16 + static_cast<std::size_t>(foot.cells[c])];
      tracker.push(static_cast<double>(s) / w.rate_hz, cells.data(), 8, expected);
    }
  }
  REQUIRE(expected.size() == 1);
  CHECK(expected[0].region == "forefoot_lateral");
  CHECK(expected[0].foot == Foot::kRight);

  HotspotMonitor monitor(device_6(w));
  CHECK(monitor.watches(6));
  CHECK_FALSE(monitor.watches(5));
  feed(monitor, w, 3, 0, 1000);
  const std::vector<HotspotAlarm> alarms = monitor.take_alarms();
  REQUIRE(alarms.size() == 1);
  const HotspotAlarm& a = alarms[0];
  CHECK(a.wearer == 3);
  CHECK(a.device == 6);
  CHECK(a.arrival_s == 1000);
  CHECK(a.event.region == expected[0].region);
  CHECK(a.event.foot == expected[0].foot);
  CHECK(a.event.start_s == Approx(expected[0].start_s));
  CHECK(a.event.t_s == Approx(expected[0].t_s));
  CHECK(a.event.peak == expected[0].peak);
  CHECK(a.event.pressure_time_integral == Approx(expected[0].pressure_time_integral));
  const HotspotCounters c = monitor.counters();
  CHECK(c.events == 1);
  CHECK(c.samples == 2 * (w.samples / 10 * 10));
  CHECK(c.trackers == 2);
  CHECK(monitor.take_alarms().empty());
}

TEST_CASE(
    "the hotspot monitor: device time going back resets a stream's trackers, idle streams are "
    "dropped",
    "[gait]") {
  const Walk w = planted_walk(20, 65, 600);
  HotspotMonitor monitor(device_6(w));
  feed(monitor, w, 3, 0, 1000);
  CHECK(monitor.take_alarms().size() == 1);
  // The device restarted: the same walk again from device time 0. Without
  // the reset the cooldown (device time) would hold the second event back.
  feed(monitor, w, 3, 0, 1001);
  CHECK(monitor.take_alarms().size() == 1);
  CHECK(monitor.counters().resets == 1);
  // Carried on in device time within the cooldown: no new event.
  feed(monitor, w, 3, 200, 1002);
  CHECK(monitor.take_alarms().empty());

  // Another wearer, after wearer 3 has been silent for longer than the
  // cooldown and the peak window: wearer 3's trackers are gone.
  const double later = 1002 + hotspot_defaults_force_insole().cooldown_s + 61;
  feed(monitor, w, 4, 0, later);
  CHECK(monitor.counters().trackers == 2);
  CHECK(monitor.take_alarms().size() == 1);
}

}  // namespace gw::gait
