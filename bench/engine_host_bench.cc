// engine_host_bench: the pipeline thread's host work per W1 wearer and tick,
// apart from the search: the work that can keep the whole daemon below the
// wearer count its GPU search alone sustains (docs/benchmarks.md, "Engine
// host path").
//
// Drives the real pipeline::Engine with N synthetic W1 wearers
// (sensors/synthetic.h, synthetic from gaitpdb; the W1 configuration of
// e2e_bench, bench/w1_workload.h) for T simulated 100-ms ticks: every tick,
// one 10-sample frame per wearer through Engine::on_frame (or on_frames in
// bunches of --frames-at-once, as the daemon takes them), then
// Engine::run_batch, as the daemon's pipeline thread does. No sockets, no
// clock waits: it runs as fast as the host allows.
//
// To keep the search out of the host figure on a machine without a GPU, the
// wearers play `--distinct` different streams (wearer w plays stream
// w % distinct, all in step), and the backend is a memo around the real CPU
// backend: each tick it searches only the distinct slices and gives every
// slice the matches of its identical representative. Every wearer still
// gets its own stream state, view caches, batch slice, match list, trackers
// and alerts, so the host work per wearer is what N distinct wearers cost.
//
// Per tick the time is split into on_frame (all frames of the tick), batch
// assembly (run_batch up to the backend call), search (the backend call: the
// memo and the real searches; not host work of the engine) and phase 2 (the
// rest of run_batch: trackers, alerts, counters). One JSON line per wearer
// count ("engine_host"): means and p99 over the measured ticks (after
// --warmup-ticks), host microseconds per wearer-tick (on_frame + assembly +
// phase 2) in wall time and in this thread's CPU time (the figure to trust
// on a shared host, but only the calling thread's: with --threads > 1 the
// engine spreads slice filling and phase 2 over its pool, and wall time is
// the figure), and a digest of every alert (so that two builds can be
// shown to raise the same alerts).
//
// With --gait, the same run also does the daemon's gait work for every frame
// (gait/monitor.h): the feet's loads reduced from the 2 x 99 insole cells
// (what the daemon's ingest threads do) and the monitor's strides and
// minutes (what its pipeline thread does), each timed on its own and
// reported beside the host figure as a ratio; --gait-examples FILE also
// scores every stride against a gait pack's examples.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench/w1_workload.h"
#include "common/error.h"
#include "gait/examples.h"
#include "gait/monitor.h"
#include "config/config.h"
#include "kernels/search.h"
#include "sinks/alert.h"
#include "pipeline/engine.h"
#include "sensors/frame.h"
#include "sensors/recording.h"
#include "sensors/synthetic.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using json = nlohmann::ordered_json;
using gw::bench::kSampleRateHz;
using gw::sensors::kW1Channels;

constexpr int kTickMs = 100;
constexpr int kFrameSamples = kSampleRateHz * kTickMs / 1000;
constexpr int kDeviceId = 1;

// Wall clock, this thread's CPU time and the whole process's: on a shared
// host the CPU time leaves out the time a thread waited for a core, and the
// process's counts the engine's pool threads as well (the one figure that
// compares a multi-threaded phase with a single-threaded one).
struct Stamp {
  Clock::time_point wall;
  double cpu_s = 0;
  double process_cpu_s = 0;
};
double clock_s(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
Stamp stamp() {
  return {Clock::now(), clock_s(CLOCK_THREAD_CPUTIME_ID), clock_s(CLOCK_PROCESS_CPUTIME_ID)};
}
double wall_ms(const Stamp& a, const Stamp& b) {
  return std::chrono::duration<double, std::milli>(b.wall - a.wall).count();
}
double cpu_ms(const Stamp& a, const Stamp& b) { return (b.cpu_s - a.cpu_s) * 1000.0; }
double process_cpu_ms(const Stamp& a, const Stamp& b) { return (b.process_cpu_s - a.process_cpu_s) * 1000.0; }

// Searches each distinct slice of a batch once (the wrapped backend) and
// copies its matches to the identical slices. Records when the search
// started and ended, so the caller can split run_batch around it.
class MemoBackend : public gw::kernels::SearchBackend {
 public:
  explicit MemoBackend(std::unique_ptr<gw::kernels::SearchBackend> inner)
      : inner_(std::move(inner)) {}
  std::string name() const override { return "memo(" + inner_->name() + ")"; }
  void set_library(std::shared_ptr<const gw::kernels::PatternLibrary> library) override {
    inner_->set_library(std::move(library));
  }
  gw::kernels::SearchResult search(const gw::kernels::SearchBatch& batch) override {
    gw::kernels::SearchResult result;
    search_into(batch, result);
    return result;
  }
  void search_into(const gw::kernels::SearchBatch& batch,
                   gw::kernels::SearchResult& result) override {
    started = stamp();
    // Representative of each slice: the first earlier slice with the same
    // shape and samples.
    gw::kernels::SearchBatch distinct;
    std::vector<std::size_t> rep_of(batch.streams.size());
    std::vector<std::size_t> reps;  // batch slice of each distinct slice
    std::unordered_map<std::uint64_t, std::vector<std::size_t>> by_hash;
    for (std::size_t s = 0; s < batch.streams.size(); ++s) {
      const gw::kernels::StreamSlice& slice = batch.streams[s];
      const float* data = batch.data.data() + slice.offset;
      const std::size_t n = static_cast<std::size_t>(slice.length) * slice.dims;
      std::uint64_t h = 1469598103934665603ull ^ static_cast<std::uint64_t>(slice.first_index);
      h = h * 1099511628211ull ^ static_cast<std::uint64_t>(slice.first_new);
      h = h * 1099511628211ull ^ slice.profile;
      h = h * 1099511628211ull ^ n;
      for (std::size_t i = 0; i < n; i += 97) {
        std::uint32_t bits = 0;
        std::memcpy(&bits, data + i, sizeof bits);
        h = (h ^ bits) * 1099511628211ull;
      }
      auto& candidates = by_hash[h];
      bool found = false;
      for (const std::size_t d : candidates) {
        const gw::kernels::StreamSlice& other = distinct.streams[d];
        if (other.first_index == slice.first_index && other.first_new == slice.first_new &&
            other.profile == slice.profile && other.dims == slice.dims &&
            other.length == slice.length &&
            std::memcmp(distinct.data.data() + other.offset, data, n * sizeof(float)) == 0) {
          rep_of[s] = d;
          found = true;
          break;
        }
      }
      if (found) continue;
      // add_slice takes sample-major values; the batch holds them dim-major.
      std::vector<float> sample_major(n);
      for (int d = 0; d < slice.dims; ++d)
        for (int t = 0; t < slice.length; ++t)
          sample_major[static_cast<std::size_t>(t) * slice.dims + d] =
              data[static_cast<std::size_t>(d) * slice.length + t];
      distinct.add_slice(slice.profile, slice.dims, sample_major.data(), slice.length,
                         slice.first_index, slice.first_new, slice.stream_key);
      rep_of[s] = distinct.streams.size() - 1;
      candidates.push_back(rep_of[s]);
      reps.push_back(s);
    }
    inner_->search_into(distinct, inner_result_);
    // Matches of each distinct slice: [first, end) in inner_result_.
    std::vector<std::size_t> first(distinct.streams.size() + 1, 0);
    for (const gw::kernels::Match& m : inner_result_.matches) ++first[m.slice + 1];
    for (std::size_t d = 0; d < distinct.streams.size(); ++d) first[d + 1] += first[d];
    result.matches.clear();
    result.stats = {};
    for (std::size_t s = 0; s < batch.streams.size(); ++s) {
      const std::size_t d = rep_of[s];
      for (std::size_t i = first[d]; i < first[d + 1]; ++i) {
        gw::kernels::Match m = inner_result_.matches[i];
        m.slice = static_cast<std::uint32_t>(s);
        result.matches.push_back(m);
      }
    }
    result.stats = inner_result_.stats;
    distinct_slices = distinct.streams.size();
    ended = stamp();
  }

  Stamp started, ended;
  std::size_t distinct_slices = 0;

 private:
  std::unique_ptr<gw::kernels::SearchBackend> inner_;
  gw::kernels::SearchResult inner_result_;
};

struct Options {
  std::string wearers = "50,200";
  int ticks = 150;
  int warmup_ticks = 20;
  int distinct = 2;
  int threads = 0;
  int frames_at_once = 1;
  std::string patterns = "random-walk";
  double threshold = 0;
  int min_dims = 0;
  std::string data;
  std::uint64_t seed = 1;
  bool gait = false;
  std::string gait_examples;
};

// The W1 device's feet: cells 0..98 the left insole, 99..197 the right.
std::map<std::uint16_t, std::vector<gw::gait::FootSource>> w1_feet() {
  std::vector<gw::gait::FootSource> feet(2);
  for (int f = 0; f < 2; ++f) {
    feet[static_cast<std::size_t>(f)].foot = static_cast<gw::gait::Foot>(f);
    feet[static_cast<std::size_t>(f)].layout = gw::gait::pressure_grid_layout();
    for (int c = 0; c < gw::sensors::kW1InsoleChannels; ++c)
      feet[static_cast<std::size_t>(f)].cells.push_back(f * gw::sensors::kW1InsoleChannels + c);
  }
  return {{static_cast<std::uint16_t>(kDeviceId), feet}};
}

std::string engine_config(const Options& options, const gw::bench::W1PatternSet& set,
                          const fs::path& templates) {
  // overload_policy none: the memo's search times say nothing about the
  // real backend's, so the cost model must not defer anything.
  return R"(daemon:
  log_level: warn
ingest:
  ring_capacity_samples: 256
)" + gw::bench::w1_devices_yaml(kDeviceId) +
         "search:\n  backend: cpu\n  threads: " + std::to_string(options.threads) +
         "\n  tick_ms: " + std::to_string(kTickMs) +
         "\n  deadline_ms: 250\n  overload_policy: none\n" +
         gw::bench::w1_patterns_yaml(set.values.size(), templates,
                                     options.threshold > 0 ? options.threshold : set.threshold,
                                     options.min_dims > 0 ? options.min_dims : set.min_dims);
}

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (const double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

double p99(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(0.99 * static_cast<double>(v.size())))];
}

json run(const Options& options, int wearers, const gw::config::Config& config,
         const std::vector<std::vector<float>>& streams) {
  auto memo = std::make_unique<MemoBackend>(gw::kernels::make_cpu_backend(options.threads));
  MemoBackend* backend = memo.get();
  gw::pipeline::Engine engine(config, std::move(memo));
  // The simulated clock: tick k ends at k * 100 ms (arrival = device time).
  double sim_now = 0;
  const auto now = [&sim_now] { return sim_now; };
  const int distinct = std::min(options.distinct, wearers);
  gw::sensors::Frame frame;
  frame.kind = gw::sensors::DeviceKind::kGeneric;
  frame.format = gw::sensors::SampleFormat::kFloat32;
  frame.device_id = kDeviceId;
  frame.channels = kW1Channels;
  frame.samples = kFrameSamples;
  frame.sample_rate_hz = kSampleRateHz;
  std::vector<std::vector<float>> tick_values(static_cast<std::size_t>(distinct));
  std::vector<double> on_frame_ms, assembly_ms, search_ms, phase2_ms;
  std::vector<double> on_frame_cpu, assembly_cpu, phase2_cpu;  // thread CPU ms
  std::vector<double> host_process_cpu;                        // all threads' CPU ms, host phases
  std::uint64_t alerts = 0, distinct_slices = 0;
  std::uint64_t digest = 1469598103934665603ull;  // FNV-1a over the alerts' JSON
  std::vector<gw::pipeline::Engine::ArrivedFrame> refs;
  std::vector<char> accepted;
  std::optional<gw::gait::GaitMonitor> gait;
  if (options.gait) {
    gw::gait::MonitorOptions gait_options;
    if (!options.gait_examples.empty()) {
      auto library = std::make_shared<gw::gait::StrideLibrary>(gait_options.cycles.curve_points,
                                                               gw::gait::AbnormalParams{});
      for (auto& e : gw::gait::read_stride_examples(options.gait_examples, gait_options.cycles.curve_points))
        library->add(std::move(e));
      gait_options.library = std::move(library);
    }
    gait.emplace(gait_options, w1_feet());
  }
  const auto feet = w1_feet().begin()->second;
  std::vector<std::vector<gw::gait::FootLoad>> loads(static_cast<std::size_t>(wearers));
  std::vector<double> reduce_ms, monitor_ms, reduce_cpu, monitor_cpu, gait_process_cpu;
  for (int tick = 0; tick < options.ticks; ++tick) {
    const std::size_t length = streams[0].size() / kW1Channels;
    for (int d = 0; d < distinct; ++d) {
      auto& v = tick_values[static_cast<std::size_t>(d)];
      v.resize(static_cast<std::size_t>(kFrameSamples) * kW1Channels);
      for (int s = 0; s < kFrameSamples; ++s) {
        const std::size_t at = (static_cast<std::size_t>(tick) * kFrameSamples + s) % length;
        std::copy_n(streams[static_cast<std::size_t>(d)].data() + at * kW1Channels, kW1Channels,
                    v.data() + static_cast<std::size_t>(s) * kW1Channels);
      }
    }
    frame.sequence = static_cast<std::uint32_t>(tick);
    frame.device_time_us = static_cast<std::uint64_t>(tick) * kTickMs * 1000;
    sim_now = (tick + 1) * kTickMs / 1000.0;
    // Frame contents are set up outside the timed loop: the daemon's pipeline
    // thread gets them decoded from the queue.
    std::vector<gw::sensors::Frame> frames(static_cast<std::size_t>(wearers), frame);
    for (int w = 0; w < wearers; ++w) {
      auto& f = frames[static_cast<std::size_t>(w)];
      f.wearer_id = static_cast<std::uint32_t>(w + 1);
      f.values = tick_values[static_cast<std::size_t>(w % distinct)];
    }
    const Stamp t0 = stamp();
    if (options.frames_at_once <= 1) {
      for (const auto& f : frames)
        if (!engine.on_frame(f, sim_now - 0.05)) throw gw::Error("engine_host_bench: frame refused");
    } else {
      const auto bunch = static_cast<std::size_t>(options.frames_at_once);
      for (std::size_t first = 0; first < frames.size(); first += bunch) {
        refs.clear();
        for (std::size_t i = first; i < std::min(frames.size(), first + bunch); ++i)
          refs.push_back({&frames[i], sim_now - 0.05});
        engine.on_frames(refs, accepted);
        if (std::count(accepted.begin(), accepted.end(), 0) > 0)
          throw gw::Error("engine_host_bench: frame refused");
      }
    }
    const Stamp t0_end = stamp();
    Stamp g0{}, g1{}, g2{};
    if (gait) {
      g0 = stamp();
      for (std::size_t w = 0; w < frames.size(); ++w) gw::gait::reduce_foot_loads(feet, frames[w], loads[w]);
      g1 = stamp();
      for (std::size_t w = 0; w < frames.size(); ++w) {
        const auto& f = frames[w];
        gait->on_frame(f.wearer_id, f.device_id, static_cast<double>(f.device_time_us) / 1e6, f.sample_rate_hz,
                       f.samples, loads[w].data(), sim_now - 0.05);
      }
      g2 = stamp();
      gait->take_minutes();
      gait->take_abnormal();
    }
    const std::uint64_t searched_before = engine.counters().batches;
    const Stamp t1 = stamp();
    backend->started = backend->ended = t1;
    const auto out = engine.run_batch(now);
    const Stamp t2 = stamp();
    // Every alert, warm-up included, in the digest (outside the timing): two
    // builds that agree on it produced the same alerts.
    for (const gw::pipeline::Alert& a : out)
      for (const char ch : gw::pipeline::alert_to_json(a).dump())
        digest = (digest ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
    if (tick < options.warmup_ticks) continue;
    alerts += out.size();
    const bool searched =
        engine.counters().batches > searched_before && backend->ended.wall > t1.wall;
    on_frame_ms.push_back(wall_ms(t0, t0_end));
    on_frame_cpu.push_back(cpu_ms(t0, t0_end));
    // Without a search, all of run_batch counts as assembly.
    const Stamp& search_start = searched ? backend->started : t2;
    const Stamp& search_end = searched ? backend->ended : t2;
    assembly_ms.push_back(wall_ms(t1, search_start));
    assembly_cpu.push_back(cpu_ms(t1, search_start));
    search_ms.push_back(wall_ms(search_start, search_end));
    phase2_ms.push_back(wall_ms(search_end, t2));
    phase2_cpu.push_back(cpu_ms(search_end, t2));
    host_process_cpu.push_back(process_cpu_ms(t0, t0_end) + process_cpu_ms(t1, search_start) +
                               process_cpu_ms(search_end, t2));
    if (searched) distinct_slices += backend->distinct_slices;
    if (gait) {
      reduce_ms.push_back(wall_ms(g0, g1));
      monitor_ms.push_back(wall_ms(g1, g2));
      reduce_cpu.push_back(cpu_ms(g0, g1));
      monitor_cpu.push_back(cpu_ms(g1, g2));
      gait_process_cpu.push_back(process_cpu_ms(g0, g2));
    }
  }
  const auto& c = engine.counters();
  const double host_ms = mean(on_frame_ms) + mean(assembly_ms) + mean(phase2_ms);
  const double per_wearer_us = host_ms * 1000.0 / wearers;
  json line;
  line["bench"] = "engine_host";
  line["wearers"] = wearers;
  line["distinct_streams"] = distinct;
  line["ticks_measured"] = on_frame_ms.size();
  line["frames_at_once"] = options.frames_at_once;
  line["threads"] = options.threads;
  line["patterns"] = options.patterns;
  line["on_frame_ms"] = mean(on_frame_ms);
  line["assembly_ms"] = mean(assembly_ms);
  line["search_ms"] = mean(search_ms);
  line["phase2_ms"] = mean(phase2_ms);
  line["on_frame_ms_p99"] = p99(on_frame_ms);
  line["assembly_ms_p99"] = p99(assembly_ms);
  line["phase2_ms_p99"] = p99(phase2_ms);
  line["host_ms_per_tick"] = host_ms;
  line["host_us_per_wearer_tick"] = per_wearer_us;
  line["on_frame_us_per_wearer_tick"] = mean(on_frame_ms) * 1000.0 / wearers;
  line["assembly_us_per_wearer_tick"] = mean(assembly_ms) * 1000.0 / wearers;
  line["phase2_us_per_wearer_tick"] = mean(phase2_ms) * 1000.0 / wearers;
  const double cpu_us = (mean(on_frame_cpu) + mean(assembly_cpu) + mean(phase2_cpu)) * 1000.0;
  line["host_cpu_us_per_wearer_tick"] = cpu_us / wearers;
  line["on_frame_cpu_us_per_wearer_tick"] = mean(on_frame_cpu) * 1000.0 / wearers;
  line["assembly_cpu_us_per_wearer_tick"] = mean(assembly_cpu) * 1000.0 / wearers;
  line["phase2_cpu_us_per_wearer_tick"] = mean(phase2_cpu) * 1000.0 / wearers;
  line["host_process_cpu_us_per_wearer_tick"] = mean(host_process_cpu) * 1000.0 / wearers;
  line["host_cpu_wearers_per_tick"] = cpu_us > 0 ? kTickMs * 1000.0 * wearers / cpu_us : 0;
  line["host_wearers_per_tick"] = per_wearer_us > 0 ? kTickMs * 1000.0 / per_wearer_us : 0;
  line["alerts_per_wearer_s"] =
      static_cast<double>(alerts) / wearers / (on_frame_ms.size() * kTickMs / 1000.0);
  line["single_dim_matches_per_wearer_tick"] =
      static_cast<double>(c.single_dim_matches) / wearers / options.ticks;
  line["searched_slices_per_tick"] =
      on_frame_ms.empty() ? 0.0 : static_cast<double>(distinct_slices) / on_frame_ms.size();
  line["batches"] = c.batches;
  line["alerts_total"] = c.alerts;
  line["alerts_digest"] = fmt::format("{:016x}", digest);
  if (gait) {
    const auto& g = gait->counters();
    line["gait_reduce_us_per_wearer_tick"] = mean(reduce_ms) * 1000.0 / wearers;
    line["gait_monitor_us_per_wearer_tick"] = mean(monitor_ms) * 1000.0 / wearers;
    line["gait_reduce_cpu_us_per_wearer_tick"] = mean(reduce_cpu) * 1000.0 / wearers;
    line["gait_monitor_cpu_us_per_wearer_tick"] = mean(monitor_cpu) * 1000.0 / wearers;
    line["gait_monitor_ms_p99"] = p99(monitor_ms);
    // The gait work against the engine's host work of the same ticks.
    line["gait_to_host_ratio"] = host_ms > 0 ? (mean(reduce_ms) + mean(monitor_ms)) / host_ms : 0;
    line["gait_monitor_to_host_ratio"] = host_ms > 0 ? mean(monitor_ms) / host_ms : 0;
    // CPU against CPU, the engine's pool threads included: what the gait
    // work adds to the host's CPU time per tick.
    line["gait_process_cpu_us_per_wearer_tick"] = mean(gait_process_cpu) * 1000.0 / wearers;
    line["gait_to_host_cpu_ratio"] =
        mean(host_process_cpu) > 0 ? mean(gait_process_cpu) / mean(host_process_cpu) : 0;
    line["gait_strides"] = g.strides;
    line["gait_scored_strides"] = g.scored_strides;
    line["gait_minutes"] = g.minutes;
    line["gait_scoring"] = !options.gait_examples.empty();
  }
  line["note"] =
      "host = on_frame + assembly + phase2 (search excluded: memo over the CPU backend, "
      "distinct streams searched once); --threads workers (search.threads: the engine's "
      "host pool too), simulated clock; *_cpu_* = the calling thread's CPU time only";
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pipeline::Engine host time per W1 wearer-tick, apart from the search; JSON lines"};
  Options options;
  app.add_option("--wearers", options.wearers, "comma-separated wearer counts");
  app.add_option("--ticks", options.ticks, "simulated 100-ms ticks per count")->check(CLI::Range(1, 1000000));
  app.add_option("--warmup-ticks", options.warmup_ticks, "ticks left out of the figures (the first 13 fill a window)")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--distinct", options.distinct, "distinct wearer streams (each searched for real)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--threads", options.threads,
                 "search.threads: CPU search threads and the engine's host workers (0 = all cores)");
  app.add_option("--frames-at-once", options.frames_at_once,
                 "frames per Engine::on_frames call, as the daemon takes them off its queue "
                 "(1 = Engine::on_frame per frame)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--patterns", options.patterns, "random-walk | synthetic")
      ->check(CLI::IsMember({"random-walk", "synthetic"}));
  app.add_option("--threshold", options.threshold, "per-dim DTW threshold (default: the source's)");
  app.add_option("--min-dims", options.min_dims, "matched dims an alert needs (default: the source's)");
  app.add_option("--data", options.data, "gaitpdb recording the synthetic wearers are made from");
  app.add_option("--seed", options.seed, "seed of the synthetic wearers and patterns");
  app.add_flag("--gait", options.gait, "also time the daemon's gait work for every frame (gait/monitor.h)");
  app.add_option("--gait-examples", options.gait_examples,
                 "with --gait: score every stride against this gait pack's example strides");
  CLI11_PARSE(app, argc, argv);
  try {
    const std::vector<int> counts = gw::bench::parse_counts(options.wearers, "--wearers");
    if (options.warmup_ticks >= options.ticks)
      throw gw::Error("--warmup-ticks must be below --ticks");
    const std::string data =
        options.data.empty() ? std::string(GW_DATA_DIR) + "/gaitpdb/GaCo01_01.txt" : options.data;
    const gw::sensors::Recording base = gw::sensors::read_gaitpdb(data);
    std::string dir_pattern = (fs::temp_directory_path() / "gw-engine-host-XXXXXX").string();
    if (!mkdtemp(dir_pattern.data())) throw gw::Error("cannot create a temporary directory");
    const fs::path workdir = dir_pattern;
    const gw::bench::W1PatternSet set = gw::bench::w1_patterns(base, options.patterns, options.seed);
    gw::bench::write_w1_templates(set, workdir / "patterns");
    const gw::config::Config config = gw::config::parse_config(
        engine_config(options, set, workdir / "patterns"), "engine_host_bench", workdir.string());
    fs::remove_all(workdir);
    // The distinct streams, long enough for every tick (they loop otherwise).
    const int max_distinct = *std::max_element(counts.begin(), counts.end());
    const int distinct = std::min(options.distinct, max_distinct);
    gw::sensors::SyntheticW1Source source(base, distinct, options.seed);
    std::vector<std::vector<float>> streams(static_cast<std::size_t>(distinct));
    for (int d = 0; d < distinct; ++d)
      source.next(d, options.ticks * kFrameSamples, streams[static_cast<std::size_t>(d)]);
    for (const int wearers : counts) {
      std::cerr << "engine_host_bench: " << wearers << " wearers, " << options.ticks << " ticks\n";
      std::cout << run(options, wearers, config, streams).dump() << std::endl;
    }
  } catch (const std::exception& e) {
    std::cerr << "engine_host_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
