// Gait cycles from insole pressure, online: heel strike and toe off of each
// foot from the foot's total load, and complete strides assembled from them,
// one sample of both feet at a time (the same code serves the daemon's
// streams and `gaitwatch gait` over a recording).
//
// The method (docs/gait.md): a foot is in contact while its load stays above
// a level between the load's running minimum and maximum (hysteresis: on at
// `contact_on`, off at `contact_off` of the range), the crossings interpolated
// between samples. The range is tracked over a short window, so the levels
// follow each wearer, insole and unit (newtons of a force insole, summed cell
// pressures of a pressure insole) without calibration. While the short range
// is small against the foot's recent walking range (standing, shifting weight,
// shuffling on the spot) no event is taken. A stride is one foot's cycle from
// a heel strike to its next heel strike with one toe off between; a stride
// outside the plausible bounds (a pause, a turn on the spot, a missed step)
// is not emitted.
//
// Thread safety: a StrideTracker is one stream's state; not shared.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "gait/ring.h"

namespace gw::gait {

enum class Foot : std::uint8_t { kLeft = 0, kRight = 1 };
const char* foot_name(Foot foot);

// Positions of a foot's sensing cells (any consistent unit), for the centre
// of pressure. Empty: the insole has no layout and no centre of pressure is
// computed.
struct FootLayout {
  std::vector<float> x;
  std::vector<float> y;
  bool empty() const { return x.empty(); }
};

// The layout of a gaitpdb force insole's 8 sensors of `foot` (PhysioNet
// gaitpdb format.txt; origin between the feet, +y forward).
FootLayout gaitpdb_layout(Foot foot);
// The layout of the W1 pressure insole's 9 x 11 grid (cell = row * 9 +
// column, row 0 at the heel; unit: one cell). Both feet share it.
FootLayout pressure_grid_layout();

// One foot at one sample: its total load and, with a layout and some load on
// the cells, the centre of pressure.
struct FootLoad {
  float load = 0;
  bool has_cop = false;
  float cop_x = 0;
  float cop_y = 0;
};
// The load of `cells` (count = layout size, or any count without a layout)
// and their centre of pressure. Negative cell values count as zero.
FootLoad foot_load(const float* cells, int count, const FootLayout& layout);

// foot_load of the values cell(0) .. cell(count - 1): one arithmetic for a
// contiguous array and for cells picked out of a frame's row. The sums run
// in eight float lanes (cell i in lane i % 8) added up in a fixed order at
// the end: the same result whichever way the cells are read, and a loop the
// compiler turns into vector instructions (this runs for every cell of
// every insole sample the daemon takes).
template <typename Cell>
FootLoad foot_load_of(const Cell& cell, int count, const FootLayout& layout) {
  constexpr int kLanes = 8;
  float total[kLanes] = {}, sum_x[kLanes] = {}, sum_y[kLanes] = {};
  const bool with_layout = !layout.empty() && static_cast<int>(layout.x.size()) == count;
  const int whole = count - count % kLanes;
  if (with_layout) {
    const float* x = layout.x.data();
    const float* y = layout.y.data();
    for (int i = 0; i < whole; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) {
        const float raw = cell(i + j);
        const float v = raw > 0 ? raw : 0.0f;  // negative and NaN cells as zero
        total[j] += v;
        sum_x[j] += v * x[i + j];
        sum_y[j] += v * y[i + j];
      }
    }
    for (int i = whole; i < count; ++i) {
      const float raw = cell(i);
      const float v = raw > 0 ? raw : 0.0f;
      total[i - whole] += v;
      sum_x[i - whole] += v * x[i];
      sum_y[i - whole] += v * y[i];
    }
  } else {
    for (int i = 0; i < whole; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) {
        const float raw = cell(i + j);
        total[j] += raw > 0 ? raw : 0.0f;
      }
    }
    for (int i = whole; i < count; ++i) {
      const float raw = cell(i);
      total[i - whole] += raw > 0 ? raw : 0.0f;
    }
  }
  double load = 0, moment_x = 0, moment_y = 0;
  for (int j = 0; j < kLanes; ++j) {
    load += total[j];
    moment_x += sum_x[j];
    moment_y += sum_y[j];
  }
  FootLoad out;
  out.load = static_cast<float>(load);
  if (with_layout && load > 0) {
    out.has_cop = true;
    out.cop_x = static_cast<float>(moment_x / load);
    out.cop_y = static_cast<float>(moment_y / load);
  }
  return out;
}

struct CycleParams {
  double sample_rate_hz = 100;
  double range_window_s = 3.0;       // running min / max of the load over this window
  double contact_on = 0.30;          // foot down above min + contact_on * range
  double contact_off = 0.15;         // foot up below min + contact_off * range
  // No events while the short-window range is below this fraction of the
  // foot's walking range (its largest recent range, halving every
  // `walking_range_half_life_s`).
  double min_range_fraction = 0.35;
  double walking_range_half_life_s = 30;
  double min_stride_s = 0.6;         // plausible strides only
  double max_stride_s = 2.5;
  double min_stance_s = 0.25;
  double min_swing_s = 0.15;
  int curve_points = 64;             // time-normalised load curve length per foot
};

// One foot's completed gait cycle.
struct Stride {
  Foot foot = Foot::kLeft;
  double heel_strike_s = 0;          // the cycle's start
  double toe_off_s = 0;
  double next_heel_strike_s = 0;     // its end (the next cycle's start)
  double stride_s() const { return next_heel_strike_s - heel_strike_s; }
  double stance_s() const { return toe_off_s - heel_strike_s; }
  double swing_s() const { return next_heel_strike_s - toe_off_s; }
  double double_support_s = 0;       // both feet in contact, within the cycle
  double cop_path = -1;              // centre-of-pressure path length over the stance (layout unit); -1 = none
  float peak_load = 0;               // the foot's largest load in the cycle
  // curve[0 .. P-1]: this foot's load over the cycle, curve[P .. 2P-1]: the
  // other foot's over the same time, P = curve_points, resampled linearly at
  // equal fractions of the cycle, each foot's curve divided by its own
  // maximum in the cycle (shape, not body weight or insole unit).
  std::vector<float> curve;
};

class StrideTracker {
 public:
  explicit StrideTracker(const CycleParams& params);

  // Feeds one sample of both feet at time `t_s` (increasing). A time step
  // over two sample periods is a gap: both feet start afresh. Appends the
  // strides this sample completes to `out` (at most one per foot).
  void push(double t_s, const FootLoad& left, const FootLoad& right, std::vector<Stride>& out);

  // Forgets everything (a restarted device, another wearer).
  void reset();

  // Whether `foot` is in contact after the last sample.
  bool in_contact(Foot foot) const { return feet_[static_cast<int>(foot)].contact; }
  const CycleParams& params() const { return params_; }

 private:
  struct Sample {
    double t_s;
    FootLoad foot[2];
    bool contact[2];
  };
  struct FootState {
    Ring<std::pair<std::int64_t, float>> window_max;  // monotonic queues over the range window
    Ring<std::pair<std::int64_t, float>> window_min;
    float walking_range = 0;
    bool contact = false;
    bool known = false;            // contact state established since the last reset
    std::optional<double> heel_strike_s;
    std::optional<double> toe_off_s;  // after heel_strike_s
    float previous_load = 0;
  };

  void update_foot(int f, std::int64_t index, double t_s, float load, double previous_t_s,
                   std::vector<Stride>& out);
  Stride make_stride(int f, double start_s, double toe_off_s, double end_s) const;

  // The first buffered sample at or after `t_s` (samples_.size() when none).
  std::size_t first_at_or_after(double t_s) const;

  CycleParams params_;
  std::int64_t window_samples_;   // range_window_s in samples
  double walking_range_decay_;    // per sample
  FootState feet_[2];
  Ring<Sample> samples_;  // the last max_stride_s (+ margin) of both feet
  std::int64_t index_ = 0;
  double last_t_s_ = 0;
  bool started_ = false;
};

}  // namespace gw::gait
