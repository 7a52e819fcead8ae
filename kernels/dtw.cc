#include "kernels/dtw.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gw::kernels {

bool is_constant_window(double mean, double std) {
  // Written as a negated ">=" so that a NaN std also counts as constant.
  return !(std > 0 && std >= 1e-8 * (std::fabs(mean) + 1));
}

MeanStd mean_std(const float* values, int n) {
  MeanStd result;
  if (n <= 0) return result;
  double sum = 0;
  for (int k = 0; k < n; ++k) sum += values[k];
  result.mean = sum / n;
  double squares = 0;
  for (int k = 0; k < n; ++k) {
    const double deviation = values[k] - result.mean;
    squares += deviation * deviation;
  }
  result.std = std::sqrt(squares / n);
  result.constant = is_constant_window(result.mean, result.std);
  return result;
}

std::vector<double> znormalize(const float* values, int n) {
  std::vector<double> out(std::max(n, 0), 0.0);
  if (n <= 0) return out;
  const MeanStd stats = mean_std(values, n);
  if (stats.constant) return out;
  for (int k = 0; k < n; ++k) out[k] = (values[k] - stats.mean) / stats.std;
  return out;
}

double dtw_reference(const double* a, const double* b, int m, int band) {
  if (m <= 0) return 0;
  band = std::clamp(band, 0, m - 1);
  const double inf = std::numeric_limits<double>::infinity();
  // The whole m x m matrix, cells outside the band left at infinity, so this
  // stays an obviously correct transcription of the recurrence.
  std::vector<double> cost(static_cast<std::size_t>(m) * m, inf);
  auto at = [&](int row, int col) -> double& {
    return cost[static_cast<std::size_t>(row) * m + col];
  };
  for (int row = 0; row < m; ++row) {
    const int col_begin = std::max(0, row - band);
    const int col_end = std::min(m - 1, row + band);
    for (int col = col_begin; col <= col_end; ++col) {
      const double diff = a[row] - b[col];
      const double cell = diff * diff;
      double best;
      if (row == 0 && col == 0) {
        best = 0;
      } else {
        best = inf;
        if (row > 0 && col > 0) best = std::min(best, at(row - 1, col - 1));
        if (row > 0) best = std::min(best, at(row - 1, col));
        if (col > 0) best = std::min(best, at(row, col - 1));
      }
      at(row, col) = cell + best;
    }
  }
  return std::sqrt(at(m - 1, m - 1));
}

std::vector<double> sliding_dtw_reference(const float* query, int m, const float* series, int n,
                                          int first_end, int band, bool znorm) {
  std::vector<double> distances;
  if (m <= 0 || n < m) return distances;
  const int begin = std::max(first_end, m - 1);
  std::vector<double> q;
  if (znorm) {
    q = znormalize(query, m);
  } else {
    q.assign(query, query + m);
  }
  std::vector<double> window(m);
  for (int end = begin; end < n; ++end) {
    const float* start = series + end - m + 1;
    if (znorm) {
      window = znormalize(start, m);
    } else {
      window.assign(start, start + m);
    }
    distances.push_back(dtw_reference(q.data(), window.data(), m, band));
  }
  return distances;
}

}  // namespace gw::kernels
