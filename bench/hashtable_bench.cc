// hashtable_bench: the experiments of Moazeni 2013, §4.6, for the lock-free
// parallel hash table (kernels/hashtable/hash_table.h), one JSON object per
// measurement on stdout, then "summary" objects with the thesis's comparisons
// side by side; a readable digest goes to stderr.
//
// Workload (§4.6.1): keys are doubles in [0, 1), uniform or normal with mean
// 0.5 and the given variance (truncated to [0, 1)), stored as their 64-bit
// patterns. The table is loaded with 262,144 pairs before EVERY timed batch
// (a host-side rebuild, untimed), so each repetition starts from the same
// contents. A batch mixes search/insert/delete in exact proportions in random
// order; inserts use fresh keys; searches and deletes hit a preloaded key with
// probability --hit-ratio, else a fresh one. Times: the batch's compute only
// (GPU: CUDA events around the batch kernel and the reclamation kernels;
// CPU: wall clock of the parallel section); the thesis excludes transfers, and
// the end-to-end figure with transfers is reported beside it.
//
// Variants: GPU_PH (n tables of m buckets), GPU_BASIC (n = 1), GPU_BIG (one
// table of n*m buckets), CPU_PH and CPU_BASIC (all hardware threads).
// Modes: --quick (a smoke subset), default (the targets and every comparison,
// a few minutes on an H100), --full (the whole grid).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/error.h"
#include "kernels/hashtable/hash_functions.h"
#include "kernels/hashtable/hash_table.h"

namespace {

using gw::kernels::hashtable::BatchTiming;
using gw::kernels::hashtable::double_as_key;
using gw::kernels::hashtable::HashFunction;
using gw::kernels::hashtable::HashKey;
using gw::kernels::hashtable::HashOp;
using gw::kernels::hashtable::HashResult;
using gw::kernels::hashtable::HashTableBackend;
using gw::kernels::hashtable::HashTableConfig;
using gw::kernels::hashtable::HashValue;
using gw::kernels::hashtable::kOpStatusCount;
using gw::kernels::hashtable::OpKind;
using gw::kernels::hashtable::OpStatus;
using gw::kernels::hashtable::TableAssignment;
using Pairs = std::vector<std::pair<HashKey, HashValue>>;
using nlohmann::json;

struct Options {
  bool quick = false;
  bool full = false;
  int reps = 5;
  int warmup = 1;
  int preload = 262144;
  int buckets = 1024;
  int cpu_threads = 0;
  int block_size = 256;
  double hit_ratio = 0.5;
  std::uint64_t ceiling_bytes = 2ull << 30;
  std::uint64_t seed = 1;
  std::string variants = "GPU_PH,GPU_BASIC,GPU_BIG,CPU_PH,CPU_BASIC";
};

struct Mix {
  int search, insert, remove;  // percent
  std::string name() const {
    return std::to_string(search) + "/" + std::to_string(insert) + "/" + std::to_string(remove);
  }
};
const std::vector<Mix> kMixes = {
    {33, 33, 33}, {50, 25, 25}, {60, 20, 20}, {80, 10, 10}, {90, 5, 5}};
const std::vector<int> kTableCounts = {1, 4, 16, 64, 128, 256, 320};
const std::vector<int> kBatchSizes = {1 << 12, 1 << 13, 1 << 14, 1 << 15,
                                      1 << 16, 1 << 17, 1 << 18};

struct Distribution {
  bool normal = true;
  double variance = 0.05;
  std::string name() const { return normal ? "normal" : "uniform"; }
  std::string label() const {
    if (!normal) return "uniform";
    char text[32];
    std::snprintf(text, sizeof text, "normal(var=%g)", variance);
    return text;
  }
};

// One measurement point.
struct Case {
  std::string variant;  // GPU_PH, GPU_BASIC, GPU_BIG, CPU_PH, CPU_BASIC
  int tables = 320;     // n (for GPU_BIG: the multiplier of m)
  HashFunction hash = HashFunction::kDek;
  Distribution distribution;
  Mix mix = kMixes[0];
  int batch = 1 << 18;

  bool gpu() const { return variant.rfind("GPU", 0) == 0; }
  std::string key() const {
    return variant + "|" + std::to_string(tables) + "|" + std::to_string(static_cast<int>(hash)) +
           "|" + distribution.label() + "|" + mix.name() + "|" + std::to_string(batch);
  }
};

struct Result {
  double compute_ms_median = 0;
  double compute_ms_min = 0;
  double end_to_end_ms_median = 0;
  double ops_per_s = 0;
  bool ok = false;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

class Bench {
 public:
  explicit Bench(const Options& options) : options_(options) {
    gpu_ = gw::kernels::hashtable::gpu_hash_table_available();
    cpu_threads_ = options.cpu_threads > 0
                       ? options.cpu_threads
                       : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }

  bool gpu() const { return gpu_; }
  bool wanted(const std::string& variant) const {
    return ("," + options_.variants + ",").find("," + variant + ",") != std::string::npos;
  }

  void ceiling() {
    if (!gpu_ || ceiling_reads_ > 0) return;
    const auto ceiling = gw::kernels::hashtable::measure_gpu_random_access(options_.ceiling_bytes);
    ceiling_reads_ = ceiling.reads_per_s;
    device_ = ceiling.device_name;
    json line = {{"bench", "hashtable"},
                 {"measurement", "random_access_ceiling"},
                 {"device", ceiling.device_name},
                 {"table_bytes", ceiling.table_bytes},
                 {"random_8B_reads_per_s", ceiling.reads_per_s},
                 {"random_8B_cas_per_s", ceiling.cas_per_s}};
    std::cout << line.dump() << std::endl;
    std::fprintf(stderr,
                 "random-access ceiling on %s over %.1f GiB: %.2f G reads/s, %.2f G CAS/s\n",
                 ceiling.device_name.c_str(), ceiling.table_bytes / double(1ull << 30),
                 ceiling.reads_per_s / 1e9, ceiling.cas_per_s / 1e9);
  }

  // Measures `c` once per run (cached by key); returns nullptr when skipped.
  const Result* run(const Case& c) {
    if (!wanted(c.variant)) return nullptr;
    if (c.gpu() && !gpu_) {
      if (skipped_.insert(c.variant).second) {
        std::cout << json{{"bench", "hashtable"},
                          {"skipped", c.variant},
                          {"reason", "no CUDA build or no GPU"}}
                         .dump()
                  << std::endl;
      }
      return nullptr;
    }
    auto found = results_.find(c.key());
    if (found != results_.end()) return &found->second;
    Result& result = results_[c.key()];
    measure(c, result);
    return &result;
  }

  const Result* lookup(const Case& c) const {
    auto found = results_.find(c.key());
    return found == results_.end() ? nullptr : &found->second;
  }

  double ceiling_reads() const { return ceiling_reads_; }
  int cpu_threads() const { return cpu_threads_; }

 private:
  HashTableConfig config_for(const Case& c) const {
    HashTableConfig config;
    config.hash_function = c.hash;
    config.table_assignment = TableAssignment::kScaledUnitDouble;
    config.buckets_per_table = options_.buckets;
    config.tables = c.tables;
    if (c.variant == "GPU_BASIC" || c.variant == "CPU_BASIC") config.tables = 1;
    if (c.variant == "GPU_BIG") {
      config.tables = 1;
      config.buckets_per_table = options_.buckets * c.tables;
    }
    config.node_capacity = static_cast<std::uint64_t>(options_.preload) + (1u << 18) + 4096;
    config.cpu_threads = cpu_threads_;
    config.gpu_block_size = options_.block_size;
    return config;
  }

  HashTableBackend& table_for(const Case& c) {
    const HashTableConfig config = config_for(c);
    const std::string key = std::string(c.gpu() ? "gpu" : "cpu") + "|" +
                            std::to_string(config.tables) + "|" +
                            std::to_string(config.buckets_per_table) + "|" +
                            std::to_string(static_cast<int>(config.hash_function));
    auto found = tables_.find(key);
    if (found != tables_.end()) return *found->second;
    // One live table at a time keeps memory flat across the grid.
    tables_.clear();
    auto table = c.gpu() ? gw::kernels::hashtable::make_gpu_hash_table(config)
                         : gw::kernels::hashtable::make_cpu_hash_table(config);
    return *(tables_[key] = std::move(table));
  }

  double draw(const Distribution& d, std::mt19937_64& rng) const {
    if (!d.normal) return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    std::normal_distribution<double> normal(0.5, std::sqrt(d.variance));
    for (;;) {
      const double x = normal(rng);
      if (x >= 0.0 && x < 1.0) return x;
    }
  }

  const Pairs& preload_for(const Distribution& d) {
    auto found = preloads_.find(d.label());
    if (found != preloads_.end()) return found->second;
    std::mt19937_64 rng(options_.seed * 1000003 + 17);
    Pairs pairs;
    pairs.reserve(options_.preload);
    for (int i = 0; i < options_.preload; ++i)
      pairs.emplace_back(double_as_key(draw(d, rng)), rng());
    return preloads_[d.label()] = std::move(pairs);
  }

  std::vector<HashOp> workload(const Case& c, const Pairs& preload) const {
    std::mt19937_64 rng(options_.seed * 7919 + static_cast<std::uint64_t>(c.batch) * 31 +
                        static_cast<std::uint64_t>(c.mix.search));
    const int n = c.batch;
    const int inserts = static_cast<int>(std::lround(n * c.mix.insert / 100.0));
    const int deletes = static_cast<int>(std::lround(n * c.mix.remove / 100.0));
    std::vector<OpKind> kinds(n, OpKind::kSearch);
    std::fill(kinds.begin(), kinds.begin() + inserts, OpKind::kInsert);
    std::fill(kinds.begin() + inserts, kinds.begin() + inserts + deletes, OpKind::kDelete);
    std::shuffle(kinds.begin(), kinds.end(), rng);
    std::bernoulli_distribution hit(options_.hit_ratio);
    std::uniform_int_distribution<std::size_t> pick(0, preload.size() - 1);
    std::vector<HashOp> ops(n);
    for (int i = 0; i < n; ++i) {
      ops[i].kind = kinds[i];
      ops[i].value = rng();
      const bool existing = kinds[i] != OpKind::kInsert && !preload.empty() && hit(rng);
      ops[i].key = existing ? preload[pick(rng)].first : double_as_key(draw(c.distribution, rng));
    }
    return ops;
  }

  void measure(const Case& c, Result& result) {
    HashTableBackend& table = table_for(c);
    const Pairs& preload = preload_for(c.distribution);
    const std::vector<HashOp> ops = workload(c, preload);
    std::vector<HashResult> results(ops.size());
    std::vector<double> compute, end_to_end;
    std::vector<std::uint64_t> statuses(kOpStatusCount, 0);
    const int reps = options_.quick ? std::min(options_.reps, 2) : options_.reps;
    for (int rep = -options_.warmup; rep < reps; ++rep) {
      table.load(preload);  // untimed: every repetition starts from the same contents
      table.run_batch(ops.data(), ops.size(), results.data());
      if (rep < 0) continue;
      const BatchTiming timing = table.last_batch_timing();
      compute.push_back(timing.compute_ms);
      end_to_end.push_back(timing.upload_ms + timing.compute_ms + timing.download_ms);
      if (rep == 0)
        for (const HashResult& r : results) ++statuses[static_cast<int>(r.status)];
    }
    result.compute_ms_median = median(compute);
    result.compute_ms_min = *std::min_element(compute.begin(), compute.end());
    result.end_to_end_ms_median = median(end_to_end);
    result.ops_per_s = c.batch / (result.compute_ms_median * 1e-3);
    result.ok = true;
    const HashTableConfig config = table.config();
    json status_counts = json::object();
    for (int s = 0; s < kOpStatusCount; ++s)
      if (statuses[s]) status_counts[to_string(static_cast<OpStatus>(s))] = statuses[s];
    json line = {{"bench", "hashtable"},
                 {"variant", c.variant},
                 {"device", c.gpu() ? device_ : "cpu"},
                 {"cpu_threads", c.gpu() ? 0 : cpu_threads_},
                 {"tables", config.tables},
                 {"buckets_per_table", config.buckets_per_table},
                 {"hash", to_string(c.hash)},
                 {"table_assignment", to_string(config.table_assignment)},
                 {"distribution", c.distribution.name()},
                 {"variance", c.distribution.normal ? c.distribution.variance : 0.0},
                 {"mix_search_insert_delete", c.mix.name()},
                 {"batch", c.batch},
                 {"preload", options_.preload},
                 {"hit_ratio", options_.hit_ratio},
                 {"reps", reps},
                 {"compute_ms_median", result.compute_ms_median},
                 {"compute_ms_min", result.compute_ms_min},
                 {"end_to_end_ms_median", result.end_to_end_ms_median},
                 {"mops_per_s", result.ops_per_s / 1e6},
                 {"end_to_end_mops_per_s", c.batch / (result.end_to_end_ms_median * 1e-3) / 1e6},
                 {"statuses", status_counts}};
    if (c.gpu() && ceiling_reads_ > 0)
      line["ops_per_random_read_ceiling"] = result.ops_per_s / ceiling_reads_;
    std::cout << line.dump() << std::endl;
    std::fprintf(stderr, "  %-9s n=%-3d %-4s %-16s %-8s batch=%-6d %9.3f ms  %9.1f Mops/s\n",
                 c.variant.c_str(), c.tables, to_string(c.hash), c.distribution.label().c_str(),
                 c.mix.name().c_str(), c.batch, result.compute_ms_median, result.ops_per_s / 1e6);
  }

  Options options_;
  bool gpu_ = false;
  int cpu_threads_ = 1;
  double ceiling_reads_ = 0;
  std::string device_ = "gpu";
  std::map<std::string, Result> results_;
  std::map<std::string, std::unique_ptr<HashTableBackend>> tables_;
  std::map<std::string, Pairs> preloads_;
  std::set<std::string> skipped_;
};

void summary(const std::string& what, const json& fields) {
  json line = {{"bench", "hashtable"}, {"summary", what}};
  line.update(fields);
  std::cout << line.dump() << std::endl;
}

double ratio(const Result* a, const Result* b) {
  return a && b && b->ops_per_s > 0 ? a->ops_per_s / b->ops_per_s : 0.0;
}

// A ratio or a throughput for the digest: "-" where it was not measured.
std::string cell(double value, const char* format = "%.2f") {
  if (value <= 0) return "-";
  char text[32];
  std::snprintf(text, sizeof text, format, value);
  return text;
}
double mops(const Result* r) { return r ? r->ops_per_s / 1e6 : 0.0; }

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"Lock-free parallel hash table benchmark (Moazeni 2013 §4.6); JSON lines on stdout"};
  app.add_flag("--quick", options.quick, "a small smoke subset (2 reps)");
  app.add_flag(
      "--full", options.full,
      "the whole grid (mixes x PH x batch sizes, distributions, hashes); 3 reps unless --reps");
  app.add_option("--reps", options.reps, "timed repetitions per point (median reported)");
  app.add_option("--warmup", options.warmup, "untimed repetitions per point");
  app.add_option("--preload", options.preload, "pairs loaded before every batch");
  app.add_option("--buckets", options.buckets, "m, buckets per table");
  app.add_option("--cpu-threads", options.cpu_threads, "CPU variants' threads (0 = all)");
  app.add_option("--block-size", options.block_size, "GPU threads per block");
  app.add_option("--hit-ratio", options.hit_ratio, "share of searches/deletes on preloaded keys");
  app.add_option("--ceiling-bytes", options.ceiling_bytes, "random-access ceiling table size");
  app.add_option("--variants", options.variants,
                 "comma-separated subset of GPU_PH,GPU_BASIC,GPU_BIG,CPU_PH,CPU_BASIC");
  app.add_option("--seed", options.seed);
  CLI11_PARSE(app, argc, argv);
  if (options.full && app.count("--reps") == 0) options.reps = 3;  // keeps --full to minutes

  try {
    Bench bench(options);
    const auto start = std::chrono::steady_clock::now();
    const Distribution normal005{true, 0.05};
    const int big_batch = 1 << 18;
    const int ph = 320;
    std::fprintf(stderr, "hashtable_bench: %s, CPU variants on %d threads, mode %s\n",
                 bench.gpu() ? "GPU available" : "no GPU (CPU variants only)", bench.cpu_threads(),
                 options.quick  ? "quick"
                 : options.full ? "full"
                                : "default");
    bench.ceiling();

    auto make = [&](const std::string& variant, int tables, const Mix& mix, int batch,
                    const Distribution& distribution = Distribution{true, 0.05},
                    HashFunction hash = HashFunction::kDek) {
      Case c;
      c.variant = variant;
      c.tables = tables;
      c.mix = mix;
      c.batch = batch;
      c.distribution = distribution;
      c.hash = hash;
      return c;
    };

    // 1. The headline point: batch 2^18, 33/33/33, normal(var 0.05), PH = 320.
    std::fprintf(stderr, "[headline] batch 2^18, 33/33/33, normal(var=0.05), PH=%d\n", ph);
    for (const char* variant : {"GPU_PH", "GPU_BASIC", "GPU_BIG", "CPU_PH", "CPU_BASIC"})
      bench.run(make(variant, ph, kMixes[0], big_batch));

    // 2. Throughput vs batch size (Fig 39) and the 4096-op latency.
    const std::vector<int> batches =
        options.quick ? std::vector<int>{1 << 12, 1 << 18} : kBatchSizes;
    std::fprintf(stderr, "[batch size] 33/33/33, normal(var=0.05)\n");
    for (int batch : batches)
      for (const char* variant : {"GPU_PH", "CPU_PH", "GPU_BASIC"})
        bench.run(make(variant, ph, kMixes[0], batch));

    if (!options.quick) {
      // 3. Mixes (Figs 30-32).
      std::fprintf(stderr, "[mixes] batch 2^18, normal(var=0.05)\n");
      for (const Mix& mix : kMixes)
        for (const char* variant : {"GPU_PH", "CPU_PH", "GPU_BASIC", "GPU_BIG"})
          bench.run(make(variant, ph, mix, big_batch));
      // 4. PH sweep against GPU_BIG with n*m buckets (Figs 30, 36, 37).
      std::fprintf(stderr, "[PH sweep] batch 2^18, 33/33/33, normal(var=0.05)\n");
      for (int n : kTableCounts)
        for (const char* variant : {"GPU_PH", "GPU_BIG", "CPU_PH"})
          bench.run(make(variant, n, kMixes[0], big_batch));
      // 5. Key distribution (Figs 28, 33, 35, 38).
      std::fprintf(stderr, "[distributions] batch 2^18, 33/33/33\n");
      for (const Distribution& d : {Distribution{false, 0}, Distribution{true, 0.5},
                                    Distribution{true, 0.05}, Distribution{true, 0.01}})
        for (const char* variant : {"GPU_PH", "GPU_BASIC", "GPU_BIG", "CPU_PH"})
          bench.run(make(variant, ph, kMixes[0], big_batch, d));
      // 6. Hash functions (Fig 34). PJW fills ~64 of 1024 buckets, so its
      // PH = 1 point is left to --full.
      std::fprintf(stderr, "[hash functions] batch 2^18, 33/33/33, normal(var=0.05)\n");
      for (HashFunction hash : {HashFunction::kDek, HashFunction::kSdbm, HashFunction::kPjw})
        for (int n : {4, 64, 320})
          bench.run(make("GPU_PH", n, kMixes[0], big_batch, normal005, hash));
    }
    if (options.full) {
      std::fprintf(stderr, "[full grid] mixes x PH x batch sizes\n");
      for (const Mix& mix : kMixes)
        for (int n : kTableCounts)
          for (int batch : kBatchSizes)
            for (const char* variant : {"GPU_PH", "CPU_PH"})
              bench.run(make(variant, n, mix, batch));
      for (HashFunction hash : {HashFunction::kDek, HashFunction::kSdbm, HashFunction::kPjw})
        for (int n : kTableCounts)
          bench.run(make("GPU_PH", n, kMixes[0], big_batch, normal005, hash));
    }

    // ---- the thesis's comparisons, side by side, from this run's numbers.
    auto get = [&](const std::string& variant, int tables, const Mix& mix, int batch,
                   const Distribution& d = Distribution{true, 0.05}) {
      return bench.lookup(make(variant, tables, mix, batch, d));
    };
    std::fprintf(stderr, "\nspeedups of GPU_PH (PH=%d) at batch 2^18, normal(var=0.05):\n", ph);
    std::fprintf(stderr, "  %-9s %12s %12s %12s %12s\n", "mix", "GPU_PH Mops", "/CPU_PH",
                 "/GPU_BASIC", "/GPU_BIG");
    for (const Mix& mix : kMixes) {
      const Result* gpu_ph = get("GPU_PH", ph, mix, big_batch);
      if (!gpu_ph) continue;
      const double over_cpu = ratio(gpu_ph, get("CPU_PH", ph, mix, big_batch));
      const double over_basic = ratio(gpu_ph, get("GPU_BASIC", ph, mix, big_batch));
      const double over_big = ratio(gpu_ph, get("GPU_BIG", ph, mix, big_batch));
      summary("speedup_by_mix", {{"tables", ph},
                                 {"batch", big_batch},
                                 {"mix", mix.name()},
                                 {"gpu_ph_mops_per_s", gpu_ph->ops_per_s / 1e6},
                                 {"gpu_ph_over_cpu_ph", over_cpu},
                                 {"gpu_ph_over_gpu_basic", over_basic},
                                 {"gpu_ph_over_gpu_big", over_big}});
      std::fprintf(stderr, "  %-9s %12.1f %12s %12s %12s\n", mix.name().c_str(),
                   gpu_ph->ops_per_s / 1e6, cell(over_cpu).c_str(), cell(over_basic).c_str(),
                   cell(over_big).c_str());
    }
    std::fprintf(stderr,
                 "\nthroughput vs batch size (33/33/33, normal(var=0.05), PH=%d), Mops/s:\n", ph);
    std::fprintf(stderr, "  %-8s %12s %12s %12s %10s %14s\n", "batch", "GPU_PH", "CPU_PH",
                 "GPU_BASIC", "GPU/CPU", "2^20 ops (ms)");
    for (int batch : kBatchSizes) {
      const Result* g = get("GPU_PH", ph, kMixes[0], batch);
      const Result* c = get("CPU_PH", ph, kMixes[0], batch);
      const Result* b = get("GPU_BASIC", ph, kMixes[0], batch);
      if (!g && !c) continue;
      json fields = {{"batch", batch}, {"tables", ph}};
      if (g) {
        fields["gpu_ph_mops_per_s"] = g->ops_per_s / 1e6;
        fields["gpu_ph_compute_ms"] = g->compute_ms_median;
        fields["gpu_ph_end_to_end_ms"] = g->end_to_end_ms_median;
        fields["gpu_ph_ms_for_2^20_ops"] = g->compute_ms_median * ((1 << 20) / batch);
      }
      if (c) {
        fields["cpu_ph_mops_per_s"] = c->ops_per_s / 1e6;
        fields["cpu_ph_compute_ms"] = c->compute_ms_median;
      }
      if (b) fields["gpu_basic_mops_per_s"] = b->ops_per_s / 1e6;
      fields["gpu_ph_over_cpu_ph"] = ratio(g, c);
      summary("throughput_by_batch", fields);
      std::fprintf(stderr, "  %-8d %12s %12s %12s %10s %14s\n", batch,
                   cell(mops(g), "%.1f").c_str(), cell(mops(c), "%.1f").c_str(),
                   cell(mops(b), "%.1f").c_str(), cell(ratio(g, c)).c_str(),
                   cell(g ? g->compute_ms_median * ((1 << 20) / batch) : 0.0, "%.3f").c_str());
    }
    {
      const Result* g = get("GPU_PH", ph, kMixes[0], 4096);
      const Result* c = get("CPU_PH", ph, kMixes[0], 4096);
      json fields = {{"batch", 4096}, {"tables", ph}};
      if (g) {
        fields["gpu_ph_compute_ms"] = g->compute_ms_median;
        fields["gpu_ph_end_to_end_ms"] = g->end_to_end_ms_median;
      }
      if (c) fields["cpu_ph_compute_ms"] = c->compute_ms_median;
      summary("latency_4096", fields);
      std::fprintf(
          stderr,
          "\n4096-op batch latency: GPU_PH %.3f ms compute (%.3f ms with copies), CPU_PH %.3f ms\n",
          g ? g->compute_ms_median : 0.0, g ? g->end_to_end_ms_median : 0.0,
          c ? c->compute_ms_median : 0.0);
    }
    std::fprintf(stderr, "\nPH sweep (33/33/33, batch 2^18, normal(var=0.05)), Mops/s:\n");
    std::fprintf(stderr, "  %-5s %12s %12s %12s %10s\n", "PH", "GPU_PH", "GPU_BIG", "CPU_PH",
                 "PH/BIG");
    for (int n : kTableCounts) {
      const Result* g = get("GPU_PH", n, kMixes[0], big_batch);
      const Result* big = get("GPU_BIG", n, kMixes[0], big_batch);
      const Result* c = get("CPU_PH", n, kMixes[0], big_batch);
      if (!g && !c) continue;
      summary("ph_sweep", {{"tables", n},
                           {"batch", big_batch},
                           {"gpu_ph_mops_per_s", g ? g->ops_per_s / 1e6 : 0.0},
                           {"gpu_big_mops_per_s", big ? big->ops_per_s / 1e6 : 0.0},
                           {"cpu_ph_mops_per_s", c ? c->ops_per_s / 1e6 : 0.0},
                           {"gpu_ph_over_gpu_big", ratio(g, big)}});
      std::fprintf(stderr, "  %-5d %12s %12s %12s %10s\n", n, cell(mops(g), "%.1f").c_str(),
                   cell(mops(big), "%.1f").c_str(), cell(mops(c), "%.1f").c_str(),
                   cell(ratio(g, big)).c_str());
    }
    std::fprintf(stderr, "\nkey distribution (33/33/33, batch 2^18, PH=%d), Mops/s:\n", ph);
    for (const Distribution& d : {Distribution{false, 0}, Distribution{true, 0.5},
                                  Distribution{true, 0.05}, Distribution{true, 0.01}}) {
      const Result* g = get("GPU_PH", ph, kMixes[0], big_batch, d);
      const Result* b = get("GPU_BASIC", ph, kMixes[0], big_batch, d);
      const Result* big = get("GPU_BIG", ph, kMixes[0], big_batch, d);
      if (!g) continue;
      summary("distribution", {{"distribution", d.label()},
                               {"gpu_ph_mops_per_s", g->ops_per_s / 1e6},
                               {"gpu_ph_over_gpu_basic", ratio(g, b)},
                               {"gpu_ph_over_gpu_big", ratio(g, big)}});
      std::fprintf(stderr, "  %-16s GPU_PH %10.1f   /GPU_BASIC %8s   /GPU_BIG %6s\n",
                   d.label().c_str(), g->ops_per_s / 1e6, cell(ratio(g, b)).c_str(),
                   cell(ratio(g, big)).c_str());
    }

    // ---- targets (H100): >= 2 G ops/s and >= 27x CPU_PH at the headline point.
    const Result* head_gpu = get("GPU_PH", ph, kMixes[0], big_batch);
    const Result* head_cpu = get("CPU_PH", ph, kMixes[0], big_batch);
    json targets = {{"tables", ph},
                    {"batch", big_batch},
                    {"mix", kMixes[0].name()},
                    {"distribution", normal005.label()},
                    {"cpu_threads", bench.cpu_threads()},
                    {"target_gops_per_s", 2.0},
                    {"target_speedup_over_cpu_ph", 27.0}};
    if (head_gpu) {
      targets["gpu_ph_gops_per_s"] = head_gpu->ops_per_s / 1e9;
      targets["gops_target_met"] = head_gpu->ops_per_s >= 2e9;
      if (bench.ceiling_reads() > 0) {
        // Hash ops/s as a fraction of random 8-byte reads/s, and its inverse:
        // how many random reads the ceiling allows in the time of one op.
        targets["gpu_ph_ops_per_random_read_ceiling"] = head_gpu->ops_per_s / bench.ceiling_reads();
        targets["ceiling_random_reads_per_gpu_ph_op"] = bench.ceiling_reads() / head_gpu->ops_per_s;
      }
    }
    if (head_gpu && head_cpu) {
      targets["gpu_ph_over_cpu_ph"] = ratio(head_gpu, head_cpu);
      targets["speedup_target_met"] = ratio(head_gpu, head_cpu) >= 27.0;
    }
    summary("targets", targets);
    if (head_gpu) {
      std::fprintf(stderr, "\ntargets: GPU_PH %.2f G ops/s (target 2), %sx CPU_PH (target 27)\n",
                   head_gpu->ops_per_s / 1e9, cell(ratio(head_gpu, head_cpu), "%.1f").c_str());
      if (bench.ceiling_reads() > 0)
        std::fprintf(stderr,
                     "  = %.3f of the random 8-byte read ceiling (%.1f random reads per op)\n",
                     head_gpu->ops_per_s / bench.ceiling_reads(),
                     bench.ceiling_reads() / head_gpu->ops_per_s);
    }
    std::fprintf(stderr, "total %.1f s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  } catch (const gw::Error& error) {
    std::cerr << "hashtable_bench: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
