#include "gait/abnormal.h"

#include <catch2/catch.hpp>

#include <cmath>

#include "common/error.h"
#include "kernels/dtw.h"

namespace gw::gait {
namespace {

constexpr int kPoints = 16;

// A two-foot curve: a bump at `centre` (fraction of the cycle) for this foot,
// the mirror for the other.
std::vector<float> curve(double centre, double width = 0.15) {
  std::vector<float> c(2 * kPoints);
  for (int k = 0; k < kPoints; ++k) {
    const double x = static_cast<double>(k) / (kPoints - 1);
    c[k] = static_cast<float>(std::exp(-std::pow((x - centre) / width, 2)));
    c[kPoints + k] = static_cast<float>(std::exp(-std::pow((x - (1 - centre)) / width, 2)));
  }
  return c;
}

TEST_CASE("the stride distance is per-foot DTW, combined as a root sum of squares", "[gait]") {
  AbnormalParams params;
  params.band_fraction = 0.25;
  StrideLibrary library(kPoints, params);
  const auto a = curve(0.3), b = curve(0.5);
  CHECK(library.distance(a, a) == 0);
  CHECK(library.distance(a, b) == Approx(library.distance(b, a)));
  std::vector<double> x(a.begin(), a.begin() + kPoints), y(b.begin(), b.begin() + kPoints);
  std::vector<double> x2(a.begin() + kPoints, a.end()), y2(b.begin() + kPoints, b.end());
  const double d1 = kernels::dtw_reference(x.data(), y.data(), kPoints, 4);
  const double d2 = kernels::dtw_reference(x2.data(), y2.data(), kPoints, 4);
  CHECK(library.distance(a, b) == Approx(std::sqrt(d1 * d1 + d2 * d2)));
  CHECK_THROWS_AS(library.add({std::vector<float>(kPoints), false, "x"}), Error);
}

TEST_CASE("a stride scores the share of abnormal examples among its k nearest", "[gait]") {
  AbnormalParams params;
  params.k = 3;
  params.band_fraction = 0;
  StrideLibrary library(kPoints, params);
  for (int i = 0; i < 3; ++i) library.add({curve(0.30 + 0.01 * i), false, "normal" + std::to_string(i)});
  for (int i = 0; i < 3; ++i) library.add({curve(0.60 + 0.01 * i), true, "patient" + std::to_string(i)});
  CHECK(library.stride_score(curve(0.31)) == Approx(0));
  CHECK(library.stride_score(curve(0.61)) == Approx(1));
  // Without patient0..2's nearest one, one normal example joins the three nearest.
  CHECK(library.stride_score(curve(0.61), "patient1") == Approx(2.0 / 3));

  Stride s1, s2;
  s1.curve = curve(0.31);
  s2.curve = curve(0.61);
  CHECK(library.score({s1, s2}) == Approx(0.5));
  CHECK(std::isnan(library.score({})));
}

TEST_CASE("evenly spaced examples and the ROC area", "[gait]") {
  std::vector<Stride> strides(10);
  for (int i = 0; i < 10; ++i) strides[static_cast<std::size_t>(i)].heel_strike_s = i;
  const auto five = evenly_spaced(strides, 5);
  REQUIRE(five.size() == 5);
  CHECK(five[1].heel_strike_s == 2);
  CHECK(evenly_spaced(strides, 20).size() == 10);

  CHECK(roc_auc({0.9, 0.8, 0.1, 0.2}, {true, true, false, false}) == 1.0);
  CHECK(roc_auc({0.1, 0.8, 0.9, 0.2}, {true, true, false, false}) == 0.25);
  CHECK(roc_auc({0.5, 0.5}, {true, false}) == 0.5);
  CHECK(std::isnan(roc_auc({0.5}, {true})));
}

}  // namespace
}  // namespace gw::gait
