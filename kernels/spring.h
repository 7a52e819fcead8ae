// One cell of streaming subsequence DTW (SPRING, Sakurai et al., ICDE 2007),
// shared by the CPU and CUDA backends so both compute bit-identical values:
// float arithmetic with explicit rounding (no fused multiply-add) and one
// fixed tie-break order.
//
// D(t, k) = (x_t - q_k)^2 + min(D(t-1, k-1), D(t, k-1), D(t-1, k)), with
// D(t, -1) = 0 for every t (a match may start at any sample) and D(-1, k) =
// +inf. S(t, k) is the start sample of the path that reaches (t, k).
// Ties prefer the diagonal, then D(t, k-1), then D(t-1, k).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define GW_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GW_HOST_DEVICE inline
#endif

namespace gw::kernels {

struct SpringCell {
  float d;
  std::int64_t start;
};

GW_HOST_DEVICE float spring_cost(float x, float q) {
#if defined(__CUDA_ARCH__)
  const float diff = __fsub_rn(x, q);
  return __fmul_rn(diff, diff);
#else
  const float d = x - q;  // gw_kernels builds with -ffp-contract=off: no FMA here
  return d * d;
#endif
}

GW_HOST_DEVICE float spring_add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

GW_HOST_DEVICE SpringCell spring_cell(float cost, SpringCell diag, SpringCell left, SpringCell up) {
  SpringCell best = diag;
  if (left.d < best.d) best = left;
  if (up.d < best.d) best = up;
  return {spring_add(cost, best.d), best.start};
}

}  // namespace gw::kernels
