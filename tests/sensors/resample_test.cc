#include "sensors/resample.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "common/error.h"

using Catch::Contains;
using gw::sensors::Recording;
using gw::sensors::resample;
using gw::sensors::resample_ratio;

namespace {

constexpr double kPi = 3.14159265358979323846;

// One channel: f sampled at `rate_hz` from `start_s`, `samples` samples.
Recording sampled(const std::function<double(double)>& f, double rate_hz, std::size_t samples,
                  double start_s = 0) {
  Recording r;
  r.source = "memory";
  r.sample_rate_hz = rate_hz;
  r.channel_names = {"v"};
  for (std::size_t s = 0; s < samples; ++s) {
    const double t = start_s + static_cast<double>(s) / rate_hz;
    r.time_s.push_back(t);
    r.values.push_back(static_cast<float>(f(t)));
  }
  return r;
}

double sine(double hz, double t, double phase = 0) { return std::sin(2 * kPi * hz * t + phase); }

// Largest |a - b| over the samples at least `margin_s` from either end.
double max_error_inside(const Recording& a, const Recording& b, double margin_s) {
  REQUIRE(a.samples() == b.samples());
  const auto margin = static_cast<std::size_t>(margin_s * a.sample_rate_hz);
  double worst = 0;
  for (std::size_t s = margin; s + margin < a.samples(); ++s)
    worst = std::max(worst, std::abs(static_cast<double>(a.values[s]) - b.values[s]));
  return worst;
}

double rms_inside(const Recording& r, double margin_s) {
  const auto margin = static_cast<std::size_t>(margin_s * r.sample_rate_hz);
  double sum = 0;
  std::size_t n = 0;
  for (std::size_t s = margin; s + margin < r.samples(); ++s, ++n)
    sum += static_cast<double>(r.values[s]) * r.values[s];
  return std::sqrt(sum / static_cast<double>(n));
}

double attenuation_db(const Recording& in, const Recording& out) {
  return 20 * std::log10(rms_inside(out, 1.0) / rms_inside(in, 1.0));
}

}  // namespace

TEST_CASE("the resampling ratio is target/source in lowest terms", "[resample]") {
  long up = 0, down = 0;
  resample_ratio(200, 100, up, down);
  CHECK((up == 1 && down == 2));
  resample_ratio(64, 100, up, down);
  CHECK((up == 25 && down == 16));
  resample_ratio(100, 64, up, down);
  CHECK((up == 16 && down == 25));
  resample_ratio(102.4, 100, up, down);
  CHECK((up == 125 && down == 128));
  CHECK_THROWS_WITH(resample_ratio(100, 100.0001, up, down), Contains("4096"));
  CHECK_THROWS_AS(resample_ratio(0, 100, up, down), gw::Error);
  CHECK_THROWS_AS(resample_ratio(100, std::nan(""), up, down), gw::Error);
}

TEST_CASE("200 -> 100 Hz: in-band sinusoids match the 100 Hz sampling, 70 Hz is removed",
          "[resample]") {
  const auto in_band = [](double t) {
    return 1.0 + 0.8 * sine(1.3, t, 0.2) + 0.5 * sine(7, t) + 0.3 * sine(23, t, 1.0);
  };
  const Recording source = sampled(in_band, 200, 2000, 2.5);
  const Recording out = resample(source, 100);
  const Recording reference = sampled(in_band, 100, 1000, 2.5);
  CHECK(out.sample_rate_hz == 100);
  CHECK(out.channel_names == source.channel_names);
  REQUIRE(out.samples() == 1000);
  // Times restart from the first sample's time at the new rate.
  CHECK(out.time_s.front() == 2.5);
  CHECK(out.time_s[7] == Approx(2.57));
  CHECK(out.time_s.back() == Approx(2.5 + 999 / 100.0));
  CHECK(max_error_inside(out, reference, 1.0) < 1e-3);

  const auto out_of_band = [](double t) { return sine(70, t); };
  const Recording tone = sampled(out_of_band, 200, 2000);
  CHECK(attenuation_db(tone, resample(tone, 100)) < -40);
}

TEST_CASE("64 -> 100 Hz and back: in-band sinusoids match, above the lower Nyquist is removed",
          "[resample]") {
  const auto in_band = [](double t) {
    return -0.4 + 0.9 * sine(1.1, t, 0.5) + 0.6 * sine(5, t) + 0.25 * sine(17, t, 2.0);
  };
  const Recording source = sampled(in_band, 64, 640);
  const Recording up = resample(source, 100);
  REQUIRE(up.samples() == 999);  // the last at or before the input's last time
  CHECK(max_error_inside(up, sampled(in_band, 100, 999), 1.0) < 1e-3);

  const Recording fast = sampled(in_band, 100, 1000);
  const Recording down = resample(fast, 64);
  REQUIRE(down.samples() == 640);
  CHECK(max_error_inside(down, sampled(in_band, 64, 640), 1.0) < 1e-3);

  // 40 Hz is above 64 Hz's Nyquist frequency: it would alias to 24 Hz.
  const Recording tone = sampled([](double t) { return sine(40, t); }, 100, 2000);
  CHECK(attenuation_db(tone, resample(tone, 64)) < -40);
}

TEST_CASE("resampling keeps a constant, every channel and the labels in time", "[resample]") {
  Recording r;
  r.source = "memory";
  r.sample_rate_hz = 64;
  r.channel_names = {"a", "b"};
  for (std::size_t s = 0; s < 640; ++s) {
    r.time_s.push_back(static_cast<double>(s) / 64);
    r.values.push_back(980.0f);
    r.values.push_back(s < 320 ? -3.0f : 5.0f);
    r.labels.push_back(s >= 320 && s < 448 ? 2 : 1);  // 2 over [5 s, 7 s)
  }
  const Recording out = resample(r, 100);
  REQUIRE(out.samples() == 999);
  REQUIRE(out.labels.size() == 999);
  for (std::size_t s = 0; s < out.samples(); ++s) CHECK(out.at(s, 0) == Approx(980.0f).epsilon(1e-6));
  // The step stays where it was (no delay): halfway between the input samples
  // at 4.984 s and 5 s, so between the outputs at 4.99 s and 5 s; settled a
  // while on.
  CHECK(out.at(499, 1) < 1.0f);
  CHECK(out.at(500, 1) > 1.0f);
  CHECK(out.at(450, 1) == Approx(-3.0).margin(1e-2));
  CHECK(out.at(550, 1) == Approx(5.0).margin(1e-2));
  // Labels: the input sample nearest in time.
  CHECK(out.labels[499] == 1);
  CHECK(out.labels[500] == 2);
  CHECK(out.labels[699] == 2);
  CHECK(out.labels[700] == 1);

  const Recording same = resample(r, 64);
  CHECK(same.values == r.values);
  CHECK(same.labels == r.labels);
  Recording empty = r;
  empty.values.clear();
  empty.time_s.clear();
  empty.labels.clear();
  CHECK_THROWS_AS(resample(empty, 100), gw::Error);
}
