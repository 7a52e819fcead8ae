// The warping path of one banded DTW comparison, for showing a detection
// (`gaitwatch plot`). The search itself only needs distances (kernels/); this
// recomputes one pattern-dim/window pair with backtracking, using the same
// cost (squared difference), band and z-normalisation.
//
// Thread safety: a pure function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "sinks/alert.h"

namespace gw::pipeline {

struct CompiledPattern;
struct CompiledLibrary;

struct Alignment {
  std::vector<double> query;  // as compared: z-normalised when znorm
  std::vector<double> window;
  std::vector<std::pair<int, int>> path;  // (query index, window index) from (0, 0) to (m-1, m-1)
  double distance = 0;  // sqrt of the path's summed cost; equals kernels::dtw_reference
};

// query and window: m values each; 0 <= band < m.
Alignment dtw_alignment(const float* query, const float* window, int m, int band, bool znorm);

// The positive example of `pattern` (one scoped to `wearer` or to every
// wearer) nearest to the windows: the smallest sum over `windows` of the
// DTW distance between the example's dim and the window (pattern_dim,
// m values as the view searches them). nullopt when it has none.
// `library` is the one `pattern` was compiled in.
std::optional<std::size_t> nearest_positive_example(
    const CompiledLibrary& library, const CompiledPattern& pattern, std::uint32_t wearer,
    const std::vector<std::pair<int, std::vector<float>>>& windows);

// A stored detection next to the example it matched, for the console's
// alert page: per matched dim, the example's dim and the window as
// compared, with the warping path between them.
struct MatchedDim {
  int pattern_dim = 0;
  std::string channel;  // the view channel the dim matched on
  Alignment alignment;
};
struct AlertExplanation {
  std::size_t example = 0;  // index among the pattern's configured examples
  std::vector<MatchedDim> dims;
  // Not exactly what the search compared: the pattern normalises per wearer
  // and the window keeps no baseline (cut before windows kept one), or a
  // dim's match reached before the stored window (the nearest stored window
  // stands in).
  bool approximate = false;
};

// Recomputes what the search compared for `alert` from its stored `window`
// and the configured pattern named there. Throws gw::Error when the pattern
// or the device is no longer configured, its shape changed since the
// window was cut, or the window is too short for a matched dim.
AlertExplanation explain_alert(const config::Config& config, const Alert& alert,
                               const AlertWindow& window);

}  // namespace gw::pipeline
