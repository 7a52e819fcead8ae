// The warping path of one banded DTW comparison, for showing a detection
// (`gaitwatch plot`). The search itself only needs distances (kernels/); this
// recomputes one pattern-dim/window pair with backtracking, using the same
// cost (squared difference), band and z-normalisation.
//
// Thread safety: a pure function.
#pragma once

#include <utility>
#include <vector>

namespace gw::pipeline {

struct Alignment {
  std::vector<double> query;  // as compared: z-normalised when znorm
  std::vector<double> window;
  std::vector<std::pair<int, int>> path;  // (query index, window index) from (0, 0) to (m-1, m-1)
  double distance = 0;  // sqrt of the path's summed cost; equals kernels::dtw_reference
};

// query and window: m values each; 0 <= band < m.
Alignment dtw_alignment(const float* query, const float* window, int m, int band, bool znorm);

}  // namespace gw::pipeline
