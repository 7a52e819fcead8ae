// A deterministic synthetic source of W1 wearers (docs/search.md,
// "Workload W1") for load tests and benchmarks: 201 channels at 100 Hz per
// wearer = left and right 99-cell pressure insoles + a 3-axis accelerometer.
//
// The insole channels are synthesized from a real gaitpdb recording by
// spatial interpolation of its 8 sensors per foot onto a 9x11 grid (inverse
// distance weighting on the sensor positions of gaitpdb format.txt) plus
// Gaussian noise; the accelerometer is the derivative of the total force
// (a stand-in). Each wearer starts at a different offset of the recording.
// Anything measured on this data says "synthetic from gaitpdb".
#pragma once

#include <cstdint>
#include <vector>

#include "sensors/recording.h"

namespace gw::sensors {

inline constexpr int kW1Channels = 201;
inline constexpr int kW1InsoleChannels = 99;

// Interpolates a gaitpdb recording's 16 sensors onto 2 x 99 insole cells.
// Output channels: left p0..p98, right p0..p98.
Recording interpolate_insoles(const Recording& gaitpdb);

class SyntheticW1Source {
 public:
  // `base` must be a gaitpdb recording; `seed` fixes noise and offsets.
  SyntheticW1Source(const Recording& base, int wearers, std::uint64_t seed, float noise_std = 2.0f);
  int wearers() const { return wearers_; }
  // Appends the next `samples` samples of `wearer` (sample-major, 201
  // channels) to `out`. Successive calls continue the wearer's stream.
  void next(int wearer, int samples, std::vector<float>& out);

 private:
  Recording insoles_;  // all 201 noise-free channels: 198 insole cells, then the accelerometer
  int wearers_;
  std::uint64_t seed_;
  float noise_std_;
  std::vector<std::uint64_t> position_;
  std::vector<std::uint64_t> rng_state_;
};

}  // namespace gw::sensors
