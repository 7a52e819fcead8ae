#include "gait/metrics.h"

#include <catch2/catch.hpp>

#include <cmath>

namespace gw::gait {
namespace {

Stride stride(Foot foot, double start, double stance, double swing) {
  Stride s;
  s.foot = foot;
  s.heel_strike_s = start;
  s.toe_off_s = start + stance;
  s.next_heel_strike_s = start + stance + swing;
  return s;
}

TEST_CASE("the median of an even and an odd count", "[gait]") {
  std::vector<double> odd{3, 1, 2};
  CHECK(median_of(odd) == 2);
  std::vector<double> even{4, 1, 3, 2};
  CHECK(median_of(even) == 2.5);
  std::vector<double> none;
  CHECK(std::isnan(median_of(none)));
}

TEST_CASE("stride-time variability leaves out a turn but keeps the ordinary spread", "[gait]") {
  std::vector<Stride> strides;
  double t = 0;
  const double times[] = {1.0, 1.1, 0.9, 1.0, 1.1, 0.9, 1.0, 1.1, 0.9, 1.0};
  for (double d : times) {
    strides.push_back(stride(Foot::kLeft, t, 0.6 * d, 0.4 * d));
    t += d;
  }
  const GaitMetrics without_turn = summarise(strides);
  strides.push_back(stride(Foot::kLeft, t, 2.0, 0.4));  // a 2.4-s turn
  const GaitMetrics with_turn = summarise(strides);
  // Population CV of the ten: std 0.0775 / mean 1.0.
  CHECK(without_turn.stride_time_cv == Approx(0.07746).margin(1e-4));
  CHECK(with_turn.stride_time_cv == Approx(without_turn.stride_time_cv).margin(1e-9));
  CHECK(with_turn.strides == 11);
  CHECK(with_turn.left_strides == 11);
  CHECK(with_turn.right_strides == 0);
  CHECK(std::isnan(with_turn.swing_asymmetry));  // one foot only
}

TEST_CASE("too few strides leave the variability unknown", "[gait]") {
  std::vector<Stride> strides{stride(Foot::kLeft, 0, 0.6, 0.4), stride(Foot::kRight, 0.5, 0.6, 0.4)};
  const GaitMetrics m = summarise(strides);
  CHECK(m.strides == 2);
  CHECK(std::isnan(m.stride_time_cv));
  CHECK(m.swing_asymmetry == Approx(0).margin(1e-9));
  CHECK(m.cadence_steps_per_min == Approx(120));
  CHECK(std::isnan(m.cop_path_per_step));
}

}  // namespace
}  // namespace gw::gait
