// Per-wearer normalisation: the baseline learner against a direct
// computation, and the engine's use of it (nothing searched before the
// baseline is learned, normalised after, learned again after a device
// restart, kept over a reload, alerts independent of batching), and
// examples' baselines (given in YAML, or learned from their recording's
// start with the engine's code).
#include "pipeline/baseline.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "config/config.h"
#include "kernels/search.h"
#include "pipeline/detector.h"
#include "pipeline/alignment.h"
#include "pipeline/engine.h"
#include "pipeline/library.h"
#include "pipeline/marks.h"
#include "pipeline/transforms.h"
#include "tests/common/shipped_pack.h"

namespace fs = std::filesystem;
using gw::config::ChannelBaseline;
using gw::config::NormaliseConfig;
using gw::pipeline::Alert;
using gw::pipeline::BaselineLearner;
using gw::pipeline::Engine;

namespace {

NormaliseConfig settings(NormaliseConfig::Statistic statistic, NormaliseConfig::Scale scale,
                         double learn_s = 1) {
  NormaliseConfig n;
  n.enabled = true;
  n.learn_s = learn_s;
  n.statistic = statistic;
  n.scale = scale;
  return n;
}

// The statistics written out the long way: sort and pick, sum and divide.
double direct_median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
double direct_mean(const std::vector<double>& v) {
  double sum = 0;
  for (const double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

}  // namespace

TEST_CASE("the baseline learner's center and spread equal a direct computation", "[baseline]") {
  using S = NormaliseConfig::Statistic;
  using K = NormaliseConfig::Scale;
  std::mt19937 rng(7);
  std::lognormal_distribution<float> skewed(0.5f, 0.8f);
  for (const int count : {99, 100}) {  // odd and even: the median's two cases
    const int channels = 3;
    std::vector<float> samples(static_cast<std::size_t>(count * channels));
    for (std::size_t i = 0; i < samples.size(); ++i)
      samples[i] = skewed(rng) * static_cast<float>(1 + i % channels) - 2.0f;
    for (const S statistic : {S::kMedian, S::kMean})
      for (const K scale : {K::kNone, K::kMad, K::kStd}) {
        INFO(count << " samples, " << NormaliseConfig::name(statistic) << ", scale "
                   << NormaliseConfig::name(scale));
        // 1 s at `count` Hz: exactly the samples given, fed in uneven pieces
        // and with more offered than it needs.
        BaselineLearner learner(settings(statistic, scale), channels, count);
        REQUIRE(learner.samples_needed() == count);
        int at = 0;
        for (const int piece : {1, 7, 30}) at += learner.add(samples.data() + at * channels, piece);
        CHECK_FALSE(learner.learned());
        std::vector<float> more = samples;
        more.resize(samples.size() + 10 * channels, 1e6f);  // never taken
        CHECK(learner.add(more.data() + at * channels, count + 10 - at) == count - at);
        REQUIRE(learner.learned());
        const ChannelBaseline b = learner.finish();
        REQUIRE(b.center.size() == static_cast<std::size_t>(channels));
        for (int c = 0; c < channels; ++c) {
          std::vector<double> x;
          for (int s = 0; s < count; ++s) x.push_back(samples[static_cast<std::size_t>(s * channels + c)]);
          const double median = direct_median(x), mean = direct_mean(x);
          const double center = statistic == S::kMedian ? median : mean;
          double spread = 1;
          if (scale == K::kMad) {
            std::vector<double> deviation;
            for (const double v : x) deviation.push_back(std::abs(v - median));
            spread = direct_median(deviation);
          } else if (scale == K::kStd) {
            double sum = 0;
            for (const double v : x) sum += (v - mean) * (v - mean);
            spread = std::sqrt(sum / count);
          }
          CHECK(b.center[static_cast<std::size_t>(c)] == Approx(center).epsilon(1e-5));
          CHECK(b.spread[static_cast<std::size_t>(c)] == Approx(spread).epsilon(1e-5));
        }
        // Normalising the learned samples centres them: their own statistic
        // becomes 0 (and the spread 1).
        std::vector<float> normalised(samples.begin(), samples.begin() + count * channels);
        gw::pipeline::apply_baseline(b, normalised.data(), static_cast<std::size_t>(count));
        BaselineLearner again(settings(statistic, scale), channels, count);
        again.add(normalised.data(), count);
        const ChannelBaseline b2 = again.finish();
        for (int c = 0; c < channels; ++c) {
          CHECK(b2.center[static_cast<std::size_t>(c)] == Approx(0).margin(1e-4));
          CHECK(b2.spread[static_cast<std::size_t>(c)] == Approx(1).epsilon(1e-4));
        }
      }
  }
}

TEST_CASE("a channel constant over the learning stretch gets the smallest spread, not zero",
          "[baseline]") {
  BaselineLearner learner(settings(NormaliseConfig::Statistic::kMedian, NormaliseConfig::Scale::kMad),
                          1, 10);
  const std::vector<float> still(10, 4.0f);
  learner.add(still.data(), 10);
  const ChannelBaseline b = learner.finish();
  CHECK(b.center[0] == 4.0f);
  CHECK(b.spread[0] == gw::pipeline::kMinBaselineSpread);
}

namespace {

constexpr int kRate = 100;
constexpr int kLength = 40;
constexpr float kExampleLevel = 0;  // the example's wearer: level 0
constexpr int kLowpassHistory = 10;  // lowpass 20 Hz at 100 Hz: 11 taps

float bump(int channel, int s) {
  const double x = static_cast<double>(s) / kLength;
  return static_cast<float>(30.0 * std::sin(3.14159265 * x) * (channel == 0 ? 1.0 : x));
}

// The bump pattern on a two-channel device, up to its transforms (the
// tests add the rest).
const std::string kBumpHead = R"(
devices:
  - {id: 1, name: two, kind: generic, sample_rate_hz: 100, channels: [a, b]}
search: {backend: cpu, threads: 1}
patterns:
  - name: bump
    device: two
    channels: [a, b]
    transforms: [{kind: lowpass, cutoff_hz: 20}]
)";

// A temp dir with a template (the bump at the example's level, lead-in
// first) and configs of a lowpass pattern on it: znorm off, so the level
// counts, and normalised (learn_s 3) unless `normalise` is empty.
struct Fixture {
  fs::path dir;
  Fixture() {
    dir = fs::temp_directory_path() / ("gw_baseline_test_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::ofstream csv(dir / "bump.csv");
    csv << "a,b\n";
    for (int s = -kLowpassHistory; s < kLength; ++s)
      csv << kExampleLevel + (s < 0 ? 0 : bump(0, s)) << "," << kExampleLevel + (s < 0 ? 0 : bump(1, s))
          << "\n";
  }
  ~Fixture() { fs::remove_all(dir); }
  // `ring`: ingest.ring_capacity_samples.
  gw::config::Config config(const std::string& normalise, const std::string& baseline,
                            int ring = 8192) const {
    std::string yaml = "ingest: {ring_capacity_samples: " + std::to_string(ring) + "}\n" +
                       kBumpHead + R"(    band: 0.1
    znorm: false
    threshold: 12
    min_dims: 2
    cooldown_s: 1
)";
    if (!normalise.empty()) yaml += "    normalise: " + normalise + "\n";
    yaml += "    examples:\n      - {template: bump.csv" +
            (baseline.empty() ? std::string() : ", baseline: " + baseline) + "}\n";
    return gw::config::parse_config(yaml, "baseline_test.yaml", dir.string());
  }
};

const std::string kNormalise = "{learn_s: 3, statistic: median, scale: none}";
const std::string kExampleBaseline = "{learn_s: 3, statistic: median, scale: none, center: [0, 0]}";

// A wearer at `level` with noise, the bump planted at each of `plants`.
std::vector<float> wearer_stream(int samples, float level, const std::vector<int>& plants,
                                 std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.f, 0.5f);
  std::vector<float> v(static_cast<std::size_t>(samples) * 2);
  for (int s = 0; s < samples; ++s)
    for (int c = 0; c < 2; ++c) {
      float x = level + noise(rng);
      for (const int at : plants)
        if (s >= at && s < at + kLength) x += bump(c, s - at);
      v[static_cast<std::size_t>(s) * 2 + c] = x;
    }
  return v;
}

gw::sensors::Frame frame_of(const std::vector<float>& v, int first, int n, std::uint32_t seq) {
  gw::sensors::Frame f;
  f.kind = gw::sensors::DeviceKind::kGeneric;
  f.wearer_id = 5;
  f.device_id = 1;
  f.channels = 2;
  f.samples = static_cast<std::uint16_t>(n);
  f.sample_rate_hz = kRate;
  f.sequence = seq;
  f.device_time_us = static_cast<std::uint64_t>(first) * 10000;
  f.values.assign(v.begin() + first * 2, v.begin() + (first + n) * 2);
  return f;
}

// Feeds `v` in frames of `frame_samples` from sequence number `first_seq`,
// a batch every `batch_every` frames and at the end; the alerts' end indices.
std::vector<std::int64_t> feed(Engine& engine, const std::vector<float>& v, int frame_samples,
                               int batch_every, std::uint32_t first_seq = 0) {
  std::vector<std::int64_t> ends;
  const auto now = [] { return 1.0; };
  const auto keep = [&](const std::vector<Alert>& alerts) {
    for (const Alert& a : alerts) ends.push_back(a.end_index);
  };
  const int samples = static_cast<int>(v.size() / 2);
  std::uint32_t seq = first_seq;
  for (int first = 0, i = 0; first < samples; first += frame_samples, ++i) {
    engine.on_frame(frame_of(v, first, std::min(frame_samples, samples - first), seq++), 0.5);
    if ((i + 1) % batch_every == 0) keep(engine.run_batch(now));
  }
  keep(engine.run_batch(now));
  return ends;
}

std::vector<std::int64_t> run_engine(const gw::config::Config& config, const std::vector<float>& v,
                                     int frame_samples, int batch_every) {
  Engine engine(config, gw::kernels::make_cpu_backend(1));
  return feed(engine, v, frame_samples, batch_every);
}

// Whether one of `ends` completes the bump planted at `at`: within the
// lowpass's delay (half its taps) and a little warping.
constexpr int kEndTolerance = kLowpassHistory / 2 + 3;
bool alerted_at(const std::vector<std::int64_t>& ends, int at) {
  return std::any_of(ends.begin(), ends.end(), [&](std::int64_t e) {
    return std::llabs(e - (at + kLength - 1)) <= kEndTolerance;
  });
}

// Writes a two-channel stream (sample-major) as a CSV recording, the floats
// exactly.
void write_recording(const fs::path& path, const std::vector<float>& v) {
  std::ofstream csv(path);
  csv.precision(9);
  csv << "a,b\n";
  for (std::size_t s = 0; s < v.size() / 2; ++s) csv << v[2 * s] << "," << v[2 * s + 1] << "\n";
}

// The bump pattern normalised with `normalise`, its one example the window
// [start, start + kLength) of the CSV recording `file`.
std::string recording_example_config(const std::string& normalise, const std::string& file,
                                     int start) {
  return kBumpHead + R"(    znorm: false
    threshold: 12
    normalise: )" + normalise + R"(
    examples:
      - {file: )" + file + ", format: csv, start: " + std::to_string(start) +
         ", end: " + std::to_string(start + kLength) + "}\n";
}

}  // namespace

TEST_CASE("a normalised pattern finds a wearer's movement at the wearer's own level",
          "[baseline][engine]") {
  Fixture fx;
  // Wearer at level 25: the bump planted at 600 sits 25 above the example's
  // level, beyond the threshold unnormalised; normalised it matches.
  const auto v = wearer_stream(1000, 25.f, {600}, 1);
  CHECK(run_engine(fx.config("", ""), v, 10, 1).empty());
  const auto ends = run_engine(fx.config(kNormalise, kExampleBaseline), v, 10, 1);
  REQUIRE(ends.size() == 1);
  CHECK(alerted_at(ends, 600));
}

TEST_CASE("nothing is searched before the baseline is learned, and alerts do not depend on batching",
          "[baseline][engine]") {
  Fixture fx;
  const auto config = fx.config(kNormalise, kExampleBaseline);
  // learn_s 3 = 300 view samples, from the first sample after the lowpass's
  // history: learned after sample 310. The bump at 100 lies inside the
  // learning stretch, the one at 700 after it.
  const auto v = wearer_stream(1100, 25.f, {100, 700}, 2);
  const auto reference = run_engine(config, v, 10, 1);
  CHECK_FALSE(alerted_at(reference, 100));
  CHECK(alerted_at(reference, 700));
  for (const auto& [frame, every] : std::vector<std::pair<int, int>>{{1, 1}, {7, 3}, {25, 5}, {64, 50}}) {
    INFO("frames of " << frame << ", a batch every " << every);
    CHECK(run_engine(config, v, frame, every) == reference);
  }
  // The first window end searched is the one after the last learned sample.
  Engine engine(config, gw::kernels::make_cpu_backend(1));
  feed(engine, wearer_stream(305, 25.f, {}, 3), 5, 1);
  CHECK(engine.counters().due_windows == 0);
  feed(engine, wearer_stream(20, 25.f, {}, 4), 5, 1, 61);
  CHECK(engine.counters().due_windows == (325 - (kLowpassHistory + 300)) * 2);  // 2 dim pairs
}

TEST_CASE("a device restart learns the baseline again, and a reload keeps it", "[baseline][engine]") {
  Fixture fx;
  // A short ring: what a fresh learner could still learn from after a
  // reload is less than a learning stretch, so a reload that dropped the
  // baseline would leave the next seconds unsearched.
  const int ring = 128;
  const int pairs = 2;  // window end x dim pair items per window end
  const auto config = fx.config(kNormalise, kExampleBaseline, ring);
  Engine engine(config, gw::kernels::make_cpu_backend(1));
  // Learned at level 25, searched.
  feed(engine, wearer_stream(600, 25.f, {}, 5), 10, 1, 5000);
  CHECK(engine.counters().due_windows == static_cast<std::uint64_t>((600 - 310) * pairs));
  // A reload with the same view keeps the baseline: a bump right after it
  // is found.
  engine.reconfigure(config);
  auto ends = feed(engine, wearer_stream(200, 25.f, {50}, 6), 10, 1, 5060);
  CHECK(ends.size() == 1);
  // The device restarts (its sequence goes far back) at another level: the
  // first seconds are not searched while it learns again, then a bump at
  // the new level is found.
  const std::uint64_t before_restart = engine.counters().due_windows;
  const std::int64_t restart_at = 800;
  ends = feed(engine, wearer_stream(900, 60.f, {150, 600}, 7), 10, 1, 0);
  CHECK(engine.counters().restarts == 1);
  REQUIRE(ends.size() == 1);
  CHECK(alerted_at(ends, restart_at + 600));
  CHECK(engine.counters().due_windows - before_restart ==
        static_cast<std::uint64_t>((900 - (kLowpassHistory + 300)) * pairs));
  // A reload that changes the normalisation learns afresh, from what the
  // ring still holds on: the bump right after it is not searched.
  engine.reconfigure(fx.config("{learn_s: 2, statistic: median, scale: none}",
                               "{learn_s: 2, statistic: median, scale: none, center: [0, 0]}", ring));
  ends = feed(engine, wearer_stream(300, 60.f, {20}, 8), 10, 1, 90);
  CHECK(ends.empty());
}

TEST_CASE("examples' baselines: as given in YAML, or learned from their recording's start",
          "[baseline][config]") {
  Fixture fx;
  // Given: the compiled example carries it and its shape is normalised by it.
  const auto given = gw::pipeline::compile_library(
      fx.config("{learn_s: 3, statistic: mean, scale: std}",
                "{learn_s: 3, statistic: mean, scale: std, center: [1.5, -2], spread: [2, 4]}"));
  const auto plain = gw::pipeline::compile_library(fx.config("", ""));
  const auto& example = given.patterns.at(0).examples.at(0);
  REQUIRE(example.baseline);
  CHECK(example.baseline->center == std::vector<float>{1.5f, -2.0f});
  CHECK(example.baseline->spread == std::vector<float>{2.0f, 4.0f});
  const auto& normalised = given.kernel_library->patterns.at(example.kernel).dims;
  const auto& raw = plain.kernel_library->patterns.at(plain.patterns[0].examples[0].kernel).dims;
  REQUIRE(normalised.size() == raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const bool second = i >= static_cast<std::size_t>(kLength);
    CHECK(normalised[i] == Approx((raw[i] - (second ? -2.0f : 1.5f)) / (second ? 4.0f : 2.0f)));
  }

  // Learned: a window of a recording learns from the recording's first
  // history + learn_s rows, through the view's transforms, as a stream does.
  const auto v = wearer_stream(700, 40.f, {500}, 9);
  write_recording(fx.dir / "wearer.csv", v);
  const std::string yaml = recording_example_config(
      "{learn_s: 3, statistic: median, scale: mad}", "wearer.csv", 500);
  const auto config = gw::config::parse_config(yaml, "learned.yaml", fx.dir.string());
  REQUIRE(config.patterns[0].examples[0].baseline_rows);
  const auto library = gw::pipeline::compile_library(config);
  const auto& learned = library.patterns[0].examples[0].baseline;
  REQUIRE(learned);
  // Directly: the lowpass of the recording's first 310 rows, median and MAD.
  const auto& view = library.views[library.patterns[0].view];
  std::vector<float> transformed;
  view.chain->apply(v.data(), kLowpassHistory + 300, transformed);
  REQUIRE(transformed.size() == 600);
  for (int c = 0; c < 2; ++c) {
    std::vector<double> x;
    for (int s = 0; s < 300; ++s) x.push_back(transformed[static_cast<std::size_t>(2 * s + c)]);
    const double median = direct_median(x);
    std::vector<double> deviation;
    for (const double y : x) deviation.push_back(std::abs(y - median));
    CHECK(learned->center[static_cast<std::size_t>(c)] == Approx(median).epsilon(1e-6));
    CHECK(learned->spread[static_cast<std::size_t>(c)] == Approx(direct_median(deviation)).epsilon(1e-5));
  }
  // The engine over the same recording learns the same baseline, so the
  // example sits at distance ~0 where it was cut.
  Engine engine(config, gw::kernels::make_cpu_backend(1));
  const auto ends = feed(engine, v, 10, 1);
  CHECK(alerted_at(ends, 500));
}

TEST_CASE("learning from active samples passes over the quiet ones and says where it stopped",
          "[baseline]") {
  NormaliseConfig gated = settings(NormaliseConfig::Statistic::kMedian, NormaliseConfig::Scale::kStd);
  gated.active_above = 1;
  // 1 s at 10 Hz: ten active samples. Every third sample is active, through
  // one channel only (the other stays quiet): it counts for both.
  const int channels = 2;
  std::vector<float> samples;
  std::vector<double> active_a, active_b;
  for (int s = 0; s < 40; ++s) {
    const bool active = s % 3 == 0;
    const float a = active ? (s % 2 == 0 ? 2.0f + 0.1f * s : -3.0f - 0.1f * s) : 0.5f;
    const float b = active ? 0.25f * static_cast<float>(s % 5) : -1.0f;  // |b| <= 1: never active alone
    samples.push_back(a);
    samples.push_back(b);
    if (active && active_a.size() < 10) {
      active_a.push_back(a);
      active_b.push_back(b);
    }
  }
  BaselineLearner learner(gated, channels, 10);
  REQUIRE(learner.samples_needed() == 10);
  // Samples 0..24 hold nine active ones (0, 3, ..., 24): all read, not learned.
  CHECK(learner.add(samples.data(), 25) == 25);
  CHECK(learner.samples_taken() == 9);
  CHECK_FALSE(learner.learned());
  // The tenth active sample is 27: reading stops right after it.
  CHECK(learner.add(samples.data() + 25 * channels, 15) == 3);
  REQUIRE(learner.learned());
  CHECK(learner.add(samples.data() + 28 * channels, 12) == 0);
  const ChannelBaseline b = learner.finish();
  CHECK(b.center[0] == Approx(direct_median(active_a)));
  CHECK(b.center[1] == Approx(direct_median(active_b)));
  double sum = 0;
  const double mean = direct_mean(active_b);
  for (const double v : active_b) sum += (v - mean) * (v - mean);
  CHECK(b.spread[1] == Approx(std::sqrt(sum / 10)));
}

namespace {

const std::string kGated = "{learn_s: 3, statistic: median, scale: none, active_above: 5}";
const std::string kGatedExampleBaseline =
    "{learn_s: 3, statistic: median, scale: none, active_above: 5, center: [0, 0]}";

// A wearer who is still (about 0) for the first `still` samples, then at
// level 25, the bump planted at each of `plants`.
std::vector<float> still_then_active(int samples, int still, const std::vector<int>& plants,
                                     std::uint32_t seed) {
  std::vector<float> v = wearer_stream(samples, 25.f, plants, seed);
  for (int s = 0; s < still; ++s)
    for (int c = 0; c < 2; ++c) v[static_cast<std::size_t>(s) * 2 + c] -= 25.f;
  return v;
}

}  // namespace

TEST_CASE("a baseline learned from active samples reads the wearer at their moving level",
          "[baseline][engine]") {
  Fixture fx;
  // Still for 500 samples, then at level 25: the bump at 1000 is found only
  // when the baseline is learned from the active samples (from about 500 to
  // 800); learned from the first samples the centre is the still level 0.
  const auto v = still_then_active(1400, 500, {650, 1000}, 11);
  const auto from_start = run_engine(fx.config(kNormalise, kExampleBaseline), v, 10, 1);
  CHECK_FALSE(alerted_at(from_start, 1000));
  const auto config = fx.config(kGated, kGatedExampleBaseline);
  const auto gated = run_engine(config, v, 10, 1);
  CHECK(alerted_at(gated, 1000));
  // The bump at 650 lies in the learning stretch: not searched.
  CHECK_FALSE(alerted_at(gated, 650));
  for (const auto& [frame, every] : std::vector<std::pair<int, int>>{{1, 1}, {7, 3}, {64, 50}}) {
    INFO("frames of " << frame << ", a batch every " << every);
    CHECK(run_engine(config, v, frame, every) == gated);
  }
  // Nothing is searched while the wearer is still, however long.
  Engine engine(config, gw::kernels::make_cpu_backend(1));
  feed(engine, still_then_active(2000, 2000, {}, 12), 10, 1);
  CHECK(engine.counters().due_windows == 0);
}

TEST_CASE("a normalised pattern's alert window keeps the stream's baseline, and marked false it stops "
          "that wearer's alert on the same samples",
          "[baseline][marks][engine]") {
  Fixture fx;
  const auto config = fx.config(kNormalise, kExampleBaseline);
  const auto v = wearer_stream(1000, 25.f, {600}, 1);
  const auto alerts_of = [&](const gw::config::Config& c) {
    Engine engine(c, gw::kernels::make_cpu_backend(1));
    std::vector<Alert> out;
    for (int first = 0, seq = 0; first < 1000; first += 10, ++seq) {
      engine.on_frame(frame_of(v, first, 10, static_cast<std::uint32_t>(seq)), 0.5);
      for (Alert& a : engine.run_batch([] { return 1.0; })) out.push_back(std::move(a));
    }
    return out;
  };
  const std::vector<Alert> before = alerts_of(config);
  REQUIRE(before.size() == 1);
  REQUIRE(before[0].window);
  const gw::pipeline::AlertWindow& window = *before[0].window;
  // The baseline the stream learned: the one learned from the stream's first
  // rows by the function the pattern compiler uses for examples.
  const gw::pipeline::CompiledLibrary library = gw::pipeline::compile_library(config);
  const ChannelBaseline learned =
      gw::pipeline::learn_view_baseline(library.views.at(0), v.data(), 1000, kRate);
  CHECK(window.baseline_center == learned.center);
  CHECK(window.baseline_spread == learned.spread);
  CHECK(window.baseline_center.size() == 2);
  CHECK(std::fabs(window.baseline_center[0] - 25.f) < 0.5f);  // the wearer's level

  const auto& pattern = config.patterns[0];
  const gw::config::PatternExample negative =
      gw::pipeline::example_from_window(pattern, kRate, window, gw::pipeline::MarkVerdict::kFalse);
  REQUIRE(negative.baseline);
  CHECK(negative.baseline->center == learned.center);
  gw::config::Config marked = config;
  CHECK(gw::pipeline::add_marked_examples(marked, {{1, "bump", negative}}, 50).applied.size() == 1);
  CHECK(alerts_of(marked).empty());

  // The match explained from the stored window is what the search compared:
  // the window normalised with its baseline gives each dim's distance.
  const gw::pipeline::AlertExplanation explained =
      gw::pipeline::explain_alert(config, before[0], window);
  CHECK_FALSE(explained.approximate);
  REQUIRE(explained.dims.size() == before[0].dims.size());
  for (std::size_t i = 0; i < explained.dims.size(); ++i)
    CHECK(explained.dims[i].alignment.distance == Approx(before[0].dims[i].distance).epsilon(1e-4));

  // The same window without its baseline (as cut from a recording) cannot
  // become a normalised pattern's example, nor a window with one another's;
  // its explanation is approximate.
  gw::pipeline::AlertWindow bare = window;
  bare.baseline_center.clear();
  bare.baseline_spread.clear();
  CHECK_THROWS_WITH(
      gw::pipeline::example_from_window(pattern, kRate, bare, gw::pipeline::MarkVerdict::kFalse),
      Catch::Contains("keeps no baseline"));
  CHECK(gw::pipeline::explain_alert(config, before[0], bare).approximate);
  gw::pipeline::AlertWindow zero_spread = window;
  zero_spread.baseline_spread[1] = 0;
  CHECK_THROWS_WITH(
      gw::pipeline::example_from_window(pattern, kRate, zero_spread, gw::pipeline::MarkVerdict::kFalse),
      Catch::Contains("spread above 0"));
  // Other normalise settings: another shape (the baseline was learned under
  // these).
  gw::config::PatternConfig relearned = pattern;
  relearned.normalise.learn_s = 4;
  CHECK_THROWS_WITH(
      gw::pipeline::example_from_window(relearned, kRate, window, gw::pipeline::MarkVerdict::kFalse),
      Catch::Contains("changed its shape"));
}

TEST_CASE("an example's baseline learned from its recording's active samples",
          "[baseline][config]") {
  Fixture fx;
  const auto v = still_then_active(1200, 400, {900}, 13);
  write_recording(fx.dir / "wearer.csv", v);
  write_recording(fx.dir / "still.csv", still_then_active(1200, 1200, {}, 14));
  const auto yaml = [](const char* file) {
    return recording_example_config(kGated, file, 900);
  };
  const auto config = gw::config::parse_config(yaml("wearer.csv"), "gated.yaml", fx.dir.string());
  const auto library = gw::pipeline::compile_library(config);
  const auto& learned = library.patterns[0].examples[0].baseline;
  REQUIRE(learned);
  // Directly: the first 300 transformed samples with some |value| above 5.
  const auto& view = library.views[library.patterns[0].view];
  std::vector<float> transformed;
  view.chain->apply(v.data(), 1200, transformed);
  for (int c = 0; c < 2; ++c) {
    std::vector<double> x;
    for (std::size_t s = 0; s < transformed.size() / 2 && x.size() < 300; ++s)
      if (std::fabs(transformed[2 * s]) > 5 || std::fabs(transformed[2 * s + 1]) > 5)
        x.push_back(transformed[2 * s + static_cast<std::size_t>(c)]);
    REQUIRE(x.size() == 300);
    CHECK(learned->center[static_cast<std::size_t>(c)] == Approx(direct_median(x)).epsilon(1e-6));
    CHECK(learned->center[static_cast<std::size_t>(c)] == Approx(25).margin(1));
  }
  // The engine over the same recording learns the same baseline.
  Engine engine(config, gw::kernels::make_cpu_backend(1));
  CHECK(alerted_at(feed(engine, v, 10, 1), 900));
  // A recording whose wearer never moves gives no baseline: the pattern
  // cannot be compiled, and the message says which example and why.
  const auto still = gw::config::parse_config(yaml("still.csv"), "still.yaml", fx.dir.string());
  CHECK_THROWS_WITH(gw::pipeline::compile_library(still),
                    Catch::Matchers::Contains("pattern 'bump': example") &&
                        Catch::Matchers::Contains("1190 transformed samples hold 0 active ones"));
}

// The shipped freeze pack gives each template the baseline of the recording
// it was exported from (`pattern export`): those written in the pack must be
// the ones the compiler learns from the recordings today, or the pack
// compares every wearer against stale examples.
TEST_CASE("the shipped freeze pack's baselines are those learned from its recordings",
          "[pipeline][baseline]") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("gw_shipped_baselines_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto first_pattern = [](gw::config::Config config) {
    config.patterns.resize(1);  // the fog pack comes first
    REQUIRE(config.patterns[0].name == "fog_freeze_index");
    REQUIRE(config.patterns[0].normalise.enabled);
    return gw::pipeline::compile_library(config).patterns.at(0).examples;
  };
  const auto from_pack = first_pattern(gw::config::load_config(std::string(GW_CONFIG_DIR) + "/gaitwatch.yaml"));
  const auto learned = first_pattern(gw::config::parse_config(
      gw::test::shipped_config_with_windows(dir), "windows.yaml", GW_CONFIG_DIR));
  std::filesystem::remove_all(dir);
  REQUIRE(from_pack.size() == learned.size());
  REQUIRE(from_pack.size() > 100);
  for (std::size_t e = 0; e < from_pack.size(); ++e) {
    INFO("example " << e);
    REQUIRE(from_pack[e].baseline.has_value());
    REQUIRE(learned[e].baseline.has_value());
    // The pack writes 9 significant digits: the same float.
    CHECK(from_pack[e].baseline->center == learned[e].baseline->center);
    CHECK(from_pack[e].baseline->spread == learned[e].baseline->spread);
  }
}
