#include "gait/abnormal.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"
#include "kernels/dtw.h"

namespace gw::gait {

StrideLibrary::StrideLibrary(int curve_points, const AbnormalParams& params)
    : points_(curve_points), params_(params) {}

void StrideLibrary::add(StrideExample example) {
  if (static_cast<int>(example.curve.size()) != 2 * points_) {
    throw Error("stride example of " + std::to_string(example.curve.size()) + " values, expected " +
                std::to_string(2 * points_) + " (two feet of " + std::to_string(points_) + " points)");
  }
  examples_.push_back(std::move(example));
}

double StrideLibrary::distance(const std::vector<float>& a, const std::vector<float>& b) const {
  const int band = std::max(0, static_cast<int>(std::lround(params_.band_fraction * points_)));
  double sum = 0;
  std::vector<double> x(static_cast<std::size_t>(points_)), y(static_cast<std::size_t>(points_));
  for (int side = 0; side < 2; ++side) {
    for (int k = 0; k < points_; ++k) {
      x[static_cast<std::size_t>(k)] = a[static_cast<std::size_t>(side * points_ + k)];
      y[static_cast<std::size_t>(k)] = b[static_cast<std::size_t>(side * points_ + k)];
    }
    const double d = kernels::dtw_reference(x.data(), y.data(), points_, band);
    sum += d * d;
  }
  return std::sqrt(sum);
}

double StrideLibrary::stride_score(const std::vector<float>& curve, const std::string& exclude_subject) const {
  std::vector<std::pair<double, bool>> nearest;
  nearest.reserve(examples_.size());
  for (const StrideExample& e : examples_) {
    if (!exclude_subject.empty() && e.subject == exclude_subject) continue;
    nearest.emplace_back(distance(curve, e.curve), e.abnormal);
  }
  if (nearest.empty()) return std::numeric_limits<double>::quiet_NaN();
  const auto k = std::min<std::size_t>(static_cast<std::size_t>(std::max(1, params_.k)), nearest.size());
  std::partial_sort(nearest.begin(), nearest.begin() + static_cast<std::ptrdiff_t>(k), nearest.end());
  int abnormal = 0;
  for (std::size_t i = 0; i < k; ++i) abnormal += nearest[i].second ? 1 : 0;
  return static_cast<double>(abnormal) / static_cast<double>(k);
}

double StrideLibrary::score(const std::vector<Stride>& strides, const std::string& exclude_subject) const {
  double sum = 0;
  int n = 0;
  for (const Stride& s : strides) {
    const double v = stride_score(s.curve, exclude_subject);
    if (std::isnan(v)) continue;
    sum += v;
    ++n;
  }
  return n ? sum / n : std::numeric_limits<double>::quiet_NaN();
}

std::vector<Stride> evenly_spaced(const std::vector<Stride>& strides, int count) {
  if (count <= 0) return {};
  if (static_cast<int>(strides.size()) <= count) return strides;
  std::vector<Stride> out;
  out.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    out.push_back(strides[static_cast<std::size_t>(i) * strides.size() / static_cast<std::size_t>(count)]);
  }
  return out;
}

double roc_auc(const std::vector<double>& scores, const std::vector<bool>& positive) {
  double pairs = 0, wins = 0;
  for (std::size_t i = 0; i < scores.size(); ++i) {
    if (!positive[i]) continue;
    for (std::size_t j = 0; j < scores.size(); ++j) {
      if (positive[j]) continue;
      pairs += 1;
      if (scores[i] > scores[j]) wins += 1;
      else if (scores[i] == scores[j]) wins += 0.5;
    }
  }
  return pairs > 0 ? wins / pairs : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace gw::gait
