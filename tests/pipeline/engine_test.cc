// The engine end to end in one process: planted shapes are found, results do
// not depend on how frames are batched, and gaps are respected.
#include "pipeline/engine.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <tuple>

#include "config/config.h"
#include "common/error.h"
#include "common/worker_pool.h"
#include "kernels/multi_device_backend.h"
#include "kernels/search.h"
#include "pipeline/cost_model.h"
#include "sensors/framing.h"
#include "sensors/recording.h"
#include "tests/common/sanitized.h"

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

// A config with one pattern, `chirp`, the last item (tests append keys).
const std::string kChirpYaml = R"(
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
    config = gw::config::parse_config(kChirpYaml, "engine_test.yaml", dir.string());
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

gw::sensors::Frame make_frame(const std::vector<float>& v, int first, int n, std::uint32_t seq,
                              std::uint32_t wearer = 3) {
  gw::sensors::Frame f;
  f.kind = gw::sensors::DeviceKind::kGeneric;
  f.wearer_id = wearer;
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

TEST_CASE("the planted shape's episode ends once, naming its alert", "[engine][episode]") {
  Fixture fx;
  const auto v = stream_with_plant(1200, 1);
  for (const int batch_every : {1, 7}) {
    Engine engine(fx.config, gw::kernels::make_cpu_backend(2));
    const auto now = [] { return 1.0; };
    std::vector<Alert> alerts;
    std::vector<gw::pipeline::EpisodeEnd> ends;
    std::uint32_t seq = 0;
    for (int first = 0; first < 1200; first += 10, ++seq) {
      engine.on_frame(make_frame(v, first, 10, seq), 0.5);
      if ((seq + 1) % batch_every != 0) continue;
      for (auto& a : engine.run_batch(now)) alerts.push_back(a);
      for (auto& e : engine.take_episode_ends()) ends.push_back(e);
    }
    for (auto& a : engine.run_batch(now)) alerts.push_back(a);
    for (auto& e : engine.take_episode_ends()) ends.push_back(e);
    CHECK(engine.take_episode_ends().empty());
    REQUIRE(alerts.size() == 1);
    REQUIRE(ends.size() == 1);
    const Alert& a = alerts[0];
    const gw::pipeline::EpisodeEnd& end = ends[0];
    CHECK(end.wearer == a.wearer);
    CHECK(end.device == a.device);
    CHECK(end.pattern == "chirp");
    CHECK(end.kind == a.kind);
    CHECK(end.severity == a.severity);
    CHECK(end.first_alert_end_index == a.end_index);
    CHECK(end.first_alert_t_end == a.t_end);
    CHECK(end.t_start == a.t_start);
    CHECK(end.t_end >= a.t_end);
    CHECK(end.t_end < 1200 * 0.01);
    CHECK(end.alerts == 1);
    const gw::pipeline::Event event = gw::pipeline::episode_ended_event(end, 42.0);
    CHECK(event.type == gw::pipeline::EventType::kEpisodeEnded);
    CHECK(event.wearer == a.wearer);
    CHECK(event.alert_seq == 0);  // the store resolves it
    CHECK(event.at == 42.0);
    CHECK(event.details["first_alert"]["end_index"] == a.end_index);
    CHECK(event.details["alerts"] == 1);
    CHECK(event.details["duration_s"].get<double>() == Approx(end.t_end - end.t_start));
  }
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

namespace {

// Stands in for a GPU backend where none exists: searches with the CPU
// backend, and advances a simulated clock by floor + slope per window (the
// cost model's shape), or throws on a chosen call like a failing device.
class SimulatedBackend final : public gw::kernels::SearchBackend {
 public:
  SimulatedBackend(double* clock_s, double floor_ms, double ms_per_window, int fail_on_call = -1)
      : inner_(gw::kernels::make_cpu_backend(2)), clock_s_(clock_s), floor_ms_(floor_ms),
        ms_per_window_(ms_per_window), fail_on_call_(fail_on_call) {}
  std::string name() const override { return "cuda:simulated"; }
  void set_library(std::shared_ptr<const gw::kernels::PatternLibrary> library) override {
    inner_->set_library(std::move(library));
  }
  // The first `calls` searches take `ms` more, as a GPU backend's do while
  // it allocates its buffers; reported in SearchStats::buffer_growths when
  // `reported`.
  struct OneOff {
    int calls = 0;
    double ms = 0;
    bool reported = true;
  };
  void set_one_off(OneOff one_off) { one_off_ = one_off; }
  gw::kernels::SearchResult search(const gw::kernels::SearchBatch& batch) override {
    if (++calls_ == fail_on_call_) throw gw::Error("simulated device lost");
    auto result = inner_->search(batch);
    double ms = floor_ms_ + ms_per_window_ * static_cast<double>(result.stats.windows);
    if (calls_ <= one_off_.calls) {
      ms += one_off_.ms;
      if (one_off_.reported) result.stats.buffer_growths = 1;
    }
    *clock_s_ += ms / 1000.0;
    return result;
  }

 private:
  std::unique_ptr<gw::kernels::SearchBackend> inner_;
  double* clock_s_;
  double floor_ms_, ms_per_window_;
  int fail_on_call_;
  int calls_ = 0;
  OneOff one_off_;
};

// Holds every stream's samples between batches on the host, as the CUDA
// backend's device rings do on the GPU: held_samples() answers from what each
// stream key sent before, and search() puts the omitted samples back before
// the CPU backend searches. Counts the samples it was spared and those that
// travelled (into `tally`, which outlives it); throws on a chosen call like
// a failing device.
class ResidentHistoryBackend final : public gw::kernels::SearchBackend {
 public:
  struct Tally {
    std::uint64_t omitted = 0, sent = 0;  // sample values
    std::uint64_t forgotten = 0;          // held streams forgotten
  };
  explicit ResidentHistoryBackend(int fail_on_call = -1, Tally* tally = nullptr)
      : inner_(gw::kernels::make_cpu_backend(2)), fail_on_call_(fail_on_call), tally_(tally) {}
  std::string name() const override { return "cuda:resident"; }
  void set_library(std::shared_ptr<const gw::kernels::PatternLibrary> library) override {
    inner_->set_library(std::move(library));
  }
  int held_samples(const gw::kernels::StreamSlice& slice) const override {
    const auto it = held_.find(slice.stream_key);
    if (it == held_.end() || !continues(it->second, slice)) return 0;
    return static_cast<int>(slice.first_new - slice.first_index);
  }
  gw::kernels::SearchResult search(const gw::kernels::SearchBatch& batch) override {
    if (++calls_ == fail_on_call_) throw gw::Error("simulated device lost");
    gw::kernels::SearchBatch full;
    for (const gw::kernels::StreamSlice& slice : batch.streams) {
      const auto dims = static_cast<std::size_t>(slice.dims);
      std::vector<float> samples(dims * static_cast<std::size_t>(slice.length));
      History& h = held_[slice.stream_key];
      const bool held = continues(h, slice);
      if (slice.omitted > 0 && !held) throw gw::Error("slice omits samples not held");
      for (int k = 0; k < slice.omitted; ++k)
        std::copy_n(h.samples.begin() +
                        static_cast<std::ptrdiff_t>(dims * static_cast<std::size_t>(slice.first_index - h.first + k)),
                    dims, samples.begin() + static_cast<std::ptrdiff_t>(dims * static_cast<std::size_t>(k)));
      const int present = slice.length - slice.omitted;
      for (int k = 0; k < present; ++k)
        for (std::size_t d = 0; d < dims; ++d)
          samples[dims * static_cast<std::size_t>(slice.omitted + k) + d] =
              batch.data[slice.offset + d * static_cast<std::size_t>(present) + static_cast<std::size_t>(k)];
      full.add_slice(slice.profile, slice.dims, samples.data(), slice.length, slice.first_index,
                     slice.first_new, slice.stream_key);
      h = {slice.first_index, slice.first_index + slice.length, slice.dims, std::move(samples)};
      if (tally_) {
        tally_->omitted += static_cast<std::uint64_t>(slice.omitted) * dims;
        tally_->sent += slice.data_size();
      }
    }
    return inner_->search(full);
  }
  void forget_streams(const std::vector<std::uint64_t>& stream_keys) override {
    for (const std::uint64_t key : stream_keys)
      if (held_.erase(key) > 0 && tally_) ++tally_->forgotten;
  }
  std::size_t held_streams() const { return held_.size(); }

 private:
  struct History {
    std::int64_t first = -1, next = -1;  // samples [first, next), sample-major
    int dims = 0;
    std::vector<float> samples;
  };
  static bool continues(const History& h, const gw::kernels::StreamSlice& slice) {
    return h.next >= 0 && h.dims == slice.dims && h.next == slice.first_new &&
           h.first <= slice.first_index;
  }
  std::unique_ptr<gw::kernels::SearchBackend> inner_;
  std::map<std::uint64_t, History> held_;
  int fail_on_call_;
  Tally* tally_;
  int calls_ = 0;
};

struct LoadRun {
  std::vector<std::tuple<std::string, std::uint32_t, std::int64_t>> alerts;  // (pattern, wearer, end), sorted
  gw::pipeline::EngineCounters counters;
  std::uint64_t due_windows = 0;  // searched + shed + dropped
  std::string backend_after;
  std::size_t cost_model_observations = 0;
  std::size_t cost_model_observations_before = 0;  // after the warm-up, before any frame
  Engine::WarmUp warm_up;
};

// Every window-end item a batch found due is searched, shed, dropped, lost or
// still pending, after every batch.
void check_accounting(const gw::pipeline::EngineCounters& c) {
  INFO("due " << c.due_windows << " searched " << c.searched_windows << " shed "
              << c.shed_windows << " dropped " << c.dropped_windows << " lost " << c.lost_windows
              << " pending " << c.pending_windows);
  REQUIRE(c.due_windows == c.searched_windows + c.shed_windows + c.dropped_windows +
                               c.lost_windows + c.pending_windows);
}

// `wearers` wearers each stream the planted shape (different noise), one
// 10-sample frame per 100 ms tick, on a backend that takes 2 ms + ms_per_window
// per window; afterwards batches run until nothing is due. `on_search_thread`:
// each batch as the daemon runs it (start_batch, the search on the engine's
// thread, finish_batch) instead of run_batch.
LoadRun run_under_load(const gw::config::Config& cfg, int wearers, double ms_per_window,
                       int fail_on_call = -1, bool on_search_thread = false,
                       SimulatedBackend::OneOff one_off = {}, std::size_t warm_up_streams = 0) {
  double clock = 0;
  auto backend = std::make_unique<SimulatedBackend>(&clock, 2.0, ms_per_window, fail_on_call);
  backend->set_one_off(one_off);
  Engine engine(cfg, std::move(backend));
  const auto now = [&clock] { return clock; };
  LoadRun out;
  if (warm_up_streams > 0) out.warm_up = engine.warm_up(warm_up_streams, now);
  out.cost_model_observations_before = engine.cost_model().observations();
  std::vector<std::vector<float>> data;
  for (int w = 0; w < wearers; ++w) data.push_back(stream_with_plant(900, 100 + w));
  auto collect = [&](const std::vector<Alert>& alerts) {
    for (const auto& a : alerts) out.alerts.emplace_back(a.pattern, a.wearer, a.end_index);
  };
  // The simulated backend advances `clock` on the search thread; finish_batch
  // waits for it before this thread reads the clock again.
  const auto batch = [&] {
    if (!on_search_thread) return engine.run_batch(now);
    engine.start_batch(now);
    check_accounting(engine.counters());  // adds up during the search too
    return engine.finish_batch(now);
  };
  const int ticks = 900 / 10;
  for (int t = 0; t < ticks; ++t) {
    clock = std::max(clock, t * 0.1);
    for (int w = 0; w < wearers; ++w)
      engine.on_frame(make_frame(data[w], t * 10, 10, static_cast<std::uint32_t>(t),
                                 static_cast<std::uint32_t>(w + 1)),
                      clock);
    collect(batch());
    check_accounting(engine.counters());
  }
  for (int extra = 0; extra < 50; ++extra) {
    collect(batch());
    check_accounting(engine.counters());
  }
  std::sort(out.alerts.begin(), out.alerts.end());
  out.counters = engine.counters();
  out.due_windows = out.counters.windows + out.counters.shed_windows + out.counters.dropped_windows;
  out.backend_after = engine.backend_name();
  out.cost_model_observations = engine.cost_model().observations();
  return out;
}

}  // namespace

TEST_CASE("soft deadlines: batches whose buffers grew teach the cost model nothing",
          "[engine][deadline]") {
  Fixture fx;
  fx.config.search.overload_policy = gw::config::OverloadPolicy::kDefer;
  // 8 wearers, searched in a few ms a tick; the first three searches take
  // 700 ms more, as a GPU backend's first batches do while it allocates.
  const SimulatedBackend::OneOff allocating{3, 700.0, /*reported=*/true};
  const LoadRun run = run_under_load(fx.config, 8, 0.01, -1, false, allocating);
  CHECK(run.counters.cost_model_skipped == 3);
  CHECK(run.cost_model_observations == run.counters.batches - 3);
  REQUIRE(run.alerts.size() == 8);

  // The same one-off time not reported: the model learns it and defers
  // streams for many batches after it.
  SimulatedBackend::OneOff unreported = allocating;
  unreported.reported = false;
  const LoadRun learnt = run_under_load(fx.config, 8, 0.01, -1, false, unreported);
  CHECK(learnt.counters.cost_model_skipped == 0);
  CHECK(learnt.alerts == run.alerts);
  INFO("deferred with the one-off time reported " << run.counters.deferred_streams
       << ", not reported " << learnt.counters.deferred_streams);
  CHECK(learnt.counters.deferred_streams > 0);
  // Reported, the batches are planned with a model of every batch only until
  // three that allocated nothing were seen.
  CHECK(run.counters.deferred_streams * 4 < learnt.counters.deferred_streams);
}

TEST_CASE("search warm-up: the one-off batches come before the first frame, not in the start",
          "[engine][deadline][warm_up]") {
  Fixture fx;
  fx.config.search.overload_policy = gw::config::OverloadPolicy::kDefer;
  // As above: the first three searches take 700 ms more (a GPU backend
  // allocating), here with a heavier load, so that they cost deferrals.
  const SimulatedBackend::OneOff allocating{3, 700.0, /*reported=*/true};
  const LoadRun cold = run_under_load(fx.config, 8, 0.02, -1, true, allocating);
  const LoadRun warm = run_under_load(fx.config, 8, 0.02, -1, true, allocating, 8);
  // Four synthetic batches of 8 streams' one view; the first three take the
  // one-off time. They teach the cost model nothing (their streams are not
  // real ones).
  CHECK(warm.warm_up.batches == 4);
  CHECK(warm.warm_up.slices == 8);
  CHECK(warm.warm_up.buffer_growths == 3);
  CHECK(warm.warm_up.first_ms > 700.0);
  CHECK(warm.warm_up.seconds > 2.1);
  CHECK(warm.cost_model_observations_before == 0);
  CHECK(cold.cost_model_observations_before == 0);
  // The real batches then allocate nothing, search the same and alert the
  // same; the warm-up is in no counter.
  CHECK(warm.counters.cost_model_skipped == 0);
  CHECK(warm.cost_model_observations == warm.counters.batches);
  CHECK(cold.counters.cost_model_skipped == 3);
  REQUIRE(cold.alerts.size() == 8);
  CHECK(warm.alerts == cold.alerts);
  CHECK(warm.counters.due_windows == cold.counters.due_windows);
  CHECK(warm.counters.searched_windows == cold.counters.searched_windows);
  CHECK(warm.counters.streams == 8);
  INFO("deferred cold " << cold.counters.deferred_streams << ", warm "
                        << warm.counters.deferred_streams);
  CHECK(cold.counters.deferred_streams > 0);
  CHECK(warm.counters.deferred_streams == 0);
  CHECK(warm.counters.deadline_misses < cold.counters.deadline_misses);
}

TEST_CASE("search warm-up: a backend holding history forgets the synthetic streams",
          "[engine][resident][warm_up]") {
  Fixture fx;
  ResidentHistoryBackend::Tally tally;
  auto backend = std::make_unique<ResidentHistoryBackend>(-1, &tally);
  const ResidentHistoryBackend* held = backend.get();
  Engine engine(fx.config, std::move(backend));
  const Engine::WarmUp warm = engine.warm_up(50, [] { return 1.0; });
  CHECK(warm.slices == 50);
  CHECK(warm.batches == 4);
  // Whole slices in the first batch and, after the backend was told to
  // forget them, in the second; then only new samples travelled, as for real
  // streams; at the end the backend was told every synthetic stream is gone.
  // (50 streams of 2 channels; the pattern's 31 samples of history, 10
  // samples a tick: 1, 1, 1 and 3 ticks.)
  constexpr int kHistory = kShapeLength - 1;
  CHECK(tally.omitted == 2u * kHistory * 2 * 50);
  CHECK(tally.sent == static_cast<std::uint64_t>(2 * (kHistory + 10) + 10 + 30) * 2 * 50);
  CHECK(tally.forgotten == 2 * 50);
  CHECK(held->held_streams() == 0);
  CHECK(engine.counters().streams == 0);
  CHECK(engine.counters().batches == 0);
  CHECK(engine.counters().searched_windows == 0);
  CHECK(engine.cost_model().observations() == 0);
  // Then a real stream is searched and found as without the warm-up.
  const auto v = stream_with_plant(900, 7);
  std::size_t alerts = 0;
  for (int t = 0; t < 90; ++t) {
    REQUIRE(engine.on_frame(make_frame(v, t * 10, 10, static_cast<std::uint32_t>(t)), 0.1 * t));
    alerts += engine.run_batch([] { return 1.0; }).size();
  }
  CHECK(alerts == run(fx.config, v, 10, 1).size());
  CHECK(alerts == 1);
  // A backend that fails in the warm-up (its second search) is told the
  // synthetic streams are gone; the error reaches the caller.
  ResidentHistoryBackend::Tally failed_tally;
  Engine failing(fx.config, std::make_unique<ResidentHistoryBackend>(2, &failed_tally));
  CHECK_THROWS_WITH(failing.warm_up(50, [] { return 1.0; }), "simulated device lost");
  CHECK(failed_tally.forgotten == 50);
  CHECK(failing.counters().streams == 0);
  // Nothing is warmed up without streams or patterns.
  auto empty = fx.config;
  empty.patterns.clear();
  Engine idle(empty, gw::kernels::make_cpu_backend(1));
  CHECK(idle.warm_up(50, [] { return 1.0; }).batches == 0);
  CHECK(engine.warm_up(0, [] { return 1.0; }).batches == 0);
}

TEST_CASE("soft deadlines: defer searches the most urgent streams and loses nothing",
          "[engine][deadline]") {
  Fixture fx;
  fx.config.search.overload_policy = gw::config::OverloadPolicy::kNone;
  // 8 wearers x 40 (end x pair) items per tick at 1 ms per item: 320 ms of
  // search per 100 ms tick, far over the 250 ms deadline.
  const LoadRun none = run_under_load(fx.config, 8, 1.0);
  CHECK(none.counters.deadline_misses > 0);
  CHECK(none.counters.deferred_streams == 0);
  REQUIRE(none.alerts.size() == 8);  // one planted shape per wearer

  fx.config.search.overload_policy = gw::config::OverloadPolicy::kDefer;
  const LoadRun defer = run_under_load(fx.config, 8, 1.0);
  CHECK(defer.counters.deferred_streams > 0);
  CHECK(defer.counters.shed_windows == 0);
  // Every window was searched eventually: same windows, same alerts.
  CHECK(defer.counters.windows == none.counters.windows);
  CHECK(defer.alerts == none.alerts);
  // The deferred backlog took extra batches to clear.
  CHECK(defer.counters.batches > none.counters.batches);
  CHECK(defer.counters.due_windows == none.counters.due_windows);
  CHECK(defer.counters.searched_windows == none.counters.searched_windows);
  CHECK(defer.counters.lost_windows == 0);
  CHECK(defer.counters.pending_windows == 0);
}

TEST_CASE("soft deadlines: defer with a short ring counts what overran it as lost",
          "[engine][deadline]") {
  Fixture fx;
  fx.config.search.overload_policy = gw::config::OverloadPolicy::kNone;
  const LoadRun none = run_under_load(fx.config, 8, 1.0);
  fx.config.search.overload_policy = gw::config::OverloadPolicy::kDefer;
  // Room for a window and 3 frames: a stream deferred for longer overruns.
  fx.config.ingest.ring_capacity_samples = kShapeLength + 30;
  const LoadRun defer = run_under_load(fx.config, 8, 1.0);
  CHECK(defer.counters.deferred_streams > 0);
  CHECK(defer.counters.overrun_samples > 0);
  CHECK(defer.counters.lost_windows > 0);
  CHECK(defer.counters.pending_windows == 0);
  CHECK(defer.counters.searched_windows < none.counters.searched_windows);
}

TEST_CASE("soft deadlines: shed skips what does not fit and counts it", "[engine][deadline]") {
  Fixture fx;
  fx.config.search.overload_policy = gw::config::OverloadPolicy::kNone;
  const LoadRun none = run_under_load(fx.config, 8, 1.0);
  fx.config.search.overload_policy = gw::config::OverloadPolicy::kShed;
  const LoadRun shed = run_under_load(fx.config, 8, 1.0);
  CHECK(shed.counters.shed_streams > 0);
  CHECK(shed.counters.shed_windows > 0);
  CHECK(shed.counters.windows < none.counters.windows);
  // Counters add up: what was due was either searched or shed.
  CHECK(shed.due_windows == none.counters.windows);
  CHECK(shed.counters.due_windows == none.counters.due_windows);
  CHECK(shed.counters.lost_windows == 0);
  CHECK(shed.counters.frames_accepted == none.counters.frames_accepted);
}

TEST_CASE("soft deadlines: a light load is searched whole under every policy",
          "[engine][deadline]") {
  Fixture fx;
  for (const gw::config::OverloadPolicy policy :
       {gw::config::OverloadPolicy::kDefer, gw::config::OverloadPolicy::kShed,
        gw::config::OverloadPolicy::kDropPatterns}) {
    fx.config.search.overload_policy = policy;
    const LoadRun light = run_under_load(fx.config, 2, 0.01);
    INFO(gw::config::name(policy));
    CHECK(light.counters.deferred_streams == 0);
    CHECK(light.counters.shed_windows == 0);
    CHECK(light.counters.dropped_windows == 0);
    CHECK(light.counters.deadline_misses == 0);
    CHECK(light.alerts.size() == 2);
  }
}

TEST_CASE("the cost model learns floor and slope from measured batches", "[engine][deadline]") {
  gw::pipeline::BatchCostModel model(1.0);
  CHECK_FALSE(model.ready());
  for (double work : {100.0, 400.0, 250.0, 1000.0, 50.0}) model.observe(work, 3.0 + 0.02 * work);
  REQUIRE(model.ready());
  CHECK(model.floor_ms() == Approx(3.0).margin(1e-6));
  CHECK(model.slope_ms() == Approx(0.02).margin(1e-9));
  CHECK(model.predict_ms(500) == Approx(13.0).margin(1e-6));
  CHECK(model.work_within(23.0) == Approx(1000.0).margin(1e-3));
  CHECK(model.work_within(2.0) == 0);
  // One batch size only: the pessimistic proportional fit.
  gw::pipeline::BatchCostModel flat;
  for (int i = 0; i < 4; ++i) flat.observe(200, 10);
  CHECK(flat.floor_ms() == 0);
  CHECK(flat.slope_ms() == Approx(0.05));
  // Newer batches outweigh older ones when conditions change.
  gw::pipeline::BatchCostModel forgetting(0.5);
  for (double work : {100.0, 200.0, 300.0}) forgetting.observe(work, work * 0.01);
  for (double work : {100.0, 200.0, 300.0, 100.0, 200.0, 300.0}) forgetting.observe(work, work * 0.1);
  CHECK(forgetting.slope_ms() > 0.08);
}

TEST_CASE("a failing search backend is replaced by the CPU backend with the same alerts",
          "[engine][failover]") {
  Fixture fx;
  fx.config.search.overload_policy = gw::config::OverloadPolicy::kNone;
  const LoadRun healthy = run_under_load(fx.config, 3, 0.01);
  const LoadRun failing = run_under_load(fx.config, 3, 0.01, /*fail_on_call=*/5);
  CHECK(healthy.counters.backend_failovers == 0);
  CHECK(failing.counters.backend_failovers == 1);
  CHECK(failing.backend_after.rfind("cpu", 0) == 0);
  CHECK(healthy.backend_after == "cuda:simulated");
  CHECK(failing.alerts == healthy.alerts);
  CHECK(failing.counters.windows == healthy.counters.windows);
  // The same when the search that fails runs on the engine's search thread.
  const LoadRun failing_there = run_under_load(fx.config, 3, 0.01, 5, /*on_search_thread=*/true);
  CHECK(failing_there.counters.backend_failovers == 1);
  CHECK(failing_there.backend_after.rfind("cpu", 0) == 0);
  CHECK(failing_there.alerts == healthy.alerts);
  CHECK(failing_there.counters.windows == healthy.counters.windows);
}

TEST_CASE("soft deadlines: drop_patterns skips the lowest-severity patterns only",
          "[engine][deadline]") {
  Fixture fx;
  // A second, info-level pattern on another channel view (the shape's
  // derivative); the planted chirp becomes critical.
  const std::string yaml = R"(
devices:
  - {id: 1, name: two, kind: generic, sample_rate_hz: 100, channels: [a, b]}
search: {backend: cpu, threads: 2, overload_policy: none}
patterns:
  - {name: chirp, kind: other, severity: critical, device: two, channels: [a, b],
     template: shape.csv, band: 0.1, nr: 1, threshold: 1.5, min_dims: 2, cooldown_s: 1}
  - {name: slope, kind: other, severity: info, device: two, channels: [a, b],
     transforms: [derivative], template: shape.csv, band: 0.1, nr: 1, threshold: 1.5,
     min_dims: 2, cooldown_s: 1}
)";
  auto config = gw::config::parse_config(yaml, "drop.yaml", fx.dir.string());
  const LoadRun none = run_under_load(config, 8, 1.0);
  config.search.overload_policy = gw::config::OverloadPolicy::kDropPatterns;
  const LoadRun drop = run_under_load(config, 8, 1.0);
  CHECK(drop.counters.dropped_windows > 0);
  CHECK(drop.counters.windows < none.counters.windows);
  CHECK(drop.due_windows == none.counters.windows);
  auto of = [](const LoadRun& run, const std::string& pattern) {
    std::vector<std::tuple<std::string, std::uint32_t, std::int64_t>> kept;
    for (const auto& a : run.alerts)
      if (std::get<0>(a) == pattern) kept.push_back(a);
    return kept;
  };
  REQUIRE(of(none, "chirp").size() == 8);
  CHECK(of(drop, "chirp") == of(none, "chirp"));  // the critical pattern was never dropped
}

namespace {

// The shipped config, its engine's host work on `host_threads` workers. Its
// patterns keep their views, transforms, positives and negatives, but only
// every fourth example of each kind (every eighth under a sanitizer): what
// these tests compare (batch order, threads, in-flight frames) does not
// depend on the library's size, and the full packs make them take minutes
// under the thread sanitizer.
constexpr int kExampleStride = gw::test::unless_sanitized(4, 8);

gw::config::Config shipped_config(int host_threads) {
  gw::config::Config config = gw::config::load_config(std::string(GW_CONFIG_DIR) + "/gaitwatch.yaml");
  config.search.threads = host_threads;
  for (auto& pattern : config.patterns) {
    // A wearer here streams 25 s, less than a normalised pattern's learning
    // stretch: without the normalisation every wearer is searched from its
    // first samples (tests/pipeline/baseline_test.cc covers it).
    pattern.normalise = gw::config::NormaliseConfig{};
    for (auto& example : pattern.examples) {
      example.baseline.reset();
      example.baseline_rows.reset();
    }
    std::vector<gw::config::PatternExample> kept;
    int positives = 0, negatives = 0;
    for (auto& example : pattern.examples)
      if ((example.negative ? negatives++ : positives++) % kExampleStride == 0)
        kept.push_back(std::move(example));
    pattern.examples = std::move(kept);
  }
  return config;
}

// Frames of 8 samples of the Daphnet recording for wearers 1..`wearers`
// (device 1), from staggered starts: [wearer - 1][frame].
// 25 s of each wearer from starts 40 samples apart, over two freezes; under
// a sanitizer 12.5 s from starts 20 samples apart, over the first of them.
constexpr std::size_t kFirstStart = gw::test::unless_sanitized<std::size_t>(53600, 54000);
constexpr std::size_t kStartStep = gw::test::unless_sanitized<std::size_t>(40, 20);
constexpr std::size_t kSamplesPerWearer = gw::test::unless_sanitized<std::size_t>(1600, 800);

std::vector<std::vector<gw::sensors::Frame>> daphnet_wearer_frames(int wearers) {
  static const gw::sensors::Recording recording =
      gw::sensors::read_daphnet(std::string(GW_DATA_DIR) + "/daphnet/S02R01.txt");
  std::vector<std::vector<gw::sensors::Frame>> frames;
  for (int w = 0; w < wearers; ++w) {
    const std::size_t begin = kFirstStart + kStartStep * static_cast<std::size_t>(w);
    frames.push_back(gw::sensors::frames_from_recording(
        recording, static_cast<std::uint32_t>(w + 1), 1, gw::sensors::DeviceKind::kGeneric, 8,
        begin, begin + kSamplesPerWearer, /*int16=*/false));
  }
  return frames;
}

// The shipped config's patterns (transformed views included) over the real
// Daphnet recording, `wearers` wearers from staggered starts, frames of 8
// samples, a batch after every wearer's 6th frame; the engine's host work on
// `host_threads` workers. With `frames_in_flight` > 0 each batch is started
// (start_batch) and only finished after that many more rounds of every
// wearer's frames, as the daemon takes frames while a search runs. With
// `next_before_phase2` each batch's search runs until the next batch point
// and ends there, then the next batch starts before the ended one's phase 2
// (the daemon's order when a search ends after its tick).
// `backend`: the search backend (default: a simulated GPU backend).
std::vector<Alert> run_shipped_config(int wearers, int host_threads, int frames_in_flight = 0,
                                      std::unique_ptr<gw::kernels::SearchBackend> backend = nullptr,
                                      gw::pipeline::EngineCounters* counters = nullptr,
                                      bool next_before_phase2 = false) {
  const gw::config::Config config = shipped_config(host_threads);
  const auto frames = daphnet_wearer_frames(wearers);
  // Named like a GPU backend, so that frames taken during a search are
  // appended on the engine's pool (with the CPU backend they stay on this
  // thread); its clock is written by the search and read by nobody.
  double search_clock = 0;
  if (!backend) backend = std::make_unique<SimulatedBackend>(&search_clock, 0, 0);
  Engine engine(config, std::move(backend));
  std::vector<Alert> alerts;
  const auto now = [] { return 1.0; };
  const auto keep = [&](std::vector<Alert> batch) {
    for (auto& a : batch) alerts.push_back(std::move(a));
  };
  // Frames taken while the search runs go in with one on_frames call (as the
  // daemon takes a bunch off its queue) just before the batch finishes.
  std::vector<Engine::ArrivedFrame> during_search;
  const auto take_during_search = [&] {
    std::vector<char> accepted;
    engine.on_frames(during_search, accepted);
    REQUIRE(std::count(accepted.begin(), accepted.end(), 0) == 0);
    during_search.clear();
  };
  std::size_t finish_after = frames[0].size();  // no batch in flight
  std::uint64_t oldest_unfinished_from = 0;
  for (std::size_t f = 0; f < frames[0].size(); ++f) {
    for (const auto& wearer_frames : frames) {
      if (engine.batch_in_flight())
        during_search.push_back({&wearer_frames[f], 0.5});
      else
        REQUIRE(engine.on_frame(wearer_frames[f], 0.5));
    }
    if (f == finish_after) {
      take_during_search();
      keep(engine.finish_batch(now));
      REQUIRE_FALSE(engine.batch_in_flight());
    }
    if ((f + 1) % 6 != 0) continue;
    if (next_before_phase2) {
      // unfinished_windows: the items of the started batches whose phase 2
      // has not returned, counted from searched_windows before each start.
      const auto searched = [&] { return engine.counters().searched_windows; };
      if (!engine.batch_in_flight()) {
        REQUIRE(engine.unfinished_windows() == 0);
        oldest_unfinished_from = searched();
        engine.start_batch(now);
        CHECK(engine.unfinished_windows() == searched() - oldest_unfinished_from);
        continue;
      }
      take_during_search();
      REQUIRE(engine.end_search(now));
      REQUIRE(engine.batch_searched());
      CHECK(engine.unfinished_windows() == searched() - oldest_unfinished_from);
      const auto next_from = searched();
      const bool next_started = engine.start_batch(now);
      CHECK(engine.unfinished_windows() == searched() - oldest_unfinished_from);
      if (next_started) {
        // Phase 2 runs in batch order: this search may not end before the
        // batch before it is through its phase 2.
        CHECK_THROWS_AS(engine.end_search(now), gw::Error);
        CHECK_THROWS_AS(engine.finish_batch(now), gw::Error);
        REQUIRE(engine.batch_in_flight());
      }
      CHECK_THROWS_AS(engine.reconfigure(engine.config()), gw::Error);
      keep(engine.detect_searched(now));
      REQUIRE_FALSE(engine.batch_searched());
      CHECK(engine.unfinished_windows() == searched() - next_from);
      oldest_unfinished_from = next_from;
      CHECK(engine.detect_searched(now).empty());
      continue;
    }
    if (frames_in_flight == 0) {
      keep(engine.run_batch(now));
    } else if (engine.start_batch(now)) {
      REQUIRE(engine.batch_in_flight());
      CHECK_THROWS_AS(engine.start_batch(now), gw::Error);
      CHECK_THROWS_AS(engine.reconfigure(engine.config()), gw::Error);
      finish_after = f + static_cast<std::size_t>(frames_in_flight);
    }
  }
  take_during_search();
  keep(engine.finish_batch(now));
  keep(engine.run_batch(now));
  CHECK(engine.unfinished_windows() == 0);
  if (counters) *counters = engine.counters();
  return alerts;
}

// `reference` has alerts of more than 8 wearers, and `other` the same alerts
// in the same order.
void require_same_alerts(const std::vector<Alert>& reference, const std::vector<Alert>& other) {
  std::set<std::uint32_t> wearers;
  for (const Alert& a : reference) wearers.insert(a.wearer);
  INFO(reference.size() << " alerts of " << wearers.size() << " wearers");
  REQUIRE(wearers.size() > 8);
  REQUIRE(other.size() == reference.size());
  for (std::size_t i = 0; i < reference.size(); ++i) {
    INFO("alert " << i);
    CHECK(gw::pipeline::alert_to_json(other[i]).dump() ==
          gw::pipeline::alert_to_json(reference[i]).dump());
  }
}

}  // namespace

TEST_CASE("alerts and their order do not depend on the engine's host threads", "[engine]") {
  // More wearers than one worker's chunk, so that the slices and phase 2
  // really spread over the workers.
  require_same_alerts(run_shipped_config(12, 1), run_shipped_config(12, 4));
}

TEST_CASE("frames taken while a search is in flight give the alerts of batches run one at a time",
          "[engine]") {
  // The daemon starts a batch, takes frames while the search runs and
  // finishes it later; those frames belong to the next batch.
  require_same_alerts(run_shipped_config(12, 2),
                      run_shipped_config(12, 2, /*frames_in_flight=*/3));
}

TEST_CASE("a batch started before the last one's phase 2 gives the alerts of batches run one at a time",
          "[engine]") {
  // The daemon ends a search that ran past its tick, starts the next batch
  // (its search runs meanwhile) and only then runs the ended batch's phase 2.
  gw::pipeline::EngineCounters one_at_a_time, pipelined;
  const auto reference = run_shipped_config(12, 2, 0, nullptr, &one_at_a_time);
  require_same_alerts(reference,
                      run_shipped_config(12, 2, 0, nullptr, &pipelined, /*next_before_phase2=*/true));
  CHECK(pipelined.batches == one_at_a_time.batches);
  CHECK(pipelined.searched_windows == one_at_a_time.searched_windows);
  CHECK(pipelined.single_dim_matches == one_at_a_time.single_dim_matches);
}

TEST_CASE("frames taken in bunches give what frames taken one at a time give", "[engine]") {
  // The daemon hands the engine every frame it takes off its queue in one
  // call (on_frames), and the engine appends different streams' frames on
  // its pool. Bunches of 4 rounds of 12 wearers, so that each stream has
  // several frames in one bunch; among them duplicates (out of order), a
  // skipped frame (a gap), unknown devices and profile mismatches.
  const gw::config::Config config = shipped_config(2);
  constexpr int kWearers = 12;
  const auto by_wearer = daphnet_wearer_frames(kWearers);
  std::vector<std::vector<gw::sensors::Frame>> bunches;
  for (std::size_t round = 0; round < by_wearer[0].size(); ++round) {
    if (round % 4 == 0) bunches.emplace_back();
    for (int w = 0; w < kWearers; ++w) {
      const gw::sensors::Frame& f = by_wearer[static_cast<std::size_t>(w)][round];
      if (w == 3 && round == 50) continue;  // a gap in wearer 4's stream
      bunches.back().push_back(f);
      if (w == 5 && round % 7 == 0) bunches.back().push_back(f);  // a duplicate
    }
    if (round % 9 == 0) {
      gw::sensors::Frame unknown = by_wearer[0][round];
      unknown.device_id = 77;
      bunches.back().push_back(unknown);
      gw::sensors::Frame mismatch = by_wearer[1][round];
      mismatch.kind = gw::sensors::DeviceKind::kAccelerometer3;
      bunches.back().push_back(mismatch);
    }
  }
  REQUIRE(bunches[1].size() >= 48);

  struct Run {
    std::vector<char> accepted;
    std::vector<std::tuple<std::uint32_t, std::uint32_t, int>> observed;  // wearer, sequence, verdict
    std::vector<Alert> alerts;
    gw::pipeline::EngineCounters counters;
  };
  const auto run = [&](bool in_bunches) {
    Run r;
    Engine engine(config, gw::kernels::make_cpu_backend(2));
    engine.set_frame_observer([&](const gw::sensors::Frame& f, gw::pipeline::FrameVerdict v, double) {
      r.observed.emplace_back(f.wearer_id, f.sequence, static_cast<int>(v));
    });
    const auto now = [] { return 1.0; };
    for (const auto& bunch : bunches) {
      if (in_bunches) {
        std::vector<Engine::ArrivedFrame> refs;
        for (const auto& f : bunch) refs.push_back({&f, 0.5});
        std::vector<char> accepted;
        engine.on_frames(refs, accepted);
        r.accepted.insert(r.accepted.end(), accepted.begin(), accepted.end());
      } else {
        for (const auto& f : bunch) r.accepted.push_back(engine.on_frame(f, 0.5));
      }
      for (auto& a : engine.run_batch(now)) r.alerts.push_back(std::move(a));
    }
    r.counters = engine.counters();
    return r;
  };
  const Run one = run(false);
  const Run bunched = run(true);
  CHECK(bunched.accepted == one.accepted);
  CHECK(bunched.observed == one.observed);
  const auto& a = one.counters;
  const auto& b = bunched.counters;
  CHECK(a.frames_out_of_order > 0);
  CHECK(a.frames_unknown_device > 0);
  CHECK(a.frames_profile_mismatch > 0);
  CHECK(a.gaps == 1);
  CHECK(b.frames_accepted == a.frames_accepted);
  CHECK(b.frames_out_of_order == a.frames_out_of_order);
  CHECK(b.frames_unknown_device == a.frames_unknown_device);
  CHECK(b.frames_profile_mismatch == a.frames_profile_mismatch);
  CHECK(b.gaps == a.gaps);
  CHECK(b.samples == a.samples);
  CHECK(b.streams == a.streams);
  require_same_alerts(one.alerts, bunched.alerts);
}

TEST_CASE("a batch finished after its samples left the ring gives the alerts of its start",
          "[engine]") {
  // A ring of a window and 30 samples; every 7 frames a batch starts and
  // 4 frames (40 samples) arrive before it finishes, overwriting ring slots
  // of samples it searched. Its alerts must still carry their own times.
  // Seven phases, so that the planted shape ends among the overwritten
  // samples in one of them.
  Fixture fx;
  fx.config.ingest.ring_capacity_samples = kShapeLength + 30;
  const auto v = stream_with_plant(900, 11);
  std::size_t alerts_seen = 0;
  std::size_t windows_missing = 0;
  for (int phase = 0; phase < 7; ++phase) {
    const auto run_phase = [&](bool finish_later) {
      double search_clock = 0;
      Engine engine(fx.config, std::make_unique<SimulatedBackend>(&search_clock, 0, 0));
      const auto now = [] { return 10.0; };  // latency_ms from each alert's own arrival
      std::vector<Alert> alerts;
      const auto keep = [&](std::vector<Alert> batch) {
        for (auto& a : batch) alerts.push_back(std::move(a));
      };
      for (int i = 0; i < 90; ++i) {
        REQUIRE(engine.on_frame(make_frame(v, i * 10, 10, static_cast<std::uint32_t>(i)), 0.1 * i));
        const int at = (i + phase) % 7;
        if (at == 2) {
          if (finish_later)
            engine.start_batch(now);
          else
            keep(engine.run_batch(now));
        }
        if (at == 6) keep(engine.finish_batch(now));
      }
      keep(engine.finish_batch(now));
      keep(engine.run_batch(now));
      return alerts;
    };
    const auto at_start = run_phase(false);
    const auto later = run_phase(true);
    INFO("phase " << phase);
    alerts_seen += at_start.size();
    REQUIRE(later.size() == at_start.size());
    for (std::size_t i = 0; i < at_start.size(); ++i) {
      CHECK(gw::pipeline::alert_to_json(later[i]).dump() ==
            gw::pipeline::alert_to_json(at_start[i]).dump());
      // The window: cut while the ring held it, or none at all (counted),
      // never one holding samples that overwrote it.
      REQUIRE(at_start[i].window);
      if (later[i].window)
        CHECK(later[i].window->values == at_start[i].window->values);
      else
        ++windows_missing;
    }
  }
  CHECK(alerts_seen > 0);
  // The ring holds 30 samples beyond a window and 40 arrive before a late
  // phase 2: its alerts' windows are gone, and none is cut from the samples
  // that replaced them.
  CHECK(windows_missing > 0);
}

TEST_CASE("a backend that holds the streams' history gets only new samples, with the same alerts",
          "[engine][resident]") {
  // The shipped config (raw and transformed views) over the Daphnet
  // recording; the resident backend is told the history it holds and puts
  // it back itself, so any sample the engine leaves out wrongly changes the
  // alerts. Also with frames taken while each search runs.
  const auto reference = run_shipped_config(12, 2);
  for (const int in_flight : {0, 3}) {
    INFO("frames in flight " << in_flight);
    ResidentHistoryBackend::Tally tally;
    gw::pipeline::EngineCounters counters;
    const auto alerts = run_shipped_config(
        12, 2, in_flight, std::make_unique<ResidentHistoryBackend>(-1, &tally), &counters);
    require_same_alerts(reference, alerts);
    // After a stream's first batch only its new samples travel: 48 per
    // batch, while the 127 before them (m = 128) stay behind.
    INFO("omitted " << tally.omitted << " sent " << tally.sent);
    CHECK(tally.omitted > 2 * tally.sent);
    CHECK(counters.backend_failovers == 0);
  }
}

namespace {

// The planted chirp on raw channels, 6 wearers, a batch every 3 frames of
// 10 samples (the shape completes in a batch whose slices omit the samples
// before it): the alerts as JSON; the counters and the last backend note
// (empty when none) where asked.
std::vector<std::string> chirp_wearers_alerts(const gw::config::Config& config,
                                              std::unique_ptr<gw::kernels::SearchBackend> backend,
                                              gw::pipeline::EngineCounters* counters = nullptr,
                                              std::string* note = nullptr) {
  Engine engine(config, std::move(backend));
  std::vector<std::vector<float>> data;
  for (int w = 0; w < 6; ++w) data.push_back(stream_with_plant(900, 40 + w));
  std::vector<std::string> alerts;
  const auto now = [] { return 20.0; };
  for (int t = 0; t < 90; ++t) {
    for (int w = 0; w < 6; ++w)
      REQUIRE(engine.on_frame(make_frame(data[w], t * 10, 10, static_cast<std::uint32_t>(t),
                                         static_cast<std::uint32_t>(w + 1)),
                              0.1 * t));
    if (t % 3 == 2) {
      for (const Alert& a : engine.run_batch(now))
        alerts.push_back(gw::pipeline::alert_to_json(a).dump());
      if (std::string taken = engine.take_backend_note(); note != nullptr && !taken.empty())
        *note = taken;
    }
  }
  if (counters != nullptr) *counters = engine.counters();
  return alerts;
}

}  // namespace

TEST_CASE("raw views: a backend that holds the history finds the planted shapes where the CPU does",
          "[engine][resident]") {
  Fixture fx;
  const auto run_with = [&](std::unique_ptr<gw::kernels::SearchBackend> backend) {
    return chirp_wearers_alerts(fx.config, std::move(backend));
  };
  ResidentHistoryBackend::Tally tally;
  const auto reference = run_with(gw::kernels::make_cpu_backend(2));
  const auto resident = run_with(std::make_unique<ResidentHistoryBackend>(-1, &tally));
  REQUIRE(reference.size() == 6);
  CHECK(resident == reference);
  CHECK(tally.omitted > 0);
  // The 18th batch (samples up to 540) completes the shapes (500..531); when
  // the backend fails there, the CPU backend searches it with the omitted
  // samples put back from the rings.
  CHECK(run_with(std::make_unique<ResidentHistoryBackend>(/*fail_on_call=*/18)) == reference);
}

TEST_CASE("a failing resident-history backend fails over with the omitted samples put back",
          "[engine][resident][failover]") {
  // The CPU backend holds nothing: the batch in flight when the resident
  // backend fails is searched again with every sample, the same alerts.
  const auto reference = run_shipped_config(12, 2);
  for (const int in_flight : {0, 3}) {
    INFO("frames in flight " << in_flight);
    gw::pipeline::EngineCounters counters;
    const auto alerts = run_shipped_config(
        12, 2, in_flight, std::make_unique<ResidentHistoryBackend>(/*fail_on_call=*/9), &counters);
    CHECK(counters.backend_failovers == 1);
    require_same_alerts(reference, alerts);
  }
}

// Two resident-history backends behind one multi-device backend stand for
// two GPUs (kernels/multi_device_backend.h); the second fails like a lost GPU
// on its chosen call. Each counts into its own tally (`tallies`: two, or
// null), since members search at once.
std::unique_ptr<gw::kernels::SearchBackend> two_devices(int second_fails_on_call,
                                                         ResidentHistoryBackend::Tally* tallies) {
  std::vector<gw::kernels::SearchMember> members;
  members.push_back(
      {std::make_unique<ResidentHistoryBackend>(-1, tallies ? &tallies[0] : nullptr), "GPU 0"});
  members.push_back({std::make_unique<ResidentHistoryBackend>(second_fails_on_call,
                                                              tallies ? &tallies[1] : nullptr),
                     "GPU 1"});
  return gw::kernels::make_multi_device_backend(std::move(members));
}

TEST_CASE("streams split across two devices raise the same alerts, a lost device's move over",
          "[engine][resident][multi]") {
  // The planted chirp on 6 wearers: each device holds its own streams'
  // history. When the second fails in the batch that completes the shapes,
  // its streams move to the first, that batch is searched again with every
  // sample, and no alert is lost or doubled; the CPU fallback is not used.
  Fixture fx;
  const auto run_with = [&](std::unique_ptr<gw::kernels::SearchBackend> backend,
                            gw::pipeline::EngineCounters* counters, std::string* note) {
    note->clear();
    return chirp_wearers_alerts(fx.config, std::move(backend), counters, note);
  };
  gw::pipeline::EngineCounters counters;
  std::string note;
  const auto reference = run_with(gw::kernels::make_cpu_backend(2), &counters, &note);
  REQUIRE(reference.size() == 6);
  ResidentHistoryBackend::Tally tallies[2];
  CHECK(run_with(two_devices(-1, tallies), &counters, &note) == reference);
  CHECK(tallies[0].omitted > 0);
  CHECK(tallies[1].omitted > 0);
  CHECK(counters.search_devices_lost == 0);
  CHECK(note.empty());
  CHECK(run_with(two_devices(/*second_fails_on_call=*/18, nullptr), &counters, &note) == reference);
  CHECK(counters.search_devices_lost == 1);
  CHECK(counters.backend_failovers == 0);
  CHECK(note.find("GPU 1") != std::string::npos);
  CHECK(note.find("searching on cuda:resident x1 [GPU 0]") != std::string::npos);
}

TEST_CASE("search warm-up: a GPU lost in the warm-up is counted and noted, the rest still search",
          "[engine][resident][multi][warm_up]") {
  Fixture fx;
  ResidentHistoryBackend::Tally tallies[2];
  Engine engine(fx.config, two_devices(/*second_fails_on_call=*/2, tallies));
  CHECK_THROWS(engine.warm_up(50, [] { return 1.0; }));
  CHECK(engine.counters().search_devices_lost == 1);
  CHECK(engine.backend_name().find("x1 [GPU 0]") != std::string::npos);
  const std::string note = engine.take_backend_note();
  CHECK(note.find("GPU 1") != std::string::npos);
  // The first device was told its synthetic streams are gone.
  CHECK(tallies[0].forgotten > 0);
  // Then the real stream is found on the device left.
  const auto v = stream_with_plant(900, 7);
  std::size_t alerts = 0;
  for (int t = 0; t < 90; ++t) {
    REQUIRE(engine.on_frame(make_frame(v, t * 10, 10, static_cast<std::uint32_t>(t)), 0.1 * t));
    alerts += engine.run_batch([] { return 1.0; }).size();
  }
  CHECK(alerts == 1);
  CHECK(engine.counters().backend_failovers == 0);
}

TEST_CASE("the shipped config on two devices, one lost mid-recording: the same alerts",
          "[engine][resident][multi]") {
  const auto reference = run_shipped_config(12, 2);
  for (const int in_flight : {0, 3}) {
    INFO("frames in flight " << in_flight);
    gw::pipeline::EngineCounters counters;
    const auto alerts = run_shipped_config(12, 2, in_flight, two_devices(/*second_fails_on_call=*/9, nullptr),
                                           &counters);
    CHECK(counters.search_devices_lost == 1);
    CHECK(counters.backend_failovers == 0);
    require_same_alerts(reference, alerts);
  }
}

TEST_CASE("a failover after the omitted samples left the ring counts their windows as lost",
          "[engine][resident][failover]") {
  // A ring of a window and 30 samples; the resident backend fails on the
  // third search, and 40 samples arrive before that batch finishes: the
  // samples it held are gone from the ring too, so the batch's window ends
  // cannot be searched on the CPU. They are counted as lost, nothing else.
  Fixture fx;
  fx.config.ingest.ring_capacity_samples = kShapeLength + 30;
  const auto v = stream_with_plant(900, 11);
  Engine engine(fx.config, std::make_unique<ResidentHistoryBackend>(/*fail_on_call=*/3));
  const auto now = [] { return 10.0; };
  std::uint32_t seq = 0;
  const auto feed = [&](int frames) {
    for (int i = 0; i < frames; ++i, ++seq)
      REQUIRE(engine.on_frame(make_frame(v, static_cast<int>(seq) * 10, 10, seq), 0.1 * seq));
  };
  feed(5);
  engine.run_batch(now);
  feed(1);
  engine.run_batch(now);  // the second search: history held from here on
  feed(1);
  REQUIRE(engine.start_batch(now));
  feed(4);
  engine.finish_batch(now);
  const auto& c = engine.counters();
  CHECK(c.backend_failovers == 1);
  CHECK(c.lost_windows > 0);
  CHECK(c.due_windows == c.searched_windows + c.shed_windows + c.dropped_windows + c.lost_windows +
                             c.pending_windows);
  // The next batch searches the newer samples as usual.
  const auto windows_before = c.windows;
  engine.run_batch(now);
  CHECK(engine.counters().windows > windows_before);
  CHECK(engine.counters().lost_windows == c.lost_windows);
}

TEST_CASE("ingest.max_streams: a frame that would open one stream more is dropped and counted",
          "[engine][streams]") {
  Fixture fx;
  fx.config.ingest.max_streams = 3;
  Engine engine(fx.config, gw::kernels::make_cpu_backend(1));
  const auto v = stream_with_plant(100, 5);
  for (std::uint32_t wearer = 1; wearer <= 5; ++wearer)
    CHECK(engine.on_frame(make_frame(v, 0, 10, 0, wearer), 1.0) == (wearer <= 3));
  CHECK(engine.on_frame(make_frame(v, 10, 10, 1, 2), 1.1));  // a live stream goes on
  CHECK(engine.counters().streams == 3);
  CHECK(engine.counters().streams_refused == 2);
  CHECK(engine.counters().frames_accepted == 4);
  CHECK(engine.stats_json().at("streams_refused") == 2);
}

TEST_CASE("sweep_streams counts streams by the age of their last frame and removes idle ones",
          "[engine][streams]") {
  Fixture fx;
  fx.config.ingest.stream_stale_s = 5;
  fx.config.ingest.stream_offline_s = 60;
  fx.config.ingest.stream_idle_s = 100;
  Engine engine(fx.config, gw::kernels::make_cpu_backend(1));
  const auto v = stream_with_plant(100, 6);
  // Wearers' last frames (wearer 1's last is the late one at 1099).
  const std::pair<std::uint32_t, double> last_frames[] = {
      {1, 1000}, {2, 1050}, {3, 1080}, {4, 1098}, {5, 1020}};
  for (const auto& [wearer, arrival] : last_frames)
    engine.on_frame(make_frame(v, 0, 10, 0, wearer), arrival);
  engine.on_frame(make_frame(v, 0, 10, 0, 1), 1099);  // out of order: still a frame
  CHECK(engine.sweep_streams(1100) == 0);
  CHECK(engine.counters().streams_by_state.online == 2);  // 1 (1 s), 4 (2 s)
  CHECK(engine.counters().streams_by_state.stale == 2);   // 2 (50 s), 3 (20 s)
  CHECK(engine.counters().streams_by_state.offline == 1); // 5 (80 s)
  CHECK(engine.counters().oldest_frame_age_s == Approx(80));
  CHECK(engine.sweep_streams(1125) == 1);  // 5: 105 s
  CHECK(engine.counters().streams == 4);
  CHECK(engine.counters().streams_evicted == 1);
  const nlohmann::json stats = engine.stats_json();  // 1: 26 s, 2: 75 s, 3: 45 s, 4: 27 s
  CHECK(stats.at("streams_by_state") ==
        nlohmann::json({{"online", 0}, {"stale", 3}, {"offline", 1}}));
  CHECK(stats.at("oldest_frame_age_s").get<double>() == Approx(75));
  CHECK(engine.sweep_streams(1300) == 4);
  CHECK(engine.counters().streams == 0);
  CHECK(engine.counters().oldest_frame_age_s == 0);
  // A removed stream's device may come back: a new stream, its frames taken.
  CHECK(engine.on_frame(make_frame(v, 10, 10, 1, 5), 1301));
  CHECK(engine.counters().streams == 1);
}

TEST_CASE("an idle stream a batch still references is removed only after its phase 2",
          "[engine][streams]") {
  Fixture fx;
  fx.config.ingest.stream_idle_s = 10;
  Engine engine(fx.config, gw::kernels::make_cpu_backend(1));
  const auto v = stream_with_plant(200, 7);
  for (int i = 0; i < 20; ++i) engine.on_frame(make_frame(v, i * 10, 10, i), 1.0);
  const auto now = [] { return 2.0; };
  REQUIRE(engine.start_batch(now, std::launch::deferred));
  CHECK(engine.sweep_streams(100) == 0);
  REQUIRE(engine.end_search(now));
  CHECK(engine.sweep_streams(100) == 0);
  CHECK(engine.counters().streams_by_state.offline == 1);
  engine.detect_searched(now);
  CHECK(engine.sweep_streams(100) == 1);
  CHECK(engine.counters().streams == 0);
  CHECK_FALSE(engine.start_batch(now));
}

TEST_CASE("removing idle streams leaves the alerts of active streams and the totals as they were",
          "[engine][streams]") {
  Fixture fx;
  fx.config.ingest.stream_idle_s = 2;
  const auto v = stream_with_plant(1500, 8);
  const auto reference = run(fx.config, v, 10, 1);
  REQUIRE(reference.size() == 1);
  Engine engine(fx.config, gw::kernels::make_cpu_backend(2));
  const auto noise = stream_with_plant(100, 9);
  // 40 wearers that send a few frames with a gap, then fall silent.
  for (std::uint32_t wearer = 100; wearer < 140; ++wearer) {
    engine.on_frame(make_frame(noise, 0, 10, 0, wearer), 0.0);
    engine.on_frame(make_frame(noise, 20, 10, 2, wearer), 0.0);
  }
  std::vector<Alert> alerts;
  std::size_t evicted = 0;
  const auto now = [] { return 1.0; };
  for (int first = 0, seq = 0; first < 1500; first += 10, ++seq) {
    const double arrival = first * 0.01;  // 1 s per 100 samples
    engine.on_frame(make_frame(v, first, 10, seq), arrival);
    for (auto& a : engine.run_batch(now)) alerts.push_back(a);
    evicted += engine.sweep_streams(arrival);
  }
  for (auto& a : engine.run_batch(now)) alerts.push_back(a);
  CHECK(evicted == 40);
  CHECK(engine.counters().streams == 1);
  CHECK(engine.counters().gaps == 40);  // the removed streams' gaps still count
  CHECK(engine.counters().missing_frames == 40);
  const auto& c = engine.counters();
  CHECK(c.due_windows == c.searched_windows + c.shed_windows + c.dropped_windows +
                             c.lost_windows + c.pending_windows);
  REQUIRE(alerts.size() == reference.size());
  CHECK(alerts[0].end_index == reference[0].end_index);
  CHECK(alerts[0].distance == reference[0].distance);
}

// ---------------------------------------------------------------------------
// Views that must agree (docs/detection.md §7): `chirp` alerts only when the
// view `bump` (publish: false; on the derivative of the channels, so it is a
// slice of its own) detects within within_s of it.

namespace {

float bump_value(int channel, int s) {
  const double x = static_cast<double>(s) / kShapeLength;
  return static_cast<float>(channel == 0 ? std::cos(15.0 * x) * (1.0 - x) : x * x * x - x);
}

constexpr double kWithinS = 1.0;  // 100 samples at 100 Hz

struct AgreementFixture {
  Fixture base;
  gw::config::Config config;
  AgreementFixture() {
    // The view's template: one row of lead-in (the derivative's history) first.
    std::ofstream csv(base.dir / "bump.csv");
    csv << "a,b\n";
    for (int s = -1; s < kShapeLength; ++s) csv << bump_value(0, s) << "," << bump_value(1, s) << "\n";
    csv.close();
    const std::string yaml = kChirpYaml + "    agree: {with: [bump], within_s: " +
                             std::to_string(kWithinS) + R"(}
  - name: bump
    publish: false
    device: two
    channels: [a, b]
    transforms: [derivative]
    template: bump.csv
    threshold: 1.5
    min_dims: 2
    cooldown_s: 1
)";
    config = gw::config::parse_config(yaml, "agreement_test.yaml", base.dir.string());
  }
};

// stream_with_plant (the chirp ends at kPlantAt + kShapeLength - 1) with the
// bump planted so that it ends `view_offset` samples after the chirp's end
// (none when nullopt).
std::vector<float> stream_with_views(std::optional<int> view_offset, std::uint32_t seed) {
  std::vector<float> v = stream_with_plant(1500, seed);
  if (!view_offset) return v;
  const int end = kPlantAt + kShapeLength - 1 + *view_offset;
  for (int s = -1; s < kShapeLength; ++s)
    for (int c = 0; c < 2; ++c)
      v[static_cast<std::size_t>(end - kShapeLength + 1 + s) * 2 + c] = 30.f * bump_value(c, s) - 4.f;
  return v;
}

struct AgreementRun {
  std::vector<Alert> alerts;
  std::uint64_t unagreed = 0;
};

AgreementRun run_agreement(const gw::config::Config& cfg, const std::vector<float>& v,
                           int frame_samples, int batch_every) {
  Engine engine(cfg, gw::kernels::make_cpu_backend(2));
  AgreementRun out;
  const auto now = [] { return 100.0; };
  const int samples = static_cast<int>(v.size() / 2);
  std::uint32_t seq = 0;
  for (int first = 0, i = 0; first < samples; first += frame_samples, ++i, ++seq) {
    engine.on_frame(make_frame(v, first, std::min(frame_samples, samples - first), seq),
                    first * 0.01);
    if ((i + 1) % batch_every == 0)
      for (auto& a : engine.run_batch(now)) out.alerts.push_back(a);
  }
  for (auto& a : engine.run_batch(now)) out.alerts.push_back(a);
  out.unagreed = engine.counters().unagreed_detections;
  return out;
}

}  // namespace

TEST_CASE("agree: a detection alerts only with its view inside the window, before or after",
          "[engine][agree]") {
  AgreementFixture fx;
  // The view alone, for where it detects: it raises nothing itself.
  auto views_published = fx.config;
  views_published.patterns[0].agree = {};
  views_published.patterns[1].publish = true;
  views_published.patterns[1].kind = "stumble";  // not merged with the chirp's alerts
  const int chirp_end = kPlantAt + kShapeLength - 1;
  for (const int offset : {-60, 60, -250, 250}) {
    INFO("view ends " << offset << " samples after the chirp");
    const auto v = stream_with_views(offset, 11);
    const auto both = run_agreement(views_published, v, 10, 1).alerts;
    std::optional<std::int64_t> chirp, bump;
    for (const Alert& a : both) (a.pattern == "chirp" ? chirp : bump) = a.end_index;
    REQUIRE(chirp);
    REQUIRE(bump);
    const bool agree = std::llabs(*bump - *chirp) <= std::llround(kWithinS * 100);
    CHECK(agree == (std::abs(offset) < 100));

    const AgreementRun run = run_agreement(fx.config, v, 10, 1);
    for (const Alert& a : run.alerts) CHECK(a.pattern == "chirp");
    CHECK(run.alerts.size() == (agree ? 1u : 0u));
    CHECK(run.unagreed == (agree ? 0u : 1u));
    if (agree) {
      CHECK(run.alerts[0].end_index == *chirp);
      CHECK(std::llabs(run.alerts[0].end_index - chirp_end) <= 2);
    }
  }
  SECTION("no view at all") {
    const AgreementRun run = run_agreement(fx.config, stream_with_views(std::nullopt, 12), 10, 1);
    CHECK(run.alerts.empty());
    CHECK(run.unagreed == 1);
  }
}

// Two publishing patterns of one kind that detect one event raise one alert:
// the second within the first's cooldown is merged (counted, its episode not
// reported); further apart, or of different kinds, both alert.
TEST_CASE("alerts of one kind on one stream are merged within the first alert's cooldown",
          "[engine][merge]") {
  AgreementFixture fx;
  auto both_publish = fx.config;
  both_publish.patterns[0].agree = {};
  both_publish.patterns[1].publish = true;
  both_publish.patterns[0].kind = "fall";
  both_publish.patterns[1].kind = "fall";
  auto other_kinds = both_publish;
  other_kinds.patterns[1].kind = "stumble";
  // "other" (the default kind) says nothing about the event: never merged.
  auto both_other = both_publish;
  both_other.patterns[0].kind = "other";
  both_other.patterns[1].kind = "other";
  REQUIRE(both_publish.patterns[0].cooldown_s == 1);  // 100 samples
  const auto run = [](const gw::config::Config& cfg, const std::vector<float>& v) {
    Engine engine(cfg, gw::kernels::make_cpu_backend(2));
    std::vector<Alert> alerts;
    std::vector<gw::pipeline::EpisodeEnd> ends;
    const auto now = [] { return 100.0; };
    const int samples = static_cast<int>(v.size() / 2);
    std::uint32_t seq = 0;
    for (int first = 0; first < samples; first += 10, ++seq) {
      engine.on_frame(make_frame(v, first, std::min(10, samples - first), seq), first * 0.01);
      for (auto& a : engine.run_batch(now)) alerts.push_back(a);
      for (auto& e : engine.take_episode_ends()) ends.push_back(e);
    }
    return std::tuple{alerts, ends, engine.counters().merged_alerts};
  };
  for (const int offset : {60, 250}) {
    INFO("the bump ends " << offset << " samples after the chirp");
    const auto v = stream_with_views(offset, 21);
    const auto [separate, separate_ends, separate_merged] = run(other_kinds, v);
    REQUIRE(separate.size() == 2);
    CHECK(separate_merged == 0);
    CHECK(std::get<0>(run(both_other, v)).size() == 2);
    const auto [merged, merged_ends, merged_count] = run(both_publish, v);
    if (offset < 100) {
      REQUIRE(merged.size() == 1);
      CHECK(merged[0].pattern == "chirp");
      CHECK(merged[0].end_index == separate[0].end_index);
      CHECK(merged_count == 1);
      for (const auto& e : merged_ends) CHECK(e.pattern == "chirp");
      CHECK(merged_ends.size() + 1 == separate_ends.size());
    } else {
      CHECK(merged.size() == 2);
      CHECK(merged_count == 0);
      CHECK(merged_ends.size() == separate_ends.size());
    }
  }
}

TEST_CASE("an alert held for agreement is merged into its kind's alert decided meanwhile",
          "[engine][merge][agree]") {
  // The chirp waits for the bump view (60 samples later); a copy of it that
  // needs no agreement alerts at once on the same window. One alert, the
  // copy's; the held one is merged when its agreement comes.
  AgreementFixture fx;
  auto cfg = fx.config;
  cfg.patterns[0].kind = "fall";
  gw::config::PatternConfig direct = cfg.patterns[0];
  direct.name = "chirp_direct";
  direct.agree = {};
  cfg.patterns.push_back(direct);
  const AgreementRun run = run_agreement(cfg, stream_with_views(60, 15), 10, 1);
  REQUIRE(run.alerts.size() == 1);
  CHECK(run.alerts[0].pattern == "chirp_direct");
  CHECK(run.unagreed == 0);
  // Without the copy the held chirp alerts: the merge, not a lost agreement.
  const AgreementRun alone = run_agreement(fx.config, stream_with_views(60, 15), 10, 1);
  REQUIRE(alone.alerts.size() == 1);
  CHECK(alone.alerts[0].pattern == "chirp");
}

TEST_CASE("agree: alerts do not depend on frame size or batch size", "[engine][agree]") {
  AgreementFixture fx;
  for (const int offset : {-60, 60, 90, 250}) {
    INFO("view ends " << offset << " samples after the chirp");
    const auto v = stream_with_views(offset, 13);
    const AgreementRun reference = run_agreement(fx.config, v, 10, 1);
    CHECK(reference.alerts.size() + reference.unagreed == 1);
    for (auto [frame_samples, batch_every] : {std::pair{7, 1}, {10, 5}, {33, 3}, {10, 1000}}) {
      INFO(frame_samples << " samples per frame, a batch every " << batch_every << " frames");
      const AgreementRun other = run_agreement(fx.config, v, frame_samples, batch_every);
      CHECK(other.unagreed == reference.unagreed);
      REQUIRE(other.alerts.size() == reference.alerts.size());
      for (std::size_t i = 0; i < other.alerts.size(); ++i) {
        CHECK(other.alerts[i].end_index == reference.alerts[i].end_index);
        CHECK(other.alerts[i].distance == reference.alerts[i].distance);
        CHECK(other.alerts[i].t_end == Approx(reference.alerts[i].t_end).margin(1e-9));
      }
    }
  }
}

TEST_CASE("agree: an alert held for a later view counts its latency from the view's sample",
          "[engine][agree]") {
  AgreementFixture fx;
  // Sample k arrives at k * 0.01 s (frame by frame) and the clock reads
  // 100 s: latency = 100 s minus the arrival of the sample that completed the
  // agreement, the view's, 60 samples after the chirp's.
  const AgreementRun run = run_agreement(fx.config, stream_with_views(60, 14), 10, 1);
  REQUIRE(run.alerts.size() == 1);
  const double chirp_arrival = static_cast<double>(run.alerts[0].end_index) * 0.01;
  CHECK(run.alerts[0].latency_ms < (100.0 - chirp_arrival) * 1000.0 - 500.0);
}

TEST_CASE("the engine lends its host pool only while the pool is spare", "[engine][pool]") {
  const auto now = [] { return 1.0; };
  const auto frames = daphnet_wearer_frames(3);
  // Enough samples for windows past the freeze index's lead-in.
  const auto feed = [&](Engine& engine) {
    for (std::size_t f = 0; f < 60; ++f)
      for (const auto& wearer_frames : frames) REQUIRE(engine.on_frame(wearer_frames[f], 0.5));
  };
  // One worker: nothing to lend.
  {
    double clock = 0;
    Engine engine(shipped_config(1), std::make_unique<SimulatedBackend>(&clock, 0, 0));
    CHECK(engine.spare_host_pool() == nullptr);
  }
  // A GPU backend's search leaves the pool to the caller, before and during it.
  {
    double clock = 0;
    Engine engine(shipped_config(4), std::make_unique<SimulatedBackend>(&clock, 0, 0));
    gw::WorkerPool* pool = engine.spare_host_pool();
    REQUIRE(pool != nullptr);
    CHECK(pool->size() == 4);
    feed(engine);
    REQUIRE(engine.start_batch(now));
    CHECK(engine.spare_host_pool() == pool);
    engine.finish_batch(now);
  }
  // The CPU backend's search has the cores: nothing is lent while it runs.
  {
    Engine engine(shipped_config(4), gw::kernels::make_cpu_backend(2));
    CHECK(engine.spare_host_pool() != nullptr);
    feed(engine);
    REQUIRE(engine.start_batch(now));
    CHECK(engine.spare_host_pool() == nullptr);
    engine.finish_batch(now);
    CHECK(engine.spare_host_pool() != nullptr);
  }
}
