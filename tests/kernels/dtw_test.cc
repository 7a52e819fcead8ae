// kernels/dtw.h: the scalar reference every optimised search is held to.
#include "kernels/dtw.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "kernels_test_support.h"

namespace gw::kernels {
namespace {

TEST_CASE("dtw_reference matches a hand-computed banded case", "[dtw]") {
  // a = 0 0 0 1 against b = 0 1 1 1. Band 0 pairs them point by point (cost
  // 0+1+1+0); band 1 lets a[2] stay on b[1] only partly (best path cost 1);
  // band 2 lets a[0..2] all sit on b[0] and a[3] cover b[1..3] (cost 0).
  const std::vector<double> a = {0, 0, 0, 1};
  const std::vector<double> b = {0, 1, 1, 1};
  CHECK(dtw_reference(a.data(), b.data(), 4, 0) == Approx(std::sqrt(2.0)).epsilon(1e-15));
  CHECK(dtw_reference(a.data(), b.data(), 4, 1) == Approx(1.0).epsilon(1e-15));
  CHECK(dtw_reference(a.data(), b.data(), 4, 2) == 0.0);
  CHECK(dtw_reference(a.data(), b.data(), 4, 3) == 0.0);
  // A band wider than the matrix is the unconstrained DTW.
  CHECK(dtw_reference(a.data(), b.data(), 4, 100) == 0.0);
}

TEST_CASE("dtw_reference with band 0 is the Euclidean distance", "[dtw]") {
  const std::vector<float> x = testing::random_walk(200, 11);
  const std::vector<float> y = testing::random_walk(200, 12);
  for (int m : {2, 7, 64, 200}) {
    std::vector<double> a(x.begin(), x.begin() + m);
    std::vector<double> b(y.begin(), y.begin() + m);
    double sum = 0;
    for (int k = 0; k < m; ++k) sum += (a[k] - b[k]) * (a[k] - b[k]);
    INFO("m = " << m);
    CHECK(dtw_reference(a.data(), b.data(), m, 0) == Approx(std::sqrt(sum)).epsilon(1e-12));
    // Warping can only help.
    CHECK(dtw_reference(a.data(), b.data(), m, m / 10) <= std::sqrt(sum) * (1 + 1e-12));
  }
}

TEST_CASE("dtw_reference is symmetric and zero on equal inputs", "[dtw]") {
  const std::vector<float> x = testing::random_walk(50, 21);
  const std::vector<float> y = testing::random_walk(50, 22);
  std::vector<double> a(x.begin(), x.end()), b(y.begin(), y.end());
  for (int band : {0, 3, 25, 49}) {
    CHECK(dtw_reference(a.data(), b.data(), 50, band) ==
          Approx(dtw_reference(b.data(), a.data(), 50, band)).epsilon(1e-12));
    CHECK(dtw_reference(a.data(), a.data(), 50, band) == 0.0);
  }
}

TEST_CASE("znormalize gives mean 0 and population std 1", "[dtw][znorm]") {
  const std::vector<float> x = testing::random_walk(100, 5, 2.0);
  const std::vector<double> z = znormalize(x.data(), 100);
  double sum = 0, squares = 0;
  for (double v : z) sum += v;
  for (double v : z) squares += v * v;
  CHECK(std::fabs(sum / 100) < 1e-12);
  CHECK(squares / 100 == Approx(1.0).epsilon(1e-12));

  const MeanStd stats = mean_std(x.data(), 100);
  CHECK_FALSE(stats.constant);
  CHECK(z[17] == Approx((x[17] - stats.mean) / stats.std).epsilon(1e-15));
}

TEST_CASE("znormalize maps constant and near-constant input to zeros", "[dtw][znorm]") {
  const std::vector<float> constant(32, 1234.5f);
  const MeanStd stats = mean_std(constant.data(), 32);
  CHECK(stats.std == 0.0);
  CHECK(stats.constant);
  for (double v : znormalize(constant.data(), 32)) CHECK(v == 0.0);

  // One ulp of 1000 (6.1e-5) in one of 128 samples: std ~ 5.4e-6, below
  // 1e-8 * (1000 + 1).
  std::vector<float> nearly = std::vector<float>(128, 1000.0f);
  nearly[3] = std::nextafter(1000.0f, 2000.0f);
  CHECK(mean_std(nearly.data(), 128).constant);
  for (double v : znormalize(nearly.data(), 128)) CHECK(v == 0.0);

  // Tiny values around 0 with a real spread are not constant: the rule is
  // relative to |mean| + 1, so std 1e-6 at mean 0 still counts.
  std::vector<float> small = {0.0f, 1e-6f, -1e-6f, 2e-6f};
  CHECK_FALSE(mean_std(small.data(), 4).constant);

  CHECK(is_constant_window(5.0, 0.0));
  CHECK(is_constant_window(1e6, 1e-3));
  CHECK_FALSE(is_constant_window(1e6, 1.0));
  CHECK(is_constant_window(0.0, std::nan("")));
}

TEST_CASE("sliding_dtw_reference indexes windows from max(first_end, m-1)", "[dtw]") {
  const std::vector<float> series = testing::random_walk(40, 3);
  const std::vector<float> query(series.begin() + 10, series.begin() + 18);  // m = 8, ends at 17
  const std::vector<double> all =
      sliding_dtw_reference(query.data(), 8, series.data(), 40, 0, 1, true);
  REQUIRE(all.size() == 40 - 7);
  CHECK(all[17 - 7] < 1e-6);  // the query's own window

  const std::vector<double> later =
      sliding_dtw_reference(query.data(), 8, series.data(), 40, 20, 1, true);
  REQUIRE(later.size() == 20);
  for (int k = 0; k < 20; ++k) CHECK(later[k] == all[k + 13]);

  CHECK(sliding_dtw_reference(query.data(), 8, series.data(), 7, 0, 1, true).empty());
  CHECK(sliding_dtw_reference(query.data(), 8, series.data(), 40, 40, 1, true).empty());

  // Without z-normalisation the raw values are compared.
  const std::vector<double> raw =
      sliding_dtw_reference(query.data(), 8, series.data(), 40, 17, 0, false);
  CHECK(raw[0] == 0.0);
}

}  // namespace
}  // namespace gw::kernels
