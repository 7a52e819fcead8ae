// The CUDA backend held to the CPU backend on identical inputs (faiss style:
// the GPU implementation is tested against the CPU one, which is itself held
// to the brute force in cpu_backend_test.cc and streaming_test.cc).
//
// Window mode: the GPU computes z-normalisation and DTW in float, the CPU in
// double, so the rule is: the same (slice, pattern, pattern dim, stream dim,
// end) sets except windows within 1e-4 (relative) of the threshold, and
// distances within 1e-4 (relative, absolute below 1). Streaming mode shares
// the float cell arithmetic of kernels/spring.h: bit-identical matches.
//
// Without the CUDA backend or without a GPU every case prints
// WARN("skipped: ...") and returns; CTest reports it skipped (the binary
// still runs in CI, so it keeps compiling and linking there).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "kernels/multi_device_backend.h"
#include "kernels/search.h"
#include "kernels_test_support.h"
#if defined(GW_HAVE_CUDA_BACKEND)
#include "kernels/cuda_backend.h"
#endif

namespace gw::kernels {
namespace {

using Series = std::vector<float>;
using testing::make_pattern;
using testing::neighbour_pairs;

constexpr float kInfinity = std::numeric_limits<float>::infinity();
constexpr double kRelative = 1e-4;
constexpr int kUncapped = 1 << 30;

// The GPU backend through the factory, or nullptr after a WARN naming why.
std::unique_ptr<SearchBackend> gpu_or_skip() {
  try {
    std::string note;
    return make_backend("cuda", 0, &note);
  } catch (const std::exception& e) {
    WARN("skipped: " << e.what());
    return nullptr;
  }
}

// A GPU backend with the given pruning (only make_cuda_backend takes it).
std::unique_ptr<SearchBackend> gpu_or_skip(const PruningOptions& pruning) {
#if defined(GW_HAVE_CUDA_BACKEND)
  try {
    return make_cuda_backend(0, pruning);
  } catch (const std::exception& e) {
    WARN("skipped: " << e.what());
    return nullptr;
  }
#else
  (void)pruning;
  return gpu_or_skip();  // throws "not built" and skips, or (never) a factory backend
#endif
}

Series cut(const Series& source, int begin, int count) {
  return Series(source.begin() + begin, source.begin() + begin + count);
}

// Adds samples [begin, end) of dim-major series as one slice; sample s has
// absolute index first_index + s.
void add_range(SearchBatch* batch, std::uint32_t profile, const std::vector<Series>& dims,
               std::int64_t first_index, int begin, int end, std::int64_t first_new,
               std::uint64_t key = 0) {
  const int count = static_cast<int>(dims.size());
  const int length = end - begin;
  std::vector<float> sample_major(static_cast<std::size_t>(length) * count);
  for (int s = 0; s < length; ++s) {
    for (int d = 0; d < count; ++d) sample_major[s * count + d] = dims[d][begin + s];
  }
  batch->add_slice(profile, count, sample_major.data(), length, first_index + begin, first_new,
                   key);
}

std::vector<Series> random_dims(int dims, int length, std::uint64_t seed) {
  std::vector<Series> out;
  for (int d = 0; d < dims; ++d) out.push_back(testing::random_walk(length, seed + d, 1.0, 0.3));
  return out;
}

// Daphnet acceleration channels (1..9) from one position of the recording.
std::vector<Series> daphnet_dims(const std::vector<int>& columns, int begin, int length) {
  std::vector<Series> out;
  for (int c : columns) out.push_back(testing::daphnet_channel(c, begin, length));
  return out;
}

using GroupKey = std::tuple<std::uint32_t, std::uint32_t, std::uint16_t, std::uint16_t>;

std::map<GroupKey, std::vector<Match>> by_group(const SearchResult& result) {
  std::map<GroupKey, std::vector<Match>> groups;
  for (const Match& m : result.matches)
    groups[{m.slice, m.pattern, m.pattern_dim, m.stream_dim}].push_back(m);
  return groups;
}

bool key_less(const Match& a, const Match& b) {
  return std::tie(a.slice, a.pattern, a.pattern_dim, a.stream_dim, a.distance, a.end) <
         std::tie(b.slice, b.pattern, b.pattern_dim, b.stream_dim, b.distance, b.end);
}

bool close(double a, double b) {
  return std::fabs(a - b) <= kRelative * std::max({std::fabs(a), std::fabs(b), 1.0});
}

std::string describe(const char* what, const GroupKey& key, std::int64_t end, double cpu,
                     double gpu) {
  std::ostringstream out;
  out << what << ": slice " << std::get<0>(key) << " pattern " << std::get<1>(key) << " pair ("
      << std::get<2>(key) << ", " << std::get<3>(key) << ") end " << end << " cpu " << cpu
      << " gpu " << gpu;
  return out.str();
}

// Checks that hold for any backend's result: order, profile, searched range
// and existing stream dims.
std::vector<std::string> structural_problems(const SearchResult& result, const SearchBatch& batch,
                                             const PatternLibrary& library) {
  std::vector<std::string> problems;
  for (std::size_t k = 0; k < result.matches.size(); ++k) {
    const Match& m = result.matches[k];
    const GroupKey key{m.slice, m.pattern, m.pattern_dim, m.stream_dim};
    if (k > 0 && key_less(m, result.matches[k - 1]))
      problems.push_back(describe("out of order", key, m.end, 0, m.distance));
    if (m.slice >= batch.streams.size() || m.pattern >= library.patterns.size()) {
      problems.push_back(describe("bad index", key, m.end, 0, m.distance));
      continue;
    }
    const StreamSlice& slice = batch.streams[m.slice];
    const Pattern& pattern = library.patterns[m.pattern];
    if (pattern.profile != slice.profile)
      problems.push_back(describe("profile mismatch", key, m.end, 0, m.distance));
    if (m.stream_dim >= slice.dims)
      problems.push_back(describe("stream dim the slice lacks", key, m.end, 0, m.distance));
    const std::int64_t last = slice.first_index + slice.length - 1;
    const std::int64_t first =
        pattern.mode == SearchMode::kWindow
            ? std::max(slice.first_new, slice.first_index + pattern.length - 1)
            : std::max(slice.first_new, slice.first_index);
    if (m.end < first || m.end > last)
      problems.push_back(describe("end outside the searched range", key, m.end, 0, m.distance));
    if (pattern.mode == SearchMode::kWindow && m.start != m.end - pattern.length + 1)
      problems.push_back(describe("window start", key, m.end, 0, static_cast<double>(m.start)));
    if (std::isnan(m.distance) || m.distance > pattern.threshold)
      problems.push_back(describe("distance over threshold", key, m.end, 0, m.distance));
  }
  return problems;
}

// The window-mode equality rule (file comment). With `cap_may_bind` a group
// whose cap binds may exchange ends at the cap boundary, but only among
// distances equal within 1e-4; otherwise no cap may bind.
std::vector<std::string> window_differences(const SearchResult& cpu, const SearchResult& gpu,
                                            const PatternLibrary& library, bool cap_may_bind) {
  std::vector<std::string> diffs;
  const auto cpu_groups = by_group(cpu);
  const auto gpu_groups = by_group(gpu);
  std::map<GroupKey, int> keys;
  for (const auto& [key, matches] : cpu_groups) keys[key] = 0;
  for (const auto& [key, matches] : gpu_groups) keys[key] = 0;
  const std::vector<Match> none;
  for (const auto& [key, unused] : keys) {
    const Pattern& pattern = library.patterns[std::get<1>(key)];
    if (pattern.mode != SearchMode::kWindow) continue;
    const auto c_it = cpu_groups.find(key);
    const auto g_it = gpu_groups.find(key);
    const std::vector<Match>& c = c_it == cpu_groups.end() ? none : c_it->second;
    const std::vector<Match>& g = g_it == gpu_groups.end() ? none : g_it->second;
    const std::size_t cap = static_cast<std::size_t>(pattern.max_matches_per_pair);
    if (c.size() > cap || g.size() > cap)
      diffs.push_back(describe("over the cap", key, -1, c.size(), g.size()));
    const bool c_full = c.size() == cap, g_full = g.size() == cap;
    if (!cap_may_bind && (c_full || g_full))
      diffs.push_back(describe("the cap binds (test setup)", key, -1, c.size(), g.size()));
    const double threshold = pattern.threshold;
    auto near_threshold = [&](double d) {
      return std::isfinite(threshold) &&
             std::fabs(d - threshold) <= kRelative * std::max(threshold, 1.0);
    };
    std::map<std::int64_t, float> c_end, g_end;
    for (const Match& m : c) c_end[m.end] = m.distance;
    for (const Match& m : g) g_end[m.end] = m.distance;
    const double c_worst = c.empty() ? 0 : c.back().distance;
    const double g_worst = g.empty() ? 0 : g.back().distance;
    for (const auto& [end, dc] : c_end) {
      const auto found = g_end.find(end);
      if (found != g_end.end()) {
        if (!close(dc, found->second))
          diffs.push_back(describe("distance", key, end, dc, found->second));
      } else if (!near_threshold(dc) && !(cap_may_bind && g_full && close(dc, g_worst))) {
        diffs.push_back(describe("missing on the GPU", key, end, dc, g_worst));
      }
    }
    for (const auto& [end, dg] : g_end) {
      if (c_end.count(end) != 0) continue;
      if (!near_threshold(dg) && !(cap_may_bind && c_full && close(dg, c_worst)))
        diffs.push_back(describe("extra on the GPU", key, end, c_worst, dg));
    }
    // Ranked distances agree position by position (swaps exchange equals only).
    if (c.size() == g.size()) {
      for (std::size_t k = 0; k < c.size(); ++k) {
        if (!close(c[k].distance, g[k].distance))
          diffs.push_back(describe("rank distance", key, c[k].end, c[k].distance, g[k].distance));
      }
    }
  }
  return diffs;
}

// Matches and every field equal, bit for bit.
// Same matches in the same order; distances equal, or within `relative`
// (float results of one backend computed by kernels that sum differently).
std::vector<std::string> exact_differences(const SearchResult& cpu, const SearchResult& gpu,
                                           double relative = 0) {
  std::vector<std::string> diffs;
  if (cpu.matches.size() != gpu.matches.size()) {
    diffs.push_back("match count cpu " + std::to_string(cpu.matches.size()) + " gpu " +
                    std::to_string(gpu.matches.size()));
  }
  const std::size_t n = std::min(cpu.matches.size(), gpu.matches.size());
  for (std::size_t k = 0; k < n && diffs.size() < 20; ++k) {
    const Match& a = cpu.matches[k];
    const Match& b = gpu.matches[k];
    if (a.slice != b.slice || a.pattern != b.pattern || a.pattern_dim != b.pattern_dim ||
        a.stream_dim != b.stream_dim || a.end != b.end || a.start != b.start ||
        !(std::fabs(a.distance - b.distance) <= relative * std::fabs(a.distance))) {
      std::ostringstream out;
      out << "match " << k << ": cpu (slice " << a.slice << " pattern " << a.pattern << " pair ("
          << a.pattern_dim << ", " << a.stream_dim << ") end " << a.end << " start " << a.start
          << " distance " << a.distance << ") gpu (slice " << b.slice << " pattern " << b.pattern
          << " pair (" << b.pattern_dim << ", " << b.stream_dim << ") end " << b.end << " start "
          << b.start << " distance " << b.distance << ")";
      diffs.push_back(out.str());
    }
  }
  return diffs;
}

// Fails with the first few differences in the message.
void require_none(const std::vector<std::string>& diffs, const std::string& what) {
  std::ostringstream out;
  for (std::size_t k = 0; k < diffs.size() && k < 20; ++k) out << "\n  " << diffs[k];
  INFO(what << ": " << diffs.size() << " differences" << out.str());
  CHECK(diffs.empty());
}

// Runs the batch on both backends and applies the window rule plus the
// structural checks; returns the CPU result.
SearchResult compare_window_search(SearchBackend& cpu, SearchBackend& gpu, const SearchBatch& batch,
                                   const PatternLibrary& library, bool cap_may_bind,
                                   const std::string& what) {
  const SearchResult c = cpu.search(batch);
  const SearchResult g = gpu.search(batch);
  require_none(structural_problems(g, batch, library), what + " (GPU structure)");
  require_none(window_differences(c, g, library, cap_may_bind), what);
  return c;
}

// Per pattern, a threshold below which about `fraction` of the CPU's
// distances lie (halfway between two neighbours), from a run with
// threshold inf and no cap.
std::vector<float> cpu_quantile_thresholds(const PatternLibrary& library, const SearchBatch& batch,
                                           double fraction) {
  auto open = std::make_shared<PatternLibrary>(library);
  for (Pattern& p : open->patterns) {
    p.threshold = kInfinity;
    p.max_matches_per_pair = kUncapped;
  }
  auto cpu = make_cpu_backend(0);
  cpu->set_library(open);
  const SearchResult result = cpu->search(batch);
  std::vector<std::vector<double>> distances(library.patterns.size());
  for (const Match& m : result.matches) distances[m.pattern].push_back(m.distance);
  std::vector<float> thresholds;
  for (const auto& d : distances)
    thresholds.push_back(d.size() >= 2 ? static_cast<float>(testing::quantile(d, fraction))
                                       : kInfinity);
  return thresholds;
}

// Four-dim slices of one profile (random walks with a flat stretch, real
// Daphnet channels, first_new in the middle of two of them) and one slice of
// another profile.
struct WindowBatch {
  SearchBatch batch;
  WindowBatch() {
    std::vector<Series> walks = random_dims(4, 900, 100);
    for (int s = 300; s < 420; ++s) walks[1][s] = 7.5f;  // constant windows under znorm
    add_range(&batch, 1, walks, 0, 0, 900, 0);
    add_range(&batch, 1, daphnet_dims({1, 2, 3, 8}, 20000, 700), 50000, 0, 700, 50000 + 333);
    add_range(&batch, 1, random_dims(4, 500, 200), 7000, 0, 500, 7000 + 420);
    add_range(&batch, 2, random_dims(2, 300, 300), 0, 0, 300, 0);
  }
};

// Three pattern dims: a random walk, a Daphnet ankle stretch, a random walk.
std::vector<Series> mixed_query(int m, std::uint64_t seed) {
  return {cut(testing::random_walk(m + 100, seed, 1.0, 0.3), 50, m),
          testing::daphnet_channel(2, 31000 + static_cast<int>(seed % 1000), m),
          cut(testing::random_walk(m + 100, seed + 1, 1.0, 0.3), 30, m)};
}

TEST_CASE("GPU window mode equals the CPU across m, band, znorm and neighbour range",
          "[gpu][window]") {
  auto gpu = gpu_or_skip();
  if (!gpu) return;
  const WindowBatch data;
  // Per (m, band fraction, znorm) one pattern; nr cycles through 0..3.
  PatternLibrary base;
  for (int m : {16, 64, 128, 300}) {
    const double fractions[] = {0.0, 0.05, 0.1, 0.25};
    for (int f = 0; f < 4; ++f) {
      const int band = static_cast<int>(std::floor(fractions[f] * m));
      for (bool znorm : {true, false}) {
        const int nr = znorm ? f : 3 - f;
        base.patterns.push_back(make_pattern(1, mixed_query(m, 1000 + m + f), band, znorm,
                                             kInfinity, kUncapped, neighbour_pairs(3, 4, nr)));
      }
    }
  }
  const std::vector<float> thresholds = cpu_quantile_thresholds(base, data.batch, 0.03);
  // Each pattern twice: without threshold (every window's distance compared)
  // and with its 3 % threshold (the lower bounds and early abandoning prune).
  auto library = std::make_shared<PatternLibrary>();
  for (std::size_t p = 0; p < base.patterns.size(); ++p) {
    library->patterns.push_back(base.patterns[p]);
    library->patterns.push_back(base.patterns[p]);
    library->patterns.back().threshold = thresholds[p];
  }
  // A profile no slice has, and one only the last slice has.
  library->patterns.push_back(make_pattern(9, mixed_query(32, 77), 3, true, kInfinity, kUncapped,
                                           neighbour_pairs(3, 4, 1)));
  library->patterns.push_back(make_pattern(2, {cut(testing::random_walk(100, 78), 10, 16)}, 1, true,
                                           kInfinity, kUncapped, {{0, 0}, {0, 1}}));
  auto cpu = make_cpu_backend(0);
  cpu->set_library(library);
  gpu->set_library(library);
  const SearchResult c =
      compare_window_search(*cpu, *gpu, data.batch, *library, false, "window sweep");
  REQUIRE(!c.matches.empty());
  for (const Match& m : c.matches) CHECK(m.pattern != library->patterns.size() - 2);
}

TEST_CASE("GPU pruning options never change the matches", "[gpu][window][pruning]") {
  PruningOptions off;
  off.lb_kim = off.lb_keogh_eq = off.lb_keogh_ec = off.early_abandon = false;
  auto gpu_off = gpu_or_skip(off);
  if (!gpu_off) return;
  const WindowBatch data;
  PatternLibrary base;
  base.patterns.push_back(
      make_pattern(1, mixed_query(64, 5), 6, true, kInfinity, 5, neighbour_pairs(3, 4, 2)));
  base.patterns.push_back(make_pattern(1, mixed_query(128, 6), 12, true, kInfinity, kUncapped,
                                       neighbour_pairs(3, 4, 3)));
  base.patterns.push_back(make_pattern(1, mixed_query(300, 7), 30, false, kInfinity, kUncapped,
                                       neighbour_pairs(3, 4, 1)));
  base.patterns.push_back(
      make_pattern(1, mixed_query(16, 8), 0, true, kInfinity, 1000, neighbour_pairs(3, 4, 0)));
  base.patterns.push_back(
      make_pattern(1, mixed_query(32, 9), 25, true, kInfinity, 2, neighbour_pairs(3, 4, 1)));
  const std::vector<float> thresholds = cpu_quantile_thresholds(base, data.batch, 0.02);
  auto library = std::make_shared<PatternLibrary>(base);
  for (std::size_t p = 0; p < base.patterns.size(); ++p)
    library->patterns[p].threshold = thresholds[p];
  // No threshold and a small cap: the cut comes from the top-p alone.
  library->patterns.push_back(
      make_pattern(1, mixed_query(64, 10), 6, true, kInfinity, 3, neighbour_pairs(3, 4, 1)));

  auto cpu = make_cpu_backend(0);
  cpu->set_library(library);
  gpu_off->set_library(library);
  const SearchResult c = cpu->search(data.batch);
  const SearchResult unpruned = gpu_off->search(data.batch);
  require_none(structural_problems(unpruned, data.batch, *library), "GPU all off (structure)");
  require_none(window_differences(c, unpruned, *library, true), "GPU all off vs CPU");
  CHECK(unpruned.stats.pruned_kim == 0);
  CHECK(unpruned.stats.pruned_keogh_eq == 0);
  CHECK(unpruned.stats.pruned_keogh_ec == 0);
  CHECK(unpruned.stats.dtw_abandoned == 0);
  CHECK(unpruned.stats.dtw_full == unpruned.stats.windows);

  // Every subset: the GPU's own float distances, so the same matches with the
  // same distances; bit-identical where one kernel shape computes both, within
  // 1e-5 relative where the pruned path takes the one-alignment-per-warp
  // kernel (bands above kMaxRegisterBand with few candidates: its min-plus
  // scan adds the costs in another order).
  for (int mask = 0; mask < 16; ++mask) {
    PruningOptions pruning;
    pruning.lb_kim = (mask & 1) != 0;
    pruning.lb_keogh_eq = (mask & 2) != 0;
    pruning.lb_keogh_ec = (mask & 4) != 0;
    pruning.early_abandon = (mask & 8) != 0;
    auto gpu = gpu_or_skip(pruning);
    REQUIRE(gpu);
    gpu->set_library(library);
    const SearchResult result = gpu->search(data.batch);
    INFO("pruning mask " << mask);
    require_none(exact_differences(unpruned, result, 1e-5), "GPU pruning subset vs all off");
    CHECK(result.stats.windows == unpruned.stats.windows);
    if (mask == 15) {
      CHECK(result.stats.pruned_kim + result.stats.pruned_keogh_eq + result.stats.pruned_keogh_ec >
            0);
      CHECK(result.stats.dtw_abandoned > 0);
      CHECK(result.stats.cells < unpruned.stats.cells);
    }
  }
}

TEST_CASE("GPU top-p cap exchanges only equal distances", "[gpu][window][cap]") {
  auto gpu = gpu_or_skip();
  if (!gpu) return;
  const WindowBatch data;
  // Integer-valued Daphnet data without znorm holds exact ties; a small cap
  // cuts through them.
  PatternLibrary base;
  for (int p : {1, 3, 7}) {
    base.patterns.push_back(
        make_pattern(1, mixed_query(32, 20 + p), 3, false, kInfinity, p, neighbour_pairs(3, 4, 1)));
    base.patterns.push_back(
        make_pattern(1, mixed_query(64, 30 + p), 6, true, kInfinity, p, neighbour_pairs(3, 4, 2)));
    base.patterns.push_back(make_pattern(1, mixed_query(128, 40 + p), 32, true, kInfinity, p,
                                         neighbour_pairs(3, 4, 0)));
  }
  // Ties by construction: an all-constant query has the same distance to
  // every window under znorm whose best path stays on the diagonal.
  base.patterns.push_back(make_pattern(1, {Series(24, 3.0f)}, 2, true, kInfinity, 4, {{0, 1}}));
  const std::vector<float> thresholds = cpu_quantile_thresholds(base, data.batch, 0.2);
  auto library = std::make_shared<PatternLibrary>(base);
  for (std::size_t p = 0; p < base.patterns.size(); ++p) {
    Pattern with_threshold = base.patterns[p];
    with_threshold.threshold = thresholds[p];
    library->patterns.push_back(with_threshold);
  }
  auto cpu = make_cpu_backend(0);
  cpu->set_library(library);
  gpu->set_library(library);
  const SearchResult c = compare_window_search(*cpu, *gpu, data.batch, *library, true, "small cap");
  REQUIRE(!c.matches.empty());
}

TEST_CASE("GPU finds a planted match split across two batches", "[gpu][window][batches]") {
  auto gpu = gpu_or_skip();
  if (!gpu) return;
  const int m = 64, band = 6, n = 600, planted_end = 510;
  const std::int64_t base = 123456;
  const Series query = cut(testing::random_walk(200, 901, 1.0, 0.3), 60, m);
  // Three wearers; wearer 0 carries the query, scaled and shifted (znorm
  // undoes both), ending at sample 510.
  std::vector<std::vector<Series>> wearers = {random_dims(3, n, 910), random_dims(3, n, 920),
                                              daphnet_dims({1, 4, 7}, 25000, n)};
  for (int k = 0; k < m; ++k) wearers[0][1][planted_end - m + 1 + k] = 3.0f * query[k] + 40.0f;
  auto library = std::make_shared<PatternLibrary>();
  library->patterns.push_back(
      make_pattern(1, {query, query}, band, true, 1.5f, kUncapped, neighbour_pairs(2, 3, 1)));
  library->patterns.push_back(
      make_pattern(1, {query, query}, band, true, kInfinity, kUncapped, neighbour_pairs(2, 3, 1)));
  auto cpu = make_cpu_backend(0);
  cpu->set_library(library);
  gpu->set_library(library);

  // Batch 1 ends 20 samples before the planted window does; batch 2 carries
  // m - 1 samples of history, so the planted window spans both.
  const int split = planted_end - 20;
  SearchBatch first, second;
  for (std::size_t w = 0; w < wearers.size(); ++w) {
    add_range(&first, 1, wearers[w], base, 0, split, base, w);
    add_range(&second, 1, wearers[w], base, split - (m - 1), n, base + split, w);
  }
  const SearchResult c1 = compare_window_search(*cpu, *gpu, first, *library, false, "batch 1");
  const SearchResult g2 = gpu->search(second);
  const SearchResult c2 = cpu->search(second);
  require_none(structural_problems(g2, second, *library), "batch 2 (GPU structure)");
  require_none(window_differences(c2, g2, *library, false), "batch 2");
  for (const Match& match : c1.matches) CHECK(match.end < base + split);
  for (const SearchResult* r : {&c2, &g2}) {
    bool planted = false;
    for (const Match& match : r->matches) {
      if (match.slice == 0 && match.pattern == 0 && match.stream_dim == 1 &&
          match.end == base + planted_end) {
        planted = true;
        CHECK(match.distance < 1e-3f);
        CHECK(match.start == base + planted_end - m + 1);
      }
    }
    CHECK(planted);
  }
}

// The GPU's matches of `batch` against the CPU's `c`: window patterns by
// window_differences, the streaming pattern `streaming` bit-identical.
void require_same_matches(const SearchResult& c, const SearchResult& g, const SearchBatch& batch,
                          const PatternLibrary& library, std::uint32_t streaming) {
  require_none(structural_problems(g, batch, library), "GPU structure");
  require_none(window_differences(c, g, library, false), "window patterns");
  SearchResult cs, gs;
  for (const Match& m : c.matches)
    if (m.pattern == streaming) cs.matches.push_back(m);
  for (const Match& m : g.matches)
    if (m.pattern == streaming) gs.matches.push_back(m);
  require_none(exact_differences(cs, gs), "streaming pattern");
}

TEST_CASE("GPU skips pairs on stream dims a slice lacks", "[gpu][window][streaming]") {
  auto gpu = gpu_or_skip();
  if (!gpu) return;
  // Two slices of one profile with 2 and 4 dims, the 2-dim one last in the
  // batch: a pair on stream dim 3 exists for the first slice only (reading
  // dim 3 of the second would run past its data).
  SearchBatch batch;
  add_range(&batch, 1, random_dims(4, 200, 1300), 0, 0, 200, 0, 1);
  add_range(&batch, 1, random_dims(2, 200, 1400), 0, 0, 200, 0, 2);
  const std::vector<Series> query = {cut(testing::random_walk(100, 1500), 20, 16)};
  const std::vector<DimPair> pairs = {{0, 0}, {0, 1}, {0, 2}, {0, 3}};
  auto library = std::make_shared<PatternLibrary>();
  library->patterns.push_back(make_pattern(1, query, 2, true, kInfinity, kUncapped, pairs));
  library->patterns.push_back(
      make_pattern(1, query, 2, true, kInfinity, kUncapped, pairs, SearchMode::kStreaming));
  auto cpu = make_cpu_backend(0);
  cpu->set_library(library);
  gpu->set_library(library);
  require_same_matches(cpu->search(batch), gpu->search(batch), batch, *library, 1);
}

// The daemon's batches: per tick one slice per stream with m-1 samples of
// history (m of the longest pattern) and the new samples, stream key =
// stream; ticks of different sizes, slices longer than 256 samples, a gap, a
// key whose dim count changes, changing slice order and key 0 (no identity).
// Window patterns of three bands and lengths, and one streaming pattern (3).
struct DaemonTicks {
  std::shared_ptr<PatternLibrary> library = std::make_shared<PatternLibrary>();
  std::vector<SearchBatch> batches;
};

DaemonTicks daemon_shaped_ticks() {
  DaemonTicks ticks;
  const int total = 2000, history = 127;
  std::vector<std::vector<Series>> data;
  for (int k = 0; k < 6; ++k)
    data.push_back(k == 3 ? daphnet_dims({1, 4, 7}, 40000, total)
                          : random_dims(3, total, 3000 + 10 * k));
  const std::vector<std::uint64_t> keys = {0, 11, 12, 13, 14, 15};
  PatternLibrary& library = *ticks.library;
  const std::vector<Series> q = random_dims(3, 300, 3500);
  auto query = [&](int m, int dims) {
    std::vector<Series> out;
    for (int d = 0; d < dims; ++d) out.push_back(cut(q[d], 40 + d, m));
    return out;
  };
  library.patterns.push_back(
      make_pattern(1, query(16, 3), 1, true, kInfinity, kUncapped, neighbour_pairs(3, 3, 1)));
  library.patterns.push_back(
      make_pattern(1, query(64, 2), 6, true, kInfinity, kUncapped, neighbour_pairs(2, 3, 1)));
  library.patterns.push_back(
      make_pattern(1, query(128, 3), 12, false, 400.0f, kUncapped, neighbour_pairs(3, 3, 0)));
  library.patterns.push_back(make_pattern(1, query(24, 3), 0, false, kInfinity, kUncapped,
                                          neighbour_pairs(3, 3, 1), SearchMode::kStreaming));
  std::vector<int> next(6, 0);
  const std::vector<int> tick_samples = {10, 10, 37, 10, 1, 300, 10, 10, 64, 10, 10, 129, 10, 10};
  ticks.batches.resize(tick_samples.size());
  for (std::size_t t = 0; t < tick_samples.size(); ++t) {
    std::vector<int> order = {0, 1, 2, 3, 4, 5};
    std::rotate(order.begin(), order.begin() + (t % 6), order.end());
    if (t % 2 == 1) std::reverse(order.begin(), order.end());
    SearchBatch& batch = ticks.batches[t];
    for (int k : order) {
      // A gap on stream 2: 50 samples never arrive; like the daemon, the
      // slice then starts at the first sample after the gap.
      const bool gap = k == 2 && t == 7;
      if (gap) next[k] += 50;
      const int count = tick_samples[t] + k;
      const int begin = gap ? next[k] : std::max(0, next[k] - history);
      REQUIRE(next[k] + count <= total);
      // Stream 5 drops its third dim from tick 9 on (same key, other shape).
      std::vector<Series> dims = data[k];
      if (k == 5 && t >= 9) dims.pop_back();
      add_range(&batch, 1, dims, 0, begin, next[k] + count, next[k], keys[k]);
      next[k] += count;
    }
  }
  return ticks;
}

// `batch` without the leading samples of each slice that `backend` says it
// holds (SearchBackend::held_samples), as the engine sends it.
SearchBatch omit_held(const SearchBatch& batch, const SearchBackend& backend) {
  SearchBatch out;
  out.streams = batch.streams;
  for (StreamSlice& slice : out.streams) {
    const StreamSlice& full = batch.streams[static_cast<std::size_t>(&slice - out.streams.data())];
    slice.omitted = backend.held_samples(slice);
    slice.offset = out.data.size();
    for (int d = 0; d < slice.dims; ++d) {
      const auto row = batch.data.begin() + static_cast<std::ptrdiff_t>(
                                                full.offset + static_cast<std::size_t>(d) * full.length);
      out.data.insert(out.data.end(), row + slice.omitted, row + full.length);
    }
  }
  return out;
}

// One daemon-shaped tick (DaemonTicks: pattern 3 streams) agrees.
void require_same_daemon_tick(const SearchResult& c, const SearchResult& g,
                              const SearchBatch& batch, const PatternLibrary& library) {
  REQUIRE(!c.matches.empty());
  require_same_matches(c, g, batch, library, 3);
}

// The daemon's ticks, and both backends on their library; gpu is null
// (after a WARN saying why) where no GPU can be used.
struct TickBackends {
  DaemonTicks ticks = daemon_shaped_ticks();
  std::unique_ptr<SearchBackend> gpu = gpu_or_skip();
  std::unique_ptr<SearchBackend> cpu = make_cpu_backend(0);
  TickBackends() {
    cpu->set_library(ticks.library);
    if (gpu) gpu->set_library(ticks.library);
  }
};

TEST_CASE("GPU window mode over daemon-shaped ticks with stream keys", "[gpu][window][batches]") {
  TickBackends backends;
  if (!backends.gpu) return;
  // A backend may keep per-key state between batches (streaming columns,
  // samples already on the device); this holds it to the CPU over the
  // daemon's ticks.
  const DaemonTicks& ticks = backends.ticks;
  SearchBackend& cpu = *backends.cpu;
  SearchBackend& gpu = *backends.gpu;

  // How batches reach the GPU: searched one by one; each next batch prepared
  // (uploaded) on a second thread while the current one is searched; or the
  // same with every fourth preparation made for a copy of the next batch,
  // which is then not the object searched (the backend must notice).
  const int feeding = GENERATE(0, 1, 2);
  INFO("feeding " << (feeding == 0 ? "plain" : feeding == 1 ? "prepared" : "prepared, some stale"));
  const std::vector<SearchBatch>& batches = ticks.batches;
  for (std::size_t t = 0; t < batches.size(); ++t) {
    const SearchBatch& batch = batches[t];
    INFO("tick " << t);
    const SearchResult c = cpu.search(batch);
    SearchResult g;
    SearchBatch decoy;
    if (feeding == 2 && t % 4 == 1 && t + 1 < batches.size()) decoy = batches[t + 1];
    std::thread preparer;
    if (feeding > 0 && t + 1 < batches.size())
      preparer = std::thread(
          [&] { gpu.prepare(decoy.streams.empty() ? batches[t + 1] : decoy); });
    gpu.search_into(batch, g);
    if (preparer.joinable()) preparer.join();
    require_same_daemon_tick(c, g, batch, *ticks.library);
  }
}

TEST_CASE("GPU searches ticks that omit the samples it holds", "[gpu][window][batches][resident]") {
  TickBackends backends;
  if (!backends.gpu) return;
  // The engine leaves out what held_samples() says the device holds; the
  // GPU must find what the CPU finds in the whole slices. Not held: key 0,
  // a stream's first tick, the tick after a gap (stream 2, tick 7), a key
  // whose dims change (stream 5, tick 9), a slice longer than the ring.
  const DaemonTicks& ticks = backends.ticks;
  SearchBackend& cpu = *backends.cpu;
  SearchBackend& gpu = *backends.gpu;
  std::size_t omitted_slices = 0, whole_slices = 0;
  for (std::size_t t = 0; t < ticks.batches.size(); ++t) {
    INFO("tick " << t);
    const SearchBatch& full = ticks.batches[t];
    const SearchBatch sparse = omit_held(full, gpu);
    for (const StreamSlice& slice : sparse.streams) {
      INFO("key " << slice.stream_key);
      if (slice.stream_key == 0 || t == 0) CHECK(slice.omitted == 0);
      (slice.omitted > 0 ? omitted_slices : whole_slices) += 1;
    }
    const SearchResult c = cpu.search(full);
    const SearchResult g = gpu.search(sparse);
    require_same_daemon_tick(c, g, full, *ticks.library);
  }
  CHECK(omitted_slices > 40);
  CHECK(whole_slices > 14);
  // A new library (a reload may change a view's transforms, not its stream
  // key): the device holds nothing any more.
  gpu.set_library(ticks.library);
  for (const StreamSlice& slice : omit_held(ticks.batches.back(), gpu).streams)
    CHECK(slice.omitted == 0);
  // A batch that omits samples the device does not hold is refused; the
  // next batch uploads whole slices and is searched as usual.
  SearchBatch wrong = ticks.batches[5];
  for (StreamSlice& slice : wrong.streams)
    if (slice.stream_key != 0 && slice.first_new > slice.first_index) {
      slice.omitted = 1;
      break;
    }
  CHECK_THROWS_AS(gpu.search(wrong), Error);
  const SearchBatch& again = ticks.batches[3];
  require_same_daemon_tick(cpu.search(again), gpu.search(omit_held(again, gpu)), again, *ticks.library);
}

TEST_CASE("GPU holds thousands of streams' samples in few allocations and reuses rings",
          "[gpu][window][batches][resident]") {
  auto gpu = gpu_or_skip();
  if (!gpu) return;
  auto cpu = make_cpu_backend(0);
  // A station starting with thousands of wearers: every stream's first
  // batch needs a ring on the device. They must not cost an allocation
  // each (a cudaMalloc waits for the whole device). Then a third of the
  // streams change shape (their rings are given back) while as many new
  // streams arrive (and may get those rings): every batch still equals the
  // CPU's search of the whole slices.
  constexpr int kStreams = 3000, kTicks = 4, kTick = 24, kLength = 32;
  auto library = std::make_shared<PatternLibrary>();
  const std::vector<Series> query = {cut(testing::random_walk(200, 77), 50, kLength),
                                     cut(testing::random_walk(200, 78), 60, kLength)};
  library->patterns.push_back(
      make_pattern(1, query, 3, true, 4.0f, kUncapped, neighbour_pairs(2, 3, 1)));
  cpu->set_library(library);
  gpu->set_library(library);
  const int total = kTicks * kTick + kLength;
  std::vector<std::vector<Series>> data;
  for (int k = 0; k < 2 * kStreams; ++k)
    data.push_back(random_dims(3, total, 9000 + static_cast<std::uint64_t>(k) * 3));
  std::size_t growths_after_first = 0, matches = 0, omitted = 0;
  for (int t = 0; t < kTicks; ++t) {
    INFO("tick " << t);
    SearchBatch full;
    const int end = kLength + (t + 1) * kTick;
    const int first_new = t == 0 ? 0 : end - kTick;
    for (int k = 0; k < kStreams; ++k) {
      // From tick 2 on, streams k % 3 == 0 lose a dim (same key, new ring)
      // and a new stream takes their place in the batch.
      const bool reshaped = t >= 2 && k % 3 == 0;
      std::vector<Series> dims = data[k];
      if (reshaped) dims.pop_back();
      const int begin = std::max(0, first_new - kLength + 1);
      add_range(&full, 1, dims, 0, begin, end, first_new, 1 + static_cast<std::uint64_t>(k));
      if (reshaped)
        add_range(&full, 1, data[kStreams + k], 0, t == 2 ? 0 : begin, end, t == 2 ? 0 : first_new,
                  1 + static_cast<std::uint64_t>(kStreams + k));
    }
    const SearchBatch sparse = omit_held(full, *gpu);
    for (const StreamSlice& s : sparse.streams) omitted += s.omitted > 0 ? 1 : 0;
    const SearchResult c = cpu->search(full);
    const SearchResult g = gpu->search(sparse);
    require_none(structural_problems(g, full, *library), "GPU structure");
    require_none(window_differences(c, g, *library, false), "window pattern");
    matches += c.matches.size();
    if (t > 0) growths_after_first += g.stats.buffer_growths;
    if (t == 0) {
      INFO("allocations for " << kStreams << " new streams: " << g.stats.buffer_growths);
      CHECK(g.stats.buffer_growths < 64);
    }
  }
  CHECK(matches > 100);
  CHECK(omitted > static_cast<std::size_t>(kStreams));  // rings were really read
  // Ticks 2 and 3 bring 1,000 reshaped and 1,000 new streams.
  CHECK(growths_after_first < 64);

  // Streams leave (SearchBackend::forget_streams) and as many newcomers
  // arrive, round after round: the device holds nothing of a gone key any
  // more, and the newcomers take the rings of those that left, so after
  // the first two rounds (a new batch shape for each of the two staging
  // slots) nothing is allocated. Without the reuse, eight rounds of 1,000
  // newcomers would need new slabs.
  std::vector<std::uint64_t> gone;
  for (int k = 0; k < kStreams; k += 3) gone.push_back(1 + static_cast<std::uint64_t>(kStreams + k));
  for (int round = 1; round <= 8; ++round) {
    INFO("round " << round);
    // The slice that follows a gone key's last samples: held before the
    // key was forgotten, not after.
    SearchBatch returning;
    add_range(&returning, 1, data[kStreams], 0, total - kLength + 1, total, total, gone.front());
    CHECK(gpu->held_samples(returning.streams.front()) == kLength - 1);
    gpu->forget_streams(gone);
    cpu->forget_streams(gone);
    CHECK(gpu->held_samples(returning.streams.front()) == 0);
    SearchBatch newcomers;
    std::vector<std::uint64_t> arrived;
    for (int k = 0; k < kStreams; k += 3) {
      arrived.push_back(1 + static_cast<std::uint64_t>((2 + round) * kStreams + k));
      add_range(&newcomers, 1, data[kStreams + k], 0, 0, total, 0, arrived.back());
    }
    const SearchResult c = cpu->search(newcomers);
    const SearchResult g = gpu->search(omit_held(newcomers, *gpu));
    require_none(window_differences(c, g, *library, false), "newcomers");
    if (round > 2) CHECK(g.stats.buffer_growths == 0);
    gone = arrived;
  }
}

TEST_CASE("GPUs behind one multi-device backend search omitted ticks as the CPU does",
          "[gpu][window][batches][resident][multi]") {
  // Two CUDA backends (GPUs 0 and 1 where two are visible, else GPU 0
  // twice), each holding its own streams' samples.
  TickBackends backends;
  if (!backends.gpu) return;
#if defined(GW_HAVE_CUDA_BACKEND)
  const int visible = cuda_device_count();
  std::vector<SearchMember> members;
  for (int m = 0; m < 2; ++m) {
    const int device = visible >= 2 ? m : 0;
    members.push_back({make_cuda_backend(device), "GPU " + std::to_string(device)});
  }
  const std::unique_ptr<SearchBackend> multi = make_multi_device_backend(std::move(members));
  const DaemonTicks& ticks = backends.ticks;
  multi->set_library(ticks.library);
  std::size_t omitted_slices = 0;
  for (std::size_t t = 0; t < ticks.batches.size(); ++t) {
    INFO("tick " << t);
    const SearchBatch& full = ticks.batches[t];
    const SearchBatch sparse = omit_held(full, *multi);
    for (const StreamSlice& slice : sparse.streams) omitted_slices += slice.omitted > 0 ? 1 : 0;
    require_same_daemon_tick(backends.cpu->search(full), multi->search(sparse), full, *ticks.library);
  }
  CHECK(omitted_slices > 40);
#else
  WARN("skipped: the test needs make_cuda_backend (GW_HAVE_CUDA_BACKEND)");
#endif
}

TEST_CASE("GPU searches a batch's samples where a stream key earlier sent other values",
          "[gpu][window][streaming][batches]") {
  auto gpu = gpu_or_skip();
  if (!gpu) return;
  // search.h: a batch's slices hold the samples searched; stream_key only
  // names whose streaming state continues. Here key 7's second batch starts
  // inside indices its first batch covered (250..299), with other values (a
  // replay of another recording, a test harness reusing keys). The daemon
  // never does this (StreamState indices only grow), but the interface does
  // not forbid it; a backend that reuses samples it kept from the first
  // batch finds other matches than the CPU.
  const std::vector<Series> first = random_dims(2, 400, 6100);
  const std::vector<Series> second = random_dims(2, 400, 6200);
  auto library = std::make_shared<PatternLibrary>();
  const std::vector<Series> query = {cut(testing::random_walk(100, 6300), 10, 32),
                                     cut(testing::random_walk(100, 6301), 10, 32)};
  library->patterns.push_back(
      make_pattern(1, query, 3, true, kInfinity, kUncapped, neighbour_pairs(2, 2, 1)));
  library->patterns.push_back(make_pattern(1, query, 0, false, kInfinity, kUncapped,
                                           neighbour_pairs(2, 2, 0), SearchMode::kStreaming));
  auto cpu = make_cpu_backend(0);
  cpu->set_library(library);
  gpu->set_library(library);
  SearchBatch one, two;
  add_range(&one, 1, first, 0, 0, 300, 0, 7);
  add_range(&two, 1, second, 0, 250, 400, 250, 7);
  for (const SearchBatch* batch : {&one, &two}) {
    const SearchResult c = cpu->search(*batch);
    const SearchResult g = gpu->search(*batch);
    require_none(window_differences(c, g, *library, false), "window pattern");
    SearchResult cs, gs;
    for (const Match& m : c.matches)
      if (m.pattern == 1) cs.matches.push_back(m);
    for (const Match& m : g.matches)
      if (m.pattern == 1) gs.matches.push_back(m);
    require_none(exact_differences(cs, gs), "streaming pattern");
  }
}

// A stream the streaming test feeds in batches: its data and the next sample.
struct FedStream {
  std::uint64_t key = 0;
  std::uint32_t profile = 1;
  std::vector<Series> dims;
  std::int64_t base = 0;  // absolute index of dims[.][0]
  int next = 0;           // next sample to feed
  int history = 0;        // already-fed samples each slice carries before first_new
};

TEST_CASE("GPU streaming state of gone streams goes to newcomers, bit-identical to the CPU",
          "[gpu][streaming]") {
  auto gpu = gpu_or_skip();
  if (!gpu) return;
  // Streams leave (forget_streams) and as many new ones arrive, round after
  // round; each newcomer's first batch must start a clean column even when
  // it takes a gone stream's slot, and its second batch must continue it.
  // After the first two rounds (new batch shapes for the two staging slots)
  // nothing is allocated: without the reuse the state would double at
  // rounds 4 and 8.
  constexpr int kPerRound = 100, kRounds = 8, kFirst = 40, kSecond = 30;
  auto library = std::make_shared<PatternLibrary>();
  const std::vector<Series> walk = random_dims(3, 200, 4242);
  library->patterns.push_back(make_pattern(
      1, {cut(walk[0], 30, 24), cut(walk[1], 60, 24), cut(walk[2], 90, 24)}, 0, false, 40.0f,
      kUncapped, neighbour_pairs(3, 3, 1), SearchMode::kStreaming));
  auto cpu = make_cpu_backend(0);
  cpu->set_library(library);
  gpu->set_library(library);
  std::vector<std::uint64_t> gone;
  for (int round = 1; round <= kRounds; ++round) {
    INFO("round " << round);
    gpu->forget_streams(gone);
    cpu->forget_streams(gone);
    std::vector<std::uint64_t> keys;
    std::vector<std::vector<Series>> data;
    for (int k = 0; k < kPerRound; ++k) {
      keys.push_back(static_cast<std::uint64_t>(round) * 1000 + static_cast<std::uint64_t>(k));
      // The same samples every round: a column left from the slot's last
      // owner would change the matches.
      data.push_back(random_dims(3, kFirst + kSecond, 60000 + static_cast<std::uint64_t>(k) * 7));
    }
    std::uint64_t growths = 0;
    for (int part = 0; part < 2; ++part) {
      INFO("part " << part);
      SearchBatch batch;
      const int begin = part == 0 ? 0 : kFirst, end = part == 0 ? kFirst : kFirst + kSecond;
      for (int k = 0; k < kPerRound; ++k)
        add_range(&batch, 1, data[k], 0, begin, end, begin, keys[k]);
      const SearchResult c = cpu->search(batch);
      const SearchResult g = gpu->search(batch);
      REQUIRE(!c.matches.empty());
      require_none(exact_differences(c, g), "streaming");
      growths += g.stats.buffer_growths;
    }
    if (round > 2) CHECK(growths == 0);
    gone = keys;
  }
}

TEST_CASE("GPU streaming mode is bit-identical to the CPU across batches and resets",
          "[gpu][streaming]") {
  auto gpu = gpu_or_skip();
  if (!gpu) return;
  const int total = 1200;
  std::vector<FedStream> streams;
  for (std::uint64_t key = 1; key <= 12; ++key) {
    FedStream s;
    s.key = key;
    s.base = static_cast<std::int64_t>(key) * 1000000;
    s.history = static_cast<int>((key * 13) % 40);
    s.dims = key % 4 == 3 ? daphnet_dims({1, 4, 7}, 20000 + static_cast<int>(key) * 500, total)
                          : random_dims(3, total, 7000 + key * 10);
    streams.push_back(std::move(s));
  }
  streams[5].profile = 2;  // only the profile-2 pattern applies
  // Many short-lived streams: more threads than one block.
  for (std::uint64_t key = 100; key < 330; ++key) {
    FedStream s;
    s.key = key;
    s.dims = random_dims(3, total, 90000 + key * 10);
    streams.push_back(std::move(s));
  }

  auto library = std::make_shared<PatternLibrary>();
  const std::vector<Series> walk_query = random_dims(3, 200, 555);
  auto query = [&](int m) {
    return std::vector<Series>{cut(walk_query[0], 30, m), cut(walk_query[1], 60, m),
                               testing::daphnet_channel(4, 31000, m)};
  };
  library->patterns.push_back(make_pattern(1, query(8), 0, false, kInfinity, kUncapped,
                                           neighbour_pairs(3, 3, 1), SearchMode::kStreaming));
  library->patterns.push_back(make_pattern(1, query(24), 0, false, 40.0f, 5,
                                           neighbour_pairs(3, 3, 2), SearchMode::kStreaming));
  library->patterns.push_back(make_pattern(1, query(64), 0, false, kInfinity, 3,
                                           neighbour_pairs(3, 3, 0), SearchMode::kStreaming));
  library->patterns.push_back(make_pattern(1, query(128), 0, false, kInfinity, kUncapped,
                                           {{2, 0}, {0, 2}}, SearchMode::kStreaming));
  // A window pattern in the same library, and a streaming one of profile 2.
  library->patterns.push_back(make_pattern(1, {cut(walk_query[2], 5, 16)}, 2, true, kInfinity,
                                           kUncapped, {{0, 0}, {0, 2}}));
  library->patterns.push_back(make_pattern(2, {cut(walk_query[2], 50, 12)}, 0, false, kInfinity,
                                           kUncapped, {{0, 1}}, SearchMode::kStreaming));

  auto cpu = make_cpu_backend(0);
  cpu->set_library(library);
  gpu->set_library(library);

  // Per batch: which streams take part and how many new samples each gets
  // (the GPU advances 16 samples per launch: sizes around 16 and 32 matter).
  struct Step {
    std::vector<int> streams;  // indices into `streams`
    int new_samples;
    std::vector<int> gap;        // streams whose first_new jumps 17 samples ahead
    std::vector<int> step_back;  // streams that go 30 samples back
    bool reload = false;         // set_library(same library) before the batch
  };
  std::vector<int> first_two = {0, 1}, first_five = {0, 1, 2, 3, 4}, twelve, all;
  for (int k = 0; k < 12; ++k) twelve.push_back(k);
  for (int k = 0; k < static_cast<int>(streams.size()); ++k) all.push_back(k);
  const std::vector<int> none;
  const std::vector<Step> steps = {
      {first_two, 1, none, none, false},
      {first_two, 16, none, none, false},
      {first_five, 17, none, none, false},
      {{0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 33, none, none, false},  // stream 1 sits out
      {twelve, 5, {1, 3}, none, false},
      {all, 40, none, none, false},
      {twelve, 2, none, {0}, false},
      {all, 16, none, none, false},
      {twelve, 70, none, none, false},
      {twelve, 9, none, none, true},
      {all, 31, none, none, false},
      {first_five, 100, none, none, false}};
  for (std::size_t b = 0; b < steps.size(); ++b) {
    const Step& step = steps[b];
    if (step.reload) {
      cpu->set_library(library);
      gpu->set_library(library);
    }
    SearchBatch batch;
    for (int index : step.streams) {
      FedStream& s = streams[index];
      if (std::count(step.gap.begin(), step.gap.end(), index)) s.next += 17;
      if (std::count(step.step_back.begin(), step.step_back.end(), index))
        s.next = std::max(0, s.next - 30);
      // Streams differ in new samples too, so chunks end at different places.
      const int count = step.new_samples + (index % 3) * 5;
      REQUIRE(s.next + count <= total);
      add_range(&batch, s.profile, s.dims, s.base, std::max(0, s.next - s.history), s.next + count,
                s.base + s.next, s.key);
      s.next += count;
    }
    INFO("batch " << b);
    const SearchResult c = cpu->search(batch);
    const SearchResult g = gpu->search(batch);
    REQUIRE(!c.matches.empty());
    require_none(structural_problems(g, batch, *library), "GPU structure");
    SearchResult cs, gs;
    for (const Match& m : c.matches)
      if (library->patterns[m.pattern].mode == SearchMode::kStreaming) cs.matches.push_back(m);
    for (const Match& m : g.matches)
      if (library->patterns[m.pattern].mode == SearchMode::kStreaming) gs.matches.push_back(m);
    require_none(exact_differences(cs, gs), "streaming");
    require_none(window_differences(c, g, *library, false), "window pattern");
  }
}

}  // namespace
}  // namespace gw::kernels
