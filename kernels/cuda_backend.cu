// Host side of the CUDA backend: owns the device copies of the pattern
// library, the per-batch buffers and the streaming (SPRING) state, launches
// the kernels of window_filter.cu, window_dtw.cu and spring_dtw.cu on one
// CUDA stream, and turns the compact match buffer into the backend-independent
// SearchResult.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <iterator>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <cuda_runtime.h>

#include "common/diagnostics.h"
#include "common/error.h"
#include "common/worker_pool.h"
#include "kernels/cuda_backend.h"
#include "kernels/cuda_kernels.h"
#include "kernels/cuda_memory.h"
#include "kernels/dtw.h"
#include "kernels/search.h"

namespace gw::kernels {
namespace {

using namespace cuda;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw Error(std::string("CUDA backend: ") + what + ": " + cudaGetErrorString(status));
}

using cuda_memory::DeviceBuffer;
using cuda_memory::PinnedBuffer;

// threshold^2 as the kernels compare a distance^2 with it.
float cutoff_threshold_sq(double threshold) {
  return std::isinf(threshold) ? INFINITY : static_cast<float>(threshold * threshold);
}

// A lower bound prunes a window only when it exceeds threshold^2 by this
// relative margin, so float rounding never prunes a match (docs/gpu.md).
float prune_threshold_sq(double threshold) {
  return std::isinf(threshold) ? INFINITY
                               : static_cast<float>(threshold * threshold * (1 + 1e-4) + 1e-6);
}

// The window-mode pairs of one band: one filter launch and one DTW kernel.
struct BandGroup {
  int band = 0;
  int pair_begin = 0;
  int pair_end = 0;
  int min_length = 0;
  int max_length = 0;
  // Which of the group's pairs read each (profile slot, stream dim) row.
  DeviceBuffer<int> row_offsets;
  DeviceBuffer<RowPair> row_pairs;
  RowPairsView rows;
};

// With Diagnostics::cuda_stage_times (GW_CUDA_STAGE_TIMES), each search()
// prints how long its stages took (stderr, one JSON line); the stream is
// synchronised at every stage boundary then, so use it to find the slow
// stage, not for throughput.
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
  struct StagedUpload;
  struct StreamHistory;

 public:
  // Every stream, event and buffer is a member that frees itself, so a step
  // that throws here leaks nothing made before it.
  CudaBackend(int device, PruningOptions pruning) : device_(device), pruning_(pruning) {
    cuda_memory::open_device(device);
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    name_ = std::string("cuda:") + prop.name;
    stream_.create(kDefaultStreamPriority);
    copy_stream_.create(kDefaultStreamPriority);
    for (StagedUpload& slot : staged_) slot.copied.create(cudaEventDisableTiming);
    stats_.reserve(1);
    pinned_stats_.reserve(1);
    match_count_.reserve(1);
    candidate_count_.reserve(1);
  }

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
    int shared_limit = 0;
    check(cudaDeviceGetAttribute(&shared_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device_),
          "shared memory limit");
    for (std::size_t p = 0; p < library->patterns.size(); ++p) {
      const Pattern& pat = library->patterns[p];
      if (pat.mode == SearchMode::kWindow && pat.length > kMaxWindowLength)
        throw Error("CUDA backend: pattern " + std::to_string(p) + ": length " +
                    std::to_string(pat.length) + " exceeds " + std::to_string(kMaxWindowLength) +
                    " in window mode (use the CPU backend)");
      if (pat.mode == SearchMode::kWindow &&
          window_filter_max_shared_bytes(pat.length, pat.band) > static_cast<std::size_t>(shared_limit))
        throw Error("CUDA backend: pattern " + std::to_string(p) + ": length " +
                    std::to_string(pat.length) + " with band " + std::to_string(pat.band) +
                    " needs more shared memory than the device has (use the CPU backend)");
    }
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
    std::vector<float4> eq_packed, ec_packed;
    std::vector<BandGroup> groups;
    std::vector<SpringPattern> springs;
    std::vector<int> query_of(library->patterns.size());
    std::unordered_map<std::uint32_t, int> profile_slots;
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
        if (window) {
          // UCR Suite's visiting order: |value| descending, so the lower
          // bounds' partial sums grow fastest.
          const std::size_t at = queries.back().offset;
          std::vector<int> visit(pat.length);
          std::iota(visit.begin(), visit.end(), 0);
          std::stable_sort(visit.begin(), visit.end(), [&](int a, int b) {
            return std::fabs(values[at + a]) > std::fabs(values[at + b]);
          });
          queries.back().packed_group = static_cast<int>(ec_packed.size());
          for (std::size_t g0 = 0; g0 < visit.size(); g0 += 3) {
            float u[3] = {0, 0, 0}, l[3] = {0, 0, 0}, v[3] = {0, 0, 0};
            std::uint32_t positions = 0;
            for (std::size_t j = 0; j < 3 && g0 + j < visit.size(); ++j) {
              const int k = visit[g0 + j];
              u[j] = upper[at + k];
              l[j] = lower[at + k];
              v[j] = values[at + k];
              positions |= static_cast<std::uint32_t>(k) << (10 * j);
            }
            float packed;
            std::memcpy(&packed, &positions, sizeof(packed));
            eq_packed.push_back({u[0], l[0], u[1], l[1]});
            eq_packed.push_back({u[2], l[2], packed, 0.f});
            ec_packed.push_back({v[0], v[1], v[2], packed});
          }
        }
      }
      const int begin = static_cast<int>(pairs.size());
      for (const DimPair& dp : pat.pairs)
        pairs.push_back({p, query_of[p] + dp.pattern_dim, dp.stream_dim, dp.pattern_dim});
      const int end = static_cast<int>(pairs.size());
      if (window) {
        if (groups.empty() || groups.back().band != pat.band) {
          groups.emplace_back();
          groups.back().band = pat.band;
          groups.back().pair_begin = begin;
          groups.back().min_length = pat.length;
        }
        groups.back().pair_end = end;
        groups.back().min_length = std::min(groups.back().min_length, pat.length);
        groups.back().max_length = std::max(groups.back().max_length, pat.length);
        profile_slots.try_emplace(pat.profile, static_cast<int>(profile_slots.size()));
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
    if (values.size() >= (1u << 31))
      throw Error("CUDA backend: the pattern library has more than 2^31 query values");
    for (BandGroup& g : groups) build_row_pairs(*library, pairs, queries, values, upper, lower, profile_slots, g);
    std::vector<PatternOutput> outputs(library->patterns.size());
    for (std::size_t p = 0; p < outputs.size(); ++p) {
      const Pattern& pat = library->patterns[p];
      outputs[p] = {pat.max_matches_per_pair, pat.length, pat.mode == SearchMode::kWindow ? 1 : 0};
    }
    pattern_outputs_.upload(outputs, stream_.get());
    pair_rank_.upload(rank, stream_.get());
    pairs_.upload(pairs, stream_.get());
    queries_.upload(queries, stream_.get());
    values_.upload(values, stream_.get());
    upper_.upload(upper, stream_.get());
    lower_.upload(lower, stream_.get());
    eq_packed_.upload(eq_packed, stream_.get());
    ec_packed_.upload(ec_packed, stream_.get());
    check(cudaStreamSynchronize(stream_.get()), "library upload");
    {
      // The streams' device rings hold samples of the old library's views
      // (a reload may change a view's transforms, not its shape or stream
      // key): nothing is held any more, the next batch uploads whole slices.
      std::lock_guard<std::mutex> lock(stage_mutex_);
      histories_.clear();
      for (StagedUpload& slot : staged_) slot.batch = nullptr;  // planned against those rings
    }
    host_pairs_ = std::move(pairs);
    groups_ = std::move(groups);
    profile_slots_ = std::move(profile_slots);
    springs_ = std::move(springs);
    library_ = std::move(library);
  }

  SearchResult search(const SearchBatch& batch) override {
    SearchResult result;
    search_into(batch, result);
    return result;
  }

  // The leading samples of `slice` that the ring of its stream key holds
  // (history_continues): the slice may omit them. None while a prepared batch
  // waits to be searched, since its staging has moved the rings on.
  int held_samples(const StreamSlice& slice) const override {
    std::lock_guard<std::mutex> lock(stage_mutex_);
    // A prepared batch not searched yet has moved the histories on.
    for (const StagedUpload& slot : staged_)
      if (slot.batch != nullptr) return 0;
    if (slice.stream_key == 0) return 0;
    const auto it = histories_.find(slice.stream_key);
    if (it == histories_.end() || !history_continues(it->second, slice)) return 0;
    return static_cast<int>(slice.first_new - slice.first_index);
  }

  // Stages `next` (host plan, pinned copy, host->device copy on copy_stream_)
  // while another thread runs search_into() of the batch before it.
  void prepare(const SearchBatch& next) override {
    check(cudaSetDevice(device_), "cudaSetDevice");
    std::lock_guard<std::mutex> lock(stage_mutex_);
    if (!library_ || library_->patterns.empty() || next.streams.empty()) return;
    stage(next, copy_stream_.get());
  }

  void search_into(const SearchBatch& batch, SearchResult& result) override {
    check(cudaSetDevice(device_), "cudaSetDevice");
    result.stats = SearchStats{};
    if (!library_ || library_->patterns.empty() || batch.streams.empty()) {
      result.matches.clear();
      return;
    }
    const PatternLibrary& lib = *library_;
    StageTimer timer(diagnostics().cuda_stage_times, stream_.get());

    // Batch data: only samples the device does not hold yet travel (see
    // StreamHistory); the device assembles the slices from rings + upload.
    StagedUpload& staged = take_staged(batch);
    const std::size_t n_data = staged.device_size;
    check(cudaStreamWaitEvent(stream_.get(), staged.copied.get(), 0), "wait for the upload");
    const std::vector<SliceView>& slices = staged.slices;
    const int rows = staged.rows;
    slices_.upload(slices, stream_.get());
    uploads_.upload(staged.uploads, stream_.get());
    data_.reserve(std::max<std::size_t>(n_data, 1));
    {
      BatchView assemble_view;
      assemble_view.data_size = static_cast<long long>(n_data);
      assemble_view.slices = slices_.get();
      assemble_view.slice_count = static_cast<int>(slices.size());
      launch_assemble(assemble_view, data_.get(), staged.device.get(), uploads_.get(),
                      stream_.get());
    }

    // Window-mode work per pattern: window counts, and the segments only the
    // unfiltered path (every bound off) walks.
    const bool any_bound = pruning_.lb_kim || pruning_.lb_keogh_eq || pruning_.lb_keogh_ec;
    std::vector<Segment> segments;
    std::vector<PatternWork> work(lib.patterns.size());
    for (std::size_t p = 0; p < lib.patterns.size(); ++p) {
      const Pattern& pat = lib.patterns[p];
      PatternWork& pw = work[p];
      pw.length = pat.length;
      pw.band = pat.band;
      pw.znorm = pat.znorm ? 1 : 0;
      const double t = pat.threshold;
      pw.cutoff_sq = cutoff_threshold_sq(t);
      pw.prune_sq = prune_threshold_sq(t);
      pw.segment_begin = static_cast<int>(segments.size());
      if (pat.mode == SearchMode::kWindow) {
        for (std::size_t s = 0; s < batch.streams.size(); ++s) {
          const StreamSlice& sl = batch.streams[s];
          if (sl.profile != pat.profile) continue;
          const std::int64_t first_end =
              std::max<std::int64_t>(sl.first_new, sl.first_index + pat.length - 1) - sl.first_index;
          const std::int64_t count = sl.length - first_end;
          if (count <= 0) continue;
          if (!any_bound)
            segments.push_back({static_cast<int>(s), static_cast<int>(first_end), pw.windows});
          pw.windows += count;
        }
      }
      pw.segment_end = static_cast<int>(segments.size());
    }
    segments_.upload(segments, stream_.get());
    work_.upload(work, stream_.get());

    BatchView view;
    view.data = data_.get();
    view.data_size = static_cast<long long>(n_data);
    view.slices = slices_.get();
    view.slice_count = static_cast<int>(slices.size());
    view.segments = segments_.get();
    view.patterns = work_.get();
    view.row_count = rows;
    bool any_window = false;
    for (const PatternWork& pw : work) any_window = any_window || pw.windows > 0;
    if (any_window && !any_bound) {
      prefix_sum_.reserve(std::max<std::size_t>(n_data, 1));
      prefix_sumsq_.reserve(std::max<std::size_t>(n_data, 1));
      launch_prefix_sums(view, prefix_sum_.get(), prefix_sumsq_.get(), stream_.get());
      view.prefix_sum = prefix_sum_.get();
      view.prefix_sumsq = prefix_sumsq_.get();
    }
    LibraryView lv{pairs_.get(), queries_.get(), values_.get(), upper_.get(),
                   lower_.get(), eq_packed_.get(), ec_packed_.get()};
    timer.mark("upload+assemble");

    check(cudaMemsetAsync(stats_.get(), 0, sizeof(DeviceStats), stream_.get()), "memset");
    std::vector<Match>& window_matches = result.matches;

    // Window mode; rerun with larger buffers when an append buffer overflowed.
    for (;;) {
      check(cudaMemsetAsync(match_count_.get(), 0, sizeof(unsigned long long), stream_.get()),
            "memset");
      check(cudaMemsetAsync(stats_.get(), 0, sizeof(DeviceStats), stream_.get()), "memset");
      match_capacity_ = std::max<unsigned long long>(match_capacity_, 1 << 16);
      matches_.reserve(match_capacity_);
      AppendBuffer<RawMatch> out{matches_.get(), match_count_.get(), match_capacity_};
      unsigned long long needed_candidates = 0;
      for (const BandGroup& g : groups_) {
        long long max_windows = 0;
        for (int q = g.pair_begin; q < g.pair_end; ++q)
          max_windows = std::max(max_windows, work[host_pairs_[q].pattern].windows);
        if (max_windows == 0) continue;
        if (!any_bound) {
          launch_window_dtw_all(view, lv, g.pair_begin, g.pair_end, max_windows, g.band,
                                g.max_length, pruning_.early_abandon, out, stats_.get(),
                                stream_.get());
          continue;
        }
        // Step 1: the fused filter over every row; survivors are the DTW's candidates.
        FilterPlan plan = plan_window_filter(slices, g.rows);
        filter_groups_.upload(plan.groups, stream_.get());
        filter_segments_.upload(plan.segments, stream_.get());
        const FilterPlanView plan_view{filter_groups_.get(), filter_segments_.get(),
                                       static_cast<int>(plan.groups.size()), plan.shared_floats};
        candidate_capacity_ = std::max<unsigned long long>(candidate_capacity_, 1 << 20);
        candidates_.reserve(candidate_capacity_);
        FilterOptions options{pruning_.lb_kim, pruning_.lb_keogh_eq, pruning_.lb_keogh_ec};
        const unsigned long long survivors = run_counted(candidate_count_, [&] {
          launch_window_filter(view, lv, g.rows, plan_view, options,
                               {candidates_.get(), candidate_count_.get(), candidate_capacity_},
                               stats_.get(), stream_.get());
        });
        timer.mark("filter");
        needed_candidates = std::max(needed_candidates, survivors);
        if (survivors > candidate_capacity_) break;  // rerun below with room for all
        // Step 2: banded DTW with early abandoning.
        launch_window_dtw_candidates(view, lv, candidates_.get(), survivors, g.band,
                                     pruning_.early_abandon, out, stats_.get(), stream_.get());
        timer.mark("dtw");
      }
      unsigned long long found = 0;
      check(cudaMemcpyAsync(&found, match_count_.get(), sizeof(found), cudaMemcpyDeviceToHost,
                            stream_.get()),
            "count");
      check(cudaStreamSynchronize(stream_.get()), "window search");
      if (needed_candidates > candidate_capacity_) {
        candidate_capacity_ = needed_candidates + needed_candidates / 4;
        continue;
      }
      if (found > match_capacity_) {
        match_capacity_ = found + found / 4;
        continue;
      }
      download_matches(matches_.get(), found, window_matches);
      timer.mark("sort+download");
      break;
    }

    // Streaming mode: advances the state, so it runs once with a buffer sized
    // for the worst case.
    std::vector<std::vector<Match>> streaming_matches(springs_.size());
    for (std::size_t i = 0; i < springs_.size(); ++i)
      search_streaming(batch, lib, view, lv, springs_[i], streaming_matches[i]);

    // The counters come back on stream_, after every kernel that adds to them.
    check(cudaMemcpyAsync(pinned_stats_.get(), stats_.get(), sizeof(DeviceStats),
                          cudaMemcpyDeviceToHost, stream_.get()),
          "stats");
    check(cudaStreamSynchronize(stream_.get()), "stats");
    const DeviceStats& ds = *pinned_stats_.get();
    result.stats.windows = ds.windows;
    result.stats.pruned_kim = ds.pruned_kim;
    result.stats.pruned_keogh_eq = ds.pruned_keogh_eq;
    result.stats.pruned_keogh_ec = ds.pruned_keogh_ec;
    result.stats.dtw_full = ds.dtw_full;
    result.stats.dtw_abandoned = ds.dtw_abandoned;
    result.stats.cells = ds.cells;
    timer.mark("streaming");
    // Each list is in result order and capped already (launch_finalize_matches);
    // merging keeps it so.
    for (auto& more : streaming_matches) {
      if (more.empty()) continue;
      std::vector<Match> merged;
      merged.reserve(result.matches.size() + more.size());
      std::merge(result.matches.begin(), result.matches.end(), more.begin(), more.end(),
                 std::back_inserter(merged), match_result_order);
      result.matches.swap(merged);
    }
    timer.mark("host_results");
    timer.report(result.matches.size());
  }

 private:
  void search_streaming(const SearchBatch& batch, const PatternLibrary& lib, const BatchView& view,
                        const LibraryView& lv, SpringPattern& sp, std::vector<Match>& out) {
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
                                cudaMemcpyDeviceToDevice, stream_.get()),
              "grow state");
        check(cudaMemcpy2DAsync(start.get(), new_states * sizeof(long long), sp.start.get(),
                                old_states * sizeof(long long), old_states * sizeof(long long),
                                sp.length, cudaMemcpyDeviceToDevice, stream_.get()),
              "grow state");
      }
      check(cudaStreamSynchronize(stream_.get()), "grow state");
      sp.d.swap(d);
      sp.start.swap(start);
      sp.slots_allocated = grown;
    }
    streaming_slices_.upload(work, stream_.get());
    // A match per (new sample, pair) is the worst case; past 64 M entries the
    // buffer is capped and an overflow is an error (the state has advanced,
    // so the batch cannot be rerun): such a threshold matches nearly everything.
    const unsigned long long capacity =
        std::min<unsigned long long>(static_cast<unsigned long long>(worst_matches), 1ull << 26);
    spring_matches_.reserve(capacity);
    check(cudaMemsetAsync(match_count_.get(), 0, sizeof(unsigned long long), stream_.get()),
          "memset");
    const double t = pat.threshold;
    const float cutoff = std::isinf(t) ? INFINITY : static_cast<float>(t * t);
    SpringStateView state{sp.d.get(), sp.start.get(), sp.slots_allocated * sp.pair_count};
    launch_spring(view, lv, sp.pair_begin, sp.pair_count, streaming_slices_.get(),
                  static_cast<int>(work.size()), max_new, cutoff, state,
                  {spring_matches_.get(), match_count_.get(), capacity}, stats_.get(),
                  stream_.get());
    unsigned long long found = 0;
    check(cudaMemcpyAsync(&found, match_count_.get(), sizeof(found), cudaMemcpyDeviceToHost,
                          stream_.get()),
          "count");
    check(cudaStreamSynchronize(stream_.get()), "streaming search");
    if (found > capacity)
      throw Error("CUDA backend: streaming pattern " + std::to_string(sp.pattern) + " matched " +
                  std::to_string(found) + " samples in one batch, more than the " +
                  std::to_string(capacity) + " the match buffer holds; raise its threshold");
    download_matches(spring_matches_.get(), found, out);
  }

  // The filter's row index of group g: for every (profile slot, stream dim),
  // the group's pairs on that stream dim of patterns of that profile, sorted
  // by pattern length (the filter computes statistics once per length).
  void build_row_pairs(const PatternLibrary& lib, const std::vector<PairView>& pairs,
                       const std::vector<QueryView>& queries, const std::vector<float>& values,
                       const std::vector<float>& upper, const std::vector<float>& lower,
                       const std::unordered_map<std::uint32_t, int>& profile_slots, BandGroup& g) {
    const int slots = static_cast<int>(profile_slots.size());
    int dim_stride = 1;
    for (int q = g.pair_begin; q < g.pair_end; ++q)
      dim_stride = std::max(dim_stride, pairs[q].stream_dim + 1);
    if (dim_stride > 65535)
      throw Error("CUDA backend: stream dims above 65534 are not supported in window mode");
    std::vector<std::vector<int>> per_row(static_cast<std::size_t>(slots) * dim_stride);
    for (int q = g.pair_begin; q < g.pair_end; ++q) {
      const int slot = profile_slots.at(lib.patterns[pairs[q].pattern].profile);
      per_row[static_cast<std::size_t>(slot) * dim_stride + pairs[q].stream_dim].push_back(q);
    }
    std::vector<int> offsets{0};
    std::vector<RowPair> list;
    for (auto& row : per_row) {
      auto length_of = [&](int q) { return lib.patterns[pairs[q].pattern].length; };
      std::stable_sort(row.begin(), row.end(),
                       [&](int a, int b) { return length_of(a) < length_of(b); });
      const std::size_t row_begin = list.size();
      for (const int q : row) {
        const Pattern& pat = lib.patterns[pairs[q].pattern];
        const QueryView& qv = queries[pairs[q].query];
        RowPair r;
        r.pair = q;
        r.packed_group = qv.packed_group;
        r.length = pat.length;
        r.znorm = pat.znorm ? 1 : 0;
        r.prune_sq = prune_threshold_sq(pat.threshold);
        r.cutoff_sq = cutoff_threshold_sq(pat.threshold);
        r.query_offset = static_cast<int>(qv.offset);
        const int m = pat.length;
        const int at[6] = {0, std::min(1, m - 1), std::min(2, m - 1), std::max(0, m - 3),
                           std::max(0, m - 2), m - 1};
        for (int k = 0; k < 6; ++k) r.kim_query[k] = values[qv.offset + at[k]];
        const int run = m / kPaaSegments;
        for (int g = 0; g < kPaaSegments && run == 0; ++g) {
          r.paa_upper[g] = INFINITY;  // no segments: the bound is 0
          r.paa_lower[g] = -INFINITY;
        }
        for (int g = 0; g < kPaaSegments && run > 0; ++g) {
          const std::size_t from = qv.offset + static_cast<std::size_t>(g) * run;
          r.paa_upper[g] = *std::max_element(upper.begin() + from, upper.begin() + from + run);
          r.paa_lower[g] = *std::min_element(lower.begin() + from, lower.begin() + from + run);
        }
        list.push_back(r);
      }
      // Each pair records where its run of equal lengths ends.
      for (std::size_t i = list.size(); i-- > row_begin;)
        list[i].run_end = (i + 1 < list.size() && list[i + 1].length == list[i].length)
                              ? list[i + 1].run_end
                              : static_cast<int>(i + 1);
      offsets.push_back(static_cast<int>(list.size()));
    }
    g.row_offsets.upload(offsets, stream_.get());
    g.row_pairs.upload(list, stream_.get());
    g.rows.offsets = g.row_offsets.get();
    g.rows.pairs = g.row_pairs.get();
    g.rows.dim_stride = dim_stride;
    g.rows.slots = slots;
    g.rows.min_length = g.min_length;
    g.rows.max_length = g.max_length;
    g.rows.band = g.band;
  }

  // Sorts `count` device matches into result order, converts and caps them
  // on the device (launch_sort_matches, launch_finalize_matches) and copies
  // the kept ones to `out` through pinned memory. Synchronises.
  void download_matches(const RawMatch* matches, unsigned long long count,
                        std::vector<Match>& out) {
    // No clear(): resizing keeps the elements already there (they are
    // overwritten below), so a reused result is not zeroed every batch.
    if (count == 0) {
      out.clear();
      return;
    }
    sorted_.reserve(count);
    sort_keys_a_.reserve(count);
    sort_keys_b_.reserve(count);
    sort_index_a_.reserve(count);
    sort_index_b_.reserve(count);
    final_all_.reserve(count);
    final_out_.reserve(count);
    final_keep_.reserve(count);
    final_kept_.reserve(1);
    const std::size_t temp = match_sort_temp_bytes(count);
    sort_temp_.reserve(temp);
    launch_sort_matches(matches, sorted_.get(), count, pair_rank_.get(),
                        {sort_keys_a_.get(), sort_keys_b_.get(), sort_index_a_.get(),
                         sort_index_b_.get(), sort_temp_.get(), temp},
                        stream_.get());
    launch_finalize_matches(sorted_.get(), count, pairs_.get(), pattern_outputs_.get(),
                            slices_.get(),
                            {final_all_.get(), final_keep_.get(), final_out_.get(),
                             final_kept_.get(), sort_temp_.get(), temp},
                            stream_.get());
    unsigned long long kept = 0;
    check(cudaMemcpyAsync(&kept, final_kept_.get(), sizeof(kept), cudaMemcpyDeviceToHost,
                          stream_.get()),
          "kept matches");
    // Touching the result's pages (zeroing, page faults) overlaps the device
    // sort; kept <= count, so shrinking later does not reallocate.
    if (out.capacity() < count) out.reserve(count + count / 4);  // headroom: counts creep up
    out.resize(count);
    check(cudaStreamSynchronize(stream_.get()), "finalize matches");
    Match* host = pinned_matches_.reserve(kept);
    check(cudaMemcpyAsync(host, final_out_.get(), kept * sizeof(Match), cudaMemcpyDeviceToHost,
                          stream_.get()),
          "matches");
    check(cudaStreamSynchronize(stream_.get()), "download matches");
    out.resize(kept);
    host_pool_.for_ranges(kept, 1 << 16, [&](std::size_t begin, std::size_t end) {
      std::memcpy(out.data() + begin, host + begin, (end - begin) * sizeof(Match));
    });
  }

  // Zeroes `counter`, runs `launch` (which appends through it) and returns the
  // final count (synchronises the stream).
  template <typename Launch>
  unsigned long long run_counted(DeviceBuffer<unsigned long long>& counter, Launch&& launch) {
    check(cudaMemsetAsync(counter.get(), 0, sizeof(unsigned long long), stream_.get()), "memset");
    launch();
    unsigned long long count = 0;
    check(cudaMemcpyAsync(&count, counter.get(), sizeof(count), cudaMemcpyDeviceToHost,
                          stream_.get()),
          "count");
    check(cudaStreamSynchronize(stream_.get()), "filter");
    return count;
  }

  // The staged upload of `batch`: the one prepare() made for it, or one made
  // now on stream_. A prepared batch that was never searched advanced the
  // stream histories past samples the device never got, so then every history
  // starts over (the next batch uploads whole slices).
  StagedUpload& take_staged(const SearchBatch& batch) {
    std::lock_guard<std::mutex> lock(stage_mutex_);
    for (StagedUpload& slot : staged_) {
      if (slot.batch == &batch) {
        slot.batch = nullptr;
        return slot;
      }
    }
    bool stale = false;
    for (StagedUpload& slot : staged_) {
      stale = stale || slot.batch != nullptr;
      slot.batch = nullptr;
    }
    if (stale) histories_.clear();
    StagedUpload& slot = stage(batch, stream_.get());
    slot.batch = nullptr;
    return slot;
  }

  // Plans `batch`'s upload into the next staging slot, copies its new
  // samples to pinned memory and starts the copy to the device on `stream`.
  // Needs stage_mutex_.
  StagedUpload& stage(const SearchBatch& batch, cudaStream_t stream) {
    StagedUpload& slot = staged_[staged_next_];
    staged_next_ = 1 - staged_next_;
    slot.batch = &batch;
    slot.slices.clear();
    slot.uploads.clear();
    slot.rows = 0;
    // A batch refused here leaves no history half-advanced: every stream
    // starts over (uploads whole slices) in the next batch.
    const auto refuse = [&](const std::string& why) {
      slot.batch = nullptr;
      histories_.clear();
      throw Error("CUDA backend: " + why);
    };
    const std::size_t n_host = batch.data.size();
    std::size_t n_device = 0;  // the assembled slices: every sample of every slice
    std::size_t n_upload = 0;
    std::unordered_map<std::uint64_t, bool> seen;
    for (std::size_t i = 0; i < batch.streams.size(); ++i) {
      const StreamSlice& s = batch.streams[i];
      if (s.dims < 0 || s.length < 0 || s.omitted < 0 || s.omitted > s.length ||
          s.offset > n_host || n_host - s.offset < s.data_size())
        refuse("slice " + std::to_string(i) + " does not fit the batch data");
      SliceView view{static_cast<long long>(n_device), s.first_index, s.dims, s.length, slot.rows};
      view.first_new = static_cast<int>(
          std::clamp<std::int64_t>(s.first_new - s.first_index, 0, s.length));
      const auto profile = profile_slots_.find(s.profile);
      view.profile_slot = profile == profile_slots_.end() ? -1 : profile->second;
      slot.slices.push_back(view);
      slot.rows += s.dims;
      n_device += static_cast<std::size_t>(s.dims) * s.length;
      SliceUpload up;
      const bool once = s.stream_key != 0 && seen.emplace(s.stream_key, true).second;
      if (s.omitted > 0 && (!once || s.omitted > view.first_new ||
                            !history_continues(history_of(s.stream_key), s)))
        refuse("slice " + std::to_string(i) + " omits " + std::to_string(s.omitted) +
               " samples the device does not hold");
      if (once) plan_history(s, &up);
      up.staging_offset = static_cast<long long>(n_upload);
      n_upload += static_cast<std::size_t>(s.dims) * (s.length - up.from);
      slot.uploads.push_back(up);
    }
    slot.device_size = n_device;
    float* staging = slot.staging.reserve(std::max<std::size_t>(n_upload, 1));
    const std::vector<SliceUpload>& uploads = slot.uploads;
    host_pool_.for_ranges(batch.streams.size(), 256, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) {
        const StreamSlice& s = batch.streams[i];
        const int from = uploads[i].from;  // >= s.omitted
        const int count = s.length - from;
        const int stride = s.length - s.omitted;
        const float* source = batch.data.data() + s.offset + (from - s.omitted);
        float* target = staging + uploads[i].staging_offset;
        if (count == stride) {  // the slice's host data is exactly what travels
          std::memcpy(target, source, s.data_size() * sizeof(float));
          continue;
        }
        for (int d = 0; d < s.dims; ++d)
          std::memcpy(target + static_cast<std::size_t>(d) * count,
                      source + static_cast<std::size_t>(d) * stride,
                      static_cast<std::size_t>(count) * sizeof(float));
      }
    });
    slot.device.reserve(std::max<std::size_t>(n_upload, 1));
    check(cudaMemcpyAsync(slot.device.get(), staging, n_upload * sizeof(float),
                          cudaMemcpyHostToDevice, stream),
          "data upload");
    check(cudaEventRecord(slot.copied.get(), stream), "cudaEventRecord");
    return slot;
  }

  // The ring of `key`, or an empty one (holds nothing) when it has none.
  const StreamHistory& history_of(std::uint64_t key) const {
    static const StreamHistory none;
    const auto it = histories_.find(key);
    return it == histories_.end() ? none : it->second;
  }

  // Whether `h` holds the samples of `s` before its first new one: the ring
  // fits the slice and continues only where the slice's new samples start
  // right after what it holds (the rule streaming uses too). Samples before
  // first_new were sent before and are taken from the ring; a slice that
  // resends other values for old indices starts over.
  static bool history_continues(const StreamHistory& h, const StreamSlice& s) {
    const std::int64_t end = s.first_index + s.length;
    return h.dims == s.dims && h.capacity >= s.length && h.next >= 0 && s.first_new == h.next &&
           h.first <= s.first_index && h.next <= end;
  }

  // Decides which samples of slice `s` the device already holds in the ring
  // of its stream key (`up->from`: the first one to upload; the ring is
  // replaced when its shape no longer fits) and moves the history on to
  // after this batch.
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
    const bool continues = history_continues(h, s);
    up->from = continues ? static_cast<int>(h.next - s.first_index) : 0;
    up->ring = h.ring.get();
    up->ring_capacity = h.capacity;
    h.first = std::max<std::int64_t>(continues ? h.first : s.first_index, end - h.capacity);
    h.next = end;
  }

  // The default priority, what cudaStreamCreate gives: the GPU hash tables'
  // batches, on every alert's way out, take the device's highest.
  static constexpr int kDefaultStreamPriority = 0;

  int device_;
  PruningOptions pruning_;
  std::string name_;
  // Declared before every buffer: the buffers are freed first.
  cuda_memory::OwnedStream stream_;
  // prepare()'s host->device copies, beside the search on stream_.
  cuda_memory::OwnedStream copy_stream_;
  // The host's cores for copies into and out of pinned staging memory.
  WorkerPool host_pool_{worker_count(0), "gw-cuda-host"};
  std::shared_ptr<const PatternLibrary> library_;
  std::vector<PairView> host_pairs_;
  std::vector<BandGroup> groups_;
  std::unordered_map<std::uint32_t, int> profile_slots_;  // window patterns' profiles -> slot
  std::vector<SpringPattern> springs_;
  DeviceBuffer<PairView> pairs_;
  DeviceBuffer<QueryView> queries_;
  DeviceBuffer<float> values_, upper_, lower_;
  DeviceBuffer<float4> eq_packed_;
  DeviceBuffer<float4> ec_packed_;
  PinnedBuffer<Match> pinned_matches_;
  DeviceBuffer<PatternOutput> pattern_outputs_;
  DeviceBuffer<Match> final_all_, final_out_;
  DeviceBuffer<unsigned char> final_keep_;
  DeviceBuffer<unsigned long long> final_kept_;
  DeviceBuffer<float> data_;
  DeviceBuffer<SliceView> slices_;
  DeviceBuffer<Segment> segments_;
  DeviceBuffer<PatternWork> work_;
  DeviceBuffer<Candidate> candidates_;
  DeviceBuffer<FilterGroup> filter_groups_;
  DeviceBuffer<FilterSegment> filter_segments_;
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
  DeviceBuffer<SliceUpload> uploads_;
  // A batch's data on its way to the device: the host plan, the pinned copy
  // of its new samples and their device buffer. Two alternate, so prepare()
  // of batch k+1 fills one while search_into() of batch k reads the other.
  struct StagedUpload {
    const SearchBatch* batch = nullptr;  // prepared for, not searched yet
    std::vector<SliceView> slices;
    std::vector<SliceUpload> uploads;
    int rows = 0;
    std::size_t device_size = 0;  // values of the assembled slices
    PinnedBuffer<float> staging;
    DeviceBuffer<float> device;
    cuda_memory::OwnedEvent copied;  // recorded after the copy to `device`
  };
  StagedUpload staged_[2];
  int staged_next_ = 0;
  // staged_, histories_: prepare() runs beside search_into().
  mutable std::mutex stage_mutex_;
  DeviceBuffer<unsigned long long> match_count_, candidate_count_;
  DeviceBuffer<DeviceStats> stats_;
  PinnedBuffer<DeviceStats> pinned_stats_;
  unsigned long long match_capacity_ = 0;
  unsigned long long candidate_capacity_ = 0;
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
