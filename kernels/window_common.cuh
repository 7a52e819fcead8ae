// Device helpers shared by the window-mode kernels (window_filter.cu and
// window_dtw.cu): window statistics, LB_Kim, locating a window in the batch,
// block counters and append buffers. Internal to kernels/.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <type_traits>
#include "common/diagnostics.h"
#include "kernels/cuda_kernels.h"

namespace gw::kernels::cuda {
namespace {

constexpr int kThreads = 128;
constexpr float kInf = INFINITY;
// Stands for a column outside the window: its squared difference (~1e36) is
// larger than any real path sum, so such cells never lie on a best path.
constexpr float kOutside = 1e18f;

__device__ __forceinline__ int find_segment(const Segment* segments, int begin, int end,
                                            long long w) {
  // Last segment with window_offset <= w.
  int lo = begin, hi = end - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (segments[mid].window_offset <= w) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// The constant-window rule of kernels/dtw.h: std < 1e-8 * (|mean| + 1)
// normalises to zeros.
__device__ __forceinline__ void set_stats(double mean, double sd, float* mean_out,
                                          float* inv_std_out) {
  *mean_out = static_cast<float>(mean);
  *inv_std_out = (sd == 0.0 || sd < 1e-8 * (fabs(mean) + 1.0)) ? 0.f : static_cast<float>(1.0 / sd);
}

// Two-pass population mean/std in double (as kernels/dtw.h mean_std).
__device__ void window_stats_two_pass(const float* x, int m, float* mean_out, float* inv_std_out) {
  double sum = 0;
  for (int k = 0; k < m; ++k) sum += x[k];
  const double mean = sum / m;
  double ss = 0;
  for (int k = 0; k < m; ++k) {
    const double d = x[k] - mean;
    ss += d * d;
  }
  set_stats(mean, sqrt(ss / m), mean_out, inv_std_out);
}

// Mean/std of the window [first, first + m) of a row from its prefix sums.
// One pass loses digits when the spread is tiny next to the mean, so near the
// constant-window limit it defers to the exact two-pass computation.
__device__ __forceinline__ void window_stats(const BatchView& b, long long row_offset, int first,
                                             int m, float* mean_out, float* inv_std_out) {
  const long long last = row_offset + first + m - 1;
  const double before_sum = first > 0 ? b.prefix_sum[last - m] : 0.0;
  const double before_sq = first > 0 ? b.prefix_sumsq[last - m] : 0.0;
  const double sum = b.prefix_sum[last] - before_sum;
  const double sumsq = b.prefix_sumsq[last] - before_sq;
  const double mean = sum / m;
  const double var = sumsq / m - mean * mean;
  if (var > 1e-6 * (mean * mean + 1.0)) {
    set_stats(mean, sqrt(var), mean_out, inv_std_out);
  } else {
    window_stats_two_pass(b.data + row_offset + first, m, mean_out, inv_std_out);
  }
}

// min(a, b, c) of values >= 0 (or +inf): such floats order like their bit
// patterns as int32, so Hopper's DPX three-way integer minimum does it in one
// instruction instead of two FMNMX.
__device__ __forceinline__ float min3_nonnegative(float a, float b, float c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return __int_as_float(__vimin3_s32(__float_as_int(a), __float_as_int(b), __float_as_int(c)));
#else
  return fminf(fminf(a, b), c);
#endif
}

// max(a, b, 0) of finite floats: a non-negative float orders like its bit
// pattern as int32 and a negative one below int 0, so Hopper's DPX three-way
// integer maximum does it in one instruction. A lower-bound term
// (c - U)+^2 + (L - c)+^2 with U >= L is max(c - U, L - c, 0)^2: at most one
// of the two differences is positive.
__device__ __forceinline__ float max_with_zero(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return __int_as_float(__vimax3_s32(__float_as_int(a), __float_as_int(b), 0));
#else
  return fmaxf(fmaxf(a, b), 0.f);
#endif
}

// A window's LB_Kim endpoints: x[0], x[1], x[2], x[m-3], x[m-2], x[m-1],
// normalised as a pair reads them. Loaded once per window and pattern length,
// not once per pair.
struct KimEnds {
  float v[6];
};

__device__ __forceinline__ KimEnds kim_ends(const float* x, int m) {
  KimEnds e;
  const int at[6] = {0, 1, 2, m - 3, m - 2, m - 1};
#pragma unroll
  for (int k = 0; k < 6; ++k) e.v[k] = x[max(at[k], 0)];
  return e;
}

__device__ __forceinline__ KimEnds normalised(const KimEnds& raw, float mean, float inv_std) {
  KimEnds e;
#pragma unroll
  for (int k = 0; k < 6; ++k) e.v[k] = (raw.v[k] - mean) * inv_std;
  return e;
}

// LB_Kim with up to three layers at each end (UCR Suite's hierarchy): every
// warping path passes through one cell of each layer {max(row, col) == a} at
// the start and at the end, so the sum of each layer's cheapest cell is a lower
// bound of the DTW for any band. Layers may not share cells: three need m >= 6.
// kq = q[0], q[1], q[2], q[m-3], q[m-2], q[m-1]; e: the window's (kim_ends).
// Returns as soon as the partial sum exceeds `prune_sq`.
__device__ __forceinline__ float lb_kim_hierarchy(const float* kq, const KimEnds& e, int m,
                                                  float prune_sq) {
  auto dist = [](float a, float b) { return (a - b) * (a - b); };
  const float x0 = e.v[0], x1 = e.v[1], x2 = e.v[2], xl2 = e.v[3], xl1 = e.v[4], xl = e.v[5];
  float lb = dist(x0, kq[0]) + dist(xl, kq[5]);
  if (lb > prune_sq || m < 6) return lb;
  lb += fminf(fminf(dist(x1, kq[0]), dist(x0, kq[1])), dist(x1, kq[1]));
  if (lb > prune_sq) return lb;
  lb += fminf(fminf(dist(xl1, kq[5]), dist(xl, kq[4])), dist(xl1, kq[4]));
  if (lb > prune_sq) return lb;
  lb += fminf(fminf(fminf(dist(x0, kq[2]), dist(x1, kq[2])), fminf(dist(x2, kq[2]), dist(x2, kq[1]))),
              dist(x2, kq[0]));
  if (lb > prune_sq) return lb;
  lb += fminf(fminf(fminf(dist(xl, kq[3]), dist(xl1, kq[3])),
                    fminf(dist(xl2, kq[3]), dist(xl2, kq[4]))),
              dist(xl2, kq[5]));
  return lb;
}

struct WindowRef {
  int slice;
  int end;  // relative
};

__device__ __forceinline__ WindowRef locate_window(const BatchView& b, const PatternWork& pw,
                                                   long long w) {
  const int seg = find_segment(b.segments, pw.segment_begin, pw.segment_end, w);
  const Segment s = b.segments[seg];
  return {s.slice, s.first_end + static_cast<int>(w - s.window_offset)};
}

__device__ __forceinline__ void add_stat(unsigned long long* counter, unsigned long long v) {
  if (v) atomicAdd(counter, v);
}

// Sum of per-thread counters, then one atomic per block. Every thread of the
// block calls it (block-wide barriers).
__device__ __forceinline__ void flush_block_counter(unsigned long long mine,
                                                    unsigned long long* global) {
  __shared__ unsigned long long total;
  if (threadIdx.x == 0) total = 0;
  __syncthreads();
  for (int offset = 16; offset > 0; offset >>= 1)
    mine += __shfl_down_sync(0xffffffffu, mine, offset);
  if ((threadIdx.x & 31) == 0 && mine) atomicAdd(&total, mine);
  __syncthreads();
  if (threadIdx.x == 0) add_stat(global, total);
  __syncthreads();
}

template <typename T>
__device__ __forceinline__ void append(AppendBuffer<T> buffer, const T& item) {
  const unsigned long long at = atomicAdd(buffer.count, 1ull);
  if (at < buffer.capacity) buffer.items[at] = item;
}

// Appends `item` where `keep`; one atomic per warp. Every lane of the warp
// must call it (convergent).
template <typename T>
__device__ __forceinline__ void append_warp(AppendBuffer<T> buffer, const T& item, bool keep) {
  const unsigned lane = threadIdx.x & 31;
  const unsigned mask = __ballot_sync(0xffffffffu, keep);
  if (mask == 0) return;
  const int leader = __ffs(mask) - 1;
  unsigned long long base = 0;
  if (lane == static_cast<unsigned>(leader)) base = atomicAdd(buffer.count, static_cast<unsigned long long>(__popc(mask)));
  base = __shfl_sync(0xffffffffu, base, leader);
  if (keep) {
    const unsigned long long at = base + __popc(mask & ((1u << lane) - 1));
    if (at < buffer.capacity) buffer.items[at] = item;
  }
}

constexpr int kWarps = kThreads / 32;

}  // namespace
}  // namespace gw::kernels::cuda
