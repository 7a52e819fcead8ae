// Scalar DTW building blocks shared by the CPU backend, the reference used in
// tests, and the offline tools. Thread safety: pure functions.
#pragma once

#include <vector>

namespace gw::kernels {

// z-normalises with population mean/std; a constant input (std == 0, or below
// 1e-8 of |mean|+1) becomes all zeros, so no division by zero can happen.
std::vector<double> znormalize(const float* values, int n);

// Full-matrix banded DTW (no pruning): sqrt of the minimal sum of squared
// differences over warping paths with |row - col| <= band. The reference every
// optimised implementation is tested against.
double dtw_reference(const double* a, const double* b, int m, int band);

// Brute-force window search of one series against one query: for every window
// end t in [first_end, n-1] (t >= m-1), the reference distance. Used by tests.
std::vector<double> sliding_dtw_reference(const float* query, int m, const float* series, int n,
                                          int first_end, int band, bool znorm);

}  // namespace gw::kernels
