// Streaming-mode DTW (SPRING) on the GPU. One thread per (slice, pair of the
// pattern): it loads the pair's column once per launch, advances it over up to
// kChunk new samples (query index outer, samples inner, so the column is read
// and written once per chunk instead of once per sample: a new sample costs m
// cells and ~8/kChunk bytes of memory traffic per cell), and reports every
// sample whose best subsequence ends there within the cutoff.
// Arithmetic and tie-breaks are those of kernels/spring.h, shared with the CPU.
#include <cmath>

#include "kernels/cuda_kernels.h"
#include "kernels/spring.h"

namespace gw::kernels::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kChunk = 16;

__global__ void __launch_bounds__(kThreads) spring_kernel(
    BatchView b, LibraryView lib, int pair_begin, int pair_count, const StreamingSlice* slices,
    int slice_count, int chunk_begin, float cutoff_sq, SpringStateView st,
    AppendBuffer<RawMatch> out, DeviceStats* stats) {
  const long long gid = blockIdx.x * static_cast<long long>(kThreads) + threadIdx.x;
  unsigned long long cells = 0;
  if (gid < static_cast<long long>(slice_count) * pair_count) {
    const int si = static_cast<int>(gid / pair_count);
    const int pl = static_cast<int>(gid % pair_count);
    const StreamingSlice ss = slices[si];
    const SliceView s = b.slices[ss.slice];
    const PairView pair = lib.pairs[pair_begin + pl];
    const QueryView qv = lib.queries[pair.query];
    const int m = qv.length;
    const float* q = lib.values + qv.offset;
    const float* x = b.data + s.offset + static_cast<long long>(pair.stream_dim) * s.length;
    const int t0 = ss.first_new + chunk_begin;
    const int n = min(kChunk, s.length - t0);
    if (n > 0 && pair.stream_dim < s.dims) {
      const long long state = static_cast<long long>(ss.slot) * pair_count + pl;
      const bool fresh = ss.reset && chunk_begin == 0;
      const long long abs0 = s.first_index + t0;
      float xs[kChunk];
      SpringCell carry[kChunk];  // D(t, k-1) of each new sample t
#pragma unroll
      for (int t = 0; t < kChunk; ++t) {
        xs[t] = t < n ? x[t0 + t] : 0.f;
        carry[t] = {0.f, abs0 + t};  // D(t, -1) = 0: a match may start at t
      }
      SpringCell old_prev{0.f, abs0};  // D(t0 - 1, k - 1); unused at k = 0
      for (int k = 0; k < m; ++k) {
        const long long at = static_cast<long long>(k) * st.states + state;
        const SpringCell old_k = fresh ? SpringCell{INFINITY, 0} : SpringCell{st.d[at], st.start[at]};
        const float qk = q[k];
        SpringCell up = old_k;           // D(t - 1, k)
        SpringCell diag = old_prev;      // D(t - 1, k - 1)
        SpringCell last = old_k;         // D(t0 + n - 1, k): what the column keeps
#pragma unroll
        for (int t = 0; t < kChunk; ++t) {
          if (t < n) {
            const SpringCell left = carry[t];  // D(t, k - 1)
            const SpringCell d = k == 0 ? SpringCell{0.f, abs0 + t} : diag;
            const SpringCell cell = spring_cell(spring_cost(xs[t], qk), d, left, up);
            diag = left;
            carry[t] = cell;
            up = cell;
            last = cell;
          }
        }
        old_prev = old_k;
        st.d[at] = last.d;
        st.start[at] = last.start;
      }
      cells = static_cast<unsigned long long>(n) * m;
#pragma unroll
      for (int t = 0; t < kChunk; ++t) {
        if (t < n && carry[t].d <= cutoff_sq) {
          const unsigned long long idx = atomicAdd(out.count, 1ull);
          if (idx < out.capacity)
            out.items[idx] = RawMatch{pair_begin + pl, ss.slice, t0 + t, carry[t].d, carry[t].start};
        }
      }
    }
  }
  for (int offset = 16; offset > 0; offset >>= 1)
    cells += __shfl_down_sync(0xffffffffu, cells, offset);
  if ((threadIdx.x & 31) == 0 && cells) atomicAdd(&stats->cells, cells);
}

}  // namespace

void launch_spring(const BatchView& batch, const LibraryView& library, int pair_begin,
                   int pair_count, const StreamingSlice* slices, int slice_count,
                   int max_new_samples, float cutoff_sq, SpringStateView state,
                   AppendBuffer<RawMatch> matches, DeviceStats* stats, cudaStream_t stream) {
  const long long threads = static_cast<long long>(slice_count) * pair_count;
  if (threads == 0) return;
  const unsigned blocks = static_cast<unsigned>((threads + kThreads - 1) / kThreads);
  for (int chunk = 0; chunk < max_new_samples; chunk += kChunk)
    spring_kernel<<<blocks, kThreads, 0, stream>>>(batch, library, pair_begin, pair_count, slices,
                                                   slice_count, chunk, cutoff_sq, state, matches,
                                                   stats);
}

}  // namespace gw::kernels::cuda
