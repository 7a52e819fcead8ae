// A synthetic walk with known timing for the gait tests: each foot's load is
// a plateau with short linear ramps at heel strike and toe off, so the true
// events are known to a sample.
#pragma once

#include <cmath>
#include <vector>

#include "gait/cycles.h"

namespace gw::gait::testing {

struct SyntheticWalk {
  double rate_hz = 100;
  double duration_s = 60;
  double stride_s = 1.1;
  double swing_s[2] = {0.40, 0.44};   // left, right
  double right_offset_s = 0.55;       // right heel strike after the left's
  double ramp_s = 0.02;               // load rise and fall, inside the stance
  float peak = 700;
  float offset = 10;                  // an unloaded insole's reading
  double start_s = 0;                 // walking starts here (standing before)
};

// The load of foot f at time t of the walk (standing: half the peak on each foot).
inline float synthetic_load(const SyntheticWalk& w, int f, double t) {
  if (t < w.start_s) return w.offset + w.peak / 2;
  const double phase0 = f == 0 ? 0.0 : w.right_offset_s;
  double u = std::fmod(t - w.start_s - phase0, w.stride_s);
  if (u < 0) u += w.stride_s;
  const double stance = w.stride_s - w.swing_s[f];
  if (u >= stance) return w.offset;
  const double edge = std::min(u, stance - u);
  const double level = edge >= w.ramp_s ? 1.0 : edge / w.ramp_s;
  return w.offset + static_cast<float>(level) * w.peak;
}

inline std::vector<Stride> track(const SyntheticWalk& w, StrideTracker& tracker) {
  std::vector<Stride> out;
  const auto n = static_cast<long>(w.duration_s * w.rate_hz);
  for (long i = 0; i < n; ++i) {
    const double t = i / w.rate_hz;
    FootLoad left, right;
    left.load = synthetic_load(w, 0, t);
    right.load = synthetic_load(w, 1, t);
    tracker.push(t, left, right, out);
  }
  return out;
}

}  // namespace gw::gait::testing
