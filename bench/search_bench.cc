// search_bench: throughput of a search backend on a W1-shaped load
// (docs/search.md, "Workload W1"), one JSON object per measurement on
// stdout. Every line names "backend" (cpu or cuda), "device" (the GPU's name
// or "cpu N threads"), "mode" (window or streaming) and "pruning".
//
// Default shape: each wearer streams 201 dims (two 99-channel insoles, dims
// 0..98 and 99..197, then a 3-axis accelerometer, dims 198..200); 16 patterns
// each span all 201 dims with m = 128, band r = floor(0.1 m) = 12, z-normalised;
// pattern dim j is compared with stream dims i, |i - j| <= 3 inside the same
// insole (never across the left/right boundary) and |i - j| <= 2 inside the
// accelerometer. Data: independent Gaussian random walks plus white noise per
// dim ("random-walk"), patterns cut from the same generator with other seeds.
// This is synthetic data, not sensor data.
//
// Measurements:
// - default: all of --seconds of new data per wearer, as one batch or in
//   ticks of --slice-samples, once per threshold (default 2.0, then inf).
// - --kernel-bound (CUDA): the unpruned banded DTW kernel (every lower bound
//   and early abandoning off, so every window's DTW runs to its last row)
//   against the fp32 instruction bound SMs * 128 lanes * clock / 4
//   instructions per cell (FADD, 2 FMNMX, FFMA; docs/gpu.md).
// - --sweep-wearers A,B,C: the daemon's realtime shape. Per tick every
//   wearer is one slice of (m-1) + 10 samples whose 10 new samples (100 ms at
//   100 Hz) are searched; consecutive ticks continue each stream (streaming
//   state carries over). Per wearer count: the median search() time over
//   --sweep-repeats ticks after one warm-up tick, and whether it fits 100 ms;
//   then a summary line with the largest count that fits. With --resident
//   each tick leaves out the samples the backend says it holds
//   (SearchBackend::held_samples), as the daemon's engine does; the leaving
//   out happens before the timed search.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/w1_workload.h"
#include "config/config.h"
#include "daemon/cli/usage.h"
#include "kernels/search.h"
#if defined(GW_HAVE_CUDA_BACKEND)
#include <cuda_runtime.h>

#include "kernels/cuda_backend.h"
#endif

namespace {

using gw::bench::kSampleRateHz;
using gw::bench::kW1Band;
using gw::bench::kW1Dims;
using gw::bench::kW1Length;
using gw::bench::kW1Patterns;
using gw::bench::random_walk_pattern;
using gw::bench::random_walks;
using gw::bench::w1_pairs;
using gw::config::BackendKind;
using gw::config::PatternMode;
using gw::kernels::DimPair;
using gw::kernels::Pattern;
using gw::kernels::PatternLibrary;
using gw::kernels::PruningOptions;
using gw::kernels::SearchBackend;
using gw::kernels::SearchBatch;
using gw::kernels::SearchMode;
using gw::kernels::SearchResult;
using gw::kernels::SearchStats;
using gw::kernels::StreamSlice;

// One daemon tick: 10 new samples per wearer, 100 ms at 100 Hz.
constexpr int kTickSamples = 10;
constexpr double kTickSeconds = static_cast<double>(kTickSamples) / kSampleRateHz;
// The default threshold: on this generator about 0.1 % of the windows of a
// pattern dim lie within it (measured with the brute-force reference; the
// JSON reports the hit rate actually seen).
constexpr double kDefaultThreshold = 2.0;
// Distinct wearer recordings the sweep generates; more wearers reuse them at
// other offsets (generating 20000 x 201 random walks would dominate the run).
constexpr int kSweepPool = 32;
constexpr int kSweepPoolStride = 13;

struct Options {
  std::vector<int> devices;  // search.devices: the GPUs; empty = every visible one
  bool resident = false;     // sweep: omit the samples the backend holds
  int wearers = 1;
  double seconds = 2;
  int threads = 0;
  std::string threshold;  // empty: the default threshold, then inf
  std::string pruning = "on";
  int repeat = 1;
  int length = kW1Length;
  int band = -1;  // -1: floor(0.1 * m)
  int dims = kW1Dims;
  int patterns = kW1Patterns;
  int max_matches = 64;
  int slice_samples = 0;  // 0: one slice with all new samples per wearer
  std::string data = "random-walk";
  std::uint64_t seed = 1;
  BackendKind backend = BackendKind::kCpu;  // cpu or cuda
  PatternMode mode = PatternMode::kWindow;
  bool kernel_bound = false;
  int kernel_wearers = 64;
  double kernel_seconds = 1;
  std::string sweep_wearers;  // "A,B,C"; empty: no sweep
  int sweep_repeats = 5;
  // Sweep ticks pipelined: batch k+1 is prepared (SearchBackend::prepare, its
  // copy to the device) on a second thread while batch k is searched.
  bool overlap = false;
};

SearchMode search_mode(const Options& options) {
  return options.mode == PatternMode::kStreaming ? SearchMode::kStreaming : SearchMode::kWindow;
}

std::shared_ptr<PatternLibrary> make_library(const Options& options, int band, float threshold,
                                             SearchMode mode) {
  auto library = std::make_shared<PatternLibrary>();
  const std::vector<DimPair> pairs = w1_pairs(options.dims);
  const int m = options.length;
  for (int p = 0; p < options.patterns; ++p) {
    Pattern pattern;
    pattern.profile = 0;
    pattern.length = m;
    pattern.band = band;
    // Streaming mode has no z-normalisation (kernels/search.h).
    pattern.znorm = mode == SearchMode::kWindow;
    pattern.mode = mode;
    pattern.threshold = threshold;
    pattern.max_matches_per_pair = options.max_matches;
    pattern.dim_count = options.dims;
    pattern.pairs = pairs;
    pattern.dims = random_walk_pattern(options.dims, m, options.seed, p);
    library->patterns.push_back(std::move(pattern));
  }
  return library;
}

// The batches one measurement searches: per wearer, m-1 samples of history
// and 100 * seconds new samples, either as one slice or as ticks of
// `slice_samples` new samples (each slice carrying m-1 samples of history).
// Wearer w is stream key w, so streaming state continues from tick to tick.
std::vector<SearchBatch> make_batches(const Options& options,
                                      const std::vector<std::vector<float>>& wearer_data,
                                      int new_samples) {
  const int history = options.length - 1;
  const int dims = options.dims;
  const int tick = options.slice_samples > 0 ? options.slice_samples : new_samples;
  std::vector<SearchBatch> batches;
  for (int first_new = 0; first_new < new_samples; first_new += tick) {
    const int count = std::min(tick, new_samples - first_new);
    SearchBatch batch;
    for (std::size_t w = 0; w < wearer_data.size(); ++w) {
      // Slice samples [first_new, first_new + history + count) of the
      // wearer's data; absolute index = position in `data`.
      batch.add_slice(0, dims, wearer_data[w].data() + static_cast<std::size_t>(first_new) * dims,
                      history + count, first_new, first_new + history, w);
    }
    batches.push_back(std::move(batch));
  }
  return batches;
}

double rate(std::uint64_t part, std::uint64_t whole) {
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::vector<int> parse_counts(const std::string& text) {
  std::vector<int> counts = gw::bench::parse_counts(text, "--sweep-wearers");
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

PruningOptions pruning_options(const std::string& pruning) {
  PruningOptions options;
  if (pruning == "off") {
    options.lb_kim = options.lb_keogh_eq = options.lb_keogh_ec = options.early_abandon = false;
  } else if (pruning == "kim") {  // which bound costs what (stage times)
    options.lb_keogh_eq = options.lb_keogh_ec = false;
  } else if (pruning == "kim-eq") {
    options.lb_keogh_ec = false;
  }
  return options;
}

// A backend and what the JSON lines say about it.
struct OpenBackend {
  std::unique_ptr<SearchBackend> backend;
  BackendKind kind = BackendKind::kCpu;  // cpu or cuda
  std::string device;  // GPU name, or "cpu N threads"
  int threads = 0;     // CPU threads (0 for cuda)
};

OpenBackend open_backend(const Options& options, const std::string& pruning_name, int threads) {
  OpenBackend out;
  out.kind = options.backend;
  const PruningOptions pruning = pruning_options(pruning_name);
  if (options.backend == BackendKind::kCpu) {
    out.backend = gw::kernels::make_cpu_backend(threads, pruning);
    out.threads = threads;
    out.device = "cpu " + std::to_string(threads) + " threads";
    return out;
  }
  // "cuda": the factory's backend (what the daemon gets) with all pruning
  // on; other pruning only through make_cuda_backend.
#if defined(GW_HAVE_CUDA_BACKEND)
  if (pruning_name != "on") out.backend = gw::kernels::make_cuda_backend(0, pruning);
#endif
  if (!out.backend) {
    std::string note;
    // throws when not built
    out.backend = gw::kernels::make_backend("cuda", threads, options.devices, &note);
    if (pruning_name != "on")
      throw std::runtime_error("--pruning " + pruning_name +
                               " on cuda needs the CUDA backend built");
  }
  const std::string name = out.backend->name();
  const std::string prefix = "cuda:";
  out.device = name.compare(0, prefix.size(), prefix) == 0 ? name.substr(prefix.size()) : name;
  return out;
}

// The GPU's multiprocessor count and peak (max boost) clock in kHz
// (cudaDevAttrClockRate), for the fp32 bound; zeros when unknown.
struct GpuClock {
  int sm_count = 0;
  int clock_khz_max_boost = 0;
};

GpuClock query_gpu_clock() {
  GpuClock clock;
#if defined(GW_HAVE_CUDA_BACKEND)
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) device = 0;
  if (cudaDeviceGetAttribute(&clock.sm_count, cudaDevAttrMultiProcessorCount, device) !=
          cudaSuccess ||
      cudaDeviceGetAttribute(&clock.clock_khz_max_boost, cudaDevAttrClockRate, device) !=
          cudaSuccess) {
    cudaGetLastError();
    clock = GpuClock{};
  }
#endif
  return clock;
}

// The fields every line of one configuration shares.
nlohmann::ordered_json base_line(const char* bench, const Options& options,
                                 const OpenBackend& backend, const std::string& pruning, int band,
                                 double threshold) {
  const std::size_t pairs_per_pattern = w1_pairs(options.dims).size();
  const bool window = search_mode(options) == SearchMode::kWindow;
  nlohmann::ordered_json line;
  line["bench"] = bench;
  line["backend"] = gw::config::name(backend.kind);
  line["device"] = backend.device;
  line["backend_name"] = backend.backend->name();
  line["mode"] = gw::config::name(options.mode);
  line["pruning"] = pruning;
  line["threads"] = backend.threads;
  line["data"] = "random-walk+noise (synthetic)";
  line["dims"] = options.dims;
  line["patterns"] = options.patterns;
  line["pairs_per_pattern"] = pairs_per_pattern;
  line["m"] = options.length;
  if (window) {
    line["band"] = band;
  } else {
    line["band"] = nullptr;  // streaming mode has no band
  }
  line["znorm"] = window;
  if (std::isinf(threshold)) {
    line["threshold"] = "inf";
  } else {
    line["threshold"] = threshold;
  }
  line["top_p"] = options.max_matches;
  line["w1_shape"] = options.dims == kW1Dims && options.patterns == kW1Patterns &&
                     options.length == kW1Length && (!window || band == kW1Band);
  return line;
}

void add_stats(nlohmann::ordered_json& line, const SearchStats& stats) {
  line["pruned_kim_rate"] = rate(stats.pruned_kim, stats.windows);
  line["pruned_keogh_eq_rate"] = rate(stats.pruned_keogh_eq, stats.windows);
  line["pruned_keogh_ec_rate"] = rate(stats.pruned_keogh_ec, stats.windows);
  line["dtw_abandoned_rate"] = rate(stats.dtw_abandoned, stats.windows);
  line["dtw_full_rate"] = rate(stats.dtw_full, stats.windows);
}

// The default measurement: --seconds of data per wearer per threshold.
void run_throughput(const Options& options, int band, const std::vector<double>& thresholds,
                    int threads) {
  OpenBackend backend = open_backend(options, options.pruning, threads);
  const SearchMode mode = search_mode(options);
  const int new_samples = static_cast<int>(std::lround(options.seconds * kSampleRateHz));
  std::vector<std::vector<float>> wearer_data;
  for (int w = 0; w < options.wearers; ++w) {
    wearer_data.push_back(
        random_walks(options.dims, new_samples + options.length - 1, options.seed * 1000003 + w));
  }
  const std::vector<SearchBatch> batches = make_batches(options, wearer_data, new_samples);
  const std::uint64_t pairs_per_wearer = w1_pairs(options.dims).size() * options.patterns;
  // Windows (window mode) or new samples x pairs (streaming) one wearer adds
  // per second at 100 Hz: one per pair per sample.
  const double wearer_windows_per_s = static_cast<double>(pairs_per_wearer) * kSampleRateHz;
  const double cells_per_window =
      mode == SearchMode::kWindow ? options.length * (2.0 * band + 1) : options.length;

  for (double threshold : thresholds) {
    backend.backend->set_library(make_library(options, band, static_cast<float>(threshold), mode));
    for (int repeat = 0; repeat < options.repeat; ++repeat) {
      SearchResult total;
      const auto start = std::chrono::steady_clock::now();
      for (const SearchBatch& batch : batches) {
        SearchResult result = backend.backend->search(batch);
        total.stats.add(result.stats);
        total.matches.insert(total.matches.end(), result.matches.begin(), result.matches.end());
      }
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const auto& stats = total.stats;
      const double windows_per_s = stats.windows / seconds;
      nlohmann::ordered_json line =
          base_line("search", options, backend, options.pruning, band, threshold);
      line["wearers"] = options.wearers;
      line["pairs"] = pairs_per_wearer * options.wearers;
      line["new_samples_per_wearer"] = new_samples;
      line["batches"] = batches.size();
      line["repeat"] = repeat;
      line["windows"] = stats.windows;
      line["matches"] = total.matches.size();
      line["hit_rate"] = rate(total.matches.size(), stats.windows);
      line["dtw_cells"] = stats.cells;
      line["seconds"] = seconds;
      line["windows_per_s"] = windows_per_s;
      line["cells_per_s"] = stats.cells / seconds;
      add_stats(line, stats);
      line["equivalent_unpruned_cells_per_s"] =
          static_cast<double>(stats.windows) * cells_per_window / seconds;
      // How many wearers of this run's shape the throughput keeps up with at
      // 100 Hz (each adds one window per pair per sample).
      line["wearers_realtime"] = windows_per_s / wearer_windows_per_s;
      if (line["w1_shape"].get<bool>()) {
        line["w1_wearers_realtime"] = windows_per_s / wearer_windows_per_s;
      } else {
        line["w1_wearers_realtime"] = nullptr;
      }
      std::cout << line.dump() << std::endl;
    }
  }
}

// --kernel-bound: the unpruned banded DTW on the GPU against the fp32 bound.
void run_kernel_bound(const Options& options, int band, double threshold, int threads) {
  if (options.backend != BackendKind::kCuda)
    throw std::invalid_argument("--kernel-bound needs --backend cuda");
  if (search_mode(options) != SearchMode::kWindow)
    throw std::invalid_argument("--kernel-bound measures the window-mode DTW kernel");
  // Every lower bound and early abandoning off: every window's DTW runs all
  // m rows of its band. The finite threshold only keeps the match buffer small.
  OpenBackend backend = open_backend(options, "off", threads);
  const GpuClock clock = query_gpu_clock();
  Options shape = options;
  shape.wearers = options.kernel_wearers;
  shape.slice_samples = 0;
  const int new_samples = static_cast<int>(std::lround(options.kernel_seconds * kSampleRateHz));
  std::vector<std::vector<float>> wearer_data;
  for (int w = 0; w < shape.wearers; ++w) {
    wearer_data.push_back(
        random_walks(options.dims, new_samples + options.length - 1, options.seed * 1000003 + w));
  }
  const std::vector<SearchBatch> batches = make_batches(shape, wearer_data, new_samples);
  backend.backend->set_library(
      make_library(options, band, static_cast<float>(threshold), SearchMode::kWindow));
  backend.backend->search(batches.front());  // warm-up: buffers, module load
  std::vector<double> times;
  SearchResult last;
  for (int repeat = 0; repeat < std::max(options.repeat, 5); ++repeat) {
    const auto start = std::chrono::steady_clock::now();
    last = backend.backend->search(batches.front());
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const double seconds = median(times);
  const SearchStats& stats = last.stats;
  const double cells_per_s = stats.cells / seconds;
  // FADD, 2 FMNMX, FFMA per cell on 128 fp32 lanes per SM.
  const double bound =
      static_cast<double>(clock.sm_count) * 128.0 * (clock.clock_khz_max_boost * 1e3) / 4.0;
  nlohmann::ordered_json line = base_line("kernel_bound", options, backend, "off", band, threshold);
  // kMaxRegisterBand (kernels/cuda_kernels.h) is 20.
  line["kernel"] =
      band <= 20 ? "register band (dtw_all_kernel, W=2r+1)" : "general (local memory row)";
  line["wearers"] = shape.wearers;
  line["new_samples_per_wearer"] = new_samples;
  line["repeats"] = times.size();
  line["windows"] = stats.windows;
  line["dtw_full"] = stats.dtw_full;
  line["dtw_cells"] = stats.cells;
  line["matches"] = last.matches.size();
  line["hit_rate"] = rate(last.matches.size(), stats.windows);
  line["seconds_median"] = seconds;
  line["seconds_min"] = *std::min_element(times.begin(), times.end());
  line["timing"] =
      "search() wall time: batch upload, z-normalisation, DTW, match copy-back, host sort";
  line["windows_per_s"] = stats.windows / seconds;
  line["cells_per_s"] = cells_per_s;
  line["sm_count"] = clock.sm_count;
  line["clock_khz_max_boost"] = clock.clock_khz_max_boost;
  line["fp32_bound_cells_per_s"] = bound;
  line["fp32_bound_formula"] =
      "sm_count * 128 lanes * clock_hz(max boost) / 4 instructions per cell";
  if (bound > 0) {
    line["fraction_of_fp32_bound"] = cells_per_s / bound;
  } else {
    line["fraction_of_fp32_bound"] = nullptr;
  }
  std::cout << line.dump() << std::endl;
}

// Per-wearer recordings for the sweep, dim-major so that a slice's dims are
// plain copies: pool[p][d * length + s].
struct SweepPool {
  int length = 0;
  std::vector<std::vector<float>> series;
};

SweepPool make_sweep_pool(const Options& options, int max_wearers, int ticks) {
  SweepPool pool;
  const int distinct = std::min(max_wearers, kSweepPool);
  const int reuse = (max_wearers + distinct - 1) / distinct;
  pool.length = options.length - 1 + kTickSamples * ticks + kSweepPoolStride * (reuse - 1);
  for (int p = 0; p < distinct; ++p) {
    const std::vector<float> sample_major =
        random_walks(options.dims, pool.length, options.seed * 1000003 + p);
    std::vector<float> dim_major(sample_major.size());
    for (int s = 0; s < pool.length; ++s) {
      for (int d = 0; d < options.dims; ++d) {
        dim_major[static_cast<std::size_t>(d) * pool.length + s] =
            sample_major[static_cast<std::size_t>(s) * options.dims + d];
      }
    }
    pool.series.push_back(std::move(dim_major));
  }
  return pool;
}

// Tick `tick` of `wearers` wearers in the daemon's shape: per wearer one
// slice of (m-1) + 10 samples starting at sample 10 * tick of its stream,
// first_new = first_index + m - 1, stream key = wearer.
SearchBatch make_tick(const Options& options, const SweepPool& pool, int wearers, int tick) {
  const int history = options.length - 1;
  const int length = history + kTickSamples;
  const int dims = options.dims;
  const int distinct = static_cast<int>(pool.series.size());
  SearchBatch batch;
  batch.streams.reserve(wearers);
  batch.data.resize(static_cast<std::size_t>(wearers) * dims * length);
  for (int w = 0; w < wearers; ++w) {
    StreamSlice slice;
    slice.profile = 0;
    slice.dims = dims;
    slice.length = length;
    slice.first_index = static_cast<std::int64_t>(tick) * kTickSamples;
    slice.first_new = slice.first_index + history;
    slice.stream_key = static_cast<std::uint64_t>(w);
    slice.offset = static_cast<std::size_t>(w) * dims * length;
    const std::vector<float>& source = pool.series[w % distinct];
    const int begin = (w / distinct) * kSweepPoolStride + tick * kTickSamples;
    for (int d = 0; d < dims; ++d) {
      std::memcpy(batch.data.data() + slice.offset + static_cast<std::size_t>(d) * length,
                  source.data() + static_cast<std::size_t>(d) * pool.length + begin,
                  static_cast<std::size_t>(length) * sizeof(float));
    }
    batch.streams.push_back(slice);
  }
  return batch;
}

// --sweep-wearers: one line per wearer count, then a summary line.
// `batch` without the leading samples of each slice that `backend` holds.
SearchBatch omit_held(const SearchBatch& batch, const SearchBackend& backend) {
  SearchBatch out;
  out.streams = batch.streams;
  std::size_t size = 0;
  for (StreamSlice& slice : out.streams) {
    slice.omitted = backend.held_samples(slice);
    slice.offset = size;
    size += slice.data_size();
  }
  out.data.resize(size);
  for (std::size_t i = 0; i < out.streams.size(); ++i) {
    const StreamSlice& full = batch.streams[i];
    const StreamSlice& slice = out.streams[i];
    const int kept = slice.length - slice.omitted;
    for (int d = 0; d < slice.dims; ++d)
      std::copy_n(batch.data.begin() + static_cast<std::ptrdiff_t>(
                                           full.offset + static_cast<std::size_t>(d) * full.length +
                                           static_cast<std::size_t>(slice.omitted)),
                  kept,
                  out.data.begin() + static_cast<std::ptrdiff_t>(
                                         slice.offset + static_cast<std::size_t>(d) * kept));
  }
  return out;
}

void run_sweep(const Options& options, int band, double threshold, int threads) {
  const std::vector<int> counts = parse_counts(options.sweep_wearers);
  const SearchMode mode = search_mode(options);
  const int ticks = 1 + options.sweep_repeats;  // one warm-up tick
  const SweepPool pool = make_sweep_pool(options, counts.back(), ticks);
  const auto library = make_library(options, band, static_cast<float>(threshold), mode);
  const std::uint64_t pairs_per_wearer = w1_pairs(options.dims).size() * options.patterns;

  std::vector<int> swept;
  std::vector<bool> fits;
  std::string device, backend_name;
  int sustained = 0;
  double best_linear = 0;
  nlohmann::ordered_json summary;
  for (const int wearers : counts) {
    nlohmann::ordered_json line;
    try {
      // A fresh backend per count: streaming state and buffers start empty.
      OpenBackend backend = open_backend(options, options.pruning, threads);
      backend.backend->set_library(library);
      line = base_line("search_sweep", options, backend, options.pruning, band, threshold);
      if (summary.empty()) summary = line;
      line["wearers"] = wearers;
      line["overlap"] = options.overlap;
      line["resident"] = options.resident;
      line["tick_new_samples"] = kTickSamples;
      line["tick_s"] = kTickSeconds;
      line["slice_samples"] = options.length - 1 + kTickSamples;
      line["pairs"] = pairs_per_wearer * wearers;
      std::vector<double> times;
      std::vector<double> matches;
      SearchStats stats;
      double warmup = 0;
      SearchResult result;  // reused, as the daemon's engine does
      // Two batches alternate in place (prepare() knows a batch by address).
      // Batches are made outside the timed region; with --overlap a tick's
      // time is search(k) running beside prepare(k + 1).
      SearchBatch batches[2];
      batches[0] = make_tick(options, pool, wearers, 0);
      for (int tick = 0; tick < ticks; ++tick) {
        SearchBatch sparse;
        if (options.resident) sparse = omit_held(batches[tick % 2], *backend.backend);
        const SearchBatch& batch = options.resident ? sparse : batches[tick % 2];
        SearchBatch& next = batches[(tick + 1) % 2];
        if (tick + 1 < ticks) next = make_tick(options, pool, wearers, tick + 1);
        const auto start = std::chrono::steady_clock::now();
        std::thread preparer;
        std::exception_ptr prepare_error;
        if (options.overlap && tick + 1 < ticks)
          preparer = std::thread([&] {
            try {
              backend.backend->prepare(next);
            } catch (...) {
              prepare_error = std::current_exception();
            }
          });
        try {
          backend.backend->search_into(batch, result);
        } catch (...) {
          if (preparer.joinable()) preparer.join();
          throw;
        }
        if (preparer.joinable()) preparer.join();
        if (prepare_error) std::rethrow_exception(prepare_error);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (tick == 0) {
          warmup = seconds;
          continue;
        }
        times.push_back(seconds);
        matches.push_back(static_cast<double>(result.matches.size()));
        stats.add(result.stats);
      }
      const double batch_s = median(times);
      const double per_tick_windows = static_cast<double>(stats.windows) / times.size();
      line["repeats"] = times.size();
      line["warmup_s"] = warmup;
      line["batch_s_median"] = batch_s;
      line["batch_s_min"] = *std::min_element(times.begin(), times.end());
      line["batch_s_max"] = *std::max_element(times.begin(), times.end());
      line["fits_tick"] = batch_s <= kTickSeconds;
      line["windows_per_batch"] = per_tick_windows;
      line["matches_per_batch_median"] = median(matches);
      line["hit_rate"] = rate(static_cast<std::uint64_t>(median(matches)),
                              static_cast<std::uint64_t>(per_tick_windows));
      line["cells_per_batch"] = static_cast<double>(stats.cells) / times.size();
      line["windows_per_s"] = per_tick_windows / batch_s;
      line["cells_per_s"] = static_cast<double>(stats.cells) / times.size() / batch_s;
      add_stats(line, stats);
      // Wearer-seconds of data searched per second: comparable across
      // backends and wearer counts (the CPU/GPU ratio), assuming the time
      // scales linearly with wearers.
      const double linear = wearers * kTickSeconds / batch_s;
      line["wearer_seconds_per_s"] = linear;
      line["ms_per_wearer_tick"] = 1e3 * batch_s / wearers;
      if (mode == SearchMode::kStreaming && backend.kind == BackendKind::kCuda) {
        // SPRING state on the GPU: one float and one start index per cell.
        line["streaming_state_bytes"] = static_cast<double>(pairs_per_wearer) * wearers *
                                        options.length * (sizeof(float) + sizeof(long long));
      }
      std::cout << line.dump() << std::endl;
      swept.push_back(wearers);
      fits.push_back(batch_s <= kTickSeconds);
      if (batch_s <= kTickSeconds) sustained = std::max(sustained, wearers);
      best_linear = std::max(best_linear, linear);
    } catch (const std::exception& e) {
      // Typically out of device memory: larger counts would fail too.
      nlohmann::ordered_json error;
      error["bench"] = "search_sweep";
      error["backend"] = gw::config::name(options.backend);
      error["mode"] = gw::config::name(options.mode);
      error["pruning"] = options.pruning;
      error["wearers"] = wearers;
      error["error"] = e.what();
      std::cout << error.dump() << std::endl;
      break;
    }
  }
  if (summary.empty()) return;
  summary["bench"] = "search_sweep_summary";
  summary["swept_wearers"] = swept;
  summary["fits_tick"] = fits;
  summary["wearers_sustained"] = sustained;
  if (summary["w1_shape"].get<bool>()) {
    summary["w1_wearers_sustained"] = sustained;
  } else {
    summary["w1_wearers_sustained"] = nullptr;
  }
  summary["best_wearer_seconds_per_s"] = best_linear;
  summary["note"] =
      "wearers_sustained: largest swept count whose median batch time <= 100 ms (one tick)";
  std::cout << summary.dump() << std::endl;
}

int run(const Options& options) {
  if (options.data != "random-walk") {
    std::cerr << "search_bench: --data " << options.data
              << " is not available (only random-walk so far)\n";
    return 2;
  }
  if (options.pruning != "on" && options.pruning != "off" && options.pruning != "kim" &&
      options.pruning != "kim-eq") {
    std::cerr << "search_bench: --pruning must be on, off, kim or kim-eq\n";
    return 2;
  }
  if (options.backend == BackendKind::kAuto) {
    std::cerr << "search_bench: --backend must be cpu or cuda\n";
    return 2;
  }
  if (options.resident && options.overlap) {
    std::cerr << "search_bench: --resident and --overlap do not go together\n";
    return 2;
  }
  if (options.length < 2 || options.dims < 1 || options.wearers < 1 || options.patterns < 1 ||
      options.seconds <= 0 || options.repeat < 1 || options.max_matches < 1 ||
      options.sweep_repeats < 1 || options.kernel_wearers < 1 || options.kernel_seconds <= 0) {
    std::cerr << "search_bench: --m >= 2, --dims, --wearers, --patterns, --repeat, --top-p, "
                 "--sweep-repeats, --kernel-wearers >= 1 and --seconds, --kernel-seconds > 0 "
                 "required\n";
    return 2;
  }
  const int band =
      options.band >= 0 ? options.band : static_cast<int>(std::floor(0.1 * options.length));
  if (band >= options.length) {
    std::cerr << "search_bench: --band must be < --m\n";
    return 2;
  }
  std::vector<double> thresholds;
  if (options.threshold.empty()) {
    thresholds = {kDefaultThreshold, std::numeric_limits<double>::infinity()};
  } else if (options.threshold == "inf") {
    thresholds = {std::numeric_limits<double>::infinity()};
  } else {
    thresholds = {std::stod(options.threshold)};
  }
  const int threads = options.threads > 0
                          ? options.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  if (options.kernel_bound) {
    // A finite threshold (~0.1 % hits) keeps the match buffer small; without
    // early abandoning it does not shorten any DTW.
    run_kernel_bound(options, band, options.threshold.empty() ? kDefaultThreshold : thresholds[0],
                     threads);
  }
  if (!options.sweep_wearers.empty()) {
    // The sweep uses one threshold: the default 2.0 unless given (inf would
    // report every window or sample as a match).
    run_sweep(options, band, thresholds[0], threads);
  }
  if (!options.kernel_bound && options.sweep_wearers.empty())
    run_throughput(options, band, thresholds, threads);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"Throughput of a search backend on a W1-shaped load; prints JSON lines."};
  gw::cli::add_choice_option<BackendKind>(app, "--backend", options.backend, "cpu or cuda");
  gw::cli::add_choice_option<PatternMode>(app, "--mode", options.mode,
                                          "window or streaming (SPRING; no band, no znorm)");
  app.add_option("--wearers", options.wearers, "wearers (one slice each per batch)");
  app.add_flag("--resident", options.resident,
               "sweep: leave out the samples the backend holds, as the daemon does");
  app.add_option("--devices", options.devices,
                 "cuda: the GPUs to search on, e.g. 0 or 0,1 (default: every visible one)")
      ->delimiter(',');
  app.add_option("--seconds", options.seconds,
                 "new data per wearer in seconds at 100 Hz (plus m-1 samples of history)");
  app.add_option("--threads", options.threads, "CPU backend threads (0: one per hardware thread)");
  app.add_option(
      "--threshold", options.threshold,
      "distance threshold, a number or inf (default: " + std::to_string(kDefaultThreshold) +
          " then inf; kernel-bound and sweeps: the first only)");
  app.add_option("--pruning", options.pruning, "on or off (lower bounds and early abandoning)");
  app.add_option("--repeat", options.repeat, "measurements per threshold");
  app.add_option("--m", options.length, "pattern length (W1: 128)");
  app.add_option("--band", options.band, "Sakoe-Chiba band in samples (default floor(0.1 m))");
  app.add_option("--dims", options.dims, "stream and pattern dims (W1: 201)");
  app.add_option("--patterns", options.patterns, "patterns (W1: 16)");
  app.add_option("--top-p", options.max_matches, "max matches kept per pair");
  app.add_option("--slice-samples", options.slice_samples,
                 "new samples per slice, one batch per tick (0: one slice per wearer)");
  app.add_option("--data", options.data, "data source: random-walk");
  app.add_option("--seed", options.seed, "generator seed");
  app.add_flag("--kernel-bound", options.kernel_bound,
               "CUDA: unpruned window DTW kernel vs the fp32 instruction bound");
  app.add_option("--kernel-wearers", options.kernel_wearers,
                 "wearers of the --kernel-bound batch (default 64)");
  app.add_option("--kernel-seconds", options.kernel_seconds,
                 "new data per wearer of the --kernel-bound batch (default 1 s)");
  app.add_option("--sweep-wearers", options.sweep_wearers,
                 "comma-separated wearer counts: realtime ticks of 10 new samples per wearer");
  app.add_option("--sweep-repeats", options.sweep_repeats,
                 "timed ticks per wearer count after one warm-up tick (default 5)");
  app.add_flag("--overlap", options.overlap,
               "sweep: prepare (upload) tick k+1 on a second thread while tick k is searched");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(options);
  } catch (const std::exception& e) {
    std::cerr << "search_bench: " << e.what() << "\n";
    return 1;
  }
}
