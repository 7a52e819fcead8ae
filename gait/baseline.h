// A wearer's own gait as a reference: stride curves gathered over the
// wearer's first minutes of walking, and later strides measured against
// them. The pack's examples say whether a gait looks like normal or
// Parkinsonian gait in general; the baseline says whether it has changed
// for this wearer (a Parkinsonian gait that is usual for its wearer does not
// change; a new limp in someone whose gait looked normal does).
//
// Learning: each stride offered while the walking time learned so far
// (left-foot strides' durations, as a minute of walking counts it) is under
// `learn_walking_s` may be kept. At most `strides` curves are kept, evenly
// spread over the learning time: all are kept until the store is full, then
// every second one is dropped and from then on only every second stride
// offered is kept, and so on. When the walking time is reached the baseline
// is learned, and its typical distance fixed: the mean over its strides of
// the mean distance to their k nearest other baseline strides.
//
// Change of a stride: the mean distance of its curve to its k nearest
// baseline strides, divided by the typical distance: near 1 for the
// wearer's usual gait, larger the more the stride differs from it.
//
// Thread safety: one owner; change() may run concurrently with other
// const calls.
#pragma once

#include <cstdint>
#include <vector>

#include "gait/abnormal.h"
#include "gait/cycles.h"

namespace gw::gait {

struct BaselineParams {
  double learn_walking_s = 0;  // walking time to learn from; 0: no baseline
  int strides = 24;            // curves kept (memory: strides x 2 x points floats per wearer)
  int k = 5;                   // nearest baseline strides averaged
  double band_fraction = 0.1;  // DTW band, as the pack's examples use
  double threshold = 1.6;      // a bout whose mean change reaches it has changed
  bool enabled() const { return learn_walking_s > 0; }
};

class StrideBaseline {
 public:
  StrideBaseline(int curve_points, const BaselineParams& params);

  // Offers a stride while learning (ignored once learned). Returns true
  // when this stride completed the learning.
  bool offer(const Stride& stride);
  bool learned() const { return learned_; }
  // The walking time offered so far (capped once learned).
  double walking_s() const { return walking_s_; }
  std::size_t kept() const { return library_.examples().size(); }
  // The mean distance among the baseline's own strides (0 until learned).
  double typical_distance() const { return typical_; }

  // The stride curve's change against the baseline (see above); NaN until
  // learned or when the baseline's strides are all alike (typical 0).
  double change(const std::vector<float>& curve) const;

  const BaselineParams& params() const { return params_; }

 private:
  void finish();

  BaselineParams params_;
  StrideLibrary library_;
  std::uint64_t offered_ = 0;
  std::uint64_t keep_every_ = 1;
  double walking_s_ = 0;
  double typical_ = 0;
  bool learned_ = false;
};

}  // namespace gw::gait
