// Window mode on the GPU, before the DTW: the batch's samples assembled
// from the staged uploads, per-row prefix sums for the window statistics,
// and the fused lower-bound filter (Ino et al. 2013: load once, test many):
// one block per row (slice, stream dim) and tile of window ends holds the
// row's samples, the window normalisations and the data envelope in shared
// memory and tests every pair that reads the row (LB_Kim, then LB_Keogh
// EQ/EC on the survivors). Survivors go to window_dtw.cu.
#include "kernels/window_common.cuh"

namespace gw::kernels::cuda {
namespace {

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

}  // namespace gw::kernels::cuda
