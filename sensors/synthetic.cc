#include "sensors/synthetic.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <utility>

#include "common/error.h"

namespace gw::sensors {
namespace {

constexpr int kSensorsPerFoot = 8;
constexpr int kAccelerometerChannels = kW1Channels - 2 * kW1InsoleChannels;
static_assert(kAccelerometerChannels == 3);

// The insole grid: 9 columns across the foot, from the lateral edge (column 0)
// to the medial edge (column 8), and 11 rows along it, from the heel (row 0)
// to the toe (row 10); cell = row * 9 + column. Both feet use the same
// anatomical layout (the right foot is mirrored), so cell k means the same
// spot under either foot.
constexpr int kGridColumns = 9;
constexpr int kGridRows = 11;
static_assert(kGridColumns * kGridRows == kW1InsoleChannels);

struct Sensor {
  const char* channel;
  double x;
  double y;
};
using FootSensors = std::array<Sensor, kSensorsPerFoot>;

// Sensor positions from data/gaitpdb/format.txt (arbitrary units; origin
// between the feet, +y forward).
constexpr FootSensors kLeftFoot = {{{"L1", -500, -800},
                                    {"L2", -700, -400},
                                    {"L3", -300, -400},
                                    {"L4", -700, 0},
                                    {"L5", -300, 0},
                                    {"L6", -700, 400},
                                    {"L7", -300, 400},
                                    {"L8", -500, 800}}};
constexpr FootSensors kRightFoot = {{{"R1", 500, -800},
                                     {"R2", 700, -400},
                                     {"R3", 300, -400},
                                     {"R4", 700, 0},
                                     {"R5", 300, 0},
                                     {"R6", 700, 400},
                                     {"R7", 300, 400},
                                     {"R8", 500, 800}}};

// Inverse-distance weights (power 2) of the foot's sensors for every grid
// cell, weights[cell * 8 + sensor], each cell's weights summing to 1. The grid
// spans the bounding box of the foot's sensors; a cell on a sensor copies it.
std::vector<double> idw_weights(const FootSensors& foot) {
  double min_x = foot[0].x, max_x = foot[0].x, min_y = foot[0].y, max_y = foot[0].y;
  for (const Sensor& s : foot) {
    min_x = std::min(min_x, s.x);
    max_x = std::max(max_x, s.x);
    min_y = std::min(min_y, s.y);
    max_y = std::max(max_y, s.y);
  }
  // The lateral edge is the one farther from the midline x = 0.
  const bool left = std::fabs(min_x) > std::fabs(max_x);
  const double lateral_x = left ? min_x : max_x;
  const double medial_x = left ? max_x : min_x;

  std::vector<double> weights(kW1InsoleChannels * kSensorsPerFoot, 0.0);
  for (int row = 0; row < kGridRows; ++row) {
    const double y = min_y + (max_y - min_y) * row / (kGridRows - 1);
    for (int column = 0; column < kGridColumns; ++column) {
      const double x = lateral_x + (medial_x - lateral_x) * column / (kGridColumns - 1);
      double* w = &weights[(row * kGridColumns + column) * kSensorsPerFoot];
      double sum = 0;
      for (int s = 0; s < kSensorsPerFoot; ++s) {
        const double d2 = (x - foot[s].x) * (x - foot[s].x) + (y - foot[s].y) * (y - foot[s].y);
        if (d2 == 0) {
          std::fill(w, w + kSensorsPerFoot, 0.0);
          w[s] = 1;
          sum = 1;
          break;
        }
        w[s] = 1 / d2;
        sum += w[s];
      }
      for (int s = 0; s < kSensorsPerFoot; ++s) w[s] /= sum;
    }
  }
  return weights;
}

std::array<std::size_t, kSensorsPerFoot> sensor_channels(const Recording& gaitpdb,
                                                         const FootSensors& foot) {
  std::array<std::size_t, kSensorsPerFoot> channels{};
  for (int s = 0; s < kSensorsPerFoot; ++s) channels[s] = gaitpdb.channel_index(foot[s].channel);
  return channels;
}

// The accelerometer stand-in. gaitpdb has no accelerometer, so three signals
// with gait timing are derived from the 16 force sensors, each the time
// derivative (central difference) of a force sum divided by the mean total
// force (a body-weight proxy), in body weights per second:
//   acc_fwd  = d/dt (front half: sensors with y > 0) - (back half: y < 0),
//   acc_vert = d/dt (left total + right total),
//   acc_lat  = d/dt (left total - right total).
// It is no model of a real accelerometer; it only gives the W1 load three
// channels that move with the steps.
std::vector<float> accelerometer_stand_in(const Recording& gaitpdb) {
  const auto left = sensor_channels(gaitpdb, kLeftFoot);
  const auto right = sensor_channels(gaitpdb, kRightFoot);
  const std::size_t n = gaitpdb.samples();
  std::vector<std::array<double, kAccelerometerChannels>> forces(n);
  double total_sum = 0;
  for (std::size_t t = 0; t < n; ++t) {
    double front = 0, back = 0, left_total = 0, right_total = 0;
    for (int s = 0; s < kSensorsPerFoot; ++s) {
      const double l = gaitpdb.at(t, left[s]);
      const double r = gaitpdb.at(t, right[s]);
      left_total += l;
      right_total += r;
      // Both feet share the sensor y positions.
      if (kLeftFoot[s].y > 0) front += l + r;
      if (kLeftFoot[s].y < 0) back += l + r;
    }
    forces[t] = {front - back, left_total + right_total, left_total - right_total};
    total_sum += left_total + right_total;
  }
  const double body_weight = n && total_sum > 0 ? total_sum / n : 1.0;
  std::vector<float> acc(n * kAccelerometerChannels, 0.0f);
  if (n < 2) return acc;
  const double dt = 1.0 / gaitpdb.sample_rate_hz;
  for (std::size_t t = 0; t < n; ++t) {
    const std::size_t before = t == 0 ? 0 : t - 1;
    const std::size_t after = t + 1 == n ? t : t + 1;
    for (int k = 0; k < kAccelerometerChannels; ++k) {
      const double slope = (forces[after][k] - forces[before][k]) / ((after - before) * dt);
      acc[t * kAccelerometerChannels + k] = static_cast<float>(slope / body_weight);
    }
  }
  return acc;
}

// splitmix64 (Steele, Lea, Flood 2014): a tiny generator with the same output
// on every platform, used both to seed and as each wearer's noise stream.
constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;
std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
std::uint64_t next_random(std::uint64_t& state) { return mix64(state += kGolden); }

// Uniform in (0, 1], from the top 53 bits, so that log() below stays finite.
double uniform_open_zero(std::uint64_t& state) {
  return static_cast<double>((next_random(state) >> 11) + 1) * 0x1.0p-53;
}

// Two independent standard normal numbers (Box-Muller).
std::array<double, 2> normal_pair(std::uint64_t& state) {
  constexpr double kTwoPi = 6.283185307179586476925;
  const double radius = std::sqrt(-2.0 * std::log(uniform_open_zero(state)));
  const double angle = kTwoPi * uniform_open_zero(state);
  return {radius * std::cos(angle), radius * std::sin(angle)};
}

}  // namespace

Recording interpolate_insoles(const Recording& gaitpdb) {
  const FootSensors* feet[] = {&kLeftFoot, &kRightFoot};
  const char* prefixes[] = {"left_p", "right_p"};
  std::array<std::size_t, kSensorsPerFoot> channels[2];
  std::vector<double> weights[2];
  for (int f = 0; f < 2; ++f) {
    channels[f] = sensor_channels(gaitpdb, *feet[f]);
    weights[f] = idw_weights(*feet[f]);
  }

  Recording out;
  out.source = gaitpdb.source;
  out.sample_rate_hz = gaitpdb.sample_rate_hz;
  out.time_s = gaitpdb.time_s;
  out.labels = gaitpdb.labels;
  for (int f = 0; f < 2; ++f) {
    for (int cell = 0; cell < kW1InsoleChannels; ++cell) {
      out.channel_names.push_back(prefixes[f] + std::to_string(cell));
    }
  }
  const std::size_t n = gaitpdb.samples();
  out.values.resize(n * 2 * kW1InsoleChannels);
  for (std::size_t t = 0; t < n; ++t) {
    float* row = &out.values[t * 2 * kW1InsoleChannels];
    for (int f = 0; f < 2; ++f) {
      double sensor[kSensorsPerFoot];
      for (int s = 0; s < kSensorsPerFoot; ++s) sensor[s] = gaitpdb.at(t, channels[f][s]);
      for (int cell = 0; cell < kW1InsoleChannels; ++cell) {
        const double* w = &weights[f][cell * kSensorsPerFoot];
        double value = 0;
        for (int s = 0; s < kSensorsPerFoot; ++s) value += w[s] * sensor[s];
        row[f * kW1InsoleChannels + cell] = static_cast<float>(value);
      }
    }
  }
  return out;
}

SyntheticW1Source::SyntheticW1Source(const Recording& base, int wearers, std::uint64_t seed,
                                     float noise_std)
    : wearers_(wearers), seed_(seed), noise_std_(noise_std) {
  if (wearers < 1) throw Error("synthetic W1 source: wearers must be at least 1");
  if (!std::isfinite(noise_std) || noise_std < 0) {
    throw Error("synthetic W1 source: noise_std must be a finite number >= 0");
  }
  if (base.samples() == 0) throw Error("synthetic W1 source: " + base.source + " has no samples");

  // insoles_ holds all 201 noise-free channels: the 198 insole cells followed
  // by the 3 accelerometer stand-in channels.
  insoles_ = interpolate_insoles(base);
  const std::vector<float> acc = accelerometer_stand_in(base);
  const std::size_t n = base.samples();
  std::vector<float> values(n * kW1Channels);
  for (std::size_t t = 0; t < n; ++t) {
    std::copy_n(&insoles_.values[t * 2 * kW1InsoleChannels], 2 * kW1InsoleChannels,
                &values[t * kW1Channels]);
    std::copy_n(&acc[t * kAccelerometerChannels], kAccelerometerChannels,
                &values[t * kW1Channels + 2 * kW1InsoleChannels]);
  }
  insoles_.values = std::move(values);
  insoles_.channel_names.insert(insoles_.channel_names.end(), {"acc_fwd", "acc_vert", "acc_lat"});

  // Wearers start evenly spread over the recording from a seeded point, so
  // no two wearers walk in step (unless there are more wearers than samples).
  std::uint64_t seeder = seed_;
  const std::uint64_t start = next_random(seeder) % n;
  for (int w = 0; w < wearers_; ++w) {
    position_.push_back((start + static_cast<std::uint64_t>(w) * n / wearers_) % n);
    rng_state_.push_back(next_random(seeder));
  }
}

void SyntheticW1Source::next(int wearer, int samples, std::vector<float>& out) {
  if (wearer < 0 || wearer >= wearers_ || samples < 0) {
    throw Error("synthetic W1 source: no wearer " + std::to_string(wearer) + " of " +
                std::to_string(wearers_) + " or negative sample count " + std::to_string(samples));
  }
  const std::size_t n = insoles_.samples();
  std::uint64_t& position = position_[static_cast<std::size_t>(wearer)];
  std::uint64_t& rng = rng_state_[static_cast<std::size_t>(wearer)];
  out.reserve(out.size() + static_cast<std::size_t>(samples) * kW1Channels);
  for (int i = 0; i < samples; ++i) {
    const float* clean = &insoles_.values[position * kW1Channels];
    for (int c = 0; c < 2 * kW1InsoleChannels; c += 2) {
      const std::array<double, 2> z = normal_pair(rng);
      // A pressure cell never reads below zero.
      out.push_back(std::max(0.0f, clean[c] + static_cast<float>(noise_std_ * z[0])));
      out.push_back(std::max(0.0f, clean[c + 1] + static_cast<float>(noise_std_ * z[1])));
    }
    out.insert(out.end(), clean + 2 * kW1InsoleChannels, clean + kW1Channels);
    position = (position + 1) % n;
  }
}

}  // namespace gw::sensors
