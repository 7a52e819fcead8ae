// search_bench: throughput of a search backend on a W1-shaped load
// (docs/ARCHITECTURE.md, "Workload W1"), one JSON object per measurement on
// stdout.
//
// Default shape: each wearer streams 201 dims (two 99-channel insoles, dims
// 0..98 and 99..197, then a 3-axis accelerometer, dims 198..200); 16 patterns
// each span all 201 dims with m = 128, band r = floor(0.1 m) = 12, z-normalised;
// pattern dim j is compared with stream dims i, |i - j| <= 3 inside the same
// insole (never across the left/right boundary) and |i - j| <= 2 inside the
// accelerometer. Data: independent Gaussian random walks plus white noise per
// dim ("random-walk"), patterns cut from the same generator with other seeds.
// This is synthetic data, not sensor data.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/search.h"

namespace {

using gw::kernels::DimPair;
using gw::kernels::Pattern;
using gw::kernels::PatternLibrary;
using gw::kernels::SearchBatch;
using gw::kernels::SearchResult;

constexpr int kSampleRateHz = 100;
// W1's shape, for "w1_wearers_realtime".
constexpr int kW1Dims = 201;
constexpr int kW1Patterns = 16;
constexpr int kW1Length = 128;
constexpr int kW1Band = 12;
// The default threshold: on this generator about 0.1 % of the windows of a
// pattern dim lie within it (measured with the brute-force reference; the
// JSON reports the hit rate actually seen).
constexpr double kDefaultThreshold = 2.0;

struct Options {
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
};

// A group of adjacent stream dims whose channels may be swapped by up to
// `neighbour_range` positions (one insole, or the accelerometer).
struct DimGroup {
  int begin = 0;
  int end = 0;  // exclusive
  int neighbour_range = 0;
};

// W1's layout generalised to other dim counts: the last 3 dims are the
// accelerometer, the rest split into a left and a right insole.
std::vector<DimGroup> layout(int dims) {
  if (dims < 9) return {{0, dims, 2}};
  const int insoles = dims - 3;
  const int left = insoles / 2;
  return {{0, left, 3}, {left, insoles, 3}, {insoles, dims, 2}};
}

std::vector<DimPair> make_pairs(int dims) {
  std::vector<DimPair> pairs;
  for (const DimGroup& group : layout(dims)) {
    for (int j = group.begin; j < group.end; ++j) {
      for (int i = std::max(group.begin, j - group.neighbour_range);
           i <= std::min(group.end - 1, j + group.neighbour_range); ++i) {
        pairs.push_back({static_cast<std::uint16_t>(j), static_cast<std::uint16_t>(i)});
      }
    }
  }
  return pairs;
}

// `dims` independent random walks (unit Gaussian steps) plus white noise
// (std 0.5), sample-major: out[s * dims + d].
std::vector<float> random_walks(int dims, int length, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> gauss(0.0, 1.0);
  std::vector<double> level(dims, 0.0);
  std::vector<float> out(static_cast<std::size_t>(dims) * length);
  for (int s = 0; s < length; ++s) {
    for (int d = 0; d < dims; ++d) {
      level[d] += gauss(rng);
      out[static_cast<std::size_t>(s) * dims + d] = static_cast<float>(level[d] + 0.5 * gauss(rng));
    }
  }
  return out;
}

std::shared_ptr<PatternLibrary> make_library(const Options& options, int band, float threshold) {
  auto library = std::make_shared<PatternLibrary>();
  const std::vector<DimPair> pairs = make_pairs(options.dims);
  const int m = options.length;
  for (int p = 0; p < options.patterns; ++p) {
    Pattern pattern;
    pattern.profile = 0;
    pattern.length = m;
    pattern.band = band;
    pattern.znorm = true;
    pattern.threshold = threshold;
    pattern.max_matches_per_pair = options.max_matches;
    pattern.dim_count = options.dims;
    pattern.pairs = pairs;
    // Cut from a longer walk so the pattern does not start at level 0.
    const int source_length = 3 * m;
    const std::vector<float> source =
        random_walks(options.dims, source_length, options.seed * 7919 + 100000 + p);
    pattern.dims.resize(static_cast<std::size_t>(options.dims) * m);
    for (int d = 0; d < options.dims; ++d) {
      for (int s = 0; s < m; ++s) {
        pattern.dims[static_cast<std::size_t>(d) * m + s] =
            source[static_cast<std::size_t>(m + s) * options.dims + d];
      }
    }
    library->patterns.push_back(std::move(pattern));
  }
  return library;
}

// The batches one measurement searches: per wearer, m-1 samples of history
// and 100 * seconds new samples, either as one slice or as ticks of
// `slice_samples` new samples (each slice carrying m-1 samples of history).
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
    for (const std::vector<float>& data : wearer_data) {
      // Slice samples [first_new, first_new + history + count) of the
      // wearer's data; absolute index = position in `data`.
      batch.add_slice(0, dims, data.data() + static_cast<std::size_t>(first_new) * dims,
                      history + count, first_new, first_new + history);
    }
    batches.push_back(std::move(batch));
  }
  return batches;
}

double rate(std::uint64_t part, std::uint64_t whole) {
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

int run(const Options& options) {
  if (options.data != "random-walk") {
    std::cerr << "search_bench: --data " << options.data
              << " is not available (only random-walk so far)\n";
    return 2;
  }
  if (options.pruning != "on" && options.pruning != "off") {
    std::cerr << "search_bench: --pruning must be on or off\n";
    return 2;
  }
  if (options.length < 2 || options.dims < 1 || options.wearers < 1 || options.patterns < 1 ||
      options.seconds <= 0 || options.repeat < 1 || options.max_matches < 1) {
    std::cerr << "search_bench: --m >= 2, --dims, --wearers, --patterns, --repeat, --top-p >= 1 "
                 "and --seconds > 0 required\n";
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
  gw::kernels::PruningOptions pruning;
  if (options.pruning == "off") {
    pruning.lb_kim = pruning.lb_keogh_eq = pruning.lb_keogh_ec = pruning.early_abandon = false;
  }
  std::unique_ptr<gw::kernels::SearchBackend> backend =
      gw::kernels::make_cpu_backend(threads, pruning);

  const int new_samples = static_cast<int>(std::lround(options.seconds * kSampleRateHz));
  std::vector<std::vector<float>> wearer_data;
  for (int w = 0; w < options.wearers; ++w) {
    wearer_data.push_back(
        random_walks(options.dims, new_samples + options.length - 1, options.seed * 1000003 + w));
  }
  const std::vector<SearchBatch> batches = make_batches(options, wearer_data, new_samples);
  const std::size_t pairs_per_pattern = make_pairs(options.dims).size();
  const std::uint64_t pairs_per_wearer = pairs_per_pattern * options.patterns;
  const bool w1_shape = options.dims == kW1Dims && options.patterns == kW1Patterns &&
                        options.length == kW1Length && band == kW1Band;
  // Windows one wearer adds per second at 100 Hz: one per pair per sample.
  const double wearer_windows_per_s = static_cast<double>(pairs_per_wearer) * kSampleRateHz;

  for (double threshold : thresholds) {
    backend->set_library(make_library(options, band, static_cast<float>(threshold)));
    for (int repeat = 0; repeat < options.repeat; ++repeat) {
      SearchResult total;
      const auto start = std::chrono::steady_clock::now();
      for (const SearchBatch& batch : batches) {
        SearchResult result = backend->search(batch);
        total.stats.add(result.stats);
        total.matches.insert(total.matches.end(), result.matches.begin(), result.matches.end());
      }
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const auto& stats = total.stats;
      const double windows_per_s = stats.windows / seconds;
      nlohmann::ordered_json line;
      line["bench"] = "search";
      line["backend"] = backend->name();
      line["data"] = "random-walk+noise (synthetic)";
      line["wearers"] = options.wearers;
      line["dims"] = options.dims;
      line["patterns"] = options.patterns;
      line["pairs_per_pattern"] = pairs_per_pattern;
      line["pairs"] = pairs_per_wearer * options.wearers;
      line["m"] = options.length;
      line["band"] = band;
      line["znorm"] = true;
      line["threads"] = threads;
      line["pruning"] = options.pruning;
      if (std::isinf(threshold)) {
        line["threshold"] = "inf";
      } else {
        line["threshold"] = threshold;
      }
      line["top_p"] = options.max_matches;
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
      line["pruned_kim_rate"] = rate(stats.pruned_kim, stats.windows);
      line["pruned_keogh_eq_rate"] = rate(stats.pruned_keogh_eq, stats.windows);
      line["pruned_keogh_ec_rate"] = rate(stats.pruned_keogh_ec, stats.windows);
      line["dtw_abandoned_rate"] = rate(stats.dtw_abandoned, stats.windows);
      line["dtw_full_rate"] = rate(stats.dtw_full, stats.windows);
      line["equivalent_unpruned_cells_per_s"] =
          static_cast<double>(stats.windows) * options.length * (2.0 * band + 1) / seconds;
      line["w1_shape"] = w1_shape;
      // How many wearers of this run's shape the throughput keeps up with at
      // 100 Hz (each adds one window per pair per sample).
      line["wearers_realtime"] = windows_per_s / wearer_windows_per_s;
      if (w1_shape) {
        line["w1_wearers_realtime"] = windows_per_s / wearer_windows_per_s;
      } else {
        line["w1_wearers_realtime"] = nullptr;
      }
      std::cout << line.dump() << std::endl;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"Throughput of the CPU search backend on a W1-shaped load; prints JSON lines."};
  app.add_option("--wearers", options.wearers, "wearers (one slice each per batch)");
  app.add_option("--seconds", options.seconds,
                 "new data per wearer in seconds at 100 Hz (plus m-1 samples of history)");
  app.add_option("--threads", options.threads, "backend threads (0: one per hardware thread)");
  app.add_option("--threshold", options.threshold,
                 "distance threshold, a number or inf (default: " +
                     std::to_string(kDefaultThreshold) + " then inf)");
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
  CLI11_PARSE(app, argc, argv);
  try {
    return run(options);
  } catch (const std::exception& e) {
    std::cerr << "search_bench: " << e.what() << "\n";
    return 1;
  }
}
