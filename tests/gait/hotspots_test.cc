#include "gait/hotspots.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "gait/walk.h"
#include "sensors/recording.h"
#include "tests/common/sanitized.h"
#include "sensors/synthetic.h"
#include "tests/gait/bundled_walks.h"

namespace gw::gait {
namespace {

// Both feet's cells of a recording, foot-major and contiguous per sample.
struct FootFrames {
  double rate_hz = 100;
  int count = 0;                     // cells per foot
  std::vector<double> t_s;
  std::vector<float> cells[2];       // cells[f][sample * count + cell]
  std::size_t samples() const { return t_s.size(); }
  float* frame(int f, std::size_t sample) { return &cells[f][sample * count]; }
};

FootFrames foot_frames(const sensors::Recording& rec) {
  const std::vector<FootSource> feet = recording_feet(rec.channel_names);
  FootFrames out;
  out.rate_hz = rec.sample_rate_hz;
  out.count = static_cast<int>(feet.front().cells.size());
  out.t_s = rec.time_s;
  for (const FootSource& foot : feet) {
    const int f = static_cast<int>(foot.foot);
    for (std::size_t s = 0; s < rec.samples(); ++s)
      for (int channel : foot.cells) out.cells[f].push_back(rec.at(s, static_cast<std::size_t>(channel)));
  }
  return out;
}

std::string walk_path(const std::string& name) { return std::string(GW_DATA_DIR) + "/gaitpdb/" + name; }

std::vector<InsoleRegion> regions_for(const FootFrames& frames) {
  return frames.count == 8 ? force_insole_regions() : pressure_grid_regions();
}
HotspotParams defaults_for(const FootFrames& frames) {
  return frames.count == 8 ? hotspot_defaults_force_insole() : hotspot_defaults_pressure_insole();
}

std::vector<HotspotEvent> track(FootFrames& frames, const HotspotParams& params, int only_foot = -1) {
  std::vector<HotspotEvent> events;
  for (int f = 0; f < 2; ++f) {
    if (only_foot >= 0 && f != only_foot) continue;
    HotspotTracker tracker(static_cast<Foot>(f), regions_for(frames), params, frames.rate_hz);
    for (std::size_t s = 0; s < frames.samples(); ++s)
      tracker.push(frames.t_s[s], frames.frame(f, s), frames.count, events);
  }
  return events;
}

int region_index(const std::vector<InsoleRegion>& regions, const std::string& name) {
  for (std::size_t r = 0; r < regions.size(); ++r)
    if (regions[r].name == name) return static_cast<int>(r);
  FAIL("no region " << name);
  return -1;
}

// Adds `extra` to `cells` of foot `f` in [from_s, to_s) while that foot is in
// stance (its load above 30 % of its largest in the walk): a hot spot of the
// insole or the foot that loads only while the foot is down.
void plant(FootFrames& frames, int f, const std::vector<int>& cells, double from_s, double to_s, float extra) {
  std::vector<double> load(frames.samples());
  for (std::size_t s = 0; s < frames.samples(); ++s) {
    const float* frame = frames.frame(f, s);
    for (int c = 0; c < frames.count; ++c) load[s] += std::max(0.0f, frame[c]);
  }
  const double stance_level = 0.3 * *std::max_element(load.begin(), load.end());
  for (std::size_t s = 0; s < frames.samples(); ++s) {
    if (frames.t_s[s] < from_s || frames.t_s[s] >= to_s || load[s] < stance_level) continue;
    for (int c : cells) frames.frame(f, s)[c] += extra;
  }
}

// The region's largest value over the whole walk of foot f.
float region_max(FootFrames& frames, int f, const std::vector<int>& cells) {
  float out = 0;
  for (std::size_t s = 0; s < frames.samples(); ++s)
    for (int c : cells) out = std::max(out, frames.frame(f, s)[c]);
  return out;
}

// The planted-hotspot checks on one form of a walk: `cells` of `region` on
// the right foot, planted from 40 s.
void check_planted_hotspot(const FootFrames& walk, const std::string& region, const std::vector<int>& cells) {
  const HotspotParams params = defaults_for(walk);
  const auto threshold = static_cast<float>(params.threshold);
  const double from_s = 40, duration_s = params.min_duration_s + 15;
  constexpr int kRight = 1;

  SECTION("a hotspot above the threshold for longer than the minimum raises one event") {
    FootFrames frames = walk;
    plant(frames, kRight, cells, from_s, from_s + duration_s, threshold + 1);
    const std::vector<HotspotEvent> events = track(frames, params);
    REQUIRE(events.size() == 1);
    const HotspotEvent& e = events[0];
    CHECK(e.foot == Foot::kRight);
    CHECK(e.region == region);
    // The first stance after the planting starts, within one stride.
    CHECK(e.start_s >= from_s);
    CHECK(e.start_s <= from_s + 1.5);
    // Raised at the first loaded sample after the minimum: within one swing.
    CHECK(e.duration_s >= params.min_duration_s - 0.01);
    CHECK(e.duration_s <= params.min_duration_s + 0.6);
    CHECK(e.t_s == Approx(e.start_s + e.duration_s));
    CHECK(e.peak > params.threshold);
    // Loaded above the threshold in stance only: more than the threshold
    // times a third of the episode, less than the peak times all of it.
    CHECK(e.pressure_time_integral > params.threshold * e.duration_s / 3);
    CHECK(e.pressure_time_integral < e.peak * e.duration_s);
  }
  SECTION("a planted load that keeps the region below the threshold raises none") {
    FootFrames frames = walk;
    const float baseline = region_max(frames, kRight, cells);
    REQUIRE(baseline < threshold);
    plant(frames, kRight, cells, from_s, from_s + duration_s, 0.9f * (threshold - baseline));
    CHECK(track(frames, params).empty());
  }
  SECTION("a hotspot shorter than the minimum duration raises none") {
    FootFrames frames = walk;
    plant(frames, kRight, cells, from_s, from_s + params.min_duration_s - 1, threshold + 1);
    CHECK(track(frames, params).empty());
  }
}

TEST_CASE("the insole regions cover every cell exactly once", "[gait]") {
  const std::pair<std::vector<InsoleRegion>, int> layouts[] = {{pressure_grid_regions(), 99},
                                                                {force_insole_regions(), 8}};
  for (const auto& [regions, cells] : layouts) {
    INFO(cells << " cells");
    std::vector<int> seen(static_cast<std::size_t>(cells), 0);
    std::vector<std::string> names;
    for (const InsoleRegion& region : regions) {
      CHECK_FALSE(region.cells.empty());
      names.push_back(region.name);
      for (int cell : region.cells) {
        REQUIRE(cell >= 0);
        REQUIRE(cell < cells);
        ++seen[static_cast<std::size_t>(cell)];
      }
    }
    CHECK(std::count(seen.begin(), seen.end(), 1) == cells);
    std::sort(names.begin(), names.end());
    CHECK(std::unique(names.begin(), names.end()) == names.end());
  }
  // The grid's regions lie where their names say: the heel at row 0, the
  // hallux medial at the toe row.
  const auto grid = pressure_grid_regions();
  const auto& heel = grid[static_cast<std::size_t>(region_index(grid, "heel"))].cells;
  CHECK(std::find(heel.begin(), heel.end(), 4) != heel.end());
  const auto& hallux = grid[static_cast<std::size_t>(region_index(grid, "hallux"))].cells;
  CHECK(std::find(hallux.begin(), hallux.end(), 10 * 9 + 8) != hallux.end());
  CHECK(force_insole_regions()[0].name == "heel");
  CHECK(force_insole_regions()[7].name == "toe");
}

TEST_CASE("a planted hotspot on the 99-cell insole of a walk", "[gait]") {
  const FootFrames walk = foot_frames(sensors::interpolate_insoles(sensors::read_gaitpdb(walk_path("GaCo01_01.txt"))));
  REQUIRE(walk.count == 99);
  // Three cells under the first metatarsal head.
  check_planted_hotspot(walk, "metatarsal_medial", {6 * 9 + 7, 7 * 9 + 7, 7 * 9 + 8});
}

TEST_CASE("a planted hotspot on the 8-sensor force insole of a walk", "[gait]") {
  const FootFrames walk = foot_frames(sensors::read_gaitpdb(walk_path("GaCo01_01.txt")));
  REQUIRE(walk.count == 8);
  check_planted_hotspot(walk, "forefoot_lateral", {5});
}

// The highest threshold at which foot f of `frames` raises an event (0 when
// none at any, to 1/65536 of the largest cell value), and the region of that
// event: the level some region sustained for the minimum duration, the
// margin the walk leaves below the threshold.
double sustained_level(FootFrames& frames, HotspotParams params, int f, std::string& region) {
  double low = 0, high = 0;
  for (float v : frames.cells[f]) high = std::max(high, static_cast<double>(v));
  for (int i = 0; i < 16; ++i) {
    params.threshold = (low + high) / 2;
    const std::vector<HotspotEvent> events = track(frames, params, f);
    if (events.empty()) {
      high = params.threshold;
    } else {
      low = params.threshold;
      region = events[0].region;
    }
  }
  return low;
}

TEST_CASE("no bundled walk raises a hotspot at the defaults", "[gait]") {
  const auto walks = testing::bundled_walks();
  // Every walk in the normal suite, every third under a sanitizer.
  const std::size_t step = gw::test::unless_sanitized<std::size_t>(1, 3);
  for (std::size_t w = 0; w < walks.size(); w += step) {
    const auto& path = walks[w];
    const std::string name = path.filename().string();
    const sensors::Recording rec = sensors::read_gaitpdb(path.string());
    FootFrames forms[] = {foot_frames(rec), foot_frames(sensors::interpolate_insoles(rec))};
    for (FootFrames& frames : forms) {
      const HotspotParams params = defaults_for(frames);
      for (int f = 0; f < 2; ++f) {
        std::string region = "-";
        const double level = sustained_level(frames, params, f, region);
        INFO(name << " " << frames.count << " cells, " << foot_name(static_cast<Foot>(f)) << ": sustained "
                  << level << " (" << region << ") vs threshold " << params.threshold << ", "
                  << 100 * level / params.threshold << " %");
        CHECK(track(frames, params, f).empty());
      }
    }
  }
  CHECK(walks.size() == 18);
}

// A standing foot of 8 cells with `heel` on cell 0 and 60 on the others.
void stand(HotspotTracker& tracker, double from_s, double to_s, float heel, std::vector<HotspotEvent>& out,
           double rate_hz = 100) {
  float cells[8] = {heel, 60, 60, 60, 60, 60, 60, 60};
  for (long i = std::lround(from_s * rate_hz); i < std::lround(to_s * rate_hz); ++i)
    tracker.push(i / rate_hz, cells, 8, out);
}

HotspotParams short_params() {
  HotspotParams params;
  params.min_duration_s = 5;
  params.cooldown_s = 20;
  return params;
}

TEST_CASE("a time gap restarts the windows and the open episodes", "[gait]") {
  std::vector<HotspotEvent> events;
  HotspotTracker tracker(Foot::kLeft, force_insole_regions(), short_params(), 100);
  stand(tracker, 0, 8, 600, events);
  REQUIRE(events.size() == 1);  // without a gap, 8 s of the heel above the threshold raise one

  tracker.reset();
  events.clear();
  // 3 sample periods missing at 4 s: two episodes of 4 s, neither long enough.
  stand(tracker, 0, 4, 600, events);
  CHECK(tracker.pressure_time_integral(0) == Approx(600 * 4.0).epsilon(0.01));
  stand(tracker, 4.03, 8, 600, events);
  CHECK(events.empty());
  // The windows restarted with the gap too.
  CHECK(tracker.pressure_time_integral(0) == Approx(600 * 3.97).epsilon(0.01));

  // Time running back is a gap as well.
  tracker.reset();
  stand(tracker, 10, 14, 600, events);
  stand(tracker, 0, 4, 600, events);
  CHECK(events.empty());
}

TEST_CASE("one event per episode, the next only after the region fell below and the cooldown passed",
          "[gait]") {
  HotspotParams params = short_params();
  params.cooldown_s = 30;
  std::vector<HotspotEvent> events;
  HotspotTracker tracker(Foot::kRight, force_insole_regions(), params, 100);
  stand(tracker, 0, 60, 600, events);   // one long episode
  REQUIRE(events.size() == 1);
  CHECK(events[0].start_s == Approx(0));
  CHECK(events[0].t_s == Approx(5));
  CHECK(events[0].duration_s == Approx(5));
  CHECK(events[0].region == "heel");
  CHECK(events[0].foot == Foot::kRight);
  CHECK(events[0].peak == Approx(600));
  CHECK(events[0].pressure_time_integral == Approx(600 * 5.0).epsilon(0.01));

  stand(tracker, 60, 70, 100, events);  // below, and the episode ended
  stand(tracker, 70, 76, 600, events);  // long enough, 70 s after the event: the cooldown passed
  REQUIRE(events.size() == 2);
  CHECK(events[1].start_s == Approx(70));
  CHECK(events[1].t_s == Approx(75));

  stand(tracker, 76, 80, 100, events);
  stand(tracker, 80, 87, 600, events);  // long enough, but within the cooldown and over before it ends
  CHECK(events.size() == 2);
  stand(tracker, 87, 91, 100, events);
  stand(tracker, 91, 110, 600, events);  // long enough at 96 s; raised when the cooldown ends
  REQUIRE(events.size() == 3);
  CHECK(events[2].start_s == Approx(91));
  CHECK(events[2].t_s == Approx(105));
  CHECK(events[2].duration_s == Approx(14));
}

TEST_CASE("no episode while the foot carries less than the standing minimum", "[gait]") {
  HotspotParams params = short_params();
  params.threshold = 100;
  params.min_foot_load = 200;
  std::vector<HotspotEvent> events;
  HotspotTracker tracker(Foot::kLeft, force_insole_regions(), params, 100);
  const float resting[8] = {150, 5, 5, 5, 5, 5, 5, 5};  // 185 in all: sitting
  for (int i = 0; i < 1000; ++i) tracker.push(i / 100.0, resting, 8, events);
  CHECK(events.empty());
  stand(tracker, 10, 20, 150, events);  // 570 in all: standing
  REQUIRE(events.size() == 1);
  CHECK(events[0].start_s == Approx(10));
}

TEST_CASE("the moving peak and pressure-time integral of a region", "[gait]") {
  HotspotParams params;
  params.integral_window_s = 2;
  std::vector<HotspotEvent> events;
  HotspotTracker tracker(Foot::kLeft, force_insole_regions(), params, 100);
  stand(tracker, 0, 5, 100, events);
  CHECK(tracker.peak(0) == Approx(100));
  CHECK(tracker.pressure_time_integral(0) == Approx(100 * 2.0));
  CHECK(tracker.pressure_time_integral(1) == Approx(60 * 2.0));
  stand(tracker, 5, 6, 40, events);
  CHECK(tracker.peak(0) == Approx(100));  // within the 2.5-s peak window
  CHECK(tracker.pressure_time_integral(0) == Approx(100 * 1.0 + 40 * 1.0));
  stand(tracker, 6, 8, 40, events);
  CHECK(tracker.peak(0) == Approx(40));
  CHECK(tracker.pressure_time_integral(0) == Approx(40 * 2.0));
}

TEST_CASE("bad regions, parameters and frames are rejected", "[gait]") {
  CHECK_THROWS_AS(HotspotTracker(Foot::kLeft, {}, HotspotParams{}, 100), Error);
  CHECK_THROWS_AS(HotspotTracker(Foot::kLeft, {{"empty", {}}}, HotspotParams{}, 100), Error);
  CHECK_THROWS_AS(HotspotTracker(Foot::kLeft, {{"bad", {-1}}}, HotspotParams{}, 100), Error);
  CHECK_THROWS_AS(HotspotTracker(Foot::kLeft, force_insole_regions(), HotspotParams{}, 0), Error);
  HotspotParams params;
  params.peak_window_s = 0;
  CHECK_THROWS_AS(HotspotTracker(Foot::kLeft, force_insole_regions(), params, 100), Error);
  params = HotspotParams{};
  params.cooldown_s = -1;
  CHECK_THROWS_AS(HotspotTracker(Foot::kLeft, force_insole_regions(), params, 100), Error);

  HotspotTracker tracker(Foot::kLeft, pressure_grid_regions(), hotspot_defaults_pressure_insole(), 100);
  const float frame[8] = {};
  std::vector<HotspotEvent> events;
  CHECK_THROWS_AS(tracker.push(0, frame, 8, events), Error);
}

}  // namespace
}  // namespace gw::gait
