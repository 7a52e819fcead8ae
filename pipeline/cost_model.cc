#include "pipeline/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gw::pipeline {

BatchCostModel::BatchCostModel(double forgetting)
    : forgetting_(std::clamp(forgetting, 1e-6, 1.0)) {}

void BatchCostModel::observe(double work, double ms) {
  if (!(work >= 0) || !(ms >= 0)) return;
  s0_ = s0_ * forgetting_ + 1;
  sx_ = sx_ * forgetting_ + work;
  sy_ = sy_ * forgetting_ + ms;
  sxx_ = sxx_ * forgetting_ + work * work;
  sxy_ = sxy_ * forgetting_ + work * ms;
  ++observations_;
  fitted_ = false;
}

void BatchCostModel::fit() const {
  if (fitted_) return;
  fitted_ = true;
  floor_ = slope_ = 0;
  if (s0_ <= 0) return;
  const double denominator = s0_ * sxx_ - sx_ * sx_;
  // Batches of (almost) one size say nothing about the slope: attribute the
  // whole time to the work, the pessimistic reading.
  if (denominator <= 1e-9 * s0_ * sxx_ || !std::isfinite(denominator)) {
    slope_ = sx_ > 0 ? sy_ / sx_ : 0;
    floor_ = sx_ > 0 ? 0 : sy_ / s0_;
    return;
  }
  slope_ = (s0_ * sxy_ - sx_ * sy_) / denominator;
  floor_ = (sy_ - slope_ * sx_) / s0_;
  // Noise can make either negative; clamp and refit the other through the mean.
  if (slope_ < 0) {
    slope_ = 0;
    floor_ = sy_ / s0_;
  } else if (floor_ < 0) {
    floor_ = 0;
    slope_ = sxx_ > 0 ? sxy_ / sxx_ : 0;
  }
}

double BatchCostModel::floor_ms() const {
  fit();
  return floor_;
}

double BatchCostModel::slope_ms() const {
  fit();
  return slope_;
}

double BatchCostModel::work_within(double budget_ms) const {
  fit();
  if (budget_ms < floor_) return 0;
  if (slope_ <= 0) return std::numeric_limits<double>::infinity();
  return (budget_ms - floor_) / slope_;
}

}  // namespace gw::pipeline
