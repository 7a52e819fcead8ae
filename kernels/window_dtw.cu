// Window-mode DTW on the GPU: the fused lower-bound filter and banded DTW
// with early abandoning.
//
// Filter (seed 002: load once, test many): one block per row (slice, stream
// dim) and tile of window ends holds the row's samples, the window
// normalisations and the data envelope in shared memory and tests every pair
// that reads the row (LB_Kim, then LB_Keogh EQ/EC on the survivors).
// DTW: one thread per surviving window. The band row and the band's data
// values stay in registers (seed 003, cuDTW++): rows are processed in
// unrolled blocks of W = 2r+1 rows, where the data value of column j lives in
// register (j + r) mod W, so the sliding band needs no register moves and each
// cell costs 3-4 instructions (FADD, DPX three-way min, FFMA). Bands wider
// than kMaxRegisterBand use a general kernel.
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

// LB_Kim with up to three layers at each end (UCR Suite's hierarchy): every
// warping path passes through one cell of each layer {max(row, col) == a} at
// the start and at the end, so the sum of each layer's cheapest cell is a lower
// bound of the DTW for any band. Layers may not share cells: three need m >= 6.
// kq = q[0], q[1], q[2], q[m-3], q[m-2], q[m-1]. Returns as soon as the
// partial sum exceeds `prune_sq`.
__device__ __forceinline__ float lb_kim_hierarchy(const float* kq, const float* x, int m, float mean,
                                                  float inv_std, float prune_sq) {
  auto c = [&](int k) { return (x[k] - mean) * inv_std; };
  auto dist = [](float a, float b) { return (a - b) * (a - b); };
  const float x0 = c(0), xl = c(m - 1);
  float lb = dist(x0, kq[0]) + dist(xl, kq[5]);
  if (lb > prune_sq || m < 6) return lb;
  const float x1 = c(1), x2 = c(2), xl1 = c(m - 2), xl2 = c(m - 3);
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

__global__ void prefix_kernel(BatchView b, double* sum, double* sumsq) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= b.row_count) return;
  int lo = 0, hi = b.slice_count - 1;  // last slice with row_begin <= row
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (b.slices[mid].row_begin <= row) lo = mid; else hi = mid - 1;
  }
  const SliceView s = b.slices[lo];
  const long long base = s.offset + static_cast<long long>(row - s.row_begin) * s.length;
  double a = 0, q = 0;
  for (int t = 0; t < s.length; ++t) {
    const double v = b.data[base + t];
    a += v;
    q += v * v;
    sum[base + t] = a;
    sumsq[base + t] = q;
  }
}

// Index of the slice holding data element e: the last with offset <= e.
__device__ __forceinline__ int slice_of_element(const BatchView& b, long long e) {
  int lo = 0, hi = b.slice_count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (b.slices[mid].offset <= e) lo = mid; else hi = mid - 1;
  }
  return lo;
}

__global__ void assemble_kernel(BatchView b, float* data, const float* staging,
                                const SliceUpload* uploads) {
  const long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (e >= b.data_size) return;
  const int slice = slice_of_element(b, e);
  const SliceView s = b.slices[slice];
  const SliceUpload up = uploads[slice];
  const long long local = e - s.offset;
  const int d = static_cast<int>(local / s.length);
  const int t = static_cast<int>(local % s.length);
  float* ring_slot = up.ring == nullptr
                         ? nullptr
                         : up.ring + d * up.ring_capacity + ((s.first_index + t) & (up.ring_capacity - 1));
  float v;
  if (t < up.from) {
    v = *ring_slot;
  } else {
    v = staging[up.staging_offset + static_cast<long long>(d) * (s.length - up.from) + t - up.from];
    if (ring_slot) *ring_slot = v;
  }
  data[e] = v;
}

// Fused filter geometry: a block owns one row (slice, stream dim) and a tile
// of kFilterTile consecutive window ends; it tests (pair, end) items in
// rounds of kFilterChunk.
constexpr int kFilterTile = 128;
constexpr int kFilterItemsPerThread = 16;
constexpr int kFilterChunk = kThreads * kFilterItemsPerThread;

__device__ __forceinline__ int filter_span(const RowPairsView& rp) {
  return kFilterTile + rp.max_length - 1 + 2 * rp.band;
}

// Population mean/std of x[0, m) by one warp (two passes in double, the
// CPU's constant-window rule); lane 0 writes the result.
__device__ __forceinline__ void window_stats_warp(const float* x, int m, float* mean_out,
                                                  float* inv_std_out) {
  const int lane = threadIdx.x & 31;
  double sum = 0;
  for (int k = lane; k < m; k += 32) sum += x[k];
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const double mean = sum / m;
  double ss = 0;
  for (int k = lane; k < m; k += 32) {
    const double d = x[k] - mean;
    ss += d * d;
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (lane == 0) set_stats(mean, sqrt(ss / m), mean_out, inv_std_out);
}

// Sum of term(position record) over a query's positions in UCR order (see
// LibraryView::ordered), testing the partial sum against prune_sq every
// kStep positions so a step's loads issue together; returns once it exceeds.
template <typename Term>
__device__ __forceinline__ float ucr_order_bound(const float4* ordered, int m, float prune_sq,
                                                 Term term) {
  constexpr int kStep = 4;
  float lb = 0.f;
  for (int k0 = 0; k0 < m && lb <= prune_sq; k0 += kStep) {
#pragma unroll
    for (int k = k0; k < k0 + kStep; ++k)
      if (k < m) lb += term(ordered[k]);
  }
  return lb;
}

// Window mode filter, fused (seed 002's "load once, test many"): the W1 load
// has ~100 pairs per stream dim but only ~10 new window ends per tick, so the
// block loads its row's samples into shared memory once, computes each window
// end's normalisation once per pattern length (not once per pair) and the
// data envelope once per row, then runs LB_Kim on every (pair, end) item and
// LB_Keogh EQ/EC on the Kim survivors, all reading the window from shared
// memory. Survivors go to `out` for the DTW kernel.
__global__ void __launch_bounds__(kThreads) fused_filter_kernel(BatchView b, LibraryView lib,
                                                                RowPairsView rp, int tile_offset,
                                                                FilterOptions opt,
                                                                AppendBuffer<Candidate> out,
                                                                DeviceStats* stats) {
  extern __shared__ __align__(16) unsigned char filter_shared[];
  // Kim survivors of a round: (pair - p0) << 8 | (end - tile_lo).
  int* list = reinterpret_cast<int*>(filter_shared);
  int* list_count = list + kFilterChunk;
  float* x = reinterpret_cast<float*>(list_count + 4);
  const int span = filter_span(rp);
  float* env_upper = x + span;
  float* env_lower = env_upper + span;
  float* mean_of_end = env_lower + span;
  float* inv_std_of_end = mean_of_end + kFilterTile;

  const int slice = blockIdx.x;
  const int dim = blockIdx.y;
  const SliceView s = b.slices[slice];
  if (dim >= s.dims || s.profile_slot < 0 || s.profile_slot >= rp.slots) return;
  const int key = s.profile_slot * rp.dim_stride + dim;
  const int pair_begin = rp.offsets[key], pair_end = rp.offsets[key + 1];
  const int base = max(s.first_new, rp.min_length - 1);
  const int tile_lo = base + (tile_offset + blockIdx.z) * kFilterTile;
  const int tile_hi = min(s.length, tile_lo + kFilterTile);  // exclusive
  if (pair_begin == pair_end || tile_lo >= tile_hi) return;   // uniform over the block

  const int lo = max(0, tile_lo - rp.max_length + 1 - rp.band);
  const int hi = min(s.length - 1, tile_hi - 1 + rp.band);
  const float* row_data = b.data + s.offset + static_cast<long long>(dim) * s.length;
  for (int k = threadIdx.x; k <= hi - lo; k += kThreads) x[k] = row_data[lo + k];
  __syncthreads();
  // Data envelope over +-band clipped to the slice (the CPU's EC envelope);
  // right for every position a window of this tile covers.
  if (opt.lb_keogh_ec) {
    for (int k = threadIdx.x; k <= hi - lo; k += kThreads) {
      const int from = max(0, k - rp.band), to = min(hi - lo, k + rp.band);
      float u = x[from], l = x[from];
      for (int o = from + 1; o <= to; ++o) {
        u = fmaxf(u, x[o]);
        l = fminf(l, x[o]);
      }
      env_upper[k] = u;
      env_lower[k] = l;
    }
  }

  unsigned long long considered = 0, kim = 0, eq = 0, ec = 0;
  const int ends = tile_hi - tile_lo;
  const int warp = threadIdx.x >> 5;
  for (int p0 = pair_begin; p0 < pair_end;) {
    // The row's pairs are sorted by length: [p0, p1) share m.
    const int m = rp.pairs[p0].length;
    const int p1 = rp.pairs[p0].run_end;
    __syncthreads();  // the previous length's readers are done with the statistics
    for (int e = tile_lo + warp; e < tile_hi; e += kThreads / 32)
      if (e >= m - 1)
        window_stats_warp(x + (e - m + 1 - lo), m, &mean_of_end[e - tile_lo],
                          &inv_std_of_end[e - tile_lo]);
    const int items = (p1 - p0) * ends;
    for (int chunk = 0; chunk < items; chunk += kFilterChunk) {
      if (threadIdx.x == 0) *list_count = 0;
      __syncthreads();
      // LB_Kim on every item; survivors to the shared list.
      for (int u = 0; u < kFilterItemsPerThread; ++u) {
        const int item = chunk + u * kThreads + threadIdx.x;
        bool keep = false;
        int entry = 0;
        if (item < items) {
          const int k = item / ends;
          const int e = tile_lo + item % ends;
          if (e >= m - 1) {
            considered += 1;
            keep = true;
            entry = (k << 8) | (e - tile_lo);
            if (opt.lb_kim) {
              const RowPair& rpair = rp.pairs[p0 + k];
              const float mean = rpair.znorm ? mean_of_end[e - tile_lo] : 0.f;
              const float inv_std = rpair.znorm ? inv_std_of_end[e - tile_lo] : 1.f;
              if (lb_kim_hierarchy(rpair.kim_query, x + (e - m + 1 - lo), m, mean, inv_std,
                                   rpair.prune_sq) > rpair.prune_sq) {
                keep = false;
                kim += 1;
              }
            }
          }
        }
        const unsigned mask = __ballot_sync(0xffffffffu, keep);
        if (mask) {
          const int lane = threadIdx.x & 31;
          const int leader = __ffs(mask) - 1;
          int at = 0;
          if (lane == leader) at = atomicAdd(list_count, __popc(mask));
          at = __shfl_sync(0xffffffffu, at, leader);
          if (keep) list[at + __popc(mask & ((1u << lane) - 1))] = entry;
        }
      }
      __syncthreads();
      // LB_Keogh EQ then EC on the Kim survivors.
      const int n = *list_count;
      for (int r0 = 0; r0 < n; r0 += kThreads) {
        const int idx = r0 + threadIdx.x;
        bool keep = false;
        Candidate cand{};
        if (idx < n) {
          const int entry = list[idx];
          const RowPair& rpair = rp.pairs[p0 + (entry >> 8)];
          const int e = tile_lo + (entry & 255);
          const float prune_sq = rpair.prune_sq;
          const float mean = rpair.znorm ? mean_of_end[e - tile_lo] : 0.f;
          const float inv_std = rpair.znorm ? inv_std_of_end[e - tile_lo] : 1.f;
          const int w0 = e - m + 1 - lo;
          keep = true;
          const float4* ordered = lib.ordered + rpair.query_offset;
          if (opt.lb_keogh_eq &&
              ucr_order_bound(ordered, m, prune_sq, [&](const float4& qe) {
                const float c = (x[w0 + __float_as_int(qe.w)] - mean) * inv_std;
                const float over = fmaxf(c - qe.x, 0.f), under = fmaxf(qe.y - c, 0.f);
                return over * over + under * under;
              }) > prune_sq) {
            keep = false;
            eq += 1;
          }
          if (keep && opt.lb_keogh_ec &&
              ucr_order_bound(ordered, m, prune_sq, [&](const float4& qe) {
                const int o = __float_as_int(qe.w);
                const float uc = (env_upper[w0 + o] - mean) * inv_std;
                const float lc = (env_lower[w0 + o] - mean) * inv_std;
                const float over = fmaxf(qe.z - uc, 0.f), under = fmaxf(lc - qe.z, 0.f);
                return over * over + under * under;
              }) > prune_sq) {
            keep = false;
            ec += 1;
          }
          cand = Candidate{rpair.pair, slice, e, mean, inv_std};
        }
        append_warp(out, cand, keep);
      }
      __syncthreads();  // the list is read before the next round resets it
    }
    p0 = p1;
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
  // Each row's query value and new data value are loaded one row ahead, so
  // their latency hides behind a row of cells.
  float q_next = q[0];
  float x_next = R < m ? x[R] : 0.f;
  int i0 = 0;
  for (; i0 < m; i0 += W) {
#pragma unroll
    for (int u = 0; u < W; ++u) {
      const int i = i0 + u;
      if (i < m) {
        const int j_new = i + R;
        const float qi = q_next;
        const float x_new = x_next;
        if (i + 1 < m) q_next = q[i + 1];
        if (j_new + 1 < m) x_next = x[j_new + 1];
        c[(u + W - 1) % W] = j_new < m ? (x_new - mean) * inv_std : kOutside;
        float left = kInf;
#pragma unroll
        for (int k = 0; k < W; ++k) {
          const float d = qi - c[(u + k) % W];
          const float best = min3_nonnegative(prev[k], prev[k + 1], left);
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
  constexpr int kMaxW = 2 * kMaxGeneralBand + 1;
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
      const float v = fmaf(d, d, min3_nonnegative(prev[k], prev[k + 1], left));
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
    BatchView b, LibraryView lib, const Candidate* candidates, unsigned long long n, int band,
    bool early_abandon, AppendBuffer<RawMatch> out, DeviceStats* stats) {
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
  const WindowRef ref = w < pw.windows ? locate_window(b, pw, w) : WindowRef{0, 0};
  if (w < pw.windows && pair.stream_dim < b.slices[ref.slice].dims) {
    considered = 1;
    const SliceView s = b.slices[ref.slice];
    const long long row = s.offset + static_cast<long long>(pair.stream_dim) * s.length;
    const float* x = b.data + row + ref.end - m + 1;
    float mean = 0.f, inv_std = 1.f;
    if (pw.znorm) window_stats(b, row, ref.end - m + 1, m, &mean, &inv_std);
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

void launch_assemble(const BatchView& batch, float* data, const float* staging,
                     const SliceUpload* uploads, cudaStream_t stream) {
  if (batch.data_size == 0) return;
  const unsigned blocks = static_cast<unsigned>((batch.data_size + 255) / 256);
  assemble_kernel<<<blocks, 256, 0, stream>>>(batch, data, staging, uploads);
}

void launch_prefix_sums(const BatchView& batch, double* sum, double* sumsq, cudaStream_t stream) {
  if (batch.row_count == 0) return;
  prefix_kernel<<<(batch.row_count + 127) / 128, 128, 0, stream>>>(batch, sum, sumsq);
}

std::size_t window_filter_shared_bytes(int max_length, int band) {
  const std::size_t span = kFilterTile + max_length - 1 + 2 * static_cast<std::size_t>(band);
  return kFilterChunk * sizeof(int) + 4 * sizeof(int) + (3 * span + 2 * kFilterTile) * sizeof(float);
}

int window_filter_tiles(int window_ends) { return (window_ends + kFilterTile - 1) / kFilterTile; }

void launch_window_filter(const BatchView& batch, const LibraryView& library,
                          const RowPairsView& rows, int tiles, FilterOptions options,
                          AppendBuffer<Candidate> candidates, DeviceStats* stats,
                          cudaStream_t stream) {
  if (batch.slice_count == 0 || rows.dim_stride == 0 || tiles <= 0) return;
  const std::size_t shared = window_filter_shared_bytes(rows.max_length, rows.band);
  if (shared > 48 * 1024)
    cudaFuncSetAttribute(fused_filter_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(shared));
  for (int offset = 0; offset < tiles; offset += 65535) {
    const dim3 grid(static_cast<unsigned>(batch.slice_count), static_cast<unsigned>(rows.dim_stride),
                    static_cast<unsigned>(std::min(65535, tiles - offset)));
    fused_filter_kernel<<<grid, kThreads, shared, stream>>>(batch, library, rows, offset, options,
                                                            candidates, stats);
  }
}

void launch_window_dtw_candidates(const BatchView& batch, const LibraryView& library,
                                  const Candidate* candidates, unsigned long long count, int band,
                                  bool early_abandon, AppendBuffer<RawMatch> matches,
                                  DeviceStats* stats, cudaStream_t stream) {
  if (count == 0) return;
  const unsigned blocks = static_cast<unsigned>((count + kThreads - 1) / kThreads);
  dispatch_band(band, [&](auto w) {
    dtw_candidates_kernel<decltype(w)::value><<<blocks, kThreads, 0, stream>>>(
        batch, library, candidates, count, band, early_abandon, matches, stats);
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
