// Puts a batch's matches into SearchResult order on the device, so the host
// only converts and caps them: two stable radix sorts (CUB), first by
// (distance^2, end), then by (slice, rank of the pair in (pattern, pattern
// dim, stream dim) order), and a gather.
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda_kernels.h"

namespace gw::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void secondary_keys(const RawMatch* in, unsigned long long count,
                               unsigned long long* keys, unsigned* index) {
  const unsigned long long i = blockIdx.x * static_cast<unsigned long long>(kThreads) + threadIdx.x;
  if (i >= count) return;
  // distance^2 >= 0: its bits order like the value.
  keys[i] = (static_cast<unsigned long long>(__float_as_uint(in[i].distance_sq)) << 32) |
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

void check_cub(cudaError_t status) {
  if (status != cudaSuccess) throw std::runtime_error(cudaGetErrorString(status));
}

}  // namespace

std::size_t match_sort_temp_bytes(unsigned long long count) {
  std::size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<unsigned long long*>(nullptr),
                                  static_cast<unsigned long long*>(nullptr),
                                  static_cast<unsigned*>(nullptr), static_cast<unsigned*>(nullptr),
                                  static_cast<int>(count));
  return bytes;
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

}  // namespace gw::kernels::cuda
