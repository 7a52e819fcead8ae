// Trivially-copyable views of one batch and one pattern library in device
// memory, passed by value into the kernels of kernels/*.cu (cuCollections
// style: the owning objects live in cuda_library.h, cuda_staging.h and
// cuda_backend.cu). Plain C++: no CUDA header needed to include this.
#pragma once

#include <cstdint>

namespace gw::kernels::cuda {

struct SliceView {
  long long offset = 0;       // into BatchView::data: dim d sample s at offset + d * length + s
  long long first_index = 0;  // absolute index of sample 0
  int dims = 0;
  int length = 0;
  int row_begin = 0;          // rows (slice dims) of earlier slices
  int first_new = 0;          // relative index of the first window end to search (>= 0)
  int profile_slot = -1;      // dense index of the slice's profile among the library's window
                              // patterns (RowPairsView), -1 when no window pattern reads it
};

// One (pattern, pattern dim j, stream dim i) pair of the flattened library.
struct PairView {
  int pattern = 0;
  int query = 0;       // index into LibraryView::queries (the pattern dim j)
  int stream_dim = 0;  // i
  int pattern_dim = 0; // j
};

// Segments of the piecewise (PAA) lower bound the fused filter runs between
// LB_Kim and LB_Keogh: a window's first kPaaSegments * floor(m / kPaaSegments)
// samples in kPaaSegments equal runs.
constexpr int kPaaSegments = 16;

// One pair as the fused filter reads it: what LB_Kim and the PAA bound need
// in one record, so a (pair, window end) item costs one broadcast load
// besides the window.
struct alignas(16) RowPair {
  int pair = 0;           // global pair index
  int packed_group = 0;   // QueryView::packed_group of the pair's query
  int length = 0;         // m
  int znorm = 1;
  float prune_sq = 0;     // PatternWork::prune_sq of the pair's pattern
  int run_end = 0;        // end of the run of pairs with this length in RowPairsView::pairs
  float kim_query[6] = {};  // q[0], q[1], q[2], q[m-3], q[m-2], q[m-1] (normalised)
  // What the filter copies into a survivor's Candidate for the DTW.
  float cutoff_sq = 0;    // PatternWork::cutoff_sq of the pair's pattern
  int query_offset = 0;   // QueryView::offset of the pair's query
  int unused[2] = {};     // keeps the PAA envelopes 16-byte aligned
  // Query envelope per PAA segment: max of upper, min of lower over the run.
  float paa_upper[kPaaSegments] = {};
  float paa_lower[kPaaSegments] = {};
};

// Window mode, fused filter: the pairs of one band group that read each
// (profile slot, stream dim) row, so one block can load a row's samples once
// and test every pair that reads it.
struct RowPairsView {
  const int* offsets = nullptr;     // row key = slot * dim_stride + dim: pairs[offsets[key] .. offsets[key + 1])
  const RowPair* pairs = nullptr;   // each row's list sorted by pattern length
  int dim_stride = 0;               // 1 + the largest stream dim of the group's pairs
  int slots = 0;                    // profile slots covered by `offsets`
  int min_length = 0;
  int max_length = 0;
  int band = 0;                     // every pair of the group has this band
};

// Window mode, fused filter: the batch's window ends cut into segments (one
// slice's consecutive ends, at most a tile) and packed into groups of at most
// one window per filter thread, all of one profile slot. One block tests one
// group on one stream dim, so the W1 shape (~10 new ends per slice and tick,
// ~110 pairs per stream dim) gives every thread a window of its own and every
// pair is read by a whole block (Ino et al. 2013: many tasks against one
// query).
struct FilterSegment {
  int slice = 0;
  int first_end = 0;     // window end (relative to the slice) of the segment's first window
  int ends = 0;          // consecutive window ends
  int window_begin = 0;  // thread of the first window within the group
  int lo = 0;            // first sample loaded (relative to the slice)
  int span = 0;          // samples loaded: lo .. lo + span - 1
  int x_offset = 0;      // where sample lo sits in the block's shared sample buffer
};

struct FilterGroup {
  int segment_begin = 0;
  int segment_end = 0;
  int slot = 0;  // profile slot shared by the group's slices
};

struct FilterPlanView {
  const FilterGroup* groups = nullptr;
  const FilterSegment* segments = nullptr;
  int group_count = 0;
  int shared_floats = 0;  // the largest group's sample buffer (segments, padding included)
};

// A normalised pattern dim with its envelope over +-band.
struct QueryView {
  long long offset = 0;  // into LibraryView::values / upper / lower
  int length = 0;
  int packed_group = 0;  // first record of the query in LibraryView::ec_packed (eq_packed: twice that)
};

// Window patterns the CUDA backend takes are at most this long: the packed
// UCR-order records hold positions in 10 bits.
inline constexpr int kMaxWindowLength = 1024;

// A run of consecutive window ends of one slice searched for one pattern.
struct Segment {
  int slice = 0;
  int first_end = 0;         // window end relative to the slice's sample 0
  long long window_offset = 0;  // windows of earlier segments of the same pattern
};

// How one slice is assembled in device memory: samples [0, from) are already
// on the device in the ring of the slice's stream (kept from earlier
// batches); samples [from, length) come from this batch's upload. The
// uploaded samples are also written to the ring for the next batch.
struct SliceUpload {
  long long staging_offset = 0;  // dim d, sample s >= from at staging_offset + d * (length - from) + s - from
  float* ring = nullptr;         // dims x capacity, or nullptr when the stream keeps no history
  long long ring_capacity = 0;   // a power of two >= length
  int from = 0;
};

// Per pattern: its window-mode work in this batch.
struct PatternWork {
  int segment_begin = 0;
  int segment_end = 0;
  long long windows = 0;   // windows per pair
  int length = 0;          // m
  int band = 0;            // r
  int znorm = 1;
  float cutoff_sq = 0;     // threshold^2 (+inf for no threshold)
  float prune_sq = 0;      // cutoff_sq with a rounding margin: a bound must exceed it to prune
};

struct LibraryView {
  const PairView* pairs = nullptr;
  const QueryView* queries = nullptr;
  const float* values = nullptr;  // normalised query values
  // The query envelope over +-band, by position (the DTW kernels' tail bound).
  const float* upper = nullptr;
  const float* lower = nullptr;
  // Window-mode queries in UCR Suite's visiting order (|value| descending,
  // so the lower bounds' partial sums grow fastest), three positions to a
  // 16-byte record where they fit (a third of the loads of one record per
  // position; docs/gpu.md). Positions p0, p1, p2 of a group are one 32-bit
  // word, p0 | p1 << 10 | p2 << 20 (as float bits). A query's last group may
  // be partial.
  // EQ: two records per group, {U0, L0, U1, L1}, {U2, L2, positions, 0}.
  const float4* eq_packed = nullptr;
  // EC: one record per group, {q0, q1, q2, positions}.
  const float4* ec_packed = nullptr;
};

struct BatchView {
  const float* data = nullptr;
  long long data_size = 0;
  const SliceView* slices = nullptr;
  int slice_count = 0;
  const Segment* segments = nullptr;
  const PatternWork* patterns = nullptr;
  int row_count = 0;                      // sum of the slices' dims
  // Inclusive prefix sums of data and data^2 along each row (same layout as
  // data), so a window's mean and std cost O(1).
  const double* prefix_sum = nullptr;
  const double* prefix_sumsq = nullptr;
};

// A window that survived the lower bounds: everything the DTW reads for it,
// so a DTW lane that takes a new candidate loads one 48-byte record and
// follows no further index before it reads the window.
struct alignas(16) Candidate {
  long long x_offset = 0;  // the window's first sample in BatchView::data
  int pair = 0;
  int slice = 0;
  int end = 0;           // relative to the slice's sample 0
  int query_offset = 0;  // the pair's query in LibraryView::values / upper / lower
  int length = 0;        // m
  float mean = 0;
  float inv_std = 0;     // 0 for a constant window (it normalises to zeros)
  // A lower bound of the window's LB_Keogh EQ sum over all positions (the
  // filter's, rounded toward zero; 0 when it did not compute one). The DTW
  // subtracts the columns it has reached to bound the rest (UCR Suite's
  // cumulative bound).
  float eq_bound = 0;
  float prune_sq = 0;    // PatternWork::prune_sq / cutoff_sq of the pair's pattern
  float cutoff_sq = 0;
};
static_assert(sizeof(Candidate) == 48);

struct RawMatch {
  int pair = 0;
  int slice = 0;
  int end = 0;    // window mode: relative end; streaming: relative end as well
  float distance_sq = 0;
  long long start = 0;  // streaming: absolute start sample; window mode: unused
};

// Effort counters, summed by the kernels with atomics.
struct DeviceStats {
  unsigned long long windows;
  unsigned long long pruned_kim;
  unsigned long long pruned_keogh_eq;
  unsigned long long pruned_keogh_ec;
  unsigned long long dtw_full;
  unsigned long long dtw_abandoned;
  unsigned long long cells;
};

// Growable output buffer: kernels append with an atomic counter and drop what
// does not fit (count still grows, so the host sees the overflow and reruns).
template <typename T>
struct AppendBuffer {
  T* items = nullptr;
  unsigned long long* count = nullptr;
  unsigned long long capacity = 0;
};

// Streaming mode (SPRING) state of one pattern: one column of `length`
// cells per (stream slot, pair of the pattern), laid out [k][state] so that
// consecutive threads (consecutive states) read consecutive addresses.
struct SpringStateView {
  float* d = nullptr;
  long long* start = nullptr;
  long long states = 0;  // slots * pairs_of_pattern
};

// One slice's part in a streaming search of one pattern.
struct StreamingSlice {
  int slice = 0;
  int slot = 0;           // state slot of the slice's stream
  int first_new = 0;      // relative index of the first new sample
  int reset = 0;          // 1: the state is stale (new stream, gap): start from +inf
};

}  // namespace gw::kernels::cuda
