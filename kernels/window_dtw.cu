// Window-mode DTW on the GPU: banded DTW with early abandoning of the
// filter's survivors (window_filter.cu). The band row and the band's data
// values stay in registers (Bednárek et al. 2016, cuDTW++): rows are processed
// in unrolled blocks of W = 2r+1 rows, where the data value of column j lives
// in register (j + r) mod W, so the sliding band needs no register moves and
// each cell costs 3-4 instructions (FADD, DPX three-way min, FFMA). Bands wider
// than kMaxRegisterBand use a general kernel.
#include "kernels/window_common.cuh"

namespace gw::kernels::cuda {
namespace {

// UCR Suite's cumulative lower bound for early abandoning: once the band
// rows up to i are done, every column j > i + r is still to be matched by
// some later row k (|k - j| <= r) at a cost of at least its LB_Keogh EQ term,
// in cells disjoint from those rows, so DTW >= (row minimum) + (those terms).
// Their sum is bounded by the candidate's eq_bound less the terms of the
// columns reached. Both sums carry float error below m * 2^-24 relative,
// which the start value takes off (3e-7 * m > 4 m 2^-24), so the bound
// never exceeds the exact one.
struct TailBound {
  float remaining = 0.f;
  __device__ __forceinline__ void start(float eq_bound, int m) {
    remaining = eq_bound * (1.f - 3e-7f * m);
  }
  // Column reached: its normalised value and the query envelope there.
  __device__ __forceinline__ void reach(float c, float upper, float lower) {
    const float d = max_with_zero(c - upper, lower - c);
    remaining = fmaf(-d, d, remaining);
  }
  __device__ __forceinline__ float value() const { return fmaxf(remaining, 0.f); }
};

// One alignment's band in registers (Bednárek et al. 2016, cuDTW++): row i of
// the band holds cells (i, i - R .. i + R) in prev[0 .. W-1]; the normalised
// data value of column j sits in c[(j + R) mod W], so the band slides without
// register moves. Also what its rows read next: the raw window x, the
// normalised query q and, with Tail, the query envelope for the tail bound.
// Each row's values are loaded one row ahead, so their latency hides behind a
// row of cells.
template <int W, bool Tail>
struct RegisterBand {
  static_assert(W % 2 == 1, "W = 2r + 1");
  static constexpr int R = (W - 1) / 2;
  float c[W];
  float prev[W + 1];
  const float* x = nullptr;
  const float* q = nullptr;
  const float* upper = nullptr;
  const float* lower = nullptr;
  float mean = 0.f, inv_std = 0.f;
  float q_next = 0.f, x_next = 0.f, u_next = 0.f, l_next = 0.f;
  TailBound tail;

  // Before row 0: columns 0 .. R-1 normalised, the rest of c outside, and
  // D(-1, -1) = 0 (the path starts at (0, 0)). eq_bound: Candidate::eq_bound
  // (0 for no tail bound); Tail only.
  __device__ __forceinline__ void start(int m, float eq_bound = 0.f) {
#pragma unroll
    for (int s = 0; s < W; ++s) {
      c[s] = kOutside;
      prev[s] = kInf;
    }
#pragma unroll
    for (int j = 0; j < R; ++j)
      if (j < m) c[j + R] = (x[j] - mean) * inv_std;
    prev[W] = kInf;
    prev[R] = 0.f;
    if constexpr (Tail) {
      tail.start(eq_bound, m);
#pragma unroll
      for (int j = 0; j < R; ++j)
        if (j < m) tail.reach(c[j + R], upper[j], lower[j]);
      u_next = R < m ? upper[R] : 0.f;
      l_next = R < m ? lower[R] : 0.f;
    }
    q_next = q[0];
    x_next = R < m ? x[R] : 0.f;
  }

  // Rows i0 .. i0 + W - 1 (those below m); returns the row minimum plus the
  // tail bound (Tail) after them.
  __device__ __forceinline__ float block(int i0, int m) {
#pragma unroll
    for (int u = 0; u < W; ++u) {
      const int i = i0 + u;
      if (i < m) {
        const int j_new = i + R;
        const float qi = q_next;
        const float x_new = x_next, u_new = u_next, l_new = l_next;
        if (i + 1 < m) q_next = q[i + 1];
        if (j_new + 1 < m) {
          x_next = x[j_new + 1];
          if constexpr (Tail) {
            u_next = upper[j_new + 1];
            l_next = lower[j_new + 1];
          }
        }
        float c_new = kOutside;
        if (j_new < m) {
          c_new = (x_new - mean) * inv_std;
          if constexpr (Tail) tail.reach(c_new, u_new, l_new);
        }
        row(u, qi, c_new);
      }
    }
    // prev holds values >= 0 (or +inf): a DPX three-way min per two cells.
    float row_min = prev[0];
#pragma unroll
    for (int k = 1; k + 1 < W; k += 2) row_min = min3_nonnegative(row_min, prev[k], prev[k + 1]);
    if constexpr (Tail) return row_min + tail.value();
    return row_min;
  }

  __device__ __forceinline__ float distance_sq() const { return prev[R]; }

 private:
  // Row i0 + u of a block (u compile-time after unrolling): takes column
  // i0 + u + R's value c_new and the query value qi.
  __device__ __forceinline__ void row(int u, float qi, float c_new) {
    c[(u + W - 1) % W] = c_new;
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
};

// Banded DTW of one window against one query with the band row in registers.
// x: raw window (m values), q: normalised query; returns distance^2, or +inf
// when abandoned (row minimum above `abandon_sq`). `rows` gets rows computed.
template <int W>
__device__ __forceinline__ float banded_dtw_registers(const float* __restrict__ x,
                                                      const float* __restrict__ q, int m,
                                                      float mean, float inv_std, float abandon_sq,
                                                      int* rows) {
  RegisterBand<W, false> band;
  band.x = x;
  band.q = q;
  band.mean = mean;
  band.inv_std = inv_std;
  band.start(m);
  for (int i0 = 0; i0 < m; i0 += W) {
    if (band.block(i0, m) > abandon_sq) {
      *rows = min(m, i0 + W);
      return kInf;
    }
  }
  *rows = m;
  return band.distance_sq();
}

// The same computation for any band, with the row in local memory. With
// `upper` (the query envelope) it abandons on the tail bound from eq_bound,
// without, on the row minimum alone.
__device__ float banded_dtw_general(const float* __restrict__ x, const float* __restrict__ q,
                                    int m, int band, float mean, float inv_std, float abandon_sq,
                                    int* rows, const float* __restrict__ upper = nullptr,
                                    const float* __restrict__ lower = nullptr,
                                    float eq_bound = 0.f) {
  constexpr int kMaxW = 2 * kMaxGeneralBand + 1;
  float prev[kMaxW + 1];
  const int w = 2 * band + 1;
  for (int k = 0; k <= w; ++k) prev[k] = kInf;
  prev[band] = 0.f;
  TailBound tail;
  tail.start(upper != nullptr ? eq_bound : 0.f, m);
  if (upper != nullptr)
    for (int j = 0; j < min(band, m); ++j) tail.reach((x[j] - mean) * inv_std, upper[j], lower[j]);
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
    if (upper != nullptr && i + band < m)
      tail.reach((x[i + band] - mean) * inv_std, upper[i + band], lower[i + band]);
    if ((i & 15) == 15) {
      float row_min = prev[0];
      for (int k = 1; k < w; ++k) row_min = fminf(row_min, prev[k]);
      if (row_min + tail.value() > abandon_sq) {
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

// A thread's DTW outcomes: abandoned (+inf before the last row) or run to
// the end, and then appended when within the pattern's cutoff; flushed into
// the batch's stats once per block.
struct DtwTally {
  unsigned long long full = 0, abandoned = 0, cells = 0;

  __device__ void add(float d2, int rows, int m, int width, float cutoff_sq,
                      const RawMatch& match, AppendBuffer<RawMatch> out) {
    cells += static_cast<unsigned long long>(rows) * width;
    if (d2 == kInf && rows < m) {
      abandoned += 1;
    } else {
      full += 1;
      if (d2 <= cutoff_sq) append(out, match);
    }
  }
  // Every thread of the block calls it (block-wide reduction).
  __device__ void flush(DeviceStats* stats) const {
    flush_block_counter(full, &stats->dtw_full);
    flush_block_counter(abandoned, &stats->dtw_abandoned);
    flush_block_counter(cells, &stats->cells);
  }
};

// Bands above the register kernels': one candidate per thread.
__global__ void __launch_bounds__(kThreads) dtw_candidates_general_kernel(
    BatchView b, LibraryView lib, const Candidate* candidates, unsigned long long n, int band,
    bool early_abandon, AppendBuffer<RawMatch> out, DeviceStats* stats) {
  const unsigned long long idx = blockIdx.x * static_cast<unsigned long long>(kThreads) + threadIdx.x;
  DtwTally tally;
  if (idx < n) {
    const Candidate cand = candidates[idx];
    const int m = cand.length;
    int rows = 0;
    const float d2 = banded_dtw_general(
        b.data + cand.x_offset, lib.values + cand.query_offset, m, band, cand.mean, cand.inv_std,
        early_abandon ? cand.prune_sq : kInf, &rows, lib.upper + cand.query_offset,
        lib.lower + cand.query_offset, cand.eq_bound);
    tally.add(d2, rows, m, 2 * band + 1, cand.cutoff_sq,
              RawMatch{cand.pair, cand.slice, cand.end, d2, 0}, out);
  }
  tally.flush(stats);
}

// Register bands, W = 2r+1. Each warp owns the candidates [32 * per_lane *
// warp, + 32 * per_lane); after every unrolled block of W rows a lane tests
// its alignment against the tail bound and, once it has ended (abandoned, or
// at the last row), takes the warp's next candidate. With one alignment per
// thread for its whole length a warp would run as long as its slowest lane,
// and few candidates run to the end, so nearly every warp would do all m rows.
// Checking more often than once per block (lanes starting mid-block with
// their columns laid out for that phase) abandoned earlier but was slower:
// each refill waits on its window's first samples (docs/gpu.md).
template <int W>
__global__ void __launch_bounds__(kThreads) dtw_candidates_kernel(
    BatchView b, LibraryView lib, const Candidate* candidates, unsigned long long n, int per_lane,
    bool early_abandon, AppendBuffer<RawMatch> out, DeviceStats* stats) {
  const unsigned lane = threadIdx.x & 31;
  const unsigned long long warp =
      (blockIdx.x * static_cast<unsigned long long>(kThreads) + threadIdx.x) >> 5;
  unsigned long long next = warp * 32ull * per_lane;  // warp-uniform: the next candidate to take
  const unsigned long long last = min(n, next + 32ull * per_lane);
  DtwTally tally;
  bool active = false;
  Candidate cand{};
  int i0 = 0;  // the alignment's first row of the next block
  float abandon_sq = 0.f;
  RegisterBand<W, true> band;
  for (;;) {
    const unsigned idle = __ballot_sync(0xffffffffu, !active);
    if (idle != 0 && next < last) {  // uniform
      const unsigned long long idx = next + __popc(idle & ((1u << lane) - 1));
      next += __popc(idle);
      if (!active && idx < last) {
        cand = candidates[idx];
        abandon_sq = early_abandon ? cand.prune_sq : kInf;
        band.x = b.data + cand.x_offset;
        band.q = lib.values + cand.query_offset;
        band.upper = lib.upper + cand.query_offset;
        band.lower = lib.lower + cand.query_offset;
        band.mean = cand.mean;
        band.inv_std = cand.inv_std;
        band.start(cand.length, cand.eq_bound);
        i0 = 0;
        active = true;
      }
    }
    if (!__any_sync(0xffffffffu, active)) break;
    bool matched = false;
    float d2 = kInf;
    if (active) {
      const int m = cand.length;
      const float bound = band.block(i0, m);
      i0 += W;
      bool ended = false;
      if (bound > abandon_sq) {
        ended = true;
      } else if (i0 >= m) {
        ended = true;
        d2 = band.distance_sq();
      }
      if (ended) {
        const int rows = min(m, i0);
        tally.cells += static_cast<unsigned long long>(rows) * W;
        if (d2 == kInf && rows < m) {
          tally.abandoned += 1;
        } else {
          tally.full += 1;
          matched = d2 <= cand.cutoff_sq;
        }
        active = false;
      }
    }
    append_warp(out, RawMatch{cand.pair, cand.slice, cand.end, d2, 0}, matched);
  }
  tally.flush(stats);
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
  unsigned long long considered = 0;
  DtwTally tally;
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
    tally.add(d2, rows, m, 2 * band + 1, pw.cutoff_sq,
              RawMatch{pair_index, ref.slice, ref.end, d2, 0}, out);
  }
  flush_block_counter(considered, &stats->windows);
  tally.flush(stats);
}

// Below this many candidates a band wider than the register kernels' uses
// one warp per alignment (measured crossover, docs/gpu.md).
constexpr unsigned long long kWarpDtwMaxCandidates = 4096;
// Candidates a warp of the register DTW kernel owns, per lane, at most: more
// shortens the time lanes wait at the end of the warp's share (docs/gpu.md),
// but a small batch needs the warps to fill the GPU, so the share shrinks
// until there are kDtwWarpsPerSm warps per SM (a few times the warps resident
// at the kernel's register count), down to one candidate per lane.
constexpr int kDtwCandidatesPerLane = 32;
constexpr int kDtwWarpsPerSm = 64;

// One alignment per warp (cuDTW++'s other shape): the warp computes each band
// row together, lane l holding cells l, l+32, ... The row's left-to-right
// dependency D[k] = min(t[k], c[k] + D[k-1]), with t[k] = c[k] + min(diag, up),
// is a min-plus scan: with P the inclusive prefix sum of c over the row's valid
// cells, D[k] = P[k] + min over k' <= k of (t[k'] - P[k']), so two warp scans
// (in double: P is a difference of sums) replace the sequential walk. The row
// lives in shared memory (one per warp). Cells outside the series are +inf
// (the thread kernels' kOutside: never on a path that reaches the end).
__global__ void __launch_bounds__(kThreads) dtw_candidates_warp_kernel(
    BatchView b, LibraryView lib, const Candidate* candidates, unsigned long long n, int band,
    bool early_abandon, AppendBuffer<RawMatch> out, DeviceStats* stats) {
  extern __shared__ float warp_rows[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int w = 2 * band + 1;
  float* prev = warp_rows + warp * (w + 1);
  const unsigned long long idx = blockIdx.x * static_cast<unsigned long long>(kWarps) + warp;
  DtwTally tally;
  if (idx < n) {  // uniform over the warp
    const Candidate cand = candidates[idx];
    const float* x = b.data + cand.x_offset;
    const float* q = lib.values + cand.query_offset;
    const int m = cand.length;
    const float abandon_sq = early_abandon ? cand.prune_sq : kInf;
    for (int k = lane; k <= w; k += 32) prev[k] = k == band ? 0.f : kInf;
    __syncwarp();
    int rows = m;
    bool gave_up = false;
    for (int i = 0; i < m; ++i) {
      const float qi = q[i];
      const int k_lo = max(0, band - i), k_hi = min(w - 1, m - 1 - i + band);
      double p_carry = 0.0, u_carry = INFINITY;
      float row_min = kInf;
      for (int c0 = 0; c0 < w; c0 += 32) {
        const int k = c0 + lane;
        const bool valid = k >= k_lo && k <= k_hi;
        double cost = 0.0, t = INFINITY;
        if (valid) {
          const float d = qi - (x[i - band + k] - cand.mean) * cand.inv_std;
          cost = static_cast<double>(d) * d;
          t = cost + fminf(prev[k], prev[k + 1]);
        }
        double sum = cost;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
          const double v = __shfl_up_sync(0xffffffffu, sum, o);
          if (lane >= o) sum += v;
        }
        sum += p_carry;
        double best = valid ? t - sum : INFINITY;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
          const double v = __shfl_up_sync(0xffffffffu, best, o);
          if (lane >= o) best = fmin(best, v);
        }
        best = fmin(best, u_carry);
        const float value = valid ? static_cast<float>(sum + best) : kInf;
        __syncwarp();  // every lane has read prev[k], prev[k + 1] of this chunk
        if (k < w) prev[k] = value;
        __syncwarp();
        p_carry = __shfl_sync(0xffffffffu, sum, 31);
        u_carry = __shfl_sync(0xffffffffu, best, 31);
        row_min = fminf(row_min, value);
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1)
        row_min = fminf(row_min, __shfl_xor_sync(0xffffffffu, row_min, o));
      if (row_min > abandon_sq) {
        rows = i + 1;
        gave_up = true;
        break;
      }
    }
    const float d2 = gave_up ? kInf : prev[band];
    if (lane == 0)
      tally.add(d2, rows, m, w, cand.cutoff_sq, RawMatch{cand.pair, cand.slice, cand.end, d2, 0},
                out);
  }
  tally.flush(stats);
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

void launch_window_dtw_candidates(const BatchView& batch, const LibraryView& library,
                                  const Candidate* candidates, unsigned long long count, int band,
                                  bool early_abandon, AppendBuffer<RawMatch> matches,
                                  DeviceStats* stats, cudaStream_t stream) {
  if (count == 0) return;
  // One alignment per warp for wide bands with few candidates, else one per
  // thread: the measured crossover (kWarpDtwMaxCandidates, docs/gpu.md).
  if (band > kMaxRegisterBand && count < kWarpDtwMaxCandidates) {
    const unsigned blocks = static_cast<unsigned>((count + kWarps - 1) / kWarps);
    const std::size_t shared = static_cast<std::size_t>(kWarps) * (2 * band + 2) * sizeof(float);
    if (shared > 48 * 1024)
      cudaFuncSetAttribute(dtw_candidates_warp_kernel,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
    dtw_candidates_warp_kernel<<<blocks, kThreads, shared, stream>>>(
        batch, library, candidates, count, band, early_abandon, matches, stats);
    return;
  }
  // Diagnostics::cuda_dtw_candidates_per_lane fixes the candidates a warp
  // owns per lane, so that the GPU tests' small batches exercise the refill.
  const int forced_per_lane = diagnostics().cuda_dtw_candidates_per_lane;
  int device = 0, sms = 1;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const unsigned long long fill = 32ull * std::max(sms, 1) * kDtwWarpsPerSm;
  const int per_lane =
      forced_per_lane > 0
          ? forced_per_lane
          : static_cast<int>(std::clamp<unsigned long long>(count / fill, 1, kDtwCandidatesPerLane));
  if (band > kMaxRegisterBand) {
    const unsigned blocks = static_cast<unsigned>((count + kThreads - 1) / kThreads);
    dtw_candidates_general_kernel<<<blocks, kThreads, 0, stream>>>(
        batch, library, candidates, count, band, early_abandon, matches, stats);
    return;
  }
  const unsigned long long per_block = static_cast<unsigned long long>(kThreads) * per_lane;
  const unsigned blocks = static_cast<unsigned>((count + per_block - 1) / per_block);
  dispatch_band(band, [&](auto w) {
    if constexpr (decltype(w)::value > 0)
      dtw_candidates_kernel<decltype(w)::value><<<blocks, kThreads, 0, stream>>>(
          batch, library, candidates, count, per_lane, early_abandon, matches, stats);
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
