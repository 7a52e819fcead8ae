// What gait labs measure from insoles, over a set of strides (a walk, or a
// minute of walking): stride counts and times, their variability, cadence,
// the phases of the cycle and the asymmetry between the feet.
//
// Definitions (docs/gait.md):
//   strides                 complete cycles of either foot (a cycle of the
//                           left and one of the right foot are two strides)
//   stride_time_median_s    median cycle time, both feet pooled
//   stride_time_cv          per foot, standard deviation / mean of its cycle
//                           times after leaving out cycles more than 3 robust
//                           standard deviations (1.4826 MAD) from its median
//                           (turns, a hesitation); the mean of the feet with at
//                           least `min_strides_per_foot` cycles
//   cadence_steps_per_min   120 / stride_time_median_s (two steps a stride)
//   stance_fraction         median stance / stride time; swing = 1 - stance
//   double_support_fraction median share of the cycle with both feet down
//   swing_asymmetry         |ln(median left swing / median right swing)|
//                           (Plotnik, Giladi, Hausdorff: gait asymmetry, without
//                           their factor 100)
//   cop_path_per_step       median centre-of-pressure path over the stance
//                           (layout unit); absent without a layout
// A value that cannot be computed (too few strides, a foot without strides)
// is NaN and printed as null.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "gait/cycles.h"

namespace gw::gait {

struct GaitMetrics {
  int strides = 0;
  int left_strides = 0;
  int right_strides = 0;
  double walking_s = 0;                // sum of the left foot's cycle times, else the right's
  double stride_time_median_s = 0;
  double stride_time_cv = 0;
  double cadence_steps_per_min = 0;
  double stance_fraction = 0;
  double swing_fraction = 0;
  double double_support_fraction = 0;
  double swing_asymmetry = 0;
  double cop_path_per_step = 0;
};

GaitMetrics summarise(const std::vector<Stride>& strides, int min_strides_per_foot = 5);

// The metrics as JSON under their names above (and left_strides,
// right_strides, walking_s, swing_fraction); NaN as null.
nlohmann::json metrics_json(const GaitMetrics& metrics);
// A metric as JSON: a number, or null for NaN (not measured).
nlohmann::json metric_json(double value);

// The median of `values` (NaN when empty); reorders them.
double median_of(std::vector<double>& values);

}  // namespace gw::gait
