#include "pipeline/alignment.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "kernels/dtw.h"

namespace gw::pipeline {

Alignment dtw_alignment(const float* query, const float* window, int m, int band, bool znorm) {
  Alignment out;
  if (znorm) {
    out.query = kernels::znormalize(query, m);
    out.window = kernels::znormalize(window, m);
  } else {
    out.query.assign(query, query + m);
    out.window.assign(window, window + m);
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const auto n = static_cast<std::size_t>(m);
  std::vector<double> cost(n * n, kInf);
  auto at = [&](int i, int j) -> double& {
    return cost[static_cast<std::size_t>(i) * n + static_cast<std::size_t>(j)];
  };
  for (int i = 0; i < m; ++i) {
    for (int j = std::max(0, i - band); j <= std::min(m - 1, i + band); ++j) {
      const double d =
          out.query[static_cast<std::size_t>(i)] - out.window[static_cast<std::size_t>(j)];
      double best = 0;
      if (i > 0 || j > 0) {
        best = kInf;
        if (i > 0 && j > 0) best = std::min(best, at(i - 1, j - 1));
        if (i > 0) best = std::min(best, at(i - 1, j));
        if (j > 0) best = std::min(best, at(i, j - 1));
      }
      at(i, j) = d * d + best;
    }
  }
  out.distance = std::sqrt(at(m - 1, m - 1));
  // Back from the end, preferring the diagonal on ties.
  int i = m - 1, j = m - 1;
  out.path.emplace_back(i, j);
  while (i > 0 || j > 0) {
    if (i > 0 && j > 0 && at(i - 1, j - 1) <= at(i - 1, j) && at(i - 1, j - 1) <= at(i, j - 1)) {
      --i;
      --j;
    } else if (i > 0 && (j == 0 || at(i - 1, j) <= at(i, j - 1))) {
      --i;
    } else {
      --j;
    }
    out.path.emplace_back(i, j);
  }
  std::reverse(out.path.begin(), out.path.end());
  return out;
}

}  // namespace gw::pipeline
