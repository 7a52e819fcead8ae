#include "gait/cycles.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "gait/metrics.h"
#include "gait/walk.h"
#include "sensors/recording.h"
#include "sensors/synthetic.h"
#include "tests/gait/bundled_walks.h"
#include "tests/gait/synthetic_walk.h"

namespace gw::gait {
namespace {

using testing::SyntheticWalk;

TEST_CASE("the centre of pressure is the load-weighted mean of the cells' positions", "[gait]") {
  FootLayout layout;
  layout.x = {0, 10, 0};
  layout.y = {0, 0, 20};
  const float cells[3] = {1, 3, -5};  // a negative reading counts as no load
  const FootLoad load = foot_load(cells, 3, layout);
  CHECK(load.load == Approx(4));
  REQUIRE(load.has_cop);
  CHECK(load.cop_x == Approx(7.5));
  CHECK(load.cop_y == Approx(0));

  const FootLoad no_layout = foot_load(cells, 3, FootLayout{});
  CHECK(no_layout.load == Approx(4));
  CHECK_FALSE(no_layout.has_cop);
}

TEST_CASE("strides of a synthetic walk have its stride, stance and swing times", "[gait]") {
  SyntheticWalk w;
  StrideTracker tracker(CycleParams{});
  const std::vector<Stride> strides = testing::track(w, tracker);
  // 60 s of 1.1-s strides: 54 per foot, less the first of each foot, which
  // needs its heel strike first.
  const auto left = std::count_if(strides.begin(), strides.end(), [](const Stride& s) { return s.foot == Foot::kLeft; });
  CHECK(left >= 50);
  CHECK(static_cast<long>(strides.size()) - left >= 50);
  for (const Stride& s : strides) {
    const int f = static_cast<int>(s.foot);
    INFO("foot " << f << " at " << s.heel_strike_s);
    CHECK(s.stride_s() == Approx(w.stride_s).margin(0.011));
    // The hysteresis levels lie on the ramps: heel strike 30 % and toe off
    // 15 % of the ramp inside the stance.
    CHECK(s.swing_s() == Approx(w.swing_s[f] + 0.45 * w.ramp_s).margin(0.011));
    REQUIRE(s.curve.size() == 2u * CycleParams{}.curve_points);
    CHECK(*std::max_element(s.curve.begin(), s.curve.end()) == Approx(1));
    CHECK(s.peak_load == Approx(w.peak + w.offset));
    CHECK(s.cop_path < 0);  // no layout was given
  }
}

TEST_CASE("metrics of a synthetic walk: cadence, stance, double support and swing asymmetry", "[gait]") {
  SyntheticWalk w;
  StrideTracker tracker(CycleParams{});
  const GaitMetrics m = summarise(testing::track(w, tracker));
  CHECK(m.stride_time_median_s == Approx(1.1).margin(0.005));
  CHECK(m.cadence_steps_per_min == Approx(120 / 1.1).margin(0.6));
  CHECK(m.stride_time_cv < 0.01);
  // Swing 0.40 and 0.44 s (each detected 0.009 s long on the ramps).
  CHECK(m.swing_asymmetry == Approx(std::log(0.449 / 0.409)).margin(0.01));
  const double stance = 1.0 - (0.42 + 0.009) / 1.1;  // the median over both feet lies between them
  CHECK(m.stance_fraction == Approx(stance).margin(0.03));
  // Both feet down: the stride less both swings (0.70 and 0.66 s stances,
  // right heel strike 0.55 s after the left's): 1.1 - 0.40 - 0.44 = 0.26 s.
  CHECK(m.double_support_fraction == Approx((1.1 - 0.409 - 0.449) / 1.1).margin(0.03));
}

TEST_CASE("standing yields no strides, the strides start with walking", "[gait]") {
  SyntheticWalk w;
  w.start_s = 20;
  w.duration_s = 50;
  StrideTracker tracker(CycleParams{});
  const std::vector<Stride> strides = testing::track(w, tracker);
  CHECK(strides.size() >= 2 * 20u);
  for (const Stride& s : strides) CHECK(s.heel_strike_s >= w.start_s);
}

TEST_CASE("a gap in the samples restarts both feet: no stride spans it", "[gait]") {
  SyntheticWalk w;
  StrideTracker tracker(CycleParams{});
  std::vector<Stride> out;
  for (long i = 0; i < 6000; ++i) {
    if (i >= 3000 && i < 3030) continue;  // 0.3 s lost
    const double t = i / w.rate_hz;
    FootLoad l, r;
    l.load = testing::synthetic_load(w, 0, t);
    r.load = testing::synthetic_load(w, 1, t);
    tracker.push(t, l, r, out);
  }
  for (const Stride& s : out) CHECK((s.next_heel_strike_s <= 30.0 || s.heel_strike_s >= 30.3));
  CHECK(out.size() > 90);
}

// The reference the tracker is checked against: the plainest stride timing
// there is. The left foot's total load crosses the level midway between its
// 5th and 95th percentile upwards once a stride; the median of the intervals
// between successive crossings (0.6 s to 2.5 s) is the stride time.
double threshold_reference_stride_s(const sensors::Recording& rec) {
  const std::size_t c = rec.channel_index("L_total");
  std::vector<float> load = rec.channel(c);
  std::vector<float> sorted = load;
  std::sort(sorted.begin(), sorted.end());
  const float p5 = sorted[sorted.size() / 20], p95 = sorted[sorted.size() * 19 / 20];
  const float level = (p5 + p95) / 2;
  std::vector<double> crossings, intervals;
  for (std::size_t i = 1; i < load.size(); ++i)
    if (load[i - 1] < level && load[i] >= level) crossings.push_back(rec.time_s[i]);
  for (std::size_t i = 1; i < crossings.size(); ++i) {
    const double d = crossings[i] - crossings[i - 1];
    if (d >= 0.6 && d <= 2.5) intervals.push_back(d);
  }
  return median_of(intervals);
}

TEST_CASE("stride times of the bundled walks agree with a threshold-crossing reference", "[gait]") {
  // Tolerance: the median stride time of each foot within 3 % of the
  // reference's (the target, met on every bundled walk).
  const auto walks = testing::bundled_walks();
  for (const auto& path : walks) {
    const std::string name = path.filename().string();
    const sensors::Recording rec = sensors::read_gaitpdb(path.string());
    const std::vector<Stride> strides = walk_strides(rec);
    std::vector<double> left;
    for (const Stride& s : strides)
      if (s.foot == Foot::kLeft) left.push_back(s.stride_s());
    INFO(name);
    REQUIRE(left.size() >= 30);
    const double reference = threshold_reference_stride_s(rec);
    CHECK(std::fabs(median_of(left) / reference - 1.0) <= 0.03);
    for (const Stride& s : strides) CHECK(s.cop_path > 0);
  }
  CHECK(walks.size() == 18);
}

TEST_CASE("the 99-cell pressure insole gives the force insole's strides", "[gait]") {
  // The W1 insole's cells interpolated from a gaitpdb walk's 8 sensors
  // (sensors/synthetic.h): the same walk on the other insole kind.
  const sensors::Recording walk = sensors::read_gaitpdb(std::string(GW_DATA_DIR) + "/gaitpdb/GaPt07_01.txt");
  const sensors::Recording cells = sensors::interpolate_insoles(walk);
  REQUIRE(recording_feet(cells.channel_names).size() == 2);
  REQUIRE(recording_feet(cells.channel_names)[0].layout.x.size() == 99);
  const GaitMetrics force = summarise(walk_strides(walk));
  const GaitMetrics pressure = summarise(walk_strides(cells));
  CHECK(pressure.strides >= force.strides - 4);
  CHECK(pressure.strides <= force.strides + 4);
  CHECK(pressure.stride_time_median_s == Approx(force.stride_time_median_s).epsilon(0.01));
  CHECK(pressure.stance_fraction == Approx(force.stance_fraction).margin(0.03));
  CHECK(pressure.cop_path_per_step > 0);  // in cells

  CHECK_THROWS_WITH(recording_feet({"a", "b"}), Catch::Contains("no insole channels"));
}

}  // namespace
}  // namespace gw::gait
