// Host launch functions of the CUDA kernels (kernels/*.cu). Every launch is
// asynchronous on the given stream; none synchronises. Views are passed by
// value; the buffers they point to must stay alive until the stream reaches
// the launch.
#pragma once

#include <cstddef>
#include <vector>

#include <cuda_runtime_api.h>

#include "kernels/cuda_views.h"

namespace gw::kernels {
struct Match;  // kernels/search.h
}

namespace gw::kernels::cuda {

// Builds batch.data (data_size values, layout of SliceView) from the device
// rings and the compact upload in `staging` (device memory), and appends the
// uploaded samples to the rings.
void launch_assemble(const BatchView& batch, float* data, const float* staging,
                     const SliceUpload* uploads, cudaStream_t stream);

// Inclusive prefix sums of every row (slice dim) of batch.data and of its
// squares, into sum/sumsq (data_size values each).
void launch_prefix_sums(const BatchView& batch, double* sum, double* sumsq, cudaStream_t stream);

// Window mode, step 1 (the filter): for every row (slice, stream dim) of the
// batch and every pair of `rows` reading it, every window end from the
// slice's first_new on: z-normalisation statistics, LB_Kim, then LB_Keogh EQ
// (query envelope, after its cheaper PAA lower bound) and EC (data envelope)
// on the Kim survivors; windows that no enabled bound prunes are appended to
// `candidates`. EC runs only on bands wider than kMaxRegisterBand, where it
// saves more DTW than it costs (docs/gpu.md). `plan` (from plan_window_filter
// over the same slices and rows, copied to the device) says which window
// ends share a block. Windows whose bounds are all off pass (a pair with
// every bound off belongs to the unfiltered path, launch_window_dtw_all).
struct FilterOptions {
  bool lb_kim = true;
  bool lb_keogh_eq = true;
  bool lb_keogh_ec = true;
};
struct FilterPlan {
  std::vector<FilterGroup> groups;
  std::vector<FilterSegment> segments;
  int shared_floats = 0;
};
// Cuts the window ends of `slices` (host copies of the batch's SliceViews)
// into segments and groups for the filter of `rows`.
FilterPlan plan_window_filter(const std::vector<SliceView>& slices, const RowPairsView& rows);
// The most shared memory a plan for patterns up to max_length with this band
// can need (set_library refuses patterns beyond the device's per-block limit).
std::size_t window_filter_max_shared_bytes(int max_length, int band);
void launch_window_filter(const BatchView& batch, const LibraryView& library,
                          const RowPairsView& rows, const FilterPlanView& plan,
                          FilterOptions options, AppendBuffer<Candidate> candidates,
                          DeviceStats* stats, cudaStream_t stream);

// Window mode, step 2: banded DTW with early abandoning of `count`
// candidates (survivors of step 1); a
// window with distance^2 <= cutoff is appended to `matches`. Every candidate
// must belong to a pattern with this `band`, which selects the kernel: one compiled per band width up to kMaxRegisterBand,
// a general one above.
inline constexpr int kMaxRegisterBand = 20;
// The general kernel keeps its row in a fixed local array: bands up to this.
inline constexpr int kMaxGeneralBand = 1024;
void launch_window_dtw_candidates(const BatchView& batch, const LibraryView& library,
                                  const Candidate* candidates, unsigned long long count, int band,
                                  bool early_abandon, AppendBuffer<RawMatch> matches,
                                  DeviceStats* stats, cudaStream_t stream);

// Window mode without a filter step: every window of the pairs
// [pair_begin, pair_end) (all of one band, none longer than max_length) is normalised and compared; used
// when every lower bound is off and by the kernel benchmark.
void launch_window_dtw_all(const BatchView& batch, const LibraryView& library, int pair_begin,
                           int pair_end, long long max_windows_per_pair, int band, int max_length,
                           bool early_abandon, AppendBuffer<RawMatch> matches, DeviceStats* stats,
                           cudaStream_t stream);

// Streaming mode of one pattern: advances the SPRING columns of every
// (slice, pair of the pattern) over the slice's new samples; a sample whose
// best subsequence distance^2 <= cutoff is appended to `matches` (pair is the
// global pair index).
void launch_spring(const BatchView& batch, const LibraryView& library, int pair_begin,
                   int pair_count, const StreamingSlice* slices, int slice_count,
                   int max_new_samples, float cutoff_sq, SpringStateView state,
                   AppendBuffer<RawMatch> matches, DeviceStats* stats, cudaStream_t stream);

// Sorting matches into SearchResult order (slice, pattern, pattern dim,
// stream dim, distance, end) on the device; pair_rank[pair] is the pair's
// position in (pattern, pattern dim, stream dim) order (below 2^24), slice
// indices below 2^32. Scratch: keys and indices for `count` items and
// match_sort_temp_bytes(count) bytes.
struct MatchSortBuffers {
  unsigned long long* keys_in = nullptr;
  unsigned long long* keys_out = nullptr;
  unsigned* index_in = nullptr;
  unsigned* index_out = nullptr;
  void* temp = nullptr;
  std::size_t temp_bytes = 0;
};
// Scratch of launch_sort_matches and launch_finalize_matches.
std::size_t match_sort_temp_bytes(unsigned long long count);
void launch_sort_matches(const RawMatch* in, RawMatch* out, unsigned long long count,
                         const int* pair_rank, MatchSortBuffers buffers, cudaStream_t stream);

// Converts `count` sorted matches to Match (absolute end/start, distance =
// sqrt) into `all`, then keeps the first max_matches of every (slice, pair)
// group (the top-p cap of sort_and_cap_matches) in order into `out`, their
// number into *kept. `temp` holds match_sort_temp_bytes(count) bytes.
struct PatternOutput {
  int max_matches = 1;  // p
  int length = 0;       // m
  int window = 1;       // window mode: start = end - m + 1; streaming: RawMatch::start
};
struct MatchFinalizeBuffers {
  Match* all = nullptr;
  unsigned char* keep = nullptr;
  Match* out = nullptr;
  unsigned long long* kept = nullptr;
  void* temp = nullptr;
  std::size_t temp_bytes = 0;
};
void launch_finalize_matches(const RawMatch* sorted, unsigned long long count,
                             const PairView* pairs, const PatternOutput* patterns,
                             const SliceView* slices, MatchFinalizeBuffers buffers,
                             cudaStream_t stream);

}  // namespace gw::kernels::cuda
