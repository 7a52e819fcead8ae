#include "sensors/synthetic.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "sensors/recording.h"

using gw::sensors::interpolate_insoles;
using gw::sensors::kW1Channels;
using gw::sensors::kW1InsoleChannels;
using gw::sensors::read_gaitpdb;
using gw::sensors::Recording;
using gw::sensors::SyntheticW1Source;

namespace {

const Recording& gaitpdb() {
  static const Recording r = read_gaitpdb(std::string(GW_DATA_DIR) + "/gaitpdb/GaCo01_01.txt");
  return r;
}

// Cell = row * 9 + column; row 0 = heel (y = -800) .. row 10 = toe (y = 800),
// column 0 = lateral edge (|x| = 700) .. column 8 = medial edge (|x| = 300).
constexpr int cell(int row, int column) { return row * 9 + column; }

std::vector<float> stream(SyntheticW1Source& source, int wearer, int samples) {
  std::vector<float> out;
  source.next(wearer, samples, out);
  return out;
}

// The sample of `insoles` whose cells equal the first sample of a noise-free
// stream, i.e. where the wearer started; insoles.samples() if none does.
std::size_t start_of(const std::vector<float>& stream, const Recording& insoles) {
  const auto cells = static_cast<std::ptrdiff_t>(2 * kW1InsoleChannels);
  for (std::size_t t = 0; t < insoles.samples(); ++t) {
    if (std::equal(stream.begin(), stream.begin() + cells,
                   insoles.values.begin() + static_cast<std::ptrdiff_t>(t) * cells)) {
      return t;
    }
  }
  return insoles.samples();
}

}  // namespace

TEST_CASE("cells on a sensor position copy that sensor and the others stay within the sensors",
          "[synthetic]") {
  const Recording& base = gaitpdb();
  const Recording insoles = interpolate_insoles(base);
  REQUIRE(insoles.channels() == 2 * kW1InsoleChannels);
  REQUIRE(insoles.samples() == base.samples());
  CHECK(insoles.channel_names.front() == "left_p0");
  CHECK(insoles.channel_names[kW1InsoleChannels] == "right_p0");
  CHECK(insoles.channel_names.back() == "right_p98");
  CHECK(insoles.time_s == base.time_s);

  // Sensors 1, 4, 5 and 8 of each foot lie on grid points (format.txt).
  struct OnGrid {
    const char* sensor;
    int channel;
  };
  const OnGrid on_grid[] = {{"L1", cell(0, 4)},
                            {"L4", cell(5, 0)},
                            {"L5", cell(5, 8)},
                            {"L8", cell(10, 4)},
                            {"R1", kW1InsoleChannels + cell(0, 4)},
                            {"R4", kW1InsoleChannels + cell(5, 0)},
                            {"R5", kW1InsoleChannels + cell(5, 8)},
                            {"R8", kW1InsoleChannels + cell(10, 4)}};
  for (const OnGrid& g : on_grid) {
    INFO(g.sensor);
    const std::size_t sensor = base.channel_index(g.sensor);
    for (std::size_t t = 0; t < base.samples(); t += 37) {
      REQUIRE(insoles.at(t, g.channel) == Approx(base.at(t, sensor)).margin(1e-3));
    }
  }

  // Inverse-distance weighting never leaves the range of the foot's sensors,
  // and a cell between sensors differs from each single sensor at some time.
  bool differs_from_l2 = false;
  for (std::size_t t = 0; t < base.samples(); t += 11) {
    float lo = base.at(t, 0), hi = base.at(t, 0);
    for (int s = 1; s < 8; ++s) {
      lo = std::min(lo, base.at(t, s));
      hi = std::max(hi, base.at(t, s));
    }
    for (int c = 0; c < kW1InsoleChannels; ++c) {
      REQUIRE(insoles.at(t, c) >= lo - 1e-3f);
      REQUIRE(insoles.at(t, c) <= hi + 1e-3f);
    }
    differs_from_l2 |= std::fabs(insoles.at(t, cell(2, 0)) - base.at(t, 1)) > 1.0f;
  }
  CHECK(differs_from_l2);
}

TEST_CASE("interpolation finds sensors by name and needs all 16", "[synthetic]") {
  const Recording& base = gaitpdb();
  // Reordered channels interpolate the same.
  const Recording reordered = base.select({"R_total", "R8", "R7", "R6", "R5", "R4", "R3", "R2",
                                           "R1", "L8", "L7", "L6", "L5", "L4", "L3", "L2", "L1"});
  CHECK(interpolate_insoles(reordered.slice(0, 50)).values ==
        interpolate_insoles(base.slice(0, 50)).values);
  CHECK_THROWS_WITH(interpolate_insoles(base.select({"L1", "L2"})), Catch::Contains("L3"));
}

TEST_CASE("the synthetic source is deterministic for a seed and has 201 channels", "[synthetic]") {
  SyntheticW1Source a(gaitpdb(), 4, 42);
  SyntheticW1Source b(gaitpdb(), 4, 42);
  CHECK(a.wearers() == 4);
  const std::vector<float> first = stream(a, 2, 300);
  REQUIRE(first.size() == 300u * kW1Channels);
  CHECK(first == stream(b, 2, 300));
  for (float v : first) REQUIRE(std::isfinite(v));
  // Insole cells are pressures: never negative, even with noise.
  for (int s = 0; s < 300; ++s) {
    for (int c = 0; c < 2 * kW1InsoleChannels; ++c) REQUIRE(first[s * kW1Channels + c] >= 0.0f);
  }

  // Successive calls continue the stream: chunking does not change it.
  std::vector<float> chunked;
  SyntheticW1Source c(gaitpdb(), 4, 42);
  c.next(2, 100, chunked);
  c.next(2, 1, chunked);
  c.next(2, 0, chunked);
  c.next(2, 199, chunked);
  CHECK(chunked == first);

  SyntheticW1Source other_seed(gaitpdb(), 4, 43);
  CHECK(stream(other_seed, 2, 300) != first);
}

TEST_CASE("different wearers get different streams", "[synthetic]") {
  SyntheticW1Source source(gaitpdb(), 3, 7, 0.0f);
  const std::vector<float> w0 = stream(source, 0, 200);
  const std::vector<float> w1 = stream(source, 1, 200);
  const std::vector<float> w2 = stream(source, 2, 200);
  CHECK(w0 != w1);
  CHECK(w1 != w2);
  CHECK(w0 != w2);
  // Another wearer's calls do not advance wearer 0.
  SyntheticW1Source fresh(gaitpdb(), 3, 7, 0.0f);
  std::vector<float> again;
  fresh.next(0, 200, again);
  CHECK(again == w0);

  CHECK_THROWS_AS(source.next(3, 1, again), gw::Error);
  CHECK_THROWS_AS(source.next(-1, 1, again), gw::Error);
  CHECK_THROWS_AS(SyntheticW1Source(gaitpdb(), 0, 1), gw::Error);
  CHECK_THROWS_AS(SyntheticW1Source(gaitpdb(), 1, 1, -1.0f), gw::Error);
}

TEST_CASE("without noise a wearer replays the interpolated recording and wraps around",
          "[synthetic]") {
  const Recording base = gaitpdb().slice(1000, 1050);
  const Recording insoles = interpolate_insoles(base);
  SyntheticW1Source source(base, 2, 5, 0.0f);
  const std::vector<float> out = stream(source, 1, 120);

  const std::size_t n = base.samples();
  const std::size_t start = start_of(out, insoles);
  REQUIRE(start < n);
  for (std::size_t s = 0; s < 120; ++s) {
    const std::size_t t = (start + s) % n;
    INFO("sample " << s);
    REQUIRE(std::equal(out.begin() + s * kW1Channels,
                       out.begin() + s * kW1Channels + 2 * kW1InsoleChannels,
                       insoles.values.begin() + t * 2 * kW1InsoleChannels));
  }
  // The two wearers start half the recording apart.
  const std::size_t other = start_of(stream(source, 0, 1), insoles);
  REQUIRE(other < n);
  CHECK((start + n - other) % n == n / 2);
}

TEST_CASE("noise has the requested standard deviation", "[synthetic]") {
  SyntheticW1Source clean(gaitpdb(), 1, 11, 0.0f);
  SyntheticW1Source noisy(gaitpdb(), 1, 11, 2.0f);
  const std::vector<float> c = stream(clean, 0, 2000);
  const std::vector<float> n = stream(noisy, 0, 2000);
  double sum = 0, sum2 = 0;
  std::size_t count = 0;
  for (std::size_t s = 0; s < 2000; ++s) {
    for (int ch = 0; ch < 2 * kW1InsoleChannels; ++ch) {
      const float clean_value = c[s * kW1Channels + ch];
      if (clean_value < 20) continue;  // away from the clamp at zero
      const double d = n[s * kW1Channels + ch] - clean_value;
      sum += d;
      sum2 += d * d;
      ++count;
    }
    // The accelerometer stand-in carries no noise.
    for (int ch = 2 * kW1InsoleChannels; ch < kW1Channels; ++ch) {
      REQUIRE(n[s * kW1Channels + ch] == c[s * kW1Channels + ch]);
    }
  }
  REQUIRE(count > 10000);
  const double mean = sum / count;
  CHECK(std::fabs(mean) < 0.05);
  CHECK(std::sqrt(sum2 / count - mean * mean) == Approx(2.0).epsilon(0.03));
}

TEST_CASE("the accelerometer stand-in is the slope of force sums over body weight", "[synthetic]") {
  const Recording walk = gaitpdb().slice(3000, 3400);
  const Recording insoles = interpolate_insoles(walk);
  SyntheticW1Source source(walk, 1, 3, 0.0f);
  const std::vector<float> out = stream(source, 0, 400);
  const std::size_t n = walk.samples();
  const std::size_t start = start_of(out, insoles);
  REQUIRE(start < n);

  // Force sums per sample: front half - back half, total, left - right.
  auto sums = [&](std::size_t t) {
    double front = 0, back = 0, left = 0, right = 0;
    for (int s = 1; s <= 8; ++s) {
      const double l = walk.at(t, walk.channel_index("L" + std::to_string(s)));
      const double r = walk.at(t, walk.channel_index("R" + std::to_string(s)));
      left += l;
      right += r;
      if (s >= 6) front += l + r;  // y = 400 or 800
      if (s <= 3) back += l + r;   // y = -800 or -400
    }
    return std::vector<double>{front - back, left + right, left - right};
  };
  double weight = 0;
  for (std::size_t t = 0; t < n; ++t) weight += sums(t)[1];
  weight /= n;
  REQUIRE(weight > 100);

  const double dt = 0.01;
  int moving = 0;
  for (std::size_t s = 0; s < n; ++s) {
    const std::size_t t = (start + s) % n;
    if (t == 0 || t + 1 == n) continue;  // one-sided at the ends
    const auto before = sums(t - 1), after = sums(t + 1);
    for (int k = 0; k < 3; ++k) {
      const double expected = (after[k] - before[k]) / (2 * dt) / weight;
      INFO("sample " << t << " axis " << k);
      REQUIRE(out[s * kW1Channels + 2 * kW1InsoleChannels + k] ==
              Approx(expected).margin(1e-4).epsilon(1e-4));
      moving += std::fabs(expected) > 1.0;
    }
  }
  CHECK(moving > 100);  // a walk, not a stand

  // A constant load gives no acceleration at all.
  Recording still = gaitpdb().slice(0, 20);
  for (std::size_t t = 1; t < still.samples(); ++t) {
    std::copy_n(still.values.begin(), still.channels(),
                still.values.begin() + t * still.channels());
  }
  SyntheticW1Source standing(still, 1, 3, 0.0f);
  const std::vector<float> quiet = stream(standing, 0, 20);
  for (std::size_t s = 0; s < 20; ++s) {
    for (int ch = 2 * kW1InsoleChannels; ch < kW1Channels; ++ch) {
      REQUIRE(quiet[s * kW1Channels + ch] == 0.0f);
    }
  }
}
