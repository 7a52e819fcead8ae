#include "gait/abnormal.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"
#include "kernels/dtw.h"

namespace gw::gait {

namespace {

// The banded DTW's minimal sum of squared differences between a and b (n
// points each, |i - j| <= band), in two rolling rows; +infinity as soon as a
// whole row exceeds `abandon_above` (the result could only be larger).
double banded_dtw_sq(const float* a, const float* b, int n, int band, double abandon_above,
                     std::vector<double>& previous, std::vector<double>& current) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  previous.assign(static_cast<std::size_t>(n), kInf);
  current.assign(static_cast<std::size_t>(n), kInf);
  for (int i = 0; i < n; ++i) {
    const int lo = std::max(0, i - band), hi = std::min(n - 1, i + band);
    // The row reads current[lo - 1] (left neighbour of its first cell),
    // which still holds the row before last: unreachable. Cells right of
    // the band were never written (the band only moves right), so no row
    // needs a full reset.
    if (lo > 0) current[static_cast<std::size_t>(lo - 1)] = kInf;
    double row_min = kInf;
    for (int j = lo; j <= hi; ++j) {
      const double d = static_cast<double>(a[i]) - static_cast<double>(b[j]);
      double best;
      if (i == 0 && j == 0) {
        best = 0;
      } else {
        best = kInf;
        if (i > 0) best = std::min(best, previous[static_cast<std::size_t>(j)]);
        if (i > 0 && j > 0) best = std::min(best, previous[static_cast<std::size_t>(j - 1)]);
        if (j > 0) best = std::min(best, current[static_cast<std::size_t>(j - 1)]);
      }
      const double cell = d * d + best;
      current[static_cast<std::size_t>(j)] = cell;
      row_min = std::min(row_min, cell);
    }
    if (row_min > abandon_above) return kInf;
    std::swap(previous, current);
  }
  return previous[static_cast<std::size_t>(n - 1)];
}

// The envelope of `q` under the band: upper[i], lower[i] the max and min of
// q[i - band .. i + band].
void envelope(const float* q, int n, int band, float* upper, float* lower) {
  for (int i = 0; i < n; ++i) {
    const int lo = std::max(0, i - band), hi = std::min(n - 1, i + band);
    float u = q[lo], l = q[lo];
    for (int j = lo + 1; j <= hi; ++j) {
      u = std::max(u, q[j]);
      l = std::min(l, q[j]);
    }
    upper[i] = u;
    lower[i] = l;
  }
}

// LB_Keogh (Keogh, "Exact indexing of dynamic time warping"): the squared
// distance of `c` to the query's envelope, a lower bound of their banded DTW's
// sum of squares.
double lb_keogh_sq(const float* c, const float* upper, const float* lower, int n) {
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    const double above = static_cast<double>(c[i]) - upper[i];
    const double below = static_cast<double>(lower[i]) - c[i];
    if (above > 0) sum += above * above;
    else if (below > 0) sum += below * below;
  }
  return sum;
}

}  // namespace

StrideLibrary::StrideLibrary(int curve_points, const AbnormalParams& params)
    : points_(curve_points), params_(params) {}

void StrideLibrary::add(StrideExample example) {
  if (static_cast<int>(example.curve.size()) != 2 * points_) {
    throw Error("stride example of " + std::to_string(example.curve.size()) + " values, expected " +
                std::to_string(2 * points_) + " (two feet of " + std::to_string(points_) + " points)");
  }
  examples_.push_back(std::move(example));
}

int StrideLibrary::band() const {
  return std::max(0, static_cast<int>(std::lround(params_.band_fraction * points_)));
}

double StrideLibrary::distance_sq(const std::vector<float>& a, const std::vector<float>& b, double abandon_above) const {
  thread_local std::vector<double> previous, current;
  const double left = banded_dtw_sq(a.data(), b.data(), points_, band(), abandon_above, previous, current);
  if (!(left <= abandon_above)) return std::numeric_limits<double>::infinity();
  const double right = banded_dtw_sq(a.data() + points_, b.data() + points_, points_, band(),
                                     abandon_above - left, previous, current);
  return left + right;
}

double StrideLibrary::distance(const std::vector<float>& a, const std::vector<float>& b) const {
  return std::sqrt(distance_sq(a, b, std::numeric_limits<double>::infinity()));
}

std::vector<std::pair<double, bool>> StrideLibrary::nearest(const std::vector<float>& curve, int k,
                                                            const std::string& exclude_subject,
                                                            std::ptrdiff_t exclude_index) const {
  // The k nearest so far in a max-heap by distance (ties: the abnormal one
  // above, so that it leaves first, as a sort by (distance, label) keeps the
  // normal one); an example whose DTW passes the k-th distance is abandoned.
  const auto wanted = static_cast<std::size_t>(std::max(1, k));
  std::vector<std::pair<double, bool>> found;
  found.reserve(wanted + 1);
  double kth = std::numeric_limits<double>::infinity();
  thread_local std::vector<float> upper, lower;
  upper.resize(2 * static_cast<std::size_t>(points_));
  lower.resize(2 * static_cast<std::size_t>(points_));
  for (int side = 0; side < 2; ++side)
    envelope(curve.data() + side * points_, points_, band(), upper.data() + side * points_,
             lower.data() + side * points_);
  for (std::size_t i = 0; i < examples_.size(); ++i) {
    const StrideExample& e = examples_[i];
    if (static_cast<std::ptrdiff_t>(i) == exclude_index) continue;
    if (!exclude_subject.empty() && e.subject == exclude_subject) continue;
    // An example whose lower bound already passes the k-th distance cannot
    // enter (a tie could only enter as the normal one of equal distance:
    // the bound is strict for those, so ties are searched).
    if (found.size() == wanted &&
        lb_keogh_sq(e.curve.data(), upper.data(), lower.data(), 2 * points_) > kth)
      continue;
    const double d = distance_sq(curve, e.curve, kth);
    if (found.size() == wanted && !(std::make_pair(d, e.abnormal) < found.front())) continue;
    found.emplace_back(d, e.abnormal);
    std::push_heap(found.begin(), found.end());
    if (found.size() > wanted) {
      std::pop_heap(found.begin(), found.end());
      found.pop_back();
    }
    if (found.size() == wanted) kth = found.front().first;
  }
  return found;
}

double StrideLibrary::stride_score(const std::vector<float>& curve, const std::string& exclude_subject) const {
  const auto nearest_examples = nearest(curve, params_.k, exclude_subject, -1);
  if (nearest_examples.empty()) return std::numeric_limits<double>::quiet_NaN();
  int abnormal = 0;
  for (const auto& [d, is_abnormal] : nearest_examples) abnormal += is_abnormal ? 1 : 0;
  return static_cast<double>(abnormal) / static_cast<double>(nearest_examples.size());
}

double StrideLibrary::nearest_mean_distance(const std::vector<float>& curve, int k,
                                            std::ptrdiff_t exclude_index) const {
  const auto nearest_examples = nearest(curve, k, "", exclude_index);
  if (nearest_examples.empty()) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0;
  for (const auto& [d, is_abnormal] : nearest_examples) sum += std::sqrt(d);
  return sum / static_cast<double>(nearest_examples.size());
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
