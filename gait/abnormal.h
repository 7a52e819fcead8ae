// Abnormal gait by example: a wearer's strides compared, by DTW of their
// time-normalised load curves (both feet), with example strides of normal and
// of abnormal (Parkinsonian) gait.
//
// A stride's score is the share of abnormal examples among its k nearest
// examples (the distance: sqrt of the sum over both feet's curves of the
// squared banded DTW distance, kernels/dtw.h, i.e. each foot warped on its
// own as the engine's per-dim search does). A set of strides (a walk, a
// walking bout) scores the mean of its strides' scores: 0 = every stride
// looks like the normal examples, 1 = like the abnormal ones; `abnormal`
// when that mean is at least the threshold.
//
// Thread safety: a built library is read-only; score() may run concurrently.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "gait/cycles.h"

namespace gw::gait {

struct AbnormalParams {
  int k = 15;                  // nearest examples voting per stride
  double band_fraction = 0.1;  // Sakoe-Chiba band, a fraction of the curve length
  double threshold = 0.5;      // mean stride score at or above it: abnormal
};

struct StrideExample {
  std::vector<float> curve;  // Stride::curve: 2 * points values
  bool abnormal = false;
  std::string subject;       // whose walk it was cut from (left out with that subject)
};

class StrideLibrary {
 public:
  StrideLibrary(int curve_points, const AbnormalParams& params);
  // Throws gw::Error when the curve's length is not 2 * curve_points.
  void add(StrideExample example);
  const std::vector<StrideExample>& examples() const { return examples_; }
  int curve_points() const { return points_; }
  const AbnormalParams& params() const { return params_; }

  // The distance between two curves of this library's length.
  double distance(const std::vector<float>& a, const std::vector<float>& b) const;
  // Its square, or +infinity once it is certain to exceed `abandon_above`
  // (a squared distance): the early abandoning of the k-nearest search.
  double distance_sq(const std::vector<float>& a, const std::vector<float>& b, double abandon_above) const;
  // Share of abnormal examples among the k nearest to `curve`, leaving out
  // the examples of `exclude_subject` (none when empty). NaN without
  // examples.
  double stride_score(const std::vector<float>& curve, const std::string& exclude_subject = "") const;
  // The mean distance from `curve` to its k nearest examples, leaving out
  // example `exclude_index` (none when negative); NaN without examples.
  double nearest_mean_distance(const std::vector<float>& curve, int k, std::ptrdiff_t exclude_index = -1) const;
  // Mean stride score of `strides` (NaN when there are none).
  double score(const std::vector<Stride>& strides, const std::string& exclude_subject = "") const;

 private:
  int band() const;
  // The k nearest examples to `curve` (squared distance, abnormal), in no
  // order, leaving out those of `exclude_subject` and example `exclude_index`.
  std::vector<std::pair<double, bool>> nearest(const std::vector<float>& curve, int k,
                                               const std::string& exclude_subject,
                                               std::ptrdiff_t exclude_index) const;

  int points_;
  AbnormalParams params_;
  std::vector<StrideExample> examples_;
};

// At most `count` of `strides`, evenly spaced (all when fewer): the examples a
// walk contributes.
std::vector<Stride> evenly_spaced(const std::vector<Stride>& strides, int count);

// The area under the ROC curve of `scores` for `positive` labels (ties count
// one half); NaN without both classes.
double roc_auc(const std::vector<double>& scores, const std::vector<bool>& positive);

}  // namespace gw::gait
