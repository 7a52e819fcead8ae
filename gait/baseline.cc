#include "gait/baseline.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "common/error.h"

namespace gw::gait {

namespace {

AbnormalParams library_params(const BaselineParams& params) {
  AbnormalParams out;
  out.k = params.k;
  out.band_fraction = params.band_fraction;
  return out;
}

}  // namespace

StrideBaseline::StrideBaseline(int curve_points, const BaselineParams& params)
    : params_(params), library_(curve_points, library_params(params)) {
  if (params.strides < 2 || params.k < 1 || !(params.learn_walking_s > 0) || !(params.threshold > 0)) {
    throw Error("stride baseline: strides >= 2, k >= 1, learn_walking_s > 0 and threshold > 0 needed");
  }
}

bool StrideBaseline::offer(const Stride& stride) {
  if (learned_) return false;
  if (static_cast<int>(stride.curve.size()) != 2 * library_.curve_points()) return false;
  if (offered_ % keep_every_ == 0) {
    if (static_cast<int>(library_.examples().size()) == params_.strides) {
      // Full: keep every second curve, then take every second stride.
      StrideLibrary thinned(library_.curve_points(), library_.params());
      const auto& examples = library_.examples();
      for (std::size_t i = 0; i < examples.size(); i += 2) thinned.add(examples[i]);
      library_ = std::move(thinned);
      keep_every_ *= 2;
    }
    if (offered_ % keep_every_ == 0) library_.add(StrideExample{stride.curve, false, ""});
  }
  ++offered_;
  if (stride.foot == Foot::kLeft) walking_s_ += stride.stride_s();
  if (walking_s_ < params_.learn_walking_s) return false;
  finish();
  return true;
}

void StrideBaseline::finish() {
  learned_ = true;
  const auto& examples = library_.examples();
  double sum = 0;
  int n = 0;
  for (std::size_t i = 0; i < examples.size(); ++i) {
    const double d = library_.nearest_mean_distance(examples[i].curve, params_.k, static_cast<std::ptrdiff_t>(i));
    if (std::isnan(d)) continue;
    sum += d;
    ++n;
  }
  typical_ = n ? sum / n : 0;
}

double StrideBaseline::change(const std::vector<float>& curve) const {
  if (!learned_ || !(typical_ > 0)) return std::numeric_limits<double>::quiet_NaN();
  return library_.nearest_mean_distance(curve, params_.k) / typical_;
}

}  // namespace gw::gait
