// Host side of the CUDA backend: owns the device copies of the pattern
// library, the per-batch buffers and the streaming (SPRING) state, launches
// the kernels of window_dtw.cu / spring_dtw.cu on one CUDA stream, and turns
// the compact match buffer into the backend-independent SearchResult.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <iterator>
#include <unordered_map>
#include <vector>

#include <cuda_runtime.h>

#include "common/error.h"
#include "kernels/cuda_backend.h"
#include "kernels/cuda_kernels.h"
#include "kernels/dtw.h"
#include "kernels/search.h"

namespace gw::kernels {
namespace {

using namespace cuda;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw Error(std::string("CUDA backend: ") + what + ": " + cudaGetErrorString(status));
}

// An owning device allocation that only grows.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    swap(other);
    return *this;
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  void reserve(std::size_t n) {
    if (n <= capacity_) return;
    cudaFree(ptr_);
    ptr_ = nullptr;
    capacity_ = 0;
    check(cudaMalloc(&ptr_, std::max<std::size_t>(n, 1) * sizeof(T)), "cudaMalloc");
    capacity_ = n;
  }
  // Grows keeping the first `keep` elements.
  void grow_keep(std::size_t n, std::size_t keep, cudaStream_t stream) {
    if (n <= capacity_) return;
    T* fresh = nullptr;
    check(cudaMalloc(&fresh, n * sizeof(T)), "cudaMalloc");
    if (keep) check(cudaMemcpyAsync(fresh, ptr_, keep * sizeof(T), cudaMemcpyDeviceToDevice, stream),
                    "copy on grow");
    check(cudaStreamSynchronize(stream), "grow");
    cudaFree(ptr_);
    ptr_ = fresh;
    capacity_ = n;
  }
  void upload(const std::vector<T>& host, cudaStream_t stream) {
    reserve(host.size());
    if (!host.empty())
      check(cudaMemcpyAsync(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice,
                            stream),
            "upload");
  }
  T* get() const { return ptr_; }
  std::size_t capacity() const { return capacity_; }
  void swap(DeviceBuffer& other) {
    std::swap(ptr_, other.ptr_);
    std::swap(capacity_, other.capacity_);
  }

 private:
  T* ptr_ = nullptr;
  std::size_t capacity_ = 0;
};

// Page-locked staging memory so uploads run as true asynchronous copies.
class PinnedBuffer {
 public:
  ~PinnedBuffer() { cudaFreeHost(ptr_); }
  float* reserve(std::size_t n) {
    if (n > capacity_) {
      cudaFreeHost(ptr_);
      ptr_ = nullptr;
      check(cudaMallocHost(&ptr_, n * sizeof(float)), "cudaMallocHost");
      capacity_ = n;
    }
    return ptr_;
  }

 private:
  float* ptr_ = nullptr;
  std::size_t capacity_ = 0;
};

struct BandGroup {
  int band = 0;
  int pair_begin = 0;
  int pair_end = 0;
  int max_length = 0;
};

// Runs fn(begin, end) over [0, n) split across the host's cores; small n
// runs inline (a thread start costs more than the work).
template <typename Fn>
void parallel_ranges(std::size_t n, std::size_t min_per_thread, Fn&& fn) {
  const std::size_t threads = std::min<std::size_t>(
      std::max(1u, std::thread::hardware_concurrency()), (n + min_per_thread - 1) / min_per_thread);
  if (threads <= 1) {
    fn(std::size_t{0}, n);
    return;
  }
  std::vector<std::thread> workers;
  const std::size_t step = (n + threads - 1) / threads;
  for (std::size_t t = 0; t < threads; ++t) {
    const std::size_t begin = t * step, end = std::min(n, begin + step);
    if (begin < end) workers.emplace_back([&fn, begin, end] { fn(begin, end); });
  }
  for (auto& w : workers) w.join();
}

// With GW_CUDA_STAGE_TIMES=1 in the environment, each search() prints how long
// its stages took (stderr, one JSON line); the stream is synchronised at every
// stage boundary then, so use it to find the slow stage, not for throughput.
class StageTimer {
 public:
  StageTimer(bool enabled, cudaStream_t stream) : enabled_(enabled), stream_(stream) {
    last_ = start_ = std::chrono::steady_clock::now();
  }
  void mark(const char* stage) {
    if (!enabled_) return;
    cudaStreamSynchronize(stream_);
    const auto now = std::chrono::steady_clock::now();
    line_ += std::string(line_.empty() ? "" : ",") + "\"" + stage + "\":" +
             std::to_string(std::chrono::duration<double, std::milli>(now - last_).count());
    last_ = now;
  }
  void report(std::size_t matches) const {
    if (!enabled_) return;
    const double total =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
    std::fprintf(stderr, "{\"cuda_stage_ms\":{%s},\"total_ms\":%f,\"matches\":%zu}\n",
                 line_.c_str(), total, matches);
  }

 private:
  bool enabled_;
  cudaStream_t stream_;
  std::chrono::steady_clock::time_point start_, last_;
  std::string line_;
};

// Streaming state of one pattern: one slot per stream seen.
struct SpringPattern {
  int pattern = 0;
  int pair_begin = 0;
  int pair_count = 0;
  int length = 0;
  std::unordered_map<std::uint64_t, int> slot_of_stream;
  std::vector<std::int64_t> next_index;  // per slot: first sample not yet consumed
  DeviceBuffer<float> d;
  DeviceBuffer<long long> start;
  long long slots_allocated = 0;
};

class CudaBackend final : public SearchBackend {
 public:
  CudaBackend(int device, PruningOptions pruning) : device_(device), pruning_(pruning) {
    check(cudaSetDevice(device), "cudaSetDevice");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    name_ = std::string("cuda:") + prop.name;
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    stats_.reserve(1);
    match_count_.reserve(1);
    candidate_count_.reserve(1);
    survivor_count_.reserve(1);
  }
  ~CudaBackend() override { cudaStreamDestroy(stream_); }

  std::string name() const override { return name_; }

  void set_library(std::shared_ptr<const PatternLibrary> library) override {
    if (!library) library = std::make_shared<PatternLibrary>();
    validate_library(*library);
    for (std::size_t p = 0; p < library->patterns.size(); ++p)
      if (library->patterns[p].band > kMaxGeneralBand)
        throw Error("CUDA backend: pattern " + std::to_string(p) + ": band " +
                    std::to_string(library->patterns[p].band) + " exceeds " +
                    std::to_string(kMaxGeneralBand) + " (use the CPU backend)");
    check(cudaSetDevice(device_), "cudaSetDevice");
    // Window-mode pairs ordered by band so each band is one contiguous range.
    std::vector<int> order(library->patterns.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      const Pattern& pa = library->patterns[a];
      const Pattern& pb = library->patterns[b];
      if (pa.mode != pb.mode) return pa.mode < pb.mode;
      return pa.band < pb.band;
    });
    std::vector<PairView> pairs;
    std::vector<QueryView> queries;
    std::vector<float> values, upper, lower;
    std::vector<BandGroup> groups;
    std::vector<SpringPattern> springs;
    std::vector<int> query_of(library->patterns.size());
    for (const int p : order) {
      const Pattern& pat = library->patterns[p];
      const bool window = pat.mode == SearchMode::kWindow;
      query_of[p] = static_cast<int>(queries.size());
      for (int j = 0; j < pat.dim_count; ++j) {
        const float* raw = pat.dims.data() + static_cast<std::size_t>(j) * pat.length;
        std::vector<double> q(raw, raw + pat.length);
        if (window && pat.znorm) q = znormalize(raw, pat.length);
        queries.push_back({static_cast<long long>(values.size()), pat.length});
        for (int k = 0; k < pat.length; ++k) {
          values.push_back(static_cast<float>(q[k]));
          double u = q[k], l = q[k];
          for (int o = std::max(0, k - pat.band); o <= std::min(pat.length - 1, k + pat.band); ++o) {
            u = std::max(u, q[o]);
            l = std::min(l, q[o]);
          }
          upper.push_back(static_cast<float>(u));
          lower.push_back(static_cast<float>(l));
        }
      }
      const int begin = static_cast<int>(pairs.size());
      for (const DimPair& dp : pat.pairs)
        pairs.push_back({p, query_of[p] + dp.pattern_dim, dp.stream_dim, dp.pattern_dim});
      const int end = static_cast<int>(pairs.size());
      if (window) {
        if (groups.empty() || groups.back().band != pat.band)
          groups.push_back({pat.band, begin, begin, 0});
        groups.back().pair_end = end;
        groups.back().max_length = std::max(groups.back().max_length, pat.length);
      } else {
        SpringPattern sp;
        sp.pattern = p;
        sp.pair_begin = begin;
        sp.pair_count = end - begin;
        sp.length = pat.length;
        springs.push_back(std::move(sp));
      }
    }
    // Rank of every pair in (pattern, pattern dim, stream dim) order: the
    // device sort's key for result order.
    std::vector<int> by_order(pairs.size());
    std::iota(by_order.begin(), by_order.end(), 0);
    std::sort(by_order.begin(), by_order.end(), [&](int a, int b) {
      return std::tie(pairs[a].pattern, pairs[a].pattern_dim, pairs[a].stream_dim) <
             std::tie(pairs[b].pattern, pairs[b].pattern_dim, pairs[b].stream_dim);
    });
    std::vector<int> rank(pairs.size());
    for (std::size_t r = 0; r < by_order.size(); ++r) rank[by_order[r]] = static_cast<int>(r);
    if (pairs.size() >= (1u << 24))
      throw Error("CUDA backend: more than 2^24 dim pairs in the pattern library");
    pair_rank_.upload(rank, stream_);
    pairs_.upload(pairs, stream_);
    queries_.upload(queries, stream_);
    values_.upload(values, stream_);
    upper_.upload(upper, stream_);
    lower_.upload(lower, stream_);
    check(cudaStreamSynchronize(stream_), "library upload");
    host_pairs_ = std::move(pairs);
    groups_ = std::move(groups);
    springs_ = std::move(springs);
    library_ = std::move(library);
  }

  SearchResult search(const SearchBatch& batch) override {
    check(cudaSetDevice(device_), "cudaSetDevice");
    SearchResult result;
    if (!library_ || library_->patterns.empty() || batch.streams.empty()) return result;
    const PatternLibrary& lib = *library_;
    StageTimer timer(stage_times_, stream_);

    // Batch data: only samples the device does not hold yet travel (see
    // StreamHistory); the device assembles the slices from rings + upload.
    const std::size_t n_data = batch.data.size();
    std::vector<SliceView> slices;
    std::vector<SliceUpload> uploads;
    std::size_t n_upload = 0;
    int rows = 0;
    std::unordered_map<std::uint64_t, bool> seen;
    for (const StreamSlice& s : batch.streams) {
      if (s.offset + static_cast<std::size_t>(s.dims) * s.length > n_data)
        throw Error("CUDA backend: a slice does not fit the batch data");
      slices.push_back({static_cast<long long>(s.offset), s.first_index, s.dims, s.length, rows});
      rows += s.dims;
      SliceUpload up;
      const bool once = s.stream_key != 0 && seen.emplace(s.stream_key, true).second;
      if (once) plan_history(s, &up);
      up.staging_offset = static_cast<long long>(n_upload);
      n_upload += static_cast<std::size_t>(s.dims) * (s.length - up.from);
      uploads.push_back(up);
    }
    float* staging = pinned_.reserve(std::max<std::size_t>(n_upload, 1));
    parallel_ranges(batch.streams.size(), 256, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) {
        const StreamSlice& s = batch.streams[i];
        const int count = s.length - uploads[i].from;
        for (int d = 0; d < s.dims; ++d)
          std::memcpy(staging + uploads[i].staging_offset + static_cast<std::size_t>(d) * count,
                      batch.data.data() + s.offset + static_cast<std::size_t>(d) * s.length +
                          uploads[i].from,
                      static_cast<std::size_t>(count) * sizeof(float));
      }
    });
    upload_.reserve(std::max<std::size_t>(n_upload, 1));
    check(cudaMemcpyAsync(upload_.get(), staging, n_upload * sizeof(float),
                          cudaMemcpyHostToDevice, stream_),
          "data upload");
    slices_.upload(slices, stream_);
    uploads_.upload(uploads, stream_);
    data_.reserve(std::max<std::size_t>(n_data, 1));
    {
      BatchView assemble_view;
      assemble_view.data_size = static_cast<long long>(n_data);
      assemble_view.slices = slices_.get();
      assemble_view.slice_count = static_cast<int>(slices.size());
      launch_assemble(assemble_view, data_.get(), upload_.get(), uploads_.get(), stream_);
    }

    // Window-mode work per pattern.
    std::vector<Segment> segments;
    std::vector<PatternWork> work(lib.patterns.size());
    std::map<int, int> envelope_of_band;
    const bool any_bound = pruning_.lb_kim || pruning_.lb_keogh_eq || pruning_.lb_keogh_ec;
    for (std::size_t p = 0; p < lib.patterns.size(); ++p) {
      const Pattern& pat = lib.patterns[p];
      PatternWork& pw = work[p];
      pw.length = pat.length;
      pw.band = pat.band;
      pw.znorm = pat.znorm ? 1 : 0;
      const double t = pat.threshold;
      pw.cutoff_sq = std::isinf(t) ? INFINITY : static_cast<float>(t * t);
      pw.prune_sq = std::isinf(t) ? INFINITY : static_cast<float>(t * t * (1 + 1e-4) + 1e-6);
      pw.segment_begin = static_cast<int>(segments.size());
      if (pat.mode == SearchMode::kWindow) {
        for (std::size_t s = 0; s < batch.streams.size(); ++s) {
          const StreamSlice& sl = batch.streams[s];
          if (sl.profile != pat.profile) continue;
          const std::int64_t first_end =
              std::max<std::int64_t>(sl.first_new, sl.first_index + pat.length - 1) - sl.first_index;
          const std::int64_t count = sl.length - first_end;
          if (count <= 0) continue;
          segments.push_back({static_cast<int>(s), static_cast<int>(first_end), pw.windows});
          pw.windows += count;
        }
        if (pruning_.lb_keogh_ec && pw.windows > 0) {
          auto [it, inserted] =
              envelope_of_band.try_emplace(pat.band, static_cast<int>(envelope_of_band.size()));
          pw.envelope = it->second;
        }
      }
      pw.segment_end = static_cast<int>(segments.size());
    }
    segments_.upload(segments, stream_);
    work_.upload(work, stream_);

    BatchView view;
    view.data = data_.get();
    view.data_size = static_cast<long long>(n_data);
    view.slices = slices_.get();
    view.slice_count = static_cast<int>(slices.size());
    view.segments = segments_.get();
    view.patterns = work_.get();
    if (!envelope_of_band.empty()) {
      env_upper_.reserve(n_data * envelope_of_band.size());
      env_lower_.reserve(n_data * envelope_of_band.size());
      for (const auto& [band, set] : envelope_of_band)
        launch_envelope(view, band, env_upper_.get() + set * n_data,
                        env_lower_.get() + set * n_data, stream_);
      view.envelope_upper = env_upper_.get();
      view.envelope_lower = env_lower_.get();
    }
    view.row_count = rows;
    bool any_window = false;
    for (const PatternWork& pw : work) any_window = any_window || pw.windows > 0;
    if (any_window) {
      prefix_sum_.reserve(std::max<std::size_t>(n_data, 1));
      prefix_sumsq_.reserve(std::max<std::size_t>(n_data, 1));
      launch_prefix_sums(view, prefix_sum_.get(), prefix_sumsq_.get(), stream_);
      view.prefix_sum = prefix_sum_.get();
      view.prefix_sumsq = prefix_sumsq_.get();
    }
    LibraryView lv{pairs_.get(), queries_.get(), values_.get(), upper_.get(), lower_.get()};
    timer.mark("upload+assemble+prefix+envelope");

    check(cudaMemsetAsync(stats_.get(), 0, sizeof(DeviceStats), stream_), "memset");
    std::vector<RawMatch> raw;

    // Window mode; rerun with larger buffers when an append buffer overflowed.
    for (;;) {
      check(cudaMemsetAsync(match_count_.get(), 0, sizeof(unsigned long long), stream_), "memset");
      check(cudaMemsetAsync(stats_.get(), 0, sizeof(DeviceStats), stream_), "memset");
      match_capacity_ = std::max<unsigned long long>(match_capacity_, 1 << 16);
      matches_.reserve(match_capacity_);
      AppendBuffer<RawMatch> out{matches_.get(), match_count_.get(), match_capacity_};
      unsigned long long needed_candidates = 0, needed_survivors = 0;
      for (const BandGroup& g : groups_) {
        long long max_windows = 0;
        for (int q = g.pair_begin; q < g.pair_end; ++q)
          max_windows = std::max(max_windows, work[host_pairs_[q].pattern].windows);
        if (max_windows == 0) continue;
        if (!any_bound) {
          launch_window_dtw_all(view, lv, g.pair_begin, g.pair_end, max_windows, g.band,
                                g.max_length, pruning_.early_abandon, out, stats_.get(), stream_);
          continue;
        }
        // 1a: O(1) statistics and LB_Kim for every window.
        candidate_capacity_ = std::max<unsigned long long>(candidate_capacity_, 1 << 20);
        candidates_.reserve(candidate_capacity_);
        FilterOptions options{pruning_.lb_kim, pruning_.lb_keogh_eq, pruning_.lb_keogh_ec};
        const unsigned long long after_kim = run_counted(candidate_count_, [&] {
          launch_window_filter(view, lv, g.pair_begin, g.pair_end, max_windows, options,
                               {candidates_.get(), candidate_count_.get(), candidate_capacity_},
                               stats_.get(), stream_);
        });
        timer.mark("filter_kim");
        needed_candidates = std::max(needed_candidates, after_kim);
        if (after_kim > candidate_capacity_) break;  // rerun below with room for all
        const Candidate* dtw_input = candidates_.get();
        unsigned long long dtw_count = after_kim;
        // 1b: LB_Keogh EQ / EC on the dense list of survivors.
        if (pruning_.lb_keogh_eq || pruning_.lb_keogh_ec) {
          survivor_capacity_ = std::max<unsigned long long>(survivor_capacity_, 1 << 18);
          survivors_.reserve(survivor_capacity_);
          dtw_count = run_counted(survivor_count_, [&] {
            launch_window_keogh(view, lv, candidates_.get(), after_kim, options,
                                {survivors_.get(), survivor_count_.get(), survivor_capacity_},
                                stats_.get(), stream_);
          });
          timer.mark("filter_keogh");
          needed_survivors = std::max(needed_survivors, dtw_count);
          if (dtw_count > survivor_capacity_) break;
          dtw_input = survivors_.get();
        }
        launch_window_dtw_candidates(view, lv, dtw_input, dtw_count, g.band,
                                     pruning_.early_abandon, out, stats_.get(), stream_);
        timer.mark("dtw");
      }
      unsigned long long found = 0;
      check(cudaMemcpyAsync(&found, match_count_.get(), sizeof(found), cudaMemcpyDeviceToHost,
                            stream_),
            "count");
      check(cudaStreamSynchronize(stream_), "window search");
      if (needed_candidates > candidate_capacity_) {
        candidate_capacity_ = needed_candidates + needed_candidates / 4;
        continue;
      }
      if (needed_survivors > survivor_capacity_) {
        survivor_capacity_ = needed_survivors + needed_survivors / 4;
        continue;
      }
      if (found > match_capacity_) {
        match_capacity_ = found + found / 4;
        continue;
      }
      download_sorted(matches_.get(), found, raw);
      timer.mark("sort+download");
      break;
    }

    // Streaming mode: advances the state, so it runs once with a buffer sized
    // for the worst case.
    std::vector<std::vector<RawMatch>> streaming_raw(springs_.size());
    for (std::size_t i = 0; i < springs_.size(); ++i)
      search_streaming(batch, lib, view, lv, springs_[i], streaming_raw[i]);

    DeviceStats ds{};
    check(cudaMemcpy(&ds, stats_.get(), sizeof(ds), cudaMemcpyDeviceToHost), "stats");
    result.stats.windows = ds.windows;
    result.stats.pruned_kim = ds.pruned_kim;
    result.stats.pruned_keogh_eq = ds.pruned_keogh_eq;
    result.stats.pruned_keogh_ec = ds.pruned_keogh_ec;
    result.stats.dtw_full = ds.dtw_full;
    result.stats.dtw_abandoned = ds.dtw_abandoned;
    result.stats.cells = ds.cells;
    timer.mark("streaming");
    // Each list is in result order already; merging keeps it so.
    result.matches = to_matches(raw, batch, lib);
    for (const auto& chunk : streaming_raw) {
      if (chunk.empty()) continue;
      std::vector<Match> more = to_matches(chunk, batch, lib);
      std::vector<Match> merged;
      merged.reserve(result.matches.size() + more.size());
      std::merge(result.matches.begin(), result.matches.end(), more.begin(), more.end(),
                 std::back_inserter(merged), match_result_order);
      result.matches.swap(merged);
    }
    // Equal float distances from different distance^2 may sit in (d^2, end)
    // rather than (distance, end) order: restore the exact order if so.
    if (!std::is_sorted(result.matches.begin(), result.matches.end(), match_result_order))
      std::sort(result.matches.begin(), result.matches.end(), match_result_order);
    cap_sorted_matches(result.matches, lib);
    timer.mark("host_results");
    timer.report(result.matches.size());
    return result;
  }

 private:
  void search_streaming(const SearchBatch& batch, const PatternLibrary& lib, const BatchView& view,
                        const LibraryView& lv, SpringPattern& sp, std::vector<RawMatch>& raw) {
    const Pattern& pat = lib.patterns[sp.pattern];
    std::vector<StreamingSlice> work;
    int max_new = 0;
    long long worst_matches = 0;
    for (std::size_t s = 0; s < batch.streams.size(); ++s) {
      const StreamSlice& sl = batch.streams[s];
      if (sl.profile != pat.profile) continue;
      const std::int64_t first_new = std::max(sl.first_new, sl.first_index);
      const int n_new = static_cast<int>(sl.first_index + sl.length - first_new);
      if (n_new <= 0) continue;
      auto [it, inserted] =
          sp.slot_of_stream.try_emplace(sl.stream_key, static_cast<int>(sp.next_index.size()));
      if (inserted) sp.next_index.push_back(-1);
      const int slot = it->second;
      const int reset = sp.next_index[slot] != first_new ? 1 : 0;
      sp.next_index[slot] = sl.first_index + sl.length;
      work.push_back({static_cast<int>(s), slot, static_cast<int>(first_new - sl.first_index), reset});
      max_new = std::max(max_new, n_new);
      worst_matches += static_cast<long long>(n_new) * sp.pair_count;
    }
    if (work.empty()) return;
    const long long slots = static_cast<long long>(sp.next_index.size());
    if (slots > sp.slots_allocated) {
      const long long grown = std::max<long long>(slots, sp.slots_allocated * 2);
      // Layout [k][state] with states = slots * pairs: growing changes the
      // stride, so copy column by column.
      const long long old_states = sp.slots_allocated * sp.pair_count;
      const long long new_states = grown * sp.pair_count;
      DeviceBuffer<float> d;
      DeviceBuffer<long long> start;
      d.reserve(static_cast<std::size_t>(new_states) * sp.length);
      start.reserve(static_cast<std::size_t>(new_states) * sp.length);
      if (old_states > 0) {
        check(cudaMemcpy2DAsync(d.get(), new_states * sizeof(float), sp.d.get(),
                                old_states * sizeof(float), old_states * sizeof(float), sp.length,
                                cudaMemcpyDeviceToDevice, stream_),
              "grow state");
        check(cudaMemcpy2DAsync(start.get(), new_states * sizeof(long long), sp.start.get(),
                                old_states * sizeof(long long), old_states * sizeof(long long),
                                sp.length, cudaMemcpyDeviceToDevice, stream_),
              "grow state");
      }
      check(cudaStreamSynchronize(stream_), "grow state");
      sp.d.swap(d);
      sp.start.swap(start);
      sp.slots_allocated = grown;
    }
    streaming_slices_.upload(work, stream_);
    // A match per (new sample, pair) is the worst case; past 64 M entries the
    // buffer is capped and an overflow is an error (the state has advanced,
    // so the batch cannot be rerun): such a threshold matches nearly everything.
    const unsigned long long capacity =
        std::min<unsigned long long>(static_cast<unsigned long long>(worst_matches), 1ull << 26);
    spring_matches_.reserve(capacity);
    check(cudaMemsetAsync(match_count_.get(), 0, sizeof(unsigned long long), stream_), "memset");
    const double t = pat.threshold;
    const float cutoff = std::isinf(t) ? INFINITY : static_cast<float>(t * t);
    SpringStateView state{sp.d.get(), sp.start.get(), sp.slots_allocated * sp.pair_count};
    launch_spring(view, lv, sp.pair_begin, sp.pair_count, streaming_slices_.get(),
                  static_cast<int>(work.size()), max_new, cutoff, state,
                  {spring_matches_.get(), match_count_.get(), capacity}, stats_.get(), stream_);
    unsigned long long found = 0;
    check(cudaMemcpyAsync(&found, match_count_.get(), sizeof(found), cudaMemcpyDeviceToHost,
                          stream_),
          "count");
    check(cudaStreamSynchronize(stream_), "streaming search");
    if (found > capacity)
      throw Error("CUDA backend: streaming pattern " + std::to_string(sp.pattern) + " matched " +
                  std::to_string(found) + " samples in one batch, more than the " +
                  std::to_string(capacity) + " the match buffer holds; raise its threshold");
    download_sorted(spring_matches_.get(), found, raw);
  }

  // Sorts `count` device matches into result order (launch_sort_matches) and
  // copies them to `out`. Synchronises.
  void download_sorted(const RawMatch* matches, unsigned long long count,
                       std::vector<RawMatch>& out) {
    out.resize(count);
    if (count == 0) return;
    sorted_.reserve(count);
    sort_keys_a_.reserve(count);
    sort_keys_b_.reserve(count);
    sort_index_a_.reserve(count);
    sort_index_b_.reserve(count);
    const std::size_t temp = match_sort_temp_bytes(count);
    sort_temp_.reserve(temp);
    launch_sort_matches(matches, sorted_.get(), count, pair_rank_.get(),
                        {sort_keys_a_.get(), sort_keys_b_.get(), sort_index_a_.get(),
                         sort_index_b_.get(), sort_temp_.get(), temp},
                        stream_);
    check(cudaMemcpyAsync(out.data(), sorted_.get(), count * sizeof(RawMatch),
                          cudaMemcpyDeviceToHost, stream_),
          "matches");
    check(cudaStreamSynchronize(stream_), "sort matches");
  }

  // Zeroes `counter`, runs `launch` (which appends through it) and returns the
  // final count (synchronises the stream).
  template <typename Launch>
  unsigned long long run_counted(DeviceBuffer<unsigned long long>& counter, Launch&& launch) {
    check(cudaMemsetAsync(counter.get(), 0, sizeof(unsigned long long), stream_), "memset");
    launch();
    unsigned long long count = 0;
    check(cudaMemcpyAsync(&count, counter.get(), sizeof(count), cudaMemcpyDeviceToHost, stream_),
          "count");
    check(cudaStreamSynchronize(stream_), "filter");
    return count;
  }

  // Decides which samples of slice `s` the device already holds in the ring
  // of its stream: the ring continues when the slice starts inside what the
  // ring holds and reaches past it. Updates the history for after this batch.
  void plan_history(const StreamSlice& s, SliceUpload* up) {
    StreamHistory& h = histories_[s.stream_key];
    long long capacity = 256;
    while (capacity < s.length) capacity *= 2;
    if (h.dims != s.dims || h.capacity < s.length) {
      h.ring = DeviceBuffer<float>();
      h.ring.reserve(static_cast<std::size_t>(s.dims) * capacity);
      h.dims = s.dims;
      h.capacity = capacity;
      h.first = h.next = -1;
    }
    const std::int64_t end = s.first_index + s.length;
    // The ring continues only where the slice's new samples start right after
    // what it holds (the rule streaming uses too): samples before first_new
    // were sent before and are taken from the ring; a slice that resends
    // other values for old indices starts over.
    const bool continues = h.next >= 0 && s.first_new == h.next && h.first <= s.first_index &&
                           h.next <= end;
    up->from = continues ? static_cast<int>(h.next - s.first_index) : 0;
    up->ring = h.ring.get();
    up->ring_capacity = h.capacity;
    h.first = std::max<std::int64_t>(continues ? h.first : s.first_index, end - h.capacity);
    h.next = end;
  }

  // Converts raw matches (already in result order) to Match.
  std::vector<Match> to_matches(const std::vector<RawMatch>& raw, const SearchBatch& batch,
                                const PatternLibrary& lib) const {
    std::vector<Match> all(raw.size());
    parallel_ranges(raw.size(), 1 << 14, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) {
        const RawMatch& r = raw[i];
        const PairView& pair = host_pairs_[r.pair];
        const Pattern& pat = lib.patterns[pair.pattern];
        Match& m = all[i];
        m.slice = static_cast<std::uint32_t>(r.slice);
        m.pattern = static_cast<std::uint32_t>(pair.pattern);
        m.pattern_dim = static_cast<std::uint16_t>(pair.pattern_dim);
        m.stream_dim = static_cast<std::uint16_t>(pair.stream_dim);
        m.end = batch.streams[r.slice].first_index + r.end;
        m.distance = std::sqrt(r.distance_sq);
        m.start = pat.mode == SearchMode::kWindow ? m.end - pat.length + 1 : r.start;
      }
    });
    return all;
  }

  int device_;
  PruningOptions pruning_;
  const bool stage_times_ = std::getenv("GW_CUDA_STAGE_TIMES") != nullptr;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<const PatternLibrary> library_;
  std::vector<PairView> host_pairs_;
  std::vector<BandGroup> groups_;
  std::vector<SpringPattern> springs_;
  DeviceBuffer<PairView> pairs_;
  DeviceBuffer<QueryView> queries_;
  DeviceBuffer<float> values_, upper_, lower_;
  PinnedBuffer pinned_;
  DeviceBuffer<float> data_, env_upper_, env_lower_;
  DeviceBuffer<SliceView> slices_;
  DeviceBuffer<Segment> segments_;
  DeviceBuffer<PatternWork> work_;
  DeviceBuffer<Candidate> candidates_, survivors_;
  DeviceBuffer<double> prefix_sum_, prefix_sumsq_;
  DeviceBuffer<RawMatch> matches_, spring_matches_, sorted_;
  DeviceBuffer<int> pair_rank_;
  DeviceBuffer<unsigned long long> sort_keys_a_, sort_keys_b_;
  DeviceBuffer<unsigned> sort_index_a_, sort_index_b_;
  DeviceBuffer<char> sort_temp_;
  DeviceBuffer<StreamingSlice> streaming_slices_;
  // Per stream key: the stream's latest samples on the device, so a batch
  // uploads only what is new (the daemon's slices repeat m-1 samples of history).
  struct StreamHistory {
    DeviceBuffer<float> ring;
    int dims = 0;
    long long capacity = 0;
    std::int64_t first = -1, next = -1;  // the ring holds samples [first, next)
  };
  std::unordered_map<std::uint64_t, StreamHistory> histories_;
  DeviceBuffer<float> upload_;
  DeviceBuffer<SliceUpload> uploads_;
  DeviceBuffer<unsigned long long> match_count_, candidate_count_, survivor_count_;
  DeviceBuffer<DeviceStats> stats_;
  unsigned long long match_capacity_ = 0;
  unsigned long long candidate_capacity_ = 0;
  unsigned long long survivor_capacity_ = 0;
};

}  // namespace

bool cuda_device_available(std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    if (why) *why = std::string("no usable CUDA device: ") + cudaGetErrorString(status);
    cudaGetLastError();
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device present";
    return false;
  }
  return true;
}

std::unique_ptr<SearchBackend> make_cuda_backend(int device, PruningOptions pruning) {
  std::string why;
  if (!cuda_device_available(&why)) throw Error("CUDA backend: " + why);
  return std::make_unique<CudaBackend>(device, pruning);
}

}  // namespace gw::kernels
