// The CUDA backend's device form of a pattern library: the queries with
// their envelopes and UCR-ordered packs, the window-mode pairs grouped by
// band with the filter's row index, the streaming patterns and the ranks
// that order matches. Built once per set_library(); read by every search.
// Include from .cu files only (kernels/cuda_backend.cu, cuda_library.cu).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <cuda_runtime.h>

#include "common/error.h"
#include "kernels/cuda_kernels.h"
#include "kernels/cuda_memory.h"
#include "kernels/search.h"

namespace gw::kernels {

// Every CUDA failure of the search backend: gw::Error "CUDA backend: what: ...".
inline void check_backend(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw Error(std::string("CUDA backend: ") + what + ": " + cudaGetErrorString(status));
}

// threshold^2 as the kernels compare a distance^2 with it.
inline float cutoff_threshold_sq(double threshold) {
  return std::isinf(threshold) ? INFINITY : static_cast<float>(threshold * threshold);
}

// A lower bound prunes a window only when it exceeds threshold^2 by this
// relative margin, so float rounding never prunes a match (docs/gpu.md).
inline float prune_threshold_sq(double threshold) {
  return std::isinf(threshold) ? INFINITY
                               : static_cast<float>(threshold * threshold * (1 + 1e-4) + 1e-6);
}

// Window-mode patterns' profiles -> the filter's profile slot.
using ProfileSlots = std::unordered_map<std::uint32_t, int>;

// The window-mode pairs of one band: one filter launch and one DTW kernel.
struct BandGroup {
  int band = 0;
  int pair_begin = 0;
  int pair_end = 0;
  int min_length = 0;
  int max_length = 0;
  // Which of the group's pairs read each (profile slot, stream dim) row.
  cuda_memory::DeviceBuffer<int> row_offsets;
  cuda_memory::DeviceBuffer<cuda::RowPair> row_pairs;
  cuda::RowPairsView rows;  // points into row_offsets and row_pairs
};

// Streaming state of one pattern: one slot per stream seen.
struct SpringPattern {
  int pattern = 0;
  int pair_begin = 0;
  int pair_count = 0;
  int length = 0;
  std::unordered_map<std::uint64_t, int> slot_of_stream;
  std::vector<std::int64_t> next_index;  // per slot: first sample not yet consumed
  std::vector<int> free_slots;  // of forgotten streams, taken by new ones first
  cuda_memory::DeviceBuffer<float> d;
  cuda_memory::DeviceBuffer<long long> start;
  long long slots_allocated = 0;
};

struct DeviceLibrary {
  // Pairs ordered by (mode, band): each band group is a contiguous range.
  std::vector<cuda::PairView> host_pairs;
  std::vector<BandGroup> groups;
  ProfileSlots profile_slots;
  std::vector<SpringPattern> springs;
  cuda_memory::DeviceBuffer<cuda::PairView> pairs;
  cuda_memory::DeviceBuffer<cuda::QueryView> queries;
  cuda_memory::DeviceBuffer<float> values, upper, lower;
  cuda_memory::DeviceBuffer<float4> eq_packed, ec_packed;
  // Rank of every pair in (pattern, pattern dim, stream dim) order: the
  // device sort's key for result order.
  cuda_memory::DeviceBuffer<int> pair_rank;
  cuda_memory::DeviceBuffer<cuda::PatternOutput> pattern_outputs;

  cuda::LibraryView view() const {
    return {pairs.get(),     queries.get(),   values.get(), upper.get(),
            lower.get(),     eq_packed.get(), ec_packed.get()};
  }
};

// Checks `library` against what the backend and `device` can run (band,
// window length, shared memory; throws gw::Error naming the pattern and
// suggesting the CPU backend) and builds its device form, uploaded on
// `stream` (synchronised before it returns).
DeviceLibrary upload_library(const PatternLibrary& library, int device, cudaStream_t stream);

}  // namespace gw::kernels
