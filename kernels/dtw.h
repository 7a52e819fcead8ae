// Scalar DTW building blocks shared by the CPU backend, the reference used in
// tests, and the offline tools. Thread safety: pure functions.
#pragma once

#include <vector>

namespace gw::kernels {

// Population mean and standard deviation computed in two passes in double
// (sum, then sum of squared deviations), and the constant-input rule every
// z-normalisation in gaitwatch shares: `constant` is true when std == 0 or
// std < 1e-8 * (|mean| + 1). n >= 1.
struct MeanStd {
  double mean = 0;
  double std = 0;
  bool constant = true;
};
MeanStd mean_std(const float* values, int n);

// True when a window with this mean and std counts as constant (see MeanStd).
bool is_constant_window(double mean, double std);

// z-normalises with population mean/std; a constant input (std == 0, or below
// 1e-8 of |mean|+1) becomes all zeros, so no division by zero can happen.
// Non-constant values are (x - mean) / std with mean/std from mean_std().
std::vector<double> znormalize(const float* values, int n);

// Full-matrix banded DTW (no pruning): sqrt of the minimal sum of squared
// differences over warping paths with |row - col| <= band. The reference every
// optimised implementation is tested against.
double dtw_reference(const double* a, const double* b, int m, int band);

// Brute-force window search of one series against one query: for every window
// end t in [first_end, n-1] (t >= m-1), the reference distance. Used by tests.
// Element k of the result belongs to the window ending at max(first_end, m-1) + k
// (empty when no window fits). With znorm both the query and every window go
// through znormalize().
std::vector<double> sliding_dtw_reference(const float* query, int m, const float* series, int n,
                                          int first_end, int band, bool znorm);

}  // namespace gw::kernels
