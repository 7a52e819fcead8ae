// Window-mode DTW on the GPU: data envelopes, the lower-bound filter, and
// banded DTW with early abandoning.
//
// Layout of the work (seed 002): one thread per window; the threads of a
// block share one pair (one query, held in shared memory) and walk
// consecutive window ends, so neighbouring lanes read neighbouring samples.
// The DTW keeps its band row and the band's data values in registers (seed
// 003, cuDTW++): rows are processed in unrolled blocks of W = 2r+1 rows, where
// the data value of column j lives in register (j + r) mod W, so the sliding
// band needs no register moves and each cell costs 4 instructions (FADD, 2x
// FMNMX, FFMA). Bands wider than kMaxRegisterBand use a general kernel.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <type_traits>

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

// Two-pass population mean/std in double, and the constant-window rule of
// kernels/dtw.h (std < 1e-8 * (|mean| + 1) normalises to zeros).
__device__ __forceinline__ void window_stats(const float* x, int m, float* mean_out,
                                             float* inv_std_out) {
  double sum = 0;
  for (int k = 0; k < m; ++k) sum += x[k];
  const double mean = sum / m;
  double ss = 0;
  for (int k = 0; k < m; ++k) {
    const double d = x[k] - mean;
    ss += d * d;
  }
  const double sd = sqrt(ss / m);
  *mean_out = static_cast<float>(mean);
  *inv_std_out = (sd == 0.0 || sd < 1e-8 * (fabs(mean) + 1.0)) ? 0.f : static_cast<float>(1.0 / sd);
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

// Block-wide sum of per-thread counters, then one atomic per block.
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

__global__ void envelope_kernel(BatchView b, int band, float* upper, float* lower) {
  const long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (e >= b.data_size) return;
  int lo = 0, hi = b.slice_count - 1;  // last slice with offset <= e
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (b.slices[mid].offset <= e) lo = mid; else hi = mid - 1;
  }
  const SliceView s = b.slices[lo];
  const long long local = e - s.offset;
  const int d = static_cast<int>(local / s.length);
  const int t = static_cast<int>(local % s.length);
  const float* row = b.data + s.offset + static_cast<long long>(d) * s.length;
  const int from = max(0, t - band), to = min(s.length - 1, t + band);
  float u = row[from], l = row[from];
  for (int k = from + 1; k <= to; ++k) {
    u = fmaxf(u, row[k]);
    l = fminf(l, row[k]);
  }
  upper[e] = u;
  lower[e] = l;
}

__global__ void __launch_bounds__(kThreads) filter_kernel(BatchView b, LibraryView lib,
                                                          int pair_begin, long long window_begin,
                                                          FilterOptions opt,
                                                          AppendBuffer<Candidate> out,
                                                          DeviceStats* stats) {
  const int pair_index = pair_begin + blockIdx.x;
  const PairView pair = lib.pairs[pair_index];
  const PatternWork pw = b.patterns[pair.pattern];
  const long long w = window_begin + blockIdx.y * static_cast<long long>(kThreads) + threadIdx.x;
  unsigned long long considered = 0, kim = 0, eq = 0, ec = 0;
  if (w < pw.windows) {
    considered = 1;
    const WindowRef ref = locate_window(b, pw, w);
    const SliceView s = b.slices[ref.slice];
    const int m = pw.length;
    const long long base = s.offset + static_cast<long long>(pair.stream_dim) * s.length + ref.end - m + 1;
    const float* x = b.data + base;
    const QueryView qv = lib.queries[pair.query];
    const float* q = lib.values + qv.offset;
    float mean, inv_std;
    if (pw.znorm) {
      window_stats(x, m, &mean, &inv_std);
    } else {
      mean = 0.f;
      inv_std = 1.f;
    }
    bool keep = true;
    if (opt.lb_kim) {
      const float d0 = q[0] - (x[0] - mean) * inv_std;
      const float d1 = q[m - 1] - (x[m - 1] - mean) * inv_std;
      if (d0 * d0 + d1 * d1 > pw.prune_sq) { keep = false; kim = 1; }
    }
    if (keep && opt.lb_keogh_eq) {
      const float* u = lib.upper + qv.offset;
      const float* l = lib.lower + qv.offset;
      float lb = 0.f;
      for (int k = 0; k < m && lb <= pw.prune_sq; ++k) {
        const float c = (x[k] - mean) * inv_std;
        const float over = fmaxf(c - u[k], 0.f), under = fmaxf(l[k] - c, 0.f);
        lb += over * over + under * under;
      }
      if (lb > pw.prune_sq) { keep = false; eq = 1; }
    }
    if (keep && opt.lb_keogh_ec && pw.envelope >= 0) {
      const long long env = static_cast<long long>(pw.envelope) * b.data_size + base;
      const float* u = b.envelope_upper + env;
      const float* l = b.envelope_lower + env;
      float lb = 0.f;
      for (int k = 0; k < m && lb <= pw.prune_sq; ++k) {
        const float uc = (u[k] - mean) * inv_std, lc = (l[k] - mean) * inv_std;
        const float over = fmaxf(q[k] - uc, 0.f), under = fmaxf(lc - q[k], 0.f);
        lb += over * over + under * under;
      }
      if (lb > pw.prune_sq) { keep = false; ec = 1; }
    }
    if (keep) append(out, Candidate{pair_index, ref.slice, ref.end, mean, inv_std});
  }
  flush_block_counter(considered, &stats->windows);
  flush_block_counter(kim, &stats->pruned_kim);
  flush_block_counter(eq, &stats->pruned_keogh_eq);
  flush_block_counter(ec, &stats->pruned_keogh_ec);
}

// Banded DTW of one window against one query with the band row in registers.
// x: raw window (m values), q: normalised query; returns distance^2, or +inf
// when abandoned (row minimum above `abandon_sq`). `rows` gets rows computed.
template <int W>
__device__ __forceinline__ float banded_dtw_registers(const float* __restrict__ x,
                                                      const float* __restrict__ q, int m,
                                                      float mean, float inv_std, float abandon_sq,
                                                      int* rows) {
  constexpr int R = (W - 1) / 2;
  float c[W];
  float prev[W + 1];
#pragma unroll
  for (int s = 0; s < W; ++s) {
    const int j = s - R;
    c[s] = (s < W - 1 && j >= 0 && j < m) ? (x[j] - mean) * inv_std : kOutside;
    prev[s] = kInf;
  }
  prev[W] = kInf;
  prev[R] = 0.f;  // D(-1, -1) = 0: the path starts at (0, 0)
  int i0 = 0;
  for (; i0 < m; i0 += W) {
#pragma unroll
    for (int u = 0; u < W; ++u) {
      const int i = i0 + u;
      if (i < m) {
        const int j_new = i + R;
        c[(u + W - 1) % W] = j_new < m ? (x[j_new] - mean) * inv_std : kOutside;
        const float qi = q[i];
        float left = kInf;
#pragma unroll
        for (int k = 0; k < W; ++k) {
          const float d = qi - c[(u + k) % W];
          const float best = fminf(fminf(prev[k], prev[k + 1]), left);
          const float v = fmaf(d, d, best);
          left = v;
          prev[k] = v;
        }
      }
    }
    float row_min = prev[0];
#pragma unroll
    for (int k = 1; k < W; ++k) row_min = fminf(row_min, prev[k]);
    if (row_min > abandon_sq) {
      *rows = min(m, i0 + W);
      return kInf;
    }
  }
  *rows = m;
  return prev[R];
}

// The same computation for any band, with the row in local memory.
__device__ float banded_dtw_general(const float* __restrict__ x, const float* __restrict__ q,
                                    int m, int band, float mean, float inv_std, float abandon_sq,
                                    int* rows) {
  constexpr int kMaxW = 2 * 1024 + 1;
  float prev[kMaxW + 1];
  const int w = 2 * band + 1;
  for (int k = 0; k <= w; ++k) prev[k] = kInf;
  prev[band] = 0.f;
  for (int i = 0; i < m; ++i) {
    const float qi = q[i];
    float left = kInf;
    for (int k = 0; k < w; ++k) {
      const int j = i - band + k;
      const float c = (j >= 0 && j < m) ? (x[j] - mean) * inv_std : kOutside;
      const float d = qi - c;
      const float v = fmaf(d, d, fminf(fminf(prev[k], prev[k + 1]), left));
      left = v;
      prev[k] = v;
    }
    if ((i & 15) == 15) {
      float row_min = prev[0];
      for (int k = 1; k < w; ++k) row_min = fminf(row_min, prev[k]);
      if (row_min > abandon_sq) {
        *rows = i + 1;
        return kInf;
      }
    }
  }
  *rows = m;
  return prev[band];
}

template <int W>
__device__ __forceinline__ float banded_dtw(const float* x, const float* q, int m, int band,
                                            float mean, float inv_std, float abandon_sq,
                                            int* rows) {
  if constexpr (W > 0) {
    return banded_dtw_registers<W>(x, q, m, mean, inv_std, abandon_sq, rows);
  } else {
    return banded_dtw_general(x, q, m, band, mean, inv_std, abandon_sq, rows);
  }
}

// W > 0: the register kernel for band (W-1)/2; W == 0: the general kernel.
template <int W>
__global__ void __launch_bounds__(kThreads) dtw_candidates_kernel(
    BatchView b, LibraryView lib, const Candidate* candidates, unsigned long long max_candidates,
    const unsigned long long* candidate_count, int band, bool early_abandon,
    AppendBuffer<RawMatch> out, DeviceStats* stats) {
  const unsigned long long n = min(*candidate_count, max_candidates);
  const unsigned long long idx = blockIdx.x * static_cast<unsigned long long>(kThreads) + threadIdx.x;
  unsigned long long full = 0, abandoned = 0, cells = 0;
  if (idx < n) {
    const Candidate cand = candidates[idx];
    const PairView pair = lib.pairs[cand.pair];
    const PatternWork pw = b.patterns[pair.pattern];
    const SliceView s = b.slices[cand.slice];
    const int m = pw.length;
    const float* x = b.data + s.offset + static_cast<long long>(pair.stream_dim) * s.length +
                     cand.end - m + 1;
    const float* q = lib.values + lib.queries[pair.query].offset;
    int rows = 0;
    const float d2 = banded_dtw<W>(x, q, m, band, cand.mean, cand.inv_std,
                                   early_abandon ? pw.prune_sq : kInf, &rows);
    cells = static_cast<unsigned long long>(rows) * (2 * band + 1);
    if (d2 == kInf && rows < m) {
      abandoned = 1;
    } else {
      full = 1;
      if (d2 <= pw.cutoff_sq) append(out, RawMatch{cand.pair, cand.slice, cand.end, d2, 0});
    }
  }
  flush_block_counter(full, &stats->dtw_full);
  flush_block_counter(abandoned, &stats->dtw_abandoned);
  flush_block_counter(cells, &stats->cells);
}

template <int W>
__global__ void __launch_bounds__(kThreads) dtw_all_kernel(BatchView b, LibraryView lib,
                                                           int pair_begin, long long window_begin,
                                                           int band, bool early_abandon,
                                                           AppendBuffer<RawMatch> out,
                                                           DeviceStats* stats) {
  const int pair_index = pair_begin + blockIdx.x;
  const PairView pair = lib.pairs[pair_index];
  const PatternWork pw = b.patterns[pair.pattern];
  const int m = pw.length;
  // The block's query in shared memory: every thread reads q[i] at row i.
  extern __shared__ float q_shared[];
  const float* q_global = lib.values + lib.queries[pair.query].offset;
  for (int k = threadIdx.x; k < m; k += kThreads) q_shared[k] = q_global[k];
  __syncthreads();
  const long long w = window_begin + blockIdx.y * static_cast<long long>(kThreads) + threadIdx.x;
  unsigned long long considered = 0, full = 0, abandoned = 0, cells = 0;
  if (w < pw.windows) {
    considered = 1;
    const WindowRef ref = locate_window(b, pw, w);
    const SliceView s = b.slices[ref.slice];
    const float* x = b.data + s.offset + static_cast<long long>(pair.stream_dim) * s.length +
                     ref.end - m + 1;
    float mean = 0.f, inv_std = 1.f;
    if (pw.znorm) window_stats(x, m, &mean, &inv_std);
    int rows = 0;
    const float d2 = banded_dtw<W>(x, q_shared, m, band, mean, inv_std,
                                   early_abandon ? pw.prune_sq : kInf, &rows);
    cells = static_cast<unsigned long long>(rows) * (2 * band + 1);
    if (d2 == kInf && rows < m) {
      abandoned = 1;
    } else {
      full = 1;
      if (d2 <= pw.cutoff_sq) append(out, RawMatch{pair_index, ref.slice, ref.end, d2, 0});
    }
  }
  flush_block_counter(considered, &stats->windows);
  flush_block_counter(full, &stats->dtw_full);
  flush_block_counter(abandoned, &stats->dtw_abandoned);
  flush_block_counter(cells, &stats->cells);
}

// Calls f(std::integral_constant<int, W>) with W = 2*band+1 for register
// bands, or W = 0 for the general kernel.
template <int Band = 0, typename F>
void dispatch_band(int band, F&& f) {
  if constexpr (Band > kMaxRegisterBand) {
    f(std::integral_constant<int, 0>{});
  } else {
    if (band == Band)
      f(std::integral_constant<int, 2 * Band + 1>{});
    else
      dispatch_band<Band + 1>(band, f);
  }
}

// grid.y is limited to 65535 blocks: larger window ranges take several launches.
constexpr long long kWindowsPerLaunch = 65535LL * kThreads;

template <typename Launch>
void for_window_ranges(long long windows, Launch&& launch) {
  for (long long begin = 0; begin < windows; begin += kWindowsPerLaunch) {
    const long long n = std::min(kWindowsPerLaunch, windows - begin);
    launch(begin, static_cast<unsigned>((n + kThreads - 1) / kThreads));
  }
}

}  // namespace

void launch_envelope(const BatchView& batch, int band, float* upper, float* lower,
                     cudaStream_t stream) {
  if (batch.data_size == 0) return;
  const unsigned blocks = static_cast<unsigned>((batch.data_size + 255) / 256);
  envelope_kernel<<<blocks, 256, 0, stream>>>(batch, band, upper, lower);
}

void launch_window_filter(const BatchView& batch, const LibraryView& library, int pair_begin,
                          int pair_end, long long max_windows_per_pair, FilterOptions options,
                          AppendBuffer<Candidate> candidates, DeviceStats* stats,
                          cudaStream_t stream) {
  if (pair_end <= pair_begin || max_windows_per_pair <= 0) return;
  for_window_ranges(max_windows_per_pair, [&](long long begin, unsigned chunks) {
    const dim3 grid(static_cast<unsigned>(pair_end - pair_begin), chunks);
    filter_kernel<<<grid, kThreads, 0, stream>>>(batch, library, pair_begin, begin, options,
                                                 candidates, stats);
  });
}

void launch_window_dtw_candidates(const BatchView& batch, const LibraryView& library,
                                  const Candidate* candidates, unsigned long long max_candidates,
                                  const unsigned long long* candidate_count, int band,
                                  bool early_abandon, AppendBuffer<RawMatch> matches,
                                  DeviceStats* stats, cudaStream_t stream) {
  if (max_candidates == 0) return;
  const unsigned blocks = static_cast<unsigned>((max_candidates + kThreads - 1) / kThreads);
  dispatch_band(band, [&](auto w) {
    dtw_candidates_kernel<decltype(w)::value><<<blocks, kThreads, 0, stream>>>(
        batch, library, candidates, max_candidates, candidate_count, band, early_abandon, matches,
        stats);
  });
}

void launch_window_dtw_all(const BatchView& batch, const LibraryView& library, int pair_begin,
                           int pair_end, long long max_windows_per_pair, int band, int max_length,
                           bool early_abandon, AppendBuffer<RawMatch> matches, DeviceStats* stats,
                           cudaStream_t stream) {
  if (pair_end <= pair_begin || max_windows_per_pair <= 0) return;
  const size_t shared = static_cast<size_t>(max_length) * sizeof(float);
  for_window_ranges(max_windows_per_pair, [&](long long begin, unsigned chunks) {
    const dim3 grid(static_cast<unsigned>(pair_end - pair_begin), chunks);
    dispatch_band(band, [&](auto w) {
      dtw_all_kernel<decltype(w)::value><<<grid, kThreads, shared, stream>>>(
          batch, library, pair_begin, begin, band, early_abandon, matches, stats);
    });
  });
}

}  // namespace gw::kernels::cuda
