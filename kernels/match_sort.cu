// Puts a batch's matches into SearchResult order on the device, converts
// them to Match and applies the top-p cap, so the host only copies them: two
// stable radix sorts (CUB), first by (distance, end), then by (slice, rank of
// the pair in (pattern, pattern dim, stream dim) order), a gather, and a
// flagged select.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>

#include <algorithm>

#include "kernels/cuda_kernels.h"
#include "kernels/search.h"

namespace gw::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void secondary_keys(const RawMatch* in, unsigned long long count,
                               unsigned long long* keys, unsigned* index) {
  const unsigned long long i = blockIdx.x * static_cast<unsigned long long>(kThreads) + threadIdx.x;
  if (i >= count) return;
  // The reported distance (sqrtf is correctly rounded, as the host's
  // std::sqrt): distinct squares may round to one distance, and the result
  // order breaks such ties by end. Distances >= 0 order like their bits.
  keys[i] = (static_cast<unsigned long long>(__float_as_uint(sqrtf(in[i].distance_sq))) << 32) |
            static_cast<unsigned>(in[i].end);
  index[i] = static_cast<unsigned>(i);
}

__global__ void primary_keys(const RawMatch* in, const unsigned* order, unsigned long long count,
                             const int* pair_rank, unsigned long long* keys) {
  const unsigned long long i = blockIdx.x * static_cast<unsigned long long>(kThreads) + threadIdx.x;
  if (i >= count) return;
  const RawMatch m = in[order[i]];
  keys[i] = (static_cast<unsigned long long>(m.slice) << 24) | static_cast<unsigned>(pair_rank[m.pair]);
}

__global__ void gather(const RawMatch* in, const unsigned* order, unsigned long long count,
                       RawMatch* out) {
  const unsigned long long i = blockIdx.x * static_cast<unsigned long long>(kThreads) + threadIdx.x;
  if (i < count) out[i] = in[order[i]];
}

// Match i of the sorted list, and whether the top-p cap keeps it: the list is
// grouped by (slice, pair) in (distance, end) order, so item i is among the
// first p of its group exactly when item i - p belongs to another group.
__global__ void finalize(const RawMatch* sorted, unsigned long long count, const PairView* pairs,
                         const PatternOutput* patterns, const SliceView* slices, Match* out,
                         unsigned char* keep) {
  const unsigned long long i = blockIdx.x * static_cast<unsigned long long>(kThreads) + threadIdx.x;
  if (i >= count) return;
  const RawMatch r = sorted[i];
  const PairView pair = pairs[r.pair];
  const PatternOutput po = patterns[pair.pattern];
  bool kept = true;
  if (i >= static_cast<unsigned long long>(po.max_matches)) {
    const RawMatch earlier = sorted[i - po.max_matches];
    kept = earlier.slice != r.slice || earlier.pair != r.pair;
  }
  Match m;
  m.slice = static_cast<std::uint32_t>(r.slice);
  m.pattern = static_cast<std::uint32_t>(pair.pattern);
  m.pattern_dim = static_cast<std::uint16_t>(pair.pattern_dim);
  m.stream_dim = static_cast<std::uint16_t>(pair.stream_dim);
  m.end = slices[r.slice].first_index + r.end;
  m.start = po.window ? m.end - po.length + 1 : r.start;
  m.distance = sqrtf(r.distance_sq);
  out[i] = m;
  keep[i] = kept ? 1 : 0;
}

void check_cub(cudaError_t status) {
  if (status != cudaSuccess) throw std::runtime_error(cudaGetErrorString(status));
}

}  // namespace

std::size_t match_sort_temp_bytes(unsigned long long count) {
  std::size_t sort_bytes = 0, select_bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<unsigned long long*>(nullptr),
                                  static_cast<unsigned long long*>(nullptr),
                                  static_cast<unsigned*>(nullptr), static_cast<unsigned*>(nullptr),
                                  static_cast<int>(count));
  cub::DeviceSelect::Flagged(nullptr, select_bytes, static_cast<Match*>(nullptr),
                             static_cast<unsigned char*>(nullptr), static_cast<Match*>(nullptr),
                             static_cast<unsigned long long*>(nullptr), static_cast<int>(count));
  return std::max(sort_bytes, select_bytes);
}

void launch_sort_matches(const RawMatch* in, RawMatch* out, unsigned long long count,
                         const int* pair_rank, MatchSortBuffers b, cudaStream_t stream) {
  if (count == 0) return;
  const unsigned blocks = static_cast<unsigned>((count + kThreads - 1) / kThreads);
  const int n = static_cast<int>(count);
  secondary_keys<<<blocks, kThreads, 0, stream>>>(in, count, b.keys_in, b.index_in);
  std::size_t temp = b.temp_bytes;
  check_cub(cub::DeviceRadixSort::SortPairs(b.temp, temp, b.keys_in, b.keys_out, b.index_in,
                                            b.index_out, n, 0, 64, stream));
  primary_keys<<<blocks, kThreads, 0, stream>>>(in, b.index_out, count, pair_rank, b.keys_in);
  temp = b.temp_bytes;
  // Stable: equal (slice, pair) keep the (distance, end) order of the first sort.
  check_cub(cub::DeviceRadixSort::SortPairs(b.temp, temp, b.keys_in, b.keys_out, b.index_out,
                                            b.index_in, n, 0, 56, stream));
  gather<<<blocks, kThreads, 0, stream>>>(in, b.index_in, count, out);
}

void launch_finalize_matches(const RawMatch* sorted, unsigned long long count,
                             const PairView* pairs, const PatternOutput* patterns,
                             const SliceView* slices, MatchFinalizeBuffers b,
                             cudaStream_t stream) {
  if (count == 0) return;
  const unsigned blocks = static_cast<unsigned>((count + kThreads - 1) / kThreads);
  finalize<<<blocks, kThreads, 0, stream>>>(sorted, count, pairs, patterns, slices, b.all,
                                            b.keep);
  std::size_t temp = b.temp_bytes;
  check_cub(cub::DeviceSelect::Flagged(b.temp, temp, b.all, b.keep, b.out, b.kept,
                                       static_cast<int>(count), stream));
}

}  // namespace gw::kernels::cuda
