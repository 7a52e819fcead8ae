// Window-mode DTW on the GPU: the fused lower-bound filter and banded DTW
// with early abandoning.
//
// Filter (Ino et al. 2013: load once, test many): one block per row (slice,
// stream dim) and tile of window ends holds the row's samples, the window
// normalisations and the data envelope in shared memory and tests every pair
// that reads the row (LB_Kim, then LB_Keogh EQ/EC on the survivors).
// DTW: one thread per surviving window. The band row and the band's data
// values stay in registers (Bednárek et al. 2016, cuDTW++): rows are processed
// in unrolled blocks of W = 2r+1 rows, where the data value of column j lives
// in register (j + r) mod W, so the sliding band needs no register moves and
// each cell costs 3-4 instructions (FADD, DPX three-way min, FFMA). Bands wider
// than kMaxRegisterBand use a general kernel.
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

// One thread per data element; a block's elements span few slices, so the
// block finds the slice of its first element once (binary search) and each
// thread steps forward from there.
__global__ void assemble_kernel(BatchView b, float* data, const float* staging,
                                const SliceUpload* uploads) {
  __shared__ int first_slice;
  const long long block_first = blockIdx.x * static_cast<long long>(blockDim.x);
  if (threadIdx.x == 0) first_slice = slice_of_element(b, block_first);
  __syncthreads();
  const long long e = block_first + threadIdx.x;
  if (e >= b.data_size) return;
  int slice = first_slice;
  while (slice + 1 < b.slice_count && b.slices[slice + 1].offset <= e) ++slice;
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

// Fused filter geometry: a block tests one group (FilterGroup: window ends of
// one or more slices, one window per thread) on one stream dim, in rounds of
// kRoundPairs pairs; each warp keeps its LB_Kim survivors of a round in its
// own list (entries: pair offset << 5 | lane of the window). Smaller rounds
// need less shared memory (more resident blocks): picked by measurement
// (docs/gpu.md). The passes after the PAA bound run on whole chunks of 32
// entries only and carry a partial last chunk to the next round (see
// kCarriedPasses), so their lanes are not idle for want of entries.
constexpr int kRoundPairs = 8;
constexpr int kWarps = kThreads / 32;
// Sample buffer of a group (floats) per filter thread: several W1 slices'
// ends share a block.
constexpr int kFilterGroupFloatsPerThread = 16;
// Filter block size (window ends per group). Larger blocks share each pair
// record's trip from L2 among more warps but wait longer for their slowest
// warp; docs/gpu.md has the sizes compared on the H100.
constexpr int kFilterThreads = 256;
// Resident filter threads per SM the register budget is sized for (64
// registers each): the filter is latency-bound, so warps beat registers.
constexpr int kFilterThreadsPerSm = 1024;
// LB_Keogh EQ positions (UCR order) of the filter's first EQ pass; the rest
// follow in a second pass on its survivors, resuming the entry's sum. A
// multiple of 3: passes start on a packed group. Measured against one pass
// over all positions (no faster) and the prefix alone (more windows go to
// the DTW, a slower batch): docs/gpu.md.
constexpr int kEqPrefix = 24;
static_assert(kEqPrefix % 3 == 0);
// A warp list entry: the low kEntryBits bits hold (pair offset from the
// warp's carry base << 5 | lane of the window); the others a partial lower
// bound with those mantissa bits cleared, i.e. rounded toward zero (by less
// than 2^-10 relative), which keeps a sum of non-negative terms a lower
// bound. One word per entry, so a pass resumes the bound an earlier pass
// started without a second shared array (fewer bytes per block, more
// resident blocks).
constexpr int kEntryBits = 13;
constexpr unsigned kEntryMask = (1u << kEntryBits) - 1;
// Pairs one carry base reaches: entries of a carry lie within them.
constexpr int kCarrySpan = 1 << (kEntryBits - 5);
static_assert(kCarrySpan >= 2 * kRoundPairs);
// The list passes, in order: the PAA bound, LB_Keogh EQ over the first
// eq_prefix positions (UCR order), the rest of EQ (resuming the entry's
// partial sum), LB_Keogh EC.
enum FilterPass { kPassPaa, kPassEqPrefix, kPassEqRest, kPassEc, kPasses };
// The carried passes (LB_Keogh EQ's two and EC): a round runs them on
// whole chunks of 32 entries and keeps the rest (< 32 entries) for the next
// round of the same length run (the windows' statistics are the same), which
// empties the carries. The PAA pass (cheap, fed ~50 entries a round) does
// not. Each carried pass's output can exceed its round's input by < 32.
constexpr int kCarriedPasses = 3;
__host__ __device__ constexpr int carry_slot(int pass) {
  return pass == kPassEqPrefix ? 0 : pass == kPassEqRest ? 1 : pass == kPassEc ? 2 : -1;
}
constexpr int kListCapacity = 32 * kRoundPairs + 32 * kCarriedPasses;
// A warp's shared words: its list, then one carry of 32 per carried pass.
constexpr int kWarpWords = kListCapacity + 32 * kCarriedPasses;
__device__ __forceinline__ unsigned pack_entry(int entry, float partial) {
  return (__float_as_uint(partial) & ~kEntryMask) | static_cast<unsigned>(entry);
}
__device__ __forceinline__ float entry_partial(unsigned word) {
  return __uint_as_float(word & ~kEntryMask);
}

// Position j (0..2) of a packed group's positions word (LibraryView::eq_packed).
__device__ __forceinline__ int packed_position(float word, int j) {
  return (__float_as_int(word) >> (10 * j)) & 1023;
}

// Groups of three positions per test of the partial sum against prune_sq:
// a step's loads issue together.
constexpr int kGroupsPerStep = 2;

// Adds LB_Keogh EQ terms, term(position, U, L, sum), of the query positions
// [begin, end) in UCR order from the query's eq_packed records to `lb`;
// returns once the sum exceeds prune_sq. begin is a multiple of 3.
template <typename Term>
__device__ __forceinline__ float eq_packed_bound(const float4* rec, int begin, int end, float lb,
                                                 float prune_sq, Term term) {
  int g = begin / 3;
  const int full = end / 3;
  for (; g + kGroupsPerStep <= full && lb <= prune_sq; g += kGroupsPerStep) {
    float4 a[kGroupsPerStep], b[kGroupsPerStep];
#pragma unroll
    for (int j = 0; j < kGroupsPerStep; ++j) {
      a[j] = rec[2 * (g + j)];
      b[j] = rec[2 * (g + j) + 1];
    }
#pragma unroll
    for (int j = 0; j < kGroupsPerStep; ++j) {
      lb = term(packed_position(b[j].z, 0), a[j].x, a[j].y, lb);
      lb = term(packed_position(b[j].z, 1), a[j].z, a[j].w, lb);
      lb = term(packed_position(b[j].z, 2), b[j].x, b[j].y, lb);
    }
  }
  for (; g < full && lb <= prune_sq; ++g) {
    const float4 a = rec[2 * g], b = rec[2 * g + 1];
    lb = term(packed_position(b.z, 0), a.x, a.y, lb);
    lb = term(packed_position(b.z, 1), a.z, a.w, lb);
    lb = term(packed_position(b.z, 2), b.x, b.y, lb);
  }
  if (3 * g < end && lb <= prune_sq) {  // a partial last group: one or two positions
    const float4 a = rec[2 * g], b = rec[2 * g + 1];
    lb = term(packed_position(b.z, 0), a.x, a.y, lb);
    if (end - 3 * g > 1) lb = term(packed_position(b.z, 1), a.z, a.w, lb);
  }
  return lb;
}

// The same for LB_Keogh EC, term(position, q, sum), over all `count`
// positions from the query's ec_packed records.
template <typename Term>
__device__ __forceinline__ float ec_packed_bound(const float4* rec, int count, float prune_sq,
                                                 Term term) {
  float lb = 0.f;
  int g = 0;
  const int full = count / 3;
  for (; g + kGroupsPerStep <= full && lb <= prune_sq; g += kGroupsPerStep) {
    float4 r[kGroupsPerStep];
#pragma unroll
    for (int j = 0; j < kGroupsPerStep; ++j) r[j] = rec[g + j];
#pragma unroll
    for (int j = 0; j < kGroupsPerStep; ++j) {
      lb = term(packed_position(r[j].w, 0), r[j].x, lb);
      lb = term(packed_position(r[j].w, 1), r[j].y, lb);
      lb = term(packed_position(r[j].w, 2), r[j].z, lb);
    }
  }
  for (; g < full && lb <= prune_sq; ++g) {
    const float4 r = rec[g];
    lb = term(packed_position(r.w, 0), r.x, lb);
    lb = term(packed_position(r.w, 1), r.y, lb);
    lb = term(packed_position(r.w, 2), r.z, lb);
  }
  if (3 * g < count && lb <= prune_sq) {
    const float4 r = rec[g];
    lb = term(packed_position(r.w, 0), r.x, lb);
    if (count - 3 * g > 1) lb = term(packed_position(r.w, 1), r.y, lb);
  }
  return lb;
}

// Piecewise (PAA) lower bound of LB_Keogh EQ: with a query envelope segment's
// max upper U and min lower L and the normalised window's segment mean c,
// run * ((c - U)+^2 + (L - c)+^2) <= the segment's LB_Keogh terms, by
// monotonicity (U_k <= U, L_k >= L) and Jensen ((.)+^2 is convex). Costs
// kPaaSegments terms instead of m; positions past kPaaSegments * run add
// nothing (terms are >= 0, so leaving them out keeps it a lower bound).
// A rounding slack of 1e-5 relative keeps float error from making it exceed
// LB_Keogh where the two are equal (run == 1).
// paa_centred: the window's segment means less its mean.
static_assert(offsetof(RowPair, paa_upper) % 16 == 0 && offsetof(RowPair, paa_lower) % 16 == 0);
__device__ __forceinline__ float paa_bound(const RowPair& rpair, const float* paa_centred, int run,
                                           float mean, float inv_std) {
  float lb = 0.f;
  // Four segments per load (the filter is bound by L1 requests).
  const float4* upper = reinterpret_cast<const float4*>(rpair.paa_upper);
  const float4* lower = reinterpret_cast<const float4*>(rpair.paa_lower);
#pragma unroll
  for (int g4 = 0; g4 < kPaaSegments / 4; ++g4) {
    const float4 u = upper[g4], l = lower[g4];
    const float us[4] = {u.x, u.y, u.z, u.w}, ls[4] = {l.x, l.y, l.z, l.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int g = 4 * g4 + j;
      const float c = rpair.znorm ? paa_centred[g] * inv_std : paa_centred[g] + mean;
      const float d = max_with_zero(c - us[j], ls[j] - c);
      lb = fmaf(d, d, lb);
    }
  }
  return lb * run * (1.f - 1e-5f);
}

// Window mode filter, fused (Ino et al. 2013: many tasks of one shape against
// one query). The W1 load has ~110 pairs per stream dim but only ~10 new window
// ends per slice and tick, so a block takes the new ends of ~25 slices (one
// window per thread) on one stream dim: it loads those rows' samples and data
// envelopes into shared memory once, each thread normalises its window once
// per pattern length, and then every thread tests its window against each
// pair in turn, so a pair's record and query are read by the whole block at
// once. LB_Kim runs on every (pair, window); a warp's Kim survivors of a round
// go to its list, and the warp runs the PAA bound, LB_Keogh EQ, then EC, on
// the list, where neighbouring entries mostly share a pair (broadcast reads of
// the query). Survivors go to `out` for the DTW kernel.
// The PAA bound is the first list pass (lanes compacted, the window's segment
// means fetched from its owner lane), not a step of the Kim loop, where most
// lanes would idle after Kim.
__global__ void __launch_bounds__(kFilterThreads, kFilterThreadsPerSm / kFilterThreads)
    fused_filter_kernel(BatchView b, LibraryView lib, RowPairsView rp, FilterPlanView plan,
                        FilterOptions opt, AppendBuffer<Candidate> out, DeviceStats* stats) {
  extern __shared__ __align__(16) unsigned char filter_shared[];
  unsigned* lists = reinterpret_cast<unsigned*>(filter_shared);
  float* x = reinterpret_cast<float*>(lists + (kFilterThreads / 32) * kWarpWords);
  float* env_upper = x + plan.shared_floats;
  float* env_lower = env_upper + plan.shared_floats;

  const FilterGroup group = plan.groups[blockIdx.x];
  const int dim = blockIdx.y;
  if (group.slot >= rp.slots || dim >= rp.dim_stride) return;
  const int key = group.slot * rp.dim_stride + dim;
  const int pair_begin = rp.offsets[key], pair_end = rp.offsets[key + 1];
  if (pair_begin == pair_end) return;  // uniform over the block
  // Read in the set-up only (L1 serves the repeats): kept out of shared
  // memory, which limits how many blocks an SM holds.
  const FilterSegment* segs = plan.segments + group.segment_begin;
  const int segment_count = group.segment_end - group.segment_begin;
  for (int g = 0; g < segment_count; ++g) {
    const FilterSegment seg = segs[g];
    const SliceView sv = b.slices[seg.slice];
    if (dim >= sv.dims) continue;
    const float* row = b.data + sv.offset + static_cast<long long>(dim) * sv.length + seg.lo;
    for (int k = threadIdx.x; k < seg.span; k += kFilterThreads) x[seg.x_offset + k] = row[k];
  }
  __syncthreads();
  // Data envelope over +-band clipped to the loaded samples (the CPU's EC
  // envelope); right for every position a window of the segment covers.
  if (opt.lb_keogh_ec) {
    for (int g = 0; g < segment_count; ++g) {
      const FilterSegment seg = segs[g];
      const float* xs = x + seg.x_offset;
      for (int k = threadIdx.x; k < seg.span; k += kFilterThreads) {
        const int from = max(0, k - rp.band), to = min(seg.span - 1, k + rp.band);
        float u = xs[from], l = xs[from];
        for (int o = from + 1; o <= to; ++o) {
          u = fmaxf(u, xs[o]);
          l = fminf(l, xs[o]);
        }
        env_upper[seg.x_offset + k] = u;
        env_lower[seg.x_offset + k] = l;
      }
    }
  }
  // This thread's window: slice, end and where relative sample 0 of its
  // slice would sit in x.
  int slice = -1, end = 0, origin = 0;
  for (int g = 0; g < segment_count; ++g) {
    const FilterSegment seg = segs[g];
    const int w = static_cast<int>(threadIdx.x) - seg.window_begin;
    if (w >= 0 && w < seg.ends) {
      slice = seg.slice;
      end = seg.first_end + w;
      origin = seg.x_offset - seg.lo;
    }
  }
  // Where the window's row starts in b.data (the DTW reads the window there).
  long long row_offset = 0;
  if (slice >= 0) {
    const SliceView sv = b.slices[slice];
    if (dim >= sv.dims) slice = -1;
    row_offset = sv.offset + static_cast<long long>(dim) * sv.length;
  }
  __syncthreads();

  const int lane = threadIdx.x & 31;
  float mean = 0.f, inv_std = 0.f;  // the window's, per length run
  unsigned* list = lists + (threadIdx.x >> 5) * kWarpWords;
  unsigned* carries = list + kListCapacity;
  unsigned long long considered = 0, kim = 0, eq = 0, ec = 0;
  int m = 0, base = 0;  // the length run's m; the pair of entry offset 0
  // Appends the candidates of the warp's active entries (warp-collective):
  // window from the owner lane, pair from the entry.
  auto emit = [&](unsigned word, bool active) {
    const int entry = static_cast<int>(word & kEntryMask);
    const int owner = entry & 31;
    const float w_mean = __shfl_sync(0xffffffffu, mean, owner);
    const float w_inv_std = __shfl_sync(0xffffffffu, inv_std, owner);
    const int w_slice = __shfl_sync(0xffffffffu, slice, owner);
    const int w_end = __shfl_sync(0xffffffffu, end, owner);
    const long long w_row = __shfl_sync(0xffffffffu, row_offset, owner);
    Candidate cand{};
    if (active) {
      const RowPair& rpair = rp.pairs[base + (entry >> 5)];
      cand.x_offset = w_row + w_end - m + 1;
      cand.pair = rpair.pair;
      cand.slice = w_slice;
      cand.end = w_end;
      cand.query_offset = rpair.query_offset;
      cand.length = m;
      cand.mean = rpair.znorm ? w_mean : 0.f;
      cand.inv_std = rpair.znorm ? w_inv_std : 1.f;
      // The entry's bound is EQ's sum, or 0 without LB_Keogh EQ.
      cand.eq_bound = entry_partial(word);
      cand.prune_sq = rpair.prune_sq;
      cand.cutoff_sq = rpair.cutoff_sq;
    }
    append_warp(out, cand, active);
  };
  for (int p0 = pair_begin; p0 < pair_end;) {
    // The row's pairs are sorted by length: [p0, p1) share m.
    m = rp.pairs[p0].length;
    const int p1 = rp.pairs[p0].run_end;
    const bool valid = slice >= 0 && end >= m - 1;
    const int first = origin + end - m + 1;  // x index of the window's first sample
    KimEnds raw_ends{}, znorm_ends{};
    mean = inv_std = 0.f;
    if (valid) {
      window_stats_two_pass(x + first, m, &mean, &inv_std);
      raw_ends = kim_ends(x + first, m);
      znorm_ends = normalised(raw_ends, mean, inv_std);
    }
    // Means of the window's PAA segments less the window mean (see
    // paa_bound): centred per sample, as LB_Keogh normalises, so a large
    // offset does not cancel digits away.
    const int paa_run = m / kPaaSegments;
    float paa_centred[kPaaSegments];
#pragma unroll
    for (int g = 0; g < kPaaSegments; ++g) {
      float sum = 0.f;
      if (valid && opt.lb_keogh_eq)
        for (int k = 0; k < paa_run; ++k) sum += x[first + g * paa_run + k] - mean;
      paa_centred[g] = paa_run > 0 ? sum / paa_run : 0.f;
    }
    base = p0;
    int carried[kCarriedPasses] = {};  // warp-uniform
    for (int k0 = p0; k0 < p1; k0 += kRoundPairs) {
      const int k1 = min(p1, k0 + kRoundPairs);
      // The carries empty at the end of the length run and before the next
      // round's offsets would outgrow kCarrySpan.
      const bool flush = k1 == p1 || k1 + kRoundPairs - base > kCarrySpan;
      int n = 0;  // warp-uniform
#pragma unroll
      for (int kk = 0; kk < kRoundPairs; ++kk) {
        const int k = k0 + kk;
        if (k >= k1) break;  // uniform
        bool keep = valid;
        if (valid) {
          considered += 1;
          const RowPair& rpair = rp.pairs[k];
          if (opt.lb_kim && lb_kim_hierarchy(rpair.kim_query, rpair.znorm ? znorm_ends : raw_ends,
                                             m, rpair.prune_sq) > rpair.prune_sq) {
            keep = false;
            kim += 1;
          }
        }
        const unsigned mask = __ballot_sync(0xffffffffu, keep);
        if (keep) list[n + __popc(mask & ((1u << lane) - 1))] = (k - base) << 5 | lane;
        n += __popc(mask);
      }
      __syncwarp();
      // Passes over the list (FilterPass), compacting it after each, so a
      // pass's lanes do work of one kind (most windows exceed the threshold
      // within EQ's first positions in UCR order). A carried pass reads its
      // carry after the list: list[0, n) then carry[0, c).
#pragma unroll
      for (int pass = 0; pass < kPasses; ++pass) {
        const bool enabled = pass == kPassEc       ? opt.lb_keogh_ec
                             : pass == kPassEqRest ? opt.lb_keogh_eq && m > kEqPrefix
                                                   : opt.lb_keogh_eq;
        if (!enabled) continue;
        const int slot = carry_slot(pass);
        unsigned* carry = carries + 32 * max(slot, 0);
        const int total = n + (slot >= 0 ? carried[max(slot, 0)] : 0);
        const int process = slot < 0 || flush ? total : total & ~31;
        auto read = [&](int v) { return v < n ? list[v] : v < total ? carry[v - n] : 0u; };
        int kept = 0;
        for (int r0 = 0; r0 < process; r0 += 32) {
          const int idx = r0 + lane;
          const unsigned word = idx < process ? read(idx) : 0u;
          const int entry = static_cast<int>(word & kEntryMask);
          float lb = pass == kPassEqRest ? entry_partial(word) : 0.f;
          const int owner = entry & 31;
          const float w_mean = __shfl_sync(0xffffffffu, mean, owner);
          const float w_inv_std = __shfl_sync(0xffffffffu, inv_std, owner);
          const int w_first = __shfl_sync(0xffffffffu, first, owner);
          float w_paa[kPaaSegments];
          if (pass == kPassPaa) {
#pragma unroll
            for (int g = 0; g < kPaaSegments; ++g)
              w_paa[g] = __shfl_sync(0xffffffffu, paa_centred[g], owner);
          }
          bool keep = false;
          if (idx < process) {
            const RowPair& rpair = rp.pairs[base + (entry >> 5)];
            const float prune_sq = rpair.prune_sq;
            // c = (x - mean) * inv_std as one FMA (raw pairs: x itself).
            const float is = rpair.znorm ? w_inv_std : 1.f;
            const float shift = rpair.znorm ? -w_mean * w_inv_std : 0.f;
            // LB_Keogh EQ: the window against the query's envelope;
            // EC: the query against the window's envelope.
            auto eq_term = [&](int position, float u, float l, float sum) {
              const float c = fmaf(x[w_first + position], is, shift);
              const float d = max_with_zero(c - u, l - c);
              return fmaf(d, d, sum);
            };
            auto ec_term = [&](int position, float q, float sum) {
              const int o = w_first + position;
              const float d = max_with_zero(q - fmaf(env_upper[o], is, shift),
                                            fmaf(env_lower[o], is, shift) - q);
              return fmaf(d, d, sum);
            };
            const float4* eq_rec = lib.eq_packed + 2 * static_cast<long long>(rpair.packed_group);
            if (pass == kPassPaa)
              lb = paa_bound(rpair, w_paa, paa_run, w_mean, w_inv_std);
            else if (pass == kPassEqPrefix)
              lb = eq_packed_bound(eq_rec, 0, min(m, kEqPrefix), 0.f, prune_sq, eq_term);
            else if (pass == kPassEqRest)
              lb = eq_packed_bound(eq_rec, kEqPrefix, m, lb, prune_sq, eq_term);
            else if (pass == kPassEc)
              lb = ec_packed_bound(lib.ec_packed + rpair.packed_group, m, prune_sq, ec_term);
            keep = lb <= prune_sq;
            if (!keep) {
              if (pass < kPassEc) eq += 1; else ec += 1;
            }
          }
          // In place: survivors move to list[0, kept), kept <= r0, and this
          // chunk's entries are in registers already; unread list entries
          // lie at or past r0 + 32.
          const unsigned mask = __ballot_sync(0xffffffffu, keep);
          __syncwarp();
          // EC's bound is not a sum over columns: the entry keeps EQ's, which
          // the DTW's tail bound needs (Candidate::eq_bound).
          if (keep)
            list[kept + __popc(mask & ((1u << lane) - 1))] =
                pack_entry(entry, pass == kPassEc ? entry_partial(word) : lb);
          kept += __popc(mask);
          __syncwarp();
        }
        if (slot >= 0) {  // the rest waits in the carry (kept <= process: unread)
          const int v = process + lane;
          const unsigned word = read(v);
          __syncwarp();
          if (v < total) carry[lane] = word;
          carried[slot] = total - process;
          __syncwarp();
        }
        n = kept;
      }
      for (int r0 = 0; r0 < n; r0 += 32) {
        const int idx = r0 + lane;
        emit(idx < n ? list[idx] : 0u, idx < n);
      }
      __syncwarp();  // the list is read before the next round refills it
      if (flush) base = k1;
    }
    p0 = p1;
  }
  flush_block_counter(considered, &stats->windows);
  flush_block_counter(kim, &stats->pruned_kim);
  flush_block_counter(eq, &stats->pruned_keogh_eq);
  flush_block_counter(ec, &stats->pruned_keogh_ec);
}

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

namespace {

// The largest segment's sample buffer, with room for the bank padding.
int segment_floats(int tile, int max_length, int band) { return tile + max_length - 1 + 2 * band + 31; }

int group_budget_floats(int tile, int max_length, int band) {
  return std::max(segment_floats(tile, max_length, band), kFilterGroupFloatsPerThread * tile);
}

// The samples, and with LB_Keogh EC their envelope (two more arrays): without
// EC the block needs a third of it, and L1 gets the rest.
std::size_t filter_shared_bytes(int threads, int shared_floats, bool lb_keogh_ec = true) {
  return static_cast<std::size_t>(threads / 32) * kWarpWords * sizeof(unsigned) +
         (lb_keogh_ec ? 3 : 1) * static_cast<std::size_t>(shared_floats) * sizeof(float);
}

}  // namespace

std::size_t window_filter_max_shared_bytes(int max_length, int band) {
  return filter_shared_bytes(kFilterThreads, group_budget_floats(kFilterThreads, max_length, band));
}

FilterPlan plan_window_filter(const std::vector<SliceView>& slices, const RowPairsView& rows) {
  FilterPlan plan;
  const int tile = kFilterThreads;
  const int budget = group_budget_floats(tile, rows.max_length, rows.band);
  FilterGroup group;
  int windows = 0, cursor = 0;
  bool open = false;
  auto close = [&] {
    if (!open) return;
    group.segment_end = static_cast<int>(plan.segments.size());
    plan.groups.push_back(group);
    plan.shared_floats = std::max(plan.shared_floats, cursor);
    open = false;
  };
  for (std::size_t s = 0; s < slices.size(); ++s) {
    const SliceView& sv = slices[s];
    if (sv.profile_slot < 0 || sv.profile_slot >= rows.slots || sv.dims <= 0) continue;
    for (int first_end = std::max(sv.first_new, rows.min_length - 1); first_end < sv.length;
         first_end += tile) {
      const int ends = std::min(tile, sv.length - first_end);
      const int lo = std::max(0, first_end - rows.max_length + 1 - rows.band);
      const int hi = std::min(sv.length - 1, first_end + ends - 1 + rows.band);
      const int span = hi - lo + 1;
      // Padding that puts the first sample of window w (of the longest
      // length) in shared-memory bank w mod 32: a warp's windows read
      // different banks at the same position.
      auto padding = [&](int at, int window) {
        const int start = at + first_end - rows.max_length + 1 - lo;
        return ((window - start) % 32 + 32) % 32;
      };
      if (open && (group.slot != sv.profile_slot || windows + ends > tile ||
                   cursor + padding(cursor, windows) + span > budget))
        close();
      if (!open) {
        group = FilterGroup{static_cast<int>(plan.segments.size()), 0, sv.profile_slot};
        windows = cursor = 0;
        open = true;
      }
      const int pad = padding(cursor, windows);
      plan.segments.push_back(
          FilterSegment{static_cast<int>(s), first_end, ends, windows, lo, span, cursor + pad});
      cursor += pad + span;
      windows += ends;
    }
  }
  close();
  return plan;
}

void launch_window_filter(const BatchView& batch, const LibraryView& library,
                          const RowPairsView& rows, const FilterPlanView& plan,
                          FilterOptions options, AppendBuffer<Candidate> candidates,
                          DeviceStats* stats, cudaStream_t stream) {
  if (plan.group_count == 0 || rows.dim_stride == 0) return;
  // LB_Keogh EC only where it pays: on a band the register DTW takes, a
  // candidate EC would prune costs the DTW (early abandoning on the tail
  // bound) about what EC costs per entry, and running EC there was slower
  // than leaving it off (docs/gpu.md). Wider bands go to the general
  // DTW kernel, which costs more per candidate.
  options.lb_keogh_ec = options.lb_keogh_ec && rows.band > kMaxRegisterBand;
  const std::size_t shared =
      filter_shared_bytes(kFilterThreads, plan.shared_floats, options.lb_keogh_ec);
  if (shared > 48 * 1024)
    cudaFuncSetAttribute(fused_filter_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(shared));
  const dim3 grid(static_cast<unsigned>(plan.group_count), static_cast<unsigned>(rows.dim_stride));
  fused_filter_kernel<<<grid, kFilterThreads, shared, stream>>>(batch, library, rows, plan, options,
                                                                candidates, stats);
}

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
