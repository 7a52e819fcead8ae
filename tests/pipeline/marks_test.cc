// Examples learned from marks (pipeline/marks.h) through the engine: the
// window an alert carries, the example made of it for one wearer, and the
// decision of each wearer's streams over the same samples.
#include "pipeline/marks.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/error.h"
#include "kernels/search.h"
#include "pipeline/alignment.h"
#include "pipeline/engine.h"

namespace fs = std::filesystem;
using gw::pipeline::Alert;
using gw::pipeline::Engine;
using gw::pipeline::MarkVerdict;

namespace {

constexpr int kLength = 32;
constexpr int kPlantAt = 400;
// Little noise on the planted shape and a tight threshold: the shape matches
// at its own alignment only, so the alert's window is that alignment.
constexpr float kPlantNoise = 0.05f;

float shape_value(int channel, int s) {
  const double x = static_cast<double>(s) / kLength;
  return static_cast<float>(channel == 0 ? std::sin(12.0 * x * x) : std::cos(9.0 * x) * x);
}

struct Fixture {
  fs::path dir = fs::temp_directory_path() / ("gw_marks_test_" + std::to_string(::getpid()));
  gw::config::Config config;
  Fixture() {
    fs::create_directories(dir);
    std::ofstream csv(dir / "shape.csv");
    csv << "a,b\n";
    for (int s = 0; s < kLength; ++s) csv << shape_value(0, s) << "," << shape_value(1, s) << "\n";
    csv.close();
    config = gw::config::parse_config(R"(
devices:
  - {id: 1, name: two, kind: generic, sample_rate_hz: 100, channels: [a, b]}
search: {backend: cpu, threads: 1}
patterns:
  - {name: chirp, device: two, channels: [a, b], template: shape.csv, band: 0.1, znorm: true,
     threshold: 0.5, min_dims: 2, cooldown_s: 100}
)",
                                      "marks_test.yaml", dir.string());
  }
  ~Fixture() { fs::remove_all(dir); }
};

// Noise with the shape planted, scaled and offset a little.
gw::sensors::Recording stream(std::uint32_t seed) {
  gw::sensors::Recording rec;
  rec.source = "synthetic";
  rec.sample_rate_hz = 100;
  rec.channel_names = {"a", "b"};
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.f, 1.f);
  for (int s = 0; s < 800; ++s) {
    rec.time_s.push_back(s / 100.0);
    for (int c = 0; c < 2; ++c) {
      float x = noise(rng);
      if (s >= kPlantAt && s < kPlantAt + kLength) x = 30.f * shape_value(c, s - kPlantAt) + kPlantNoise * x;
      rec.values.push_back(x);
    }
  }
  return rec;
}

// The alerts of each wearer's stream of the same samples; with
// `windows_paused` the engine cuts no windows (the daemon's writer behind).
std::map<std::uint32_t, std::vector<Alert>> run(const gw::config::Config& config,
                                                const gw::sensors::Recording& rec,
                                                const std::vector<std::uint32_t>& wearers,
                                                bool windows_paused = false,
                                                gw::pipeline::EngineCounters* counters = nullptr) {
  Engine engine(config, gw::kernels::make_cpu_backend(1));
  engine.set_alert_windows_paused(windows_paused);
  std::map<std::uint32_t, std::vector<Alert>> alerts;
  const auto now = [] { return 1.0; };
  std::uint32_t seq = 0;
  for (std::size_t first = 0; first < rec.samples(); first += 20, ++seq) {
    for (std::uint32_t wearer : wearers) {
      gw::sensors::Frame f;
      f.kind = gw::sensors::DeviceKind::kGeneric;
      f.wearer_id = wearer;
      f.device_id = 1;
      f.channels = 2;
      f.samples = 20;
      f.sample_rate_hz = 100;
      f.sequence = seq;
      f.device_time_us = first * 10000;
      f.values.assign(rec.values.begin() + static_cast<std::ptrdiff_t>(first * 2),
                      rec.values.begin() + static_cast<std::ptrdiff_t>((first + 20) * 2));
      REQUIRE(engine.on_frame(f, 0.5));
    }
    for (Alert& a : engine.run_batch(now)) alerts[a.wearer].push_back(std::move(a));
  }
  CHECK(engine.counters().alert_windows_unavailable == 0);
  if (counters) *counters = engine.counters();
  return alerts;
}

}  // namespace

TEST_CASE("paused windows: the same alerts without their windows, counted", "[marks]") {
  Fixture fx;
  const gw::sensors::Recording rec = stream(11);
  gw::pipeline::EngineCounters cut, paused;
  const auto with_windows = run(fx.config, rec, {1, 2}, /*windows_paused=*/false, &cut);
  const auto without = run(fx.config, rec, {1, 2}, /*windows_paused=*/true, &paused);
  REQUIRE(with_windows.size() == 2);
  REQUIRE(without.size() == 2);
  for (const std::uint32_t wearer : {1u, 2u}) {
    const auto& a = with_windows.at(wearer);
    const auto& b = without.at(wearer);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i].window);
      CHECK_FALSE(b[i].window);
      CHECK(b[i].end_index == a[i].end_index);
      CHECK(b[i].distance == a[i].distance);
    }
  }
  CHECK(cut.alert_windows_paused == 0);
  CHECK(paused.alert_windows_paused == cut.alerts);
  CHECK(paused.alerts == cut.alerts);
}

// marks.window_budget_mb_per_s: a window of this pattern is 2 channels x 32
// float32 samples (256 bytes); a budget of 256 bytes a second, with a clock
// that does not move, lets the one phase 2 that raises the three wearers'
// alerts cut one window. The others are raised without, counted.
TEST_CASE("the window budget: alerts beyond it are raised without their windows, counted",
          "[marks]") {
  Fixture fx;
  const gw::sensors::Recording rec = stream(11);
  gw::pipeline::EngineCounters unlimited, limited;
  fx.config.marks.window_budget_mb_per_s = 0;
  const auto all = run(fx.config, rec, {1, 2, 3}, false, &unlimited);
  fx.config.marks.window_budget_mb_per_s = 256e-6;
  const auto some = run(fx.config, rec, {1, 2, 3}, false, &limited);
  REQUIRE(unlimited.alerts == 3);
  REQUIRE(limited.alerts == 3);
  int with_window = 0;
  for (const auto& [wearer, alerts] : some)
    for (const Alert& a : alerts) with_window += a.window ? 1 : 0;
  CHECK(with_window == 1);
  CHECK(limited.alert_windows_over_budget == 2);
  CHECK(unlimited.alert_windows_over_budget == 0);
  for (const auto& [wearer, alerts] : all)
    for (const Alert& a : alerts) CHECK(a.window);
  // The same alerts either way.
  for (const std::uint32_t wearer : {1u, 2u, 3u}) {
    REQUIRE(all.at(wearer).size() == some.at(wearer).size());
    CHECK(all.at(wearer).front().end_index == some.at(wearer).front().end_index);
  }
}

TEST_CASE("a wearer's false mark stops that wearer's alert on the same samples, not others'",
          "[marks]") {
  Fixture fx;
  const gw::sensors::Recording rec = stream(11);
  auto before = run(fx.config, rec, {1, 2});
  REQUIRE(before[1].size() == 1);
  REQUIRE(before[2].size() == 1);
  const Alert& alert = before[2][0];
  REQUIRE(alert.window);
  const gw::pipeline::AlertWindow& window = *alert.window;
  CHECK(window.wearer == 2);
  CHECK(window.lead_in == 0);
  CHECK(window.length == kLength);
  // The window the engine cut from its ring is the one cut offline from the
  // recording at the alert's end: the same example either way.
  const auto& pattern = fx.config.patterns[0];
  const auto& device = fx.config.devices[0];
  const gw::pipeline::AlertWindow offline =
      gw::pipeline::window_from_recording(pattern, device, rec, alert.end_index, 2);
  CHECK(offline.values == window.values);
  CHECK(offline.shape == window.shape);

  const gw::config::PatternExample negative =
      gw::pipeline::example_from_window(pattern, device.sample_rate_hz, window, MarkVerdict::kFalse);
  CHECK(negative.negative);
  REQUIRE(negative.wearer);
  CHECK(*negative.wearer == 2);
  gw::config::Config marked = fx.config;
  const auto applied = gw::pipeline::add_marked_examples(marked, {{1, "chirp", negative}}, 50);
  CHECK(applied.applied == std::vector<std::uint64_t>{1});
  REQUIRE(marked.patterns[0].examples.size() == 2);
  CHECK(marked.patterns[0].examples.back().negative);

  auto after = run(marked, rec, {1, 2});
  CHECK(after[1].size() == 1);  // wearer 1 still alerts
  CHECK(after[2].empty());      // wearer 2's negative equals the window
  // A true mark instead keeps the alert (a second positive).
  gw::config::Config confirmed = fx.config;
  gw::pipeline::add_marked_examples(
      confirmed,
      {{2, "chirp",
        gw::pipeline::example_from_window(pattern, device.sample_rate_hz, window, MarkVerdict::kTrue)}},
      50);
  CHECK(run(confirmed, rec, {2})[2].size() == 1);
}

TEST_CASE("example_from_window refuses a window of another shape", "[marks]") {
  Fixture fx;
  const auto& pattern = fx.config.patterns[0];
  const gw::sensors::Recording rec = stream(3);
  const auto window =
      gw::pipeline::window_from_recording(pattern, fx.config.devices[0], rec, 500, 4);
  gw::config::PatternConfig longer = pattern;
  longer.length = kLength + 1;
  CHECK_THROWS_WITH(gw::pipeline::example_from_window(longer, 100, window, MarkVerdict::kFalse),
                    Catch::Contains("changed its shape"));
  gw::config::PatternConfig renamed = pattern;
  renamed.name = "other";
  CHECK_THROWS_AS(gw::pipeline::example_from_window(renamed, 100, window, MarkVerdict::kFalse),
                  gw::Error);
  CHECK_THROWS_WITH(gw::pipeline::window_from_recording(pattern, fx.config.devices[0], rec, 10, 4),
                    Catch::Contains("needs samples"));
}

TEST_CASE("add_marked_examples keeps the newest per wearer and pattern within the cap",
          "[marks]") {
  Fixture fx;
  const auto& pattern = fx.config.patterns[0];
  const gw::sensors::Recording rec = stream(5);
  std::vector<gw::pipeline::MarkedExample> examples;
  for (std::uint64_t id = 1; id <= 4; ++id) {
    const auto w = gw::pipeline::window_from_recording(pattern, fx.config.devices[0], rec,
                                                       100 + static_cast<std::int64_t>(id),
                                                       id == 4 ? 9 : 8);
    examples.push_back({id, "chirp",
                        gw::pipeline::example_from_window(pattern, 100, w,
                                                          id == 2 ? MarkVerdict::kTrue
                                                                  : MarkVerdict::kFalse)});
  }
  examples.push_back({5, "gone", examples[0].example});
  gw::config::Config config = fx.config;
  const auto applied = gw::pipeline::add_marked_examples(config, examples, 2);
  CHECK(applied.applied == std::vector<std::uint64_t>{2, 3, 4});
  CHECK(applied.over_cap == std::vector<std::uint64_t>{1});
  CHECK(applied.unknown_pattern == std::vector<std::uint64_t>{5});
  const auto& list = config.patterns[0].examples;
  REQUIRE(list.size() == 4);
  // Positives stay before negatives.
  CHECK_FALSE(list[0].negative);
  CHECK_FALSE(list[1].negative);
  CHECK(*list[1].wearer == 8);
  CHECK(list[2].negative);
  CHECK(list[3].negative);
  CHECK(*list[3].wearer == 9);
}

TEST_CASE("an alert's stored window explains the match: the example and each dim's distance",
          "[marks]") {
  Fixture fx;
  const gw::sensors::Recording rec = stream(11);
  auto alerts = run(fx.config, rec, {1});
  REQUIRE(alerts[1].size() == 1);
  const Alert& alert = alerts[1][0];
  REQUIRE(alert.window);
  const gw::pipeline::AlertExplanation explained =
      gw::pipeline::explain_alert(fx.config, alert, *alert.window);
  CHECK(explained.example == 0);
  CHECK_FALSE(explained.approximate);
  REQUIRE(explained.dims.size() == alert.dims.size());
  for (std::size_t i = 0; i < alert.dims.size(); ++i) {
    INFO("dim " << i);
    const auto& a = explained.dims[i].alignment;
    CHECK(explained.dims[i].pattern_dim == alert.dims[i].pattern_dim);
    // What the search measured, recomputed from the stored samples.
    CHECK(a.distance == Approx(alert.dims[i].distance).epsilon(1e-4));
    REQUIRE(a.path.size() >= static_cast<std::size_t>(kLength));
    CHECK(a.path.front() == std::pair<int, int>{0, 0});
    CHECK(a.path.back() == std::pair<int, int>{kLength - 1, kLength - 1});
  }
  // A pattern that is no longer configured cannot explain it.
  gw::config::Config renamed = fx.config;
  renamed.patterns[0].name = "other";
  CHECK_THROWS_WITH(gw::pipeline::explain_alert(renamed, alert, *alert.window),
                    Catch::Contains("no longer configured"));
}
