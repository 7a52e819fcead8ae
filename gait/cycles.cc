#include "gait/cycles.h"

#include <algorithm>
#include <cmath>

namespace gw::gait {

const char* foot_name(Foot foot) { return foot == Foot::kLeft ? "left" : "right"; }

FootLayout gaitpdb_layout(Foot foot) {
  // Sensor positions of the Infotronic force insole (gaitpdb format.txt);
  // the right foot mirrors the left in x.
  static const float kX[8] = {-500, -700, -300, -700, -300, -700, -300, -500};
  static const float kY[8] = {-800, -400, -400, 0, 0, 400, 400, 800};
  FootLayout layout;
  for (int i = 0; i < 8; ++i) {
    layout.x.push_back(foot == Foot::kLeft ? kX[i] : -kX[i]);
    layout.y.push_back(kY[i]);
  }
  return layout;
}

FootLayout pressure_grid_layout() {
  constexpr int kColumns = 9;
  constexpr int kRows = 11;
  FootLayout layout;
  for (int row = 0; row < kRows; ++row) {
    for (int column = 0; column < kColumns; ++column) {
      layout.x.push_back(static_cast<float>(column));
      layout.y.push_back(static_cast<float>(row));
    }
  }
  return layout;
}

FootLoad foot_load(const float* cells, int count, const FootLayout& layout) {
  return foot_load_of([cells](int i) { return cells[i]; }, count, layout);
}

StrideTracker::StrideTracker(const CycleParams& params)
    : params_(params),
      window_samples_(std::max<std::int64_t>(1, std::llround(params.range_window_s * params.sample_rate_hz))),
      walking_range_decay_(std::exp2(-1.0 / (params.sample_rate_hz * params.walking_range_half_life_s))) {}

void StrideTracker::reset() {
  for (FootState& foot : feet_) {
    foot.window_max.clear();
    foot.window_min.clear();
    foot.walking_range = 0;
    foot.contact = false;
    foot.known = false;
    foot.heel_strike_s.reset();
    foot.toe_off_s.reset();
    foot.previous_load = 0;
  }
  samples_.clear();
  started_ = false;
}

namespace {

// The time between (t0, x0) and (t1, x1) where the line through them crosses
// `level`; t1 when it does not lie between them.
double crossing_time(double t0, float x0, double t1, float x1, double level) {
  if (x1 == x0) return t1;
  const double f = (level - x0) / (static_cast<double>(x1) - x0);
  if (!(f >= 0 && f <= 1)) return t1;
  return t0 + f * (t1 - t0);
}

}  // namespace

void StrideTracker::push(double t_s, const FootLoad& left, const FootLoad& right,
                         std::vector<Stride>& out) {
  const double period = 1.0 / params_.sample_rate_hz;
  if (started_ && (t_s <= last_t_s_ || t_s - last_t_s_ > 2.0 * period)) reset();
  const double previous_t = started_ ? last_t_s_ : t_s;
  const std::int64_t index = index_++;
  const FootLoad loads[2] = {left, right};

  // Contact of both feet first, so the stored sample and any stride it
  // completes see both feet's state at this sample.
  struct Event {
    bool heel_strike = false;
    bool toe_off = false;
    double t_s = 0;
  };
  Event events[2];
  const std::int64_t window = window_samples_;
  const double decay = walking_range_decay_;
  for (int f = 0; f < 2; ++f) {
    FootState& s = feet_[f];
    const float load = loads[f].load;
    while (!s.window_max.empty() && s.window_max.back().second <= load) s.window_max.pop_back();
    s.window_max.push_back({index, load});
    while (!s.window_min.empty() && s.window_min.back().second >= load) s.window_min.pop_back();
    s.window_min.push_back({index, load});
    while (s.window_max.front().first <= index - window) s.window_max.pop_front();
    while (s.window_min.front().first <= index - window) s.window_min.pop_front();
    const float lo = s.window_min.front().second;
    const float range = s.window_max.front().second - lo;
    s.walking_range = std::max(range, static_cast<float>(s.walking_range * decay));
    const bool active = range > 0 && range >= params_.min_range_fraction * s.walking_range;
    if (!active) {
      // Standing or shuffling: the cycle in progress is not a stride.
      s.heel_strike_s.reset();
      s.toe_off_s.reset();
    } else {
      const double on = lo + params_.contact_on * range;
      const double off = lo + params_.contact_off * range;
      if (!s.known) {
        s.contact = load > (on + off) / 2;
        s.known = true;
      } else if (!s.contact && load > on) {
        s.contact = true;
        events[f] = {true, false, crossing_time(previous_t, s.previous_load, t_s, load, on)};
      } else if (s.contact && load < off) {
        s.contact = false;
        events[f] = {false, true, crossing_time(previous_t, s.previous_load, t_s, load, off)};
      }
    }
    s.previous_load = load;
  }

  samples_.push_back(Sample{t_s, {left, right}, {feet_[0].contact, feet_[1].contact}});
  while (!samples_.empty() && samples_.front().t_s < t_s - params_.max_stride_s - 1.0) samples_.pop_front();
  last_t_s_ = t_s;
  started_ = true;

  for (int f = 0; f < 2; ++f) {
    FootState& s = feet_[f];
    if (events[f].toe_off) {
      if (s.heel_strike_s) s.toe_off_s = events[f].t_s;
    } else if (events[f].heel_strike) {
      const double hs = events[f].t_s;
      if (s.heel_strike_s && s.toe_off_s) {
        const double start = *s.heel_strike_s, to = *s.toe_off_s;
        const double stride = hs - start;
        if (stride >= params_.min_stride_s && stride <= params_.max_stride_s &&
            to - start >= params_.min_stance_s && hs - to >= params_.min_swing_s &&
            samples_.front().t_s <= start) {
          out.push_back(make_stride(f, start, to, hs));
        }
      }
      s.heel_strike_s = hs;
      s.toe_off_s.reset();
    }
  }
}

std::size_t StrideTracker::first_at_or_after(double t_s) const {
  std::size_t lo = 0, hi = samples_.size();
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (samples_[mid].t_s < t_s) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

Stride StrideTracker::make_stride(int f, double start_s, double toe_off_s, double end_s) const {
  Stride stride;
  stride.foot = static_cast<Foot>(f);
  stride.heel_strike_s = start_s;
  stride.toe_off_s = toe_off_s;
  stride.next_heel_strike_s = end_s;

  int in_cycle = 0, both = 0;
  double path = 0;
  bool has_cop = false;
  const Sample* previous_cop = nullptr;
  for (std::size_t i = first_at_or_after(start_s); i < samples_.size() && samples_[i].t_s < end_s; ++i) {
    const Sample* it = &samples_[i];
    ++in_cycle;
    if (it->contact[0] && it->contact[1]) ++both;
    stride.peak_load = std::max(stride.peak_load, it->foot[f].load);
    if (it->t_s <= toe_off_s && it->foot[f].has_cop) {
      if (previous_cop) {
        const double dx = it->foot[f].cop_x - previous_cop->foot[f].cop_x;
        const double dy = it->foot[f].cop_y - previous_cop->foot[f].cop_y;
        path += std::sqrt(dx * dx + dy * dy);
      }
      previous_cop = it;
      has_cop = true;
    }
  }
  stride.double_support_s = in_cycle ? stride.stride_s() * both / in_cycle : 0;
  if (has_cop) stride.cop_path = path;

  // Resample both feet at equal fractions of the cycle, then scale each
  // foot's curve to [0, 1] by its own minimum and maximum.
  const int points = params_.curve_points;
  stride.curve.assign(2 * static_cast<std::size_t>(points), 0.0f);
  // The load of `foot` at time t, interpolated between the samples around
  // it; `at` is a cursor that only moves forward as t grows (the first
  // sample at or after t), so one curve costs one pass over the cycle.
  const std::size_t buffered = samples_.size();
  auto value_at = [&](double t, int foot, std::size_t& at) -> float {
    while (at < buffered && samples_[at].t_s < t) ++at;
    if (at == buffered) return samples_.back().foot[foot].load;
    const Sample& here = samples_[at];
    if (at == 0 || here.t_s == t) return here.foot[foot].load;
    const Sample& prev = samples_[at - 1];
    const double w = (t - prev.t_s) / (here.t_s - prev.t_s);
    return static_cast<float>(prev.foot[foot].load + w * (here.foot[foot].load - prev.foot[foot].load));
  };
  const int feet[2] = {f, 1 - f};
  const std::size_t cycle_start = first_at_or_after(start_s);
  for (int side = 0; side < 2; ++side) {
    float* curve = &stride.curve[static_cast<std::size_t>(side) * points];
    std::size_t at = cycle_start;
    for (int k = 0; k < points; ++k) {
      const double t = start_s + (end_s - start_s) * k / (points - 1);
      curve[k] = value_at(t, feet[side], at);
    }
    const auto [lo, hi] = std::minmax_element(curve, curve + points);
    const float min = *lo, span = *hi - *lo;
    for (int k = 0; k < points; ++k) curve[k] = span > 0 ? (curve[k] - min) / span : 0.0f;
  }
  return stride;
}

}  // namespace gw::gait
