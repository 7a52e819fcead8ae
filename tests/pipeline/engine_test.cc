// The engine end to end in one process: planted shapes are found, results do
// not depend on how frames are batched, and gaps are respected.
#include "pipeline/engine.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "config/config.h"
#include "kernels/search.h"

namespace fs = std::filesystem;
using gw::pipeline::Alert;
using gw::pipeline::Engine;

namespace {

constexpr int kShapeLength = 32;
constexpr int kPlantAt = 500;  // first sample of the planted shape

float shape_value(int channel, int s) {
  const double x = static_cast<double>(s) / kShapeLength;
  return static_cast<float>(channel == 0 ? std::sin(12.0 * x * x) : std::cos(9.0 * x) * x);
}

// A temp dir with a template CSV and a config using it.
struct Fixture {
  fs::path dir;
  gw::config::Config config;
  Fixture() {
    dir = fs::temp_directory_path() / ("gw_engine_test_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::ofstream csv(dir / "shape.csv");
    csv << "a,b\n";
    for (int s = 0; s < kShapeLength; ++s)
      csv << shape_value(0, s) << "," << shape_value(1, s) << "\n";
    csv.close();
    const std::string yaml = R"(
devices:
  - {id: 1, name: two, kind: generic, sample_rate_hz: 100, channels: [a, b]}
search: {backend: cpu, threads: 2}
patterns:
  - name: chirp
    kind: other
    severity: info
    device: two
    channels: [a, b]
    template: shape.csv
    band: 0.1
    znorm: true
    nr: 1
    threshold: 1.5
    min_dims: 2
    alpha: 1.5
    cooldown_s: 1
)";
    config = gw::config::parse_config(yaml, "engine_test.yaml", dir.string());
  }
  ~Fixture() { fs::remove_all(dir); }
};

// Noise with the shape planted (scaled and offset, as z-normalisation allows).
std::vector<float> stream_with_plant(int samples, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.f, 1.f);
  std::vector<float> v(static_cast<std::size_t>(samples) * 2);
  for (int s = 0; s < samples; ++s)
    for (int c = 0; c < 2; ++c) {
      float x = noise(rng);
      if (s >= kPlantAt && s < kPlantAt + kShapeLength)
        x = 40.f * shape_value(c, s - kPlantAt) + 7.f + 0.05f * x;
      v[static_cast<std::size_t>(s) * 2 + c] = x;
    }
  return v;
}

gw::sensors::Frame make_frame(const std::vector<float>& v, int first, int n, std::uint32_t seq) {
  gw::sensors::Frame f;
  f.kind = gw::sensors::DeviceKind::kGeneric;
  f.wearer_id = 3;
  f.device_id = 1;
  f.channels = 2;
  f.samples = static_cast<std::uint16_t>(n);
  f.sample_rate_hz = 100;
  f.sequence = seq;
  f.device_time_us = static_cast<std::uint64_t>(first) * 10000;
  f.values.assign(v.begin() + first * 2, v.begin() + (first + n) * 2);
  return f;
}

// Feeds frames of `frame_samples`, skipping frame `skip` (-1 = none), and runs
// a batch every `batch_every` frames.
std::vector<Alert> run(const gw::config::Config& cfg, const std::vector<float>& v,
                       int frame_samples, int batch_every, int skip = -1) {
  Engine engine(cfg, gw::kernels::make_cpu_backend(2));
  std::vector<Alert> alerts;
  const auto now = [] { return 1.0; };
  const int samples = static_cast<int>(v.size() / 2);
  std::uint32_t seq = 0;
  for (int first = 0, i = 0; first < samples; first += frame_samples, ++i, ++seq) {
    const int n = std::min(frame_samples, samples - first);
    if (i != skip) engine.on_frame(make_frame(v, first, n, seq), 0.5);
    if ((i + 1) % batch_every == 0)
      for (auto& a : engine.run_batch(now)) alerts.push_back(a);
  }
  for (auto& a : engine.run_batch(now)) alerts.push_back(a);
  return alerts;
}

}  // namespace

TEST_CASE("a planted two-channel shape raises one alert where it completes", "[engine]") {
  Fixture fx;
  const auto v = stream_with_plant(1200, 1);
  const auto alerts = run(fx.config, v, 10, 1);
  REQUIRE(alerts.size() == 1);
  const Alert& a = alerts[0];
  CHECK(a.pattern == "chirp");
  CHECK(a.wearer == 3);
  CHECK(a.matched_dims == 2);
  CHECK(std::llabs(a.end_index - (kPlantAt + kShapeLength - 1)) <= 2);
  CHECK(a.t_end == Approx(a.end_index * 0.01).margin(1e-9));
  CHECK(a.latency_ms == Approx(500.0));
  CHECK(a.distance < 1.5 * 2);
  for (const auto& d : a.dims) CHECK(d.pattern_dim == d.stream_dim);
}

TEST_CASE("alerts do not depend on frame size or batch size", "[engine]") {
  Fixture fx;
  const auto v = stream_with_plant(1500, 2);
  const auto reference = run(fx.config, v, 10, 1);
  REQUIRE_FALSE(reference.empty());
  for (auto [frame_samples, batch_every] : {std::pair{7, 1}, {10, 5}, {33, 3}, {10, 1000}}) {
    const auto other = run(fx.config, v, frame_samples, batch_every);
    REQUIRE(other.size() == reference.size());
    for (std::size_t i = 0; i < other.size(); ++i) {
      CHECK(other[i].end_index == reference[i].end_index);
      CHECK(other[i].distance == reference[i].distance);
      CHECK(other[i].matched_dims == reference[i].matched_dims);
    }
  }
}

TEST_CASE("a lost frame inside the shape means no window spans the gap", "[engine]") {
  Fixture fx;
  const auto v = stream_with_plant(1200, 3);
  CHECK(run(fx.config, v, 10, 1).size() == 1);
  CHECK(run(fx.config, v, 10, 1, /*skip=*/kPlantAt / 10 + 1).empty());
}

TEST_CASE("frames that do not fit their device profile are counted, not used", "[engine]") {
  Fixture fx;
  Engine engine(fx.config, gw::kernels::make_cpu_backend(1));
  const auto v = stream_with_plant(100, 4);
  auto f = make_frame(v, 0, 10, 0);
  f.device_id = 9;
  engine.on_frame(f, 0);
  f.device_id = 1;
  f.kind = gw::sensors::DeviceKind::kAccelerometer3;
  engine.on_frame(f, 0);
  CHECK(engine.counters().frames_unknown_device == 1);
  CHECK(engine.counters().frames_profile_mismatch == 1);
  CHECK(engine.counters().frames_accepted == 0);
}

TEST_CASE("reconfigure swaps patterns between batches", "[engine]") {
  Fixture fx;
  const auto v = stream_with_plant(1200, 5);
  auto strict = fx.config;
  strict.patterns[0].threshold = 0.01;
  CHECK(run(strict, v, 10, 1).empty());

  Engine engine(strict, gw::kernels::make_cpu_backend(1));
  const auto now = [] { return 0.0; };
  std::size_t alerts = 0;
  for (int i = 0; i < 120; ++i) {
    if (i == 40) engine.reconfigure(fx.config);  // before the shape starts at 500
    engine.on_frame(make_frame(v, i * 10, 10, static_cast<std::uint32_t>(i)), 0);
    alerts += engine.run_batch(now).size();
  }
  CHECK(alerts == 1);
}
