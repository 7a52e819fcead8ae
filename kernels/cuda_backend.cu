// Host side of the CUDA backend: holds the device form of the pattern
// library (cuda_library.h), the upload path (cuda_staging.h), the per-batch
// buffers and the streaming (SPRING) state, launches the kernels of
// window_filter.cu, window_dtw.cu and spring_dtw.cu on one CUDA stream, and
// turns the compact match buffer into the backend-independent SearchResult.
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
#include <optional>
#include <unordered_map>
#include <vector>

#include <cuda_runtime.h>

#include "common/diagnostics.h"
#include "common/error.h"
#include "common/worker_pool.h"
#include "kernels/cuda_backend.h"
#include "kernels/cuda_kernels.h"
#include "kernels/cuda_library.h"
#include "kernels/cuda_memory.h"
#include "kernels/cuda_staging.h"
#include "kernels/dtw.h"
#include "kernels/search.h"

namespace gw::kernels {
namespace {

using namespace cuda;
using cuda_memory::DeviceBuffer;
using cuda_memory::PinnedBuffer;

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

class CudaBackend final : public SearchBackend {
 public:
  // Every stream, event and buffer is a member that frees itself, so a step
  // that throws here leaks nothing made before it.
  CudaBackend(int device, PruningOptions pruning) : device_(device), pruning_(pruning) {
    cuda_memory::open_device(device);
    cudaDeviceProp prop{};
    check_backend(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    name_ = std::string("cuda:") + prop.name;
    stream_.create(kDefaultStreamPriority);
    copy_stream_.create(kDefaultStreamPriority);
    stager_.emplace(host_pool_);
    stats_.reserve(1);
    pinned_stats_.reserve(1);
    match_count_.reserve(1);
    candidate_count_.reserve(1);
  }

  std::string name() const override { return name_; }

  void set_library(std::shared_ptr<const PatternLibrary> library) override {
    if (!library) library = std::make_shared<PatternLibrary>();
    validate_library(*library);
    DeviceLibrary uploaded = upload_library(*library, device_, stream_.get());
    // The streams' device rings hold samples of the old library's views (a
    // reload may change a view's transforms, not its shape or stream key):
    // nothing is held any more, the next batch uploads whole slices.
    stager_->forget_histories();
    device_library_ = std::move(uploaded);
    library_ = std::move(library);
  }

  SearchResult search(const SearchBatch& batch) override {
    SearchResult result;
    search_into(batch, result);
    return result;
  }

  int held_samples(const StreamSlice& slice) const override {
    return stager_->held_samples(slice);
  }

  void forget_streams(const std::vector<std::uint64_t>& stream_keys) override {
    stager_->forget_streams(stream_keys);
    // A freed streaming slot's next_index of -1 matches no first_new, so
    // the next stream in it starts with a reset column.
    for (SpringPattern& sp : device_library_.springs)
      for (const std::uint64_t key : stream_keys) {
        const auto it = sp.slot_of_stream.find(key);
        if (it == sp.slot_of_stream.end()) continue;
        sp.next_index[static_cast<std::size_t>(it->second)] = -1;
        sp.free_slots.push_back(it->second);
        sp.slot_of_stream.erase(it);
      }
  }

  // Stages `next` (host plan, pinned copy, host->device copy on copy_stream_)
  // while another thread runs search_into() of the batch before it.
  void prepare(const SearchBatch& next) override {
    check_backend(cudaSetDevice(device_), "cudaSetDevice");
    if (!library_ || library_->patterns.empty() || next.streams.empty()) return;
    stager_->prepare(next, device_library_.profile_slots, copy_stream_.get());
  }

  void search_into(const SearchBatch& batch, SearchResult& result) override {
    check_backend(cudaSetDevice(device_), "cudaSetDevice");
    result.stats = SearchStats{};
    if (!library_ || library_->patterns.empty() || batch.streams.empty()) {
      result.matches.clear();
      return;
    }
    const PatternLibrary& lib = *library_;
    StageTimer timer(diagnostics().cuda_stage_times, stream_.get());

    // Batch data: only samples the device does not hold yet travel (see
    // UploadStager); the device assembles the slices from rings + upload.
    StagedUpload& staged = stager_->take(batch, device_library_.profile_slots, stream_.get());
    const std::size_t n_data = staged.device_size;
    check_backend(cudaStreamWaitEvent(stream_.get(), staged.copied.get(), 0), "wait for the upload");
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
    const LibraryView lv = device_library_.view();
    timer.mark("upload+assemble");

    check_backend(cudaMemsetAsync(stats_.get(), 0, sizeof(DeviceStats), stream_.get()), "memset");
    std::vector<Match>& window_matches = result.matches;

    // Window mode; rerun with larger buffers when an append buffer overflowed.
    for (;;) {
      check_backend(cudaMemsetAsync(match_count_.get(), 0, sizeof(unsigned long long), stream_.get()),
            "memset");
      check_backend(cudaMemsetAsync(stats_.get(), 0, sizeof(DeviceStats), stream_.get()), "memset");
      match_capacity_ = std::max<unsigned long long>(match_capacity_, 1 << 16);
      matches_.reserve(match_capacity_);
      AppendBuffer<RawMatch> out{matches_.get(), match_count_.get(), match_capacity_};
      unsigned long long needed_candidates = 0;
      for (const BandGroup& g : device_library_.groups) {
        long long max_windows = 0;
        for (int q = g.pair_begin; q < g.pair_end; ++q)
          max_windows = std::max(max_windows, work[device_library_.host_pairs[q].pattern].windows);
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
      check_backend(cudaMemcpyAsync(&found, match_count_.get(), sizeof(found), cudaMemcpyDeviceToHost,
                            stream_.get()),
            "count");
      check_backend(cudaStreamSynchronize(stream_.get()), "window search");
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
    std::vector<std::vector<Match>> streaming_matches(device_library_.springs.size());
    for (std::size_t i = 0; i < device_library_.springs.size(); ++i)
      search_streaming(batch, lib, view, lv, device_library_.springs[i], streaming_matches[i]);

    // The counters come back on stream_, after every kernel that adds to them.
    check_backend(cudaMemcpyAsync(pinned_stats_.get(), stats_.get(), sizeof(DeviceStats),
                          cudaMemcpyDeviceToHost, stream_.get()),
          "stats");
    check_backend(cudaStreamSynchronize(stream_.get()), "stats");
    const DeviceStats& ds = *pinned_stats_.get();
    result.stats.windows = ds.windows;
    result.stats.pruned_kim = ds.pruned_kim;
    result.stats.pruned_keogh_eq = ds.pruned_keogh_eq;
    result.stats.pruned_keogh_ec = ds.pruned_keogh_ec;
    result.stats.dtw_full = ds.dtw_full;
    result.stats.dtw_abandoned = ds.dtw_abandoned;
    result.stats.cells = ds.cells;
    const std::uint64_t allocations = cuda_memory::allocation_count();
    result.stats.buffer_growths = allocations - allocations_seen_;
    allocations_seen_ = allocations;
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
      auto [it, inserted] = sp.slot_of_stream.try_emplace(sl.stream_key, -1);
      if (inserted) {
        if (sp.free_slots.empty()) {
          it->second = static_cast<int>(sp.next_index.size());
          sp.next_index.push_back(-1);
        } else {
          it->second = sp.free_slots.back();
          sp.free_slots.pop_back();
        }
      }
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
        check_backend(cudaMemcpy2DAsync(d.get(), new_states * sizeof(float), sp.d.get(),
                                old_states * sizeof(float), old_states * sizeof(float), sp.length,
                                cudaMemcpyDeviceToDevice, stream_.get()),
              "grow state");
        check_backend(cudaMemcpy2DAsync(start.get(), new_states * sizeof(long long), sp.start.get(),
                                old_states * sizeof(long long), old_states * sizeof(long long),
                                sp.length, cudaMemcpyDeviceToDevice, stream_.get()),
              "grow state");
      }
      check_backend(cudaStreamSynchronize(stream_.get()), "grow state");
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
    check_backend(cudaMemsetAsync(match_count_.get(), 0, sizeof(unsigned long long), stream_.get()),
          "memset");
    const double t = pat.threshold;
    const float cutoff = std::isinf(t) ? INFINITY : static_cast<float>(t * t);
    SpringStateView state{sp.d.get(), sp.start.get(), sp.slots_allocated * sp.pair_count};
    launch_spring(view, lv, sp.pair_begin, sp.pair_count, streaming_slices_.get(),
                  static_cast<int>(work.size()), max_new, cutoff, state,
                  {spring_matches_.get(), match_count_.get(), capacity}, stats_.get(),
                  stream_.get());
    unsigned long long found = 0;
    check_backend(cudaMemcpyAsync(&found, match_count_.get(), sizeof(found), cudaMemcpyDeviceToHost,
                          stream_.get()),
          "count");
    check_backend(cudaStreamSynchronize(stream_.get()), "streaming search");
    if (found > capacity)
      throw Error("CUDA backend: streaming pattern " + std::to_string(sp.pattern) + " matched " +
                  std::to_string(found) + " samples in one batch, more than the " +
                  std::to_string(capacity) + " the match buffer holds; raise its threshold");
    download_matches(spring_matches_.get(), found, out);
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
    launch_sort_matches(matches, sorted_.get(), count, device_library_.pair_rank.get(),
                        {sort_keys_a_.get(), sort_keys_b_.get(), sort_index_a_.get(),
                         sort_index_b_.get(), sort_temp_.get(), temp},
                        stream_.get());
    launch_finalize_matches(sorted_.get(), count, device_library_.pairs.get(),
                            device_library_.pattern_outputs.get(),
                            slices_.get(),
                            {final_all_.get(), final_keep_.get(), final_out_.get(),
                             final_kept_.get(), sort_temp_.get(), temp},
                            stream_.get());
    unsigned long long kept = 0;
    check_backend(cudaMemcpyAsync(&kept, final_kept_.get(), sizeof(kept), cudaMemcpyDeviceToHost,
                          stream_.get()),
          "kept matches");
    // Touching the result's pages (zeroing, page faults) overlaps the device
    // sort; kept <= count, so shrinking later does not reallocate.
    if (out.capacity() < count) out.reserve(count + count / 4);  // headroom: counts creep up
    out.resize(count);
    check_backend(cudaStreamSynchronize(stream_.get()), "finalize matches");
    Match* host = pinned_matches_.reserve(kept);
    check_backend(cudaMemcpyAsync(host, final_out_.get(), kept * sizeof(Match), cudaMemcpyDeviceToHost,
                          stream_.get()),
          "matches");
    check_backend(cudaStreamSynchronize(stream_.get()), "download matches");
    out.resize(kept);
    host_pool_.for_ranges(kept, 1 << 16, [&](std::size_t begin, std::size_t end) {
      std::memcpy(out.data() + begin, host + begin, (end - begin) * sizeof(Match));
    });
  }

  // Zeroes `counter`, runs `launch` (which appends through it) and returns the
  // final count (synchronises the stream).
  template <typename Launch>
  unsigned long long run_counted(DeviceBuffer<unsigned long long>& counter, Launch&& launch) {
    check_backend(cudaMemsetAsync(counter.get(), 0, sizeof(unsigned long long), stream_.get()), "memset");
    launch();
    unsigned long long count = 0;
    check_backend(cudaMemcpyAsync(&count, counter.get(), sizeof(count), cudaMemcpyDeviceToHost,
                          stream_.get()),
          "count");
    check_backend(cudaStreamSynchronize(stream_.get()), "filter");
    return count;
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
  // Made once the device is current (the constructor's body).
  std::optional<UploadStager> stager_;
  std::shared_ptr<const PatternLibrary> library_;
  DeviceLibrary device_library_;
  PinnedBuffer<Match> pinned_matches_;
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
  DeviceBuffer<unsigned long long> sort_keys_a_, sort_keys_b_;
  DeviceBuffer<unsigned> sort_index_a_, sort_index_b_;
  DeviceBuffer<char> sort_temp_;
  DeviceBuffer<StreamingSlice> streaming_slices_;
  DeviceBuffer<SliceUpload> uploads_;
  DeviceBuffer<unsigned long long> match_count_, candidate_count_;
  DeviceBuffer<DeviceStats> stats_;
  PinnedBuffer<DeviceStats> pinned_stats_;
  // cuda_memory::allocation_count() at the end of the last search.
  std::uint64_t allocations_seen_ = cuda_memory::allocation_count();
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

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

std::unique_ptr<SearchBackend> make_cuda_backend(int device, PruningOptions pruning) {
  std::string why;
  if (!cuda_device_available(&why)) throw Error("CUDA backend: " + why);
  return std::make_unique<CudaBackend>(device, pruning);
}

}  // namespace gw::kernels
