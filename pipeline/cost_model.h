// The batch latency model of Ma 2014: a batch of `work` items takes
// floor + slope * work milliseconds. Fitted online by exponentially weighted
// least squares over the batches the engine measured, so it follows the
// backend actually running (CPU, GPU, a GPU shared with other work) and
// forgets old conditions at the rate `forgetting`.
//
// Thread safety: none (the engine's thread owns it).
#pragma once

#include <cstddef>

namespace gw::pipeline {

class BatchCostModel {
 public:
  // forgetting in (0, 1]: the weight of an observation decays by this factor
  // per later observation (1 = plain least squares).
  explicit BatchCostModel(double forgetting = 0.98);

  // Records a measured batch; work >= 0, ms >= 0 (negative values are ignored).
  void observe(double work, double ms);

  // True once at least `kMinObservations` batches were seen; callers should
  // not shed work on a model that is not ready. Batches of one size only
  // give the proportional fit (floor 0, all time per item: the pessimistic one).
  bool ready() const { return observations_ >= kMinObservations; }
  static constexpr std::size_t kMinObservations = 3;

  double floor_ms() const;  // >= 0
  double slope_ms() const;  // per work item, >= 0
  double predict_ms(double work) const { return floor_ms() + slope_ms() * work; }
  // The most work whose predicted time fits budget_ms: 0 when even the
  // floor does not fit, +inf when the slope is 0.
  double work_within(double budget_ms) const;
  std::size_t observations() const { return observations_; }

 private:
  void fit() const;
  double forgetting_;
  std::size_t observations_ = 0;
  // Weighted sums: weight, work, ms, work^2, work*ms.
  double s0_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
  mutable bool fitted_ = false;
  mutable double floor_ = 0, slope_ = 0;
};

}  // namespace gw::pipeline
