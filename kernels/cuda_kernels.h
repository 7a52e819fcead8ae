// Host launch functions of the CUDA kernels (kernels/*.cu). Every launch is
// asynchronous on the given stream; none synchronises. Views are passed by
// value; the buffers they point to must stay alive until the stream reaches
// the launch.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/cuda_views.h"

namespace gw::kernels::cuda {

// Sliding max/min of every slice dim over +-band (clipped to the slice):
// upper/lower hold batch.data_size values each.
void launch_envelope(const BatchView& batch, int band, float* upper, float* lower,
                     cudaStream_t stream);

// Window mode, step 1: z-normalisation statistics and the lower-bound cascade
// (LB_Kim, LB_Keogh EQ, LB_Keogh EC; each switchable) for every window of
// every pair in [pair_begin, pair_end); survivors are appended to `candidates`.
struct FilterOptions {
  bool lb_kim = true;
  bool lb_keogh_eq = true;
  bool lb_keogh_ec = true;
};
void launch_window_filter(const BatchView& batch, const LibraryView& library, int pair_begin,
                          int pair_end, long long max_windows_per_pair, FilterOptions options,
                          AppendBuffer<Candidate> candidates, DeviceStats* stats,
                          cudaStream_t stream);

// Window mode, step 2: banded DTW with early abandoning of the candidates
// (count read from device memory, at most `max_candidates` processed); a
// window with distance^2 <= cutoff is appended to `matches`. Every candidate
// must belong to a pattern with this `band`, which selects the kernel: one compiled per band width up to kMaxRegisterBand,
// a general one above.
inline constexpr int kMaxRegisterBand = 20;
void launch_window_dtw_candidates(const BatchView& batch, const LibraryView& library,
                                  const Candidate* candidates, unsigned long long max_candidates,
                                  const unsigned long long* candidate_count, int band,
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

}  // namespace gw::kernels::cuda
