#include "gait/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gw::gait {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Coefficient of variation of `times` after leaving out values more than 3
// robust standard deviations from the median; NaN for fewer than `min` values
// left.
double robust_cv(std::vector<double> times, int min) {
  if (static_cast<int>(times.size()) < min) return kNaN;
  std::vector<double> work = times;
  const double median = median_of(work);
  for (std::size_t i = 0; i < times.size(); ++i) work[i] = std::fabs(times[i] - median);
  const double mad = median_of(work);
  const double limit = 3.0 * 1.4826 * mad;
  double sum = 0, sum_sq = 0;
  int n = 0;
  for (double v : times) {
    if (std::fabs(v - median) > limit && mad > 0) continue;
    sum += v;
    ++n;
  }
  if (n < min) return kNaN;
  const double mean = sum / n;
  for (double v : times) {
    if (std::fabs(v - median) > limit && mad > 0) continue;
    sum_sq += (v - mean) * (v - mean);
  }
  return std::sqrt(sum_sq / n) / mean;
}
}  // namespace

double median_of(std::vector<double>& values) {
  if (values.empty()) return kNaN;
  const std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const double upper = values[mid];
  if (values.size() % 2) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

nlohmann::json metric_json(double value) { return std::isnan(value) ? nlohmann::json(nullptr) : nlohmann::json(value); }

nlohmann::json metrics_json(const GaitMetrics& m) {
  return {{"strides", m.strides},
          {"left_strides", m.left_strides},
          {"right_strides", m.right_strides},
          {"walking_s", m.walking_s},
          {"stride_time_median_s", metric_json(m.stride_time_median_s)},
          {"stride_time_cv", metric_json(m.stride_time_cv)},
          {"cadence_steps_per_min", metric_json(m.cadence_steps_per_min)},
          {"stance_fraction", metric_json(m.stance_fraction)},
          {"swing_fraction", metric_json(m.swing_fraction)},
          {"double_support_fraction", metric_json(m.double_support_fraction)},
          {"swing_asymmetry", metric_json(m.swing_asymmetry)},
          {"cop_path_per_step", metric_json(m.cop_path_per_step)}};
}

GaitMetrics summarise(const std::vector<Stride>& strides, int min_strides_per_foot) {
  GaitMetrics m;
  std::vector<double> times, stance, double_support, cop, foot_times[2], foot_swing[2];
  for (const Stride& s : strides) {
    const int f = static_cast<int>(s.foot);
    times.push_back(s.stride_s());
    stance.push_back(s.stance_s() / s.stride_s());
    double_support.push_back(s.double_support_s / s.stride_s());
    if (s.cop_path >= 0) cop.push_back(s.cop_path);
    foot_times[f].push_back(s.stride_s());
    foot_swing[f].push_back(s.swing_s());
  }
  m.strides = static_cast<int>(strides.size());
  m.left_strides = static_cast<int>(foot_times[0].size());
  m.right_strides = static_cast<int>(foot_times[1].size());
  const auto& walked = foot_times[0].empty() ? foot_times[1] : foot_times[0];
  for (double t : walked) m.walking_s += t;
  m.stride_time_median_s = median_of(times);
  m.cadence_steps_per_min = 120.0 / m.stride_time_median_s;
  m.stance_fraction = median_of(stance);
  m.swing_fraction = 1.0 - m.stance_fraction;
  m.double_support_fraction = median_of(double_support);
  m.cop_path_per_step = median_of(cop);

  double cv_sum = 0;
  int cv_feet = 0;
  for (const auto& t : foot_times) {
    const double cv = robust_cv(t, min_strides_per_foot);
    if (!std::isnan(cv)) {
      cv_sum += cv;
      ++cv_feet;
    }
  }
  m.stride_time_cv = cv_feet ? cv_sum / cv_feet : kNaN;
  const double left_swing = median_of(foot_swing[0]);
  const double right_swing = median_of(foot_swing[1]);
  m.swing_asymmetry = (left_swing > 0 && right_swing > 0) ? std::fabs(std::log(left_swing / right_swing)) : kNaN;
  return m;
}

}  // namespace gw::gait
