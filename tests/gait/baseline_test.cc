#include "gait/baseline.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "common/error.h"
#include "gait/walk.h"
#include "sensors/recording.h"

namespace gw::gait {
namespace {

constexpr int kPoints = 64;

// A bundled gaitpdb walk, stored plain or gzipped.
sensors::Recording walk(const std::string& name) {
  const std::string plain = std::string(GW_DATA_DIR) + "/gaitpdb/" + name + ".txt";
  return sensors::read_gaitpdb(std::filesystem::exists(plain) ? plain : plain + ".gz");
}

// `first` followed, without a gap, by `second`: one wearer whose gait
// changes (the samples of `second` continue `first`'s time).
sensors::Recording followed_by(const sensors::Recording& first, const sensors::Recording& second) {
  sensors::Recording out = first;
  const double period = 1.0 / first.sample_rate_hz;
  const double shift = first.time_s.back() + period - second.time_s.front();
  for (const double t : second.time_s) out.time_s.push_back(t + shift);
  out.values.insert(out.values.end(), second.values.begin(), second.values.end());
  return out;
}

// A left stride of 1 s whose curve is `value` everywhere.
Stride stride_of(float value) {
  Stride s;
  s.foot = Foot::kLeft;
  s.heel_strike_s = 0;
  s.toe_off_s = 0.6;
  s.next_heel_strike_s = 1;
  s.curve.assign(2 * kPoints, value);
  return s;
}

double mean_change(const StrideBaseline& baseline, const std::vector<Stride>& strides, std::size_t from) {
  double sum = 0;
  int n = 0;
  for (std::size_t i = from; i < strides.size(); ++i) {
    sum += baseline.change(strides[i].curve);
    ++n;
  }
  return sum / n;
}

TEST_CASE("a baseline keeps at most its strides, evenly spread over the learning time", "[gait]") {
  BaselineParams params;
  params.learn_walking_s = 30;
  params.strides = 8;
  params.k = 2;
  StrideBaseline baseline(kPoints, params);
  bool learned_at_last = false;
  for (int i = 0; i < 30; ++i) {
    CHECK_FALSE(baseline.learned());
    learned_at_last = baseline.offer(stride_of(static_cast<float>(i) / 100));
  }
  CHECK(learned_at_last);
  REQUIRE(baseline.learned());
  CHECK(baseline.walking_s() == Approx(30));
  // 30 offered into 8 places: every fourth, from the first.
  CHECK(baseline.kept() == 8);
  // Once learned, nothing more is taken.
  CHECK_FALSE(baseline.offer(stride_of(5)));
  CHECK(baseline.kept() == 8);
  // Kept 0, 0.04, ..., 0.28: between constant curves DTW keeps to the
  // diagonal, so a distance is sqrt(128) x the difference. Typical: the two
  // nearest others are 0.04 and 0.08 away at the ends, 0.04 and 0.04 inside:
  // (2 x 0.06 + 6 x 0.04) / 8 = 0.045.
  const double unit = std::sqrt(2.0 * kPoints);
  CHECK(baseline.typical_distance() == Approx(unit * 0.045).epsilon(1e-4));
  // 0.14 lies 0.02 from 0.12 and 0.16; 2.0 lies 1.72 and 1.76 from 0.28 and 0.24.
  CHECK(baseline.change(stride_of(0.14f).curve) == Approx(0.02 / 0.045).epsilon(1e-3));
  CHECK(baseline.change(stride_of(2.0f).curve) == Approx(1.74 / 0.045).epsilon(1e-3));
  // The right foot's strides do not count as walking time (a minute counts the left's).
  StrideBaseline right_only(kPoints, params);
  Stride right = stride_of(0.1f);
  right.foot = Foot::kRight;
  for (int i = 0; i < 40; ++i) right_only.offer(right);
  CHECK_FALSE(right_only.learned());
  CHECK(std::isnan(right_only.change(right.curve)));
}

TEST_CASE("a baseline refuses settings it cannot learn with", "[gait]") {
  BaselineParams params;
  params.learn_walking_s = 30;
  params.strides = 1;
  CHECK_THROWS_AS(StrideBaseline(kPoints, params), Error);
  params.strides = 8;
  params.learn_walking_s = 0;
  CHECK_THROWS_AS(StrideBaseline(kPoints, params), Error);
}

TEST_CASE("a walk's own later strides change less against its baseline than another person's", "[gait]") {
  BaselineParams params;
  params.learn_walking_s = 45;
  const std::vector<Stride> own = walk_strides(walk("GaCo01_01"));
  StrideBaseline baseline(kPoints, params);
  std::size_t after = own.size();
  for (std::size_t i = 0; i < own.size(); ++i)
    if (baseline.offer(own[i])) {
      after = i + 1;
      break;
    }
  REQUIRE(baseline.learned());
  CHECK(baseline.kept() <= 24);
  CHECK(baseline.kept() >= 12);
  REQUIRE(after + 40 < own.size());
  const double same = mean_change(baseline, own, after);
  CHECK(same < 1.75);
  for (const char* other : {"GaPt04_01", "SiPt04_01", "SiCo03_01"}) {
    const std::vector<Stride> strides = walk_strides(walk(other));
    INFO(other);
    CHECK(mean_change(baseline, strides, strides.size() / 2) > same);
  }
}

TEST_CASE("a wearer whose gait changes after the baseline raises one gait-change bout, an unchanged one none",
          "[gait]") {
  MonitorOptions options;
  options.baseline.learn_walking_s = 45;
  options.baseline.threshold = 1.75;
  options.cooldown_s = 100000;
  options.minute_s = 40;  // the first minute falls inside the learning
  const sensors::Recording usual = walk("GaCo01_01");
  const double switch_s = usual.time_s.back() - usual.time_s.front();

  const WalkMinutes changed = walk_minutes(followed_by(usual, walk("SiPt04_01")), options, 10);
  REQUIRE(changed.abnormal.size() == 1);
  const AbnormalBout& bout = changed.abnormal[0];
  CHECK(bout.reason == BoutReason::kChangedFromBaseline);
  CHECK(bout.wearer == 1);
  CHECK(bout.strides == options.bout_strides);
  CHECK(bout.score >= 1.75);
  CHECK(bout.t_end > switch_s);

  // The same walk twice: the baseline holds, no bout.
  const WalkMinutes unchanged = walk_minutes(followed_by(usual, usual), options, 10);
  CHECK(unchanged.abnormal.empty());
  REQUIRE(unchanged.minutes.size() >= 3);
  // The first minute was learning; the later ones carry their change.
  CHECK(std::isnan(unchanged.minutes[0].baseline_change));
  for (std::size_t i = 1; i < unchanged.minutes.size(); ++i) {
    INFO(i);
    CHECK(unchanged.minutes[i].baseline_change < 1.75);
    CHECK(unchanged.minutes[i].baseline_change > 0.3);
  }
  // Without the baseline the minutes carry none.
  const WalkMinutes off = walk_minutes(followed_by(usual, usual), MonitorOptions{}, 10);
  REQUIRE_FALSE(off.minutes.empty());
  CHECK(std::isnan(off.minutes.back().baseline_change));
}

}  // namespace
}  // namespace gw::gait
