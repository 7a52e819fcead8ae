// Channel transforms: the arithmetic of each step, that a chain's output does
// not depend on how its input was cut, and that a transformed pattern cut from
// a recording is found at distance 0 where the engine streams that recording.
#include "pipeline/transforms.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <random>
#include <set>
#include <utility>

#include "kernels/search.h"
#include "pipeline/engine.h"
#include "pipeline/library.h"

namespace fs = std::filesystem;
using gw::config::TransformStep;

namespace {

constexpr double kRate = 64;

std::vector<double> sine(double hz, double amplitude, int n, double offset = 0) {
  std::vector<double> x(static_cast<std::size_t>(n));
  for (int t = 0; t < n; ++t)
    x[static_cast<std::size_t>(t)] = offset + amplitude * std::sin(2 * M_PI * hz * t / kRate);
  return x;
}

TransformStep step_of(TransformStep::Kind kind) {
  TransformStep s;
  s.kind = kind;
  return s;
}

// `n` samples of 4-channel noise through `chain` (two output channels), whole
// and from `from_sample` - history() on: the outputs of the samples from
// `from_sample` on must be the same. Returns the whole run's input and output.
std::pair<std::vector<float>, std::vector<float>> check_cut_independent(
    const gw::pipeline::TransformChain& chain, int n, int from_sample, float spread,
    unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0, spread);
  std::vector<float> in(static_cast<std::size_t>(n) * 4);
  for (auto& v : in) v = noise(rng);
  std::vector<float> whole;
  chain.apply(in.data(), n, whole);
  REQUIRE(whole.size() == static_cast<std::size_t>(n - chain.history()) * 2);
  const int from = from_sample - chain.history();
  std::vector<float> part;
  chain.apply(in.data() + static_cast<std::size_t>(from) * 4, n - from, part);
  REQUIRE(part.size() == static_cast<std::size_t>(n - from_sample) * 2);
  for (std::size_t k = 0; k < part.size(); ++k)
    REQUIRE(part[k] == whole[whole.size() - part.size() + k]);
  return {in, whole};
}

}  // namespace

TEST_CASE("derivative and lowpass", "[transforms]") {
  std::vector<double> ramp;
  for (int t = 0; t < 10; ++t) ramp.push_back(3.0 * t);
  const auto d = gw::pipeline::derivative(ramp, kRate);
  REQUIRE(d.size() == 9);
  for (const double v : d) CHECK(v == Approx(3.0 * kRate));

  const int taps = 2 * 8 + 1;  // cutoff 8 Hz at 64 Hz
  const auto dc = gw::pipeline::lowpass(std::vector<double>(100, 7.0), 8, taps, kRate);
  REQUIRE(dc.size() == 100 - (taps - 1));
  for (const double v : dc) CHECK(v == Approx(7.0));
  auto peak = [](const std::vector<double>& x) {
    double p = 0;
    for (const double v : x) p = std::max(p, std::abs(v));
    return p;
  };
  CHECK(peak(gw::pipeline::lowpass(sine(2, 1, 400), 8, taps, kRate)) > 0.9);
  CHECK(peak(gw::pipeline::lowpass(sine(24, 1, 400), 8, taps, kRate)) < 0.05);
}

TEST_CASE("the freeze index is high for trembling and low for walking", "[transforms]") {
  TransformStep fi = step_of(TransformStep::Kind::kFreezeIndex);
  fi.window_s = 2;  // 128 samples: bins every 0.5 Hz
  const auto trembling = gw::pipeline::freeze_index(sine(5, 100, 300, 1000), fi, kRate);
  const auto walking = gw::pipeline::freeze_index(sine(1.5, 100, 300, 1000), fi, kRate);
  REQUIRE(trembling.size() == 300 - 127);
  // All power (100^2 / 2) in one band, none in the other; the DC offset is in neither.
  for (const double v : trembling) CHECK(v == Approx(std::log(5000.0 + 1.0)).epsilon(1e-6));
  for (const double v : walking) CHECK(v == Approx(-std::log(5000.0 + 1.0)).epsilon(1e-6));
}

TEST_CASE("a chain's output does not depend on where its input was cut", "[transforms]") {
  gw::config::DeviceProfile device;
  device.channels = {"x", "y", "z", "w"};
  device.groups = {{"acc", 0, 2}, {"other", 3, 3}};
  TransformStep lp = step_of(TransformStep::Kind::kLowpass);
  lp.cutoff_hz = 10;
  TransformStep fi = step_of(TransformStep::Kind::kFreezeIndex);
  fi.window_s = 1;
  const std::vector<TransformStep> steps = {step_of(TransformStep::Kind::kMagnitude), lp,
                                            step_of(TransformStep::Kind::kDerivative), fi};
  const std::vector<int> inputs = {0, 1, 2, 3};
  const auto dims = gw::config::derived_channels(device, inputs, steps);
  REQUIRE(dims.size() == 2);
  CHECK(dims[0].name == "|acc|");
  CHECK(dims[0].inputs == std::vector<int>{0, 1, 2});
  const gw::pipeline::TransformChain chain(inputs, dims, steps, kRate);
  CHECK(chain.history() == (2 * 6 + 1 - 1) + 1 + (64 - 1));

  // The output for samples [200, 600) from input [200 - history, 600) only.
  check_cut_independent(chain, 600, 200, 50, 3);
  // Magnitude of one sample: |(3, 4, 0)| = 5.
  const gw::pipeline::TransformChain magnitude(
      inputs, gw::config::derived_channels(device, inputs, {steps[0]}), {steps[0]}, kRate);
  const std::vector<float> one = {3, 4, 0, -2};
  std::vector<float> out;
  magnitude.apply(one.data(), 1, out);
  CHECK(out == std::vector<float>{5, 2});
}

TEST_CASE("an orientation change measures a turn however the sensor is worn", "[transforms]") {
  // Upright (gravity on z) for 300 samples, then lying (gravity on x), with noise.
  std::mt19937 rng(11);
  std::normal_distribution<double> noise(0, 0.05);
  std::vector<std::array<double, 3>> a;
  for (int t = 0; t < 600; ++t)
    a.push_back(t < 300 ? std::array<double, 3>{noise(rng), noise(rng), 1 + noise(rng)}
                        : std::array<double, 3>{1 + noise(rng), noise(rng), noise(rng)});
  const int window = 32, lag = 96;
  const auto turn = gw::pipeline::orientation_change(a, window, lag);
  REQUIRE(turn.size() == a.size() - (lag + window - 1));
  auto at = [&](int t) { return turn[static_cast<std::size_t>(t - (lag + window - 1))]; };
  CHECK(at(250) < 5);                     // both means upright
  CHECK(at(299 + lag) == Approx(90).margin(3));  // now lying, lag ago upright
  CHECK(at(299 + window / 2) < 60);       // the window straddles the turn
  CHECK(at(599) < 5);                     // both lying again

  // The same movement from a sensor rotated on the belt (about an oblique axis).
  const double angle = 0.7, ux = 0.6, uy = 0.0, uz = 0.8;  // unit axis
  const double c = std::cos(angle), s = std::sin(angle), C = 1 - c;
  const double R[3][3] = {{c + ux * ux * C, ux * uy * C - uz * s, ux * uz * C + uy * s},
                          {uy * ux * C + uz * s, c + uy * uy * C, uy * uz * C - ux * s},
                          {uz * ux * C - uy * s, uz * uy * C + ux * s, c + uz * uz * C}};
  std::vector<std::array<double, 3>> rotated;
  for (const auto& v : a) {
    std::array<double, 3> r{};
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) r[static_cast<std::size_t>(i)] += R[i][j] * v[static_cast<std::size_t>(j)];
    rotated.push_back(r);
  }
  const auto turn_rotated = gw::pipeline::orientation_change(rotated, window, lag);
  REQUIRE(turn_rotated.size() == turn.size());
  for (std::size_t k = 0; k < turn.size(); ++k) REQUIRE(turn_rotated[k] == Approx(turn[k]).margin(1e-6));
  // The raw axes do change: the rotation is not the identity.
  CHECK(std::hypot(rotated[0][0] - a[0][0], rotated[0][1] - a[0][1], rotated[0][2] - a[0][2]) >
        0.3);

  // A zero vector has no direction: no turn, not NaN.
  const auto still = gw::pipeline::orientation_change(
      std::vector<std::array<double, 3>>(10, {0, 0, 0}), 2, 3);
  REQUIRE(still.size() == 6);
  for (const double v : still) CHECK(v == 0);
}

TEST_CASE("an orientation change chain does not depend on where its input was cut",
          "[transforms]") {
  gw::config::DeviceProfile device;
  device.channels = {"x", "y", "z", "w"};
  device.groups = {{"acc", 0, 2}, {"other", 3, 3}};
  TransformStep turn = step_of(TransformStep::Kind::kOrientationChange);
  turn.window_s = 0.25;
  turn.lag_s = 1;
  TransformStep lp = step_of(TransformStep::Kind::kLowpass);
  lp.cutoff_hz = 10;
  const std::vector<TransformStep> steps = {turn, lp};
  const std::vector<int> inputs = {0, 1, 2, 3};
  const auto dims = gw::config::derived_channels(device, inputs, steps);
  REQUIRE(dims.size() == 2);
  CHECK(dims[0].name == "turn(acc)");
  CHECK(dims[0].inputs == std::vector<int>{0, 1, 2});
  CHECK(dims[1].name == "turn(other)");
  const gw::pipeline::TransformChain chain(inputs, dims, steps, kRate);
  CHECK(chain.history() == (64 + 16 - 1) + (2 * 6 + 1 - 1));

  const int n = 500;
  const auto [in, whole] = check_cut_independent(chain, n, 150, 1, 5);
  // The group's first output against the arithmetic on its own three axes.
  std::vector<std::array<double, 3>> acc;
  for (int t = 0; t < n; ++t)
    acc.push_back({in[static_cast<std::size_t>(t) * 4], in[static_cast<std::size_t>(t) * 4 + 1],
                   in[static_cast<std::size_t>(t) * 4 + 2]});
  const auto expected = gw::pipeline::lowpass(
      gw::pipeline::orientation_change(acc, 16, 64), lp.cutoff_hz, lp.lowpass_taps(kRate), kRate);
  REQUIRE(expected.size() == static_cast<std::size_t>(n - chain.history()));
  for (std::size_t k = 0; k < expected.size(); ++k)
    REQUIRE(whole[k * 2] == Approx(expected[k]).epsilon(1e-5));
}

namespace {

// A 3-axis recording at 64 Hz: slow walking-like motion with a 5 Hz tremor
// burst, written as CSV for a pattern example and replayed as frames.
struct TremorRecording {
  fs::path dir;
  std::vector<float> values;  // sample-major x, y, z
  static constexpr int kSamples = 3000;
  static constexpr int kBurst = 1800;  // tremor from here for 400 samples
  TremorRecording() {
    dir = fs::temp_directory_path() / ("gw_transforms_test_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::mt19937 rng(11);
    std::normal_distribution<double> noise(0, 20);
    std::ofstream csv(dir / "tremor.csv");
    csv << "x,y,z\n";
    for (int t = 0; t < kSamples; ++t) {
      const bool burst = t >= kBurst && t < kBurst + 400;
      const double hz = burst ? 5.5 : 1.2;
      const double a = burst ? 150 : 300;
      const double x = a * std::sin(2 * M_PI * hz * t / kRate) + noise(rng);
      const double y = 1000 + 0.5 * a * std::cos(2 * M_PI * hz * t / kRate) + noise(rng);
      const double z = noise(rng);
      // Written exactly as the frames carry them (9 digits round-trip a float).
      const float xf = static_cast<float>(x), yf = static_cast<float>(y),
                  zf = static_cast<float>(z);
      values.insert(values.end(), {xf, yf, zf});
      csv << std::setprecision(9) << xf << "," << yf << "," << zf << "\n";
    }
  }
  ~TremorRecording() { fs::remove_all(dir); }

  gw::config::Config config() const {
    const std::string yaml =
        "devices:\n"
        "  - {id: 1, name: acc, kind: generic, sample_rate_hz: 64, channels: [x, y, z]}\n"
        "search: {backend: cpu, threads: 2}\n"
        "patterns:\n"
        "  - name: tremor\n"
        "    device: acc\n"
        "    channels: [x, y, z]\n"
        "    transforms: [magnitude, {kind: freeze_index, window_s: 2}]\n"
        "    znorm: false\n"
        "    band: 0.1\n"
        "    threshold: 0.001\n"
        "    cooldown_s: 100\n"
        "    example: {file: tremor.csv, format: csv, start: 1840, end: 1904}\n";
    return gw::config::parse_config(yaml, "transforms_test.yaml", dir.string());
  }

  std::vector<gw::pipeline::Alert> detect(const gw::config::Config& config, int frame_samples,
                                          int batch_every) const {
    gw::pipeline::Engine engine(config, gw::kernels::make_cpu_backend(2));
    std::vector<gw::pipeline::Alert> alerts;
    const auto now = [] { return 0.0; };
    std::uint32_t seq = 0;
    for (int first = 0; first < kSamples; first += frame_samples, ++seq) {
      const int n = std::min(frame_samples, kSamples - first);
      gw::sensors::Frame f;
      f.kind = gw::sensors::DeviceKind::kGeneric;
      f.wearer_id = 1;
      f.device_id = 1;
      f.channels = 3;
      f.samples = static_cast<std::uint16_t>(n);
      f.sample_rate_hz = static_cast<float>(kRate);
      f.sequence = seq;
      f.device_time_us = static_cast<std::uint64_t>(first * 1e6 / kRate);
      f.values.assign(values.begin() + first * 3, values.begin() + (first + n) * 3);
      engine.on_frame(f, 0);
      if ((seq + 1) % static_cast<std::uint32_t>(batch_every) == 0)
        for (auto& a : engine.run_batch(now)) alerts.push_back(a);
    }
    for (auto& a : engine.run_batch(now)) alerts.push_back(a);
    return alerts;
  }
};

}  // namespace

TEST_CASE("a transformed example is found where it was cut, however the stream is batched",
          "[transforms]") {
  TremorRecording rec;
  const auto config = rec.config();
  const auto& pattern = config.patterns.at(0);
  CHECK(pattern.dim_count == 1);
  CHECK(pattern.examples.at(0).lead_in == 127);
  const auto reference = rec.detect(config, 6, 1);
  REQUIRE(reference.size() == 1);
  CHECK(reference[0].end_index == 1903);  // on the rise of the freeze index
  CHECK(reference[0].distance < 1e-3);
  for (auto [frame_samples, batch_every] : {std::pair{5, 3}, {64, 1}, {13, 1000}}) {
    const auto other = rec.detect(config, frame_samples, batch_every);
    REQUIRE(other.size() == 1);
    CHECK(other[0].end_index == reference[0].end_index);
    CHECK(other[0].distance == reference[0].distance);
  }
}

TEST_CASE("orientation changes that differ only in their lag search different views, each "
          "finding its example where it was cut",
          "[transforms]") {
  TremorRecording rec;
  auto pattern = [](const std::string& name, double lag_s) {
    return "  - name: " + name +
           "\n"
           "    device: acc\n"
           "    channels: [x, y, z]\n"
           "    transforms: [{kind: orientation_change, window_s: 0.25, lag_s: " +
           std::to_string(lag_s) +
           "}]\n"
           "    znorm: false\n"
           "    band: 0.1\n"
           "    threshold: 0.001\n"
           "    cooldown_s: 100\n"
           "    example: {file: tremor.csv, format: csv, start: 1840, end: 1904}\n";
  };
  const std::string yaml =
      "devices:\n"
      "  - {id: 1, name: acc, kind: generic, sample_rate_hz: 64, channels: [x, y, z]}\n"
      "search: {backend: cpu, threads: 2}\n"
      "patterns:\n" +
      pattern("lag_1", 1) + pattern("lag_2", 2) + pattern("lag_2_again", 2);
  const auto config = gw::config::parse_config(yaml, "transforms_test.yaml", rec.dir.string());
  CHECK(config.patterns.at(0).examples.at(0).lead_in == 64 + 16 - 1);
  CHECK(config.patterns.at(1).examples.at(0).lead_in == 128 + 16 - 1);
  const auto library = gw::pipeline::compile_library(config);
  REQUIRE(library.patterns.size() == 3);
  CHECK(library.patterns[0].view != library.patterns[1].view);
  CHECK(library.patterns[1].view == library.patterns[2].view);
  // Streamed, each pattern's own example lies at distance 0 where it was cut.
  const auto alerts = rec.detect(config, 7, 2);
  std::set<std::string> found;
  for (const auto& a : alerts) {
    INFO(a.pattern << " ends at " << a.end_index << ", distance " << a.distance);
    CHECK(a.end_index == 1903);
    CHECK(a.distance < 1e-3);
    found.insert(a.pattern);
  }
  CHECK(found == std::set<std::string>{"lag_1", "lag_2", "lag_2_again"});
}
