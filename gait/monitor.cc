#include "gait/monitor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

namespace gw::gait {

namespace {

// Indices of `prefix`1..8 in `channels`; empty when any is missing.
std::vector<int> force_sensors(const std::vector<std::string>& channels, const std::string& prefix) {
  std::vector<int> out;
  for (int i = 1; i <= 8; ++i) {
    const auto it = std::find(channels.begin(), channels.end(), prefix + std::to_string(i));
    if (it == channels.end()) return {};
    out.push_back(static_cast<int>(it - channels.begin()));
  }
  return out;
}

// The stride's timing and loads without its curve: what a minute's metrics
// need (gait/metrics.h), kept without copying the curve for every stride.
Stride timing_of(const Stride& stride) {
  Stride out;
  out.foot = stride.foot;
  out.heel_strike_s = stride.heel_strike_s;
  out.toe_off_s = stride.toe_off_s;
  out.next_heel_strike_s = stride.next_heel_strike_s;
  out.double_support_s = stride.double_support_s;
  out.cop_path = stride.cop_path;
  out.peak_load = stride.peak_load;
  return out;
}

}  // namespace

std::vector<FootSource> device_feet(sensors::DeviceKind kind, const std::vector<std::string>& channels) {
  std::vector<FootSource> out;
  if (kind == sensors::DeviceKind::kPressureInsoleLeft || kind == sensors::DeviceKind::kPressureInsoleRight) {
    FootSource foot;
    foot.foot = kind == sensors::DeviceKind::kPressureInsoleLeft ? Foot::kLeft : Foot::kRight;
    foot.cells.resize(channels.size());
    std::iota(foot.cells.begin(), foot.cells.end(), 0);
    if (channels.size() == pressure_grid_layout().x.size()) foot.layout = pressure_grid_layout();
    foot.form = InsoleForm::kPressureGrid;
    out.push_back(std::move(foot));
    return out;
  }
  for (const Foot f : {Foot::kLeft, Foot::kRight}) {
    std::vector<int> cells = force_sensors(channels, f == Foot::kLeft ? "L" : "R");
    if (cells.empty()) continue;
    out.push_back(FootSource{f, std::move(cells), gaitpdb_layout(f), InsoleForm::kForceInsole});
  }
  return out;
}

void reduce_foot_loads(const std::vector<FootSource>& feet, const sensors::Frame& frame,
                       std::vector<FootLoad>& out) {
  out.resize(static_cast<std::size_t>(frame.samples) * feet.size());
  const std::size_t channels = frame.channels;
  for (std::size_t i = 0; i < feet.size(); ++i) {
    const int* cells = feet[i].cells.data();
    const int count = static_cast<int>(feet[i].cells.size());
    // Checked per cell only when the frame is narrower than the foot's cells reach.
    const bool inside = std::all_of(feet[i].cells.begin(), feet[i].cells.end(),
                                    [channels](int c) { return static_cast<std::size_t>(c) < channels; });
    // A pressure insole's cells are one run of channels: read straight from the row.
    bool run = count > 0;
    for (int c = 1; run && c < count; ++c) run = cells[c] == cells[0] + c;
    for (std::size_t s = 0; s < frame.samples; ++s) {
      const float* row = frame.values.data() + s * channels;
      FootLoad& load = out[s * feet.size() + i];
      if (inside && run) {
        const float* first = row + cells[0];
        load = foot_load_of([first](int c) { return first[c]; }, count, feet[i].layout);
      } else if (inside) {
        load = foot_load_of([row, cells](int c) { return row[cells[c]]; }, count, feet[i].layout);
      } else {
        load = foot_load_of(
            [row, cells, channels](int c) {
              const auto channel = static_cast<std::size_t>(cells[c]);
              return channel < channels ? row[channel] : 0.0f;
            },
            count, feet[i].layout);
      }
    }
  }
}

GaitMonitor::GaitMonitor(MonitorOptions options, std::map<std::uint16_t, std::vector<FootSource>> devices)
    : options_(std::move(options)), devices_(std::move(devices)) {}

const std::vector<FootSource>* GaitMonitor::feet_of(std::uint16_t device) const {
  const auto it = devices_.find(device);
  return it == devices_.end() ? nullptr : &it->second;
}

GaitMonitor::WearerState& GaitMonitor::wearer_state(std::uint32_t wearer, double rate_hz) {
  auto it = wearers_.find(wearer);
  if (it == wearers_.end()) {
    CycleParams params = options_.cycles;
    params.sample_rate_hz = rate_hz;
    it = wearers_.emplace(wearer, WearerState(params)).first;
  }
  return it->second;
}

void GaitMonitor::on_frame(std::uint32_t wearer, std::uint16_t device, double first_sample_s, double rate_hz,
                           int samples, const FootLoad* loads, double arrival_s) {
  const std::vector<FootSource>* feet = feet_of(device);
  if (!feet || feet->empty() || samples <= 0 || !(rate_hz > 0)) return;
  WearerState& w = wearer_state(wearer, rate_hz);
  const double period = 1.0 / rate_hz;
  const std::size_t per_sample = feet->size();
  for (const FootSource& f : *feet)
    if (f.foot == Foot::kLeft) w.left_device = device;

  if (per_sample == 2) {
    // Both feet from one device: joined as they come.
    const int left = (*feet)[0].foot == Foot::kLeft ? 0 : 1;
    for (int s = 0; s < samples; ++s) {
      const FootLoad* row = loads + static_cast<std::size_t>(s) * per_sample;
      push_joined(wearer, w, first_sample_s + s * period, row[left], row[1 - left], arrival_s);
    }
    return;
  }
  const int f = static_cast<int>((*feet)[0].foot);
  for (int s = 0; s < samples; ++s)
    w.waiting[f].push_back(Pending{first_sample_s + s * period, loads[s], device, arrival_s});
  pair_waiting(wearer, w, period);
}

void GaitMonitor::pair_waiting(std::uint32_t wearer, WearerState& w, double period) {
  auto& left = w.waiting[0];
  auto& right = w.waiting[1];
  while (!left.empty() && !right.empty()) {
    const double lt = left.front().t_s, rt = right.front().t_s;
    if (std::fabs(lt - rt) <= 0.5 * period) {
      push_joined(wearer, w, lt, left.front().load, right.front().load,
                  std::max(left.front().arrival_s, right.front().arrival_s));
      left.pop_front();
      right.pop_front();
    } else if (lt < rt) {
      left.pop_front();
      ++counters_.unpaired_samples;
    } else {
      right.pop_front();
      ++counters_.unpaired_samples;
    }
  }
  // What waits alone longer than the lag for the other foot is dropped.
  for (auto* queue : {&left, &right}) {
    if (queue->empty()) continue;
    const double newest = queue->back().t_s;
    while (!queue->empty() && newest - queue->front().t_s > options_.max_join_lag_s) {
      queue->pop_front();
      ++counters_.unpaired_samples;
    }
  }
}

void GaitMonitor::push_joined(std::uint32_t wearer, WearerState& w, double t_s, const FootLoad& left,
                              const FootLoad& right, double arrival_s) {
  ++counters_.samples;
  scratch_.clear();
  w.tracker.push(t_s, left, right, scratch_);
  for (const Stride& stride : scratch_) on_stride(wearer, w, stride, arrival_s);
}

namespace {

// The mean of the values that are numbers; NaN when none is.
double mean_of_numbers(const std::vector<double>& values) {
  double sum = 0;
  int n = 0;
  for (const double v : values)
    if (!std::isnan(v)) {
      sum += v;
      ++n;
    }
  return n ? sum / n : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

void GaitMonitor::on_stride(std::uint32_t wearer, WearerState& w, const Stride& stride, double arrival_s) {
  ++counters_.strides;
  double score = std::numeric_limits<double>::quiet_NaN();
  if (options_.library && scoring_) {
    score = options_.library->stride_score(stride.curve);
    ++counters_.scored_strides;
  }
  double change = std::numeric_limits<double>::quiet_NaN();
  if (options_.baseline.enabled()) {
    if (!w.baseline) w.baseline = std::make_unique<StrideBaseline>(options_.cycles.curve_points, options_.baseline);
    if (!w.baseline->learned()) {
      if (w.baseline->offer(stride)) ++counters_.baselines_learned;
    } else if (scoring_) {
      change = w.baseline->change(stride.curve);
      ++counters_.change_scored_strides;
    }
  }

  // The minute of walking.
  w.minute.push_back(timing_of(stride));
  w.minute_scores.push_back(score);
  w.minute_changes.push_back(change);
  if (stride.foot == Foot::kLeft) w.minute_walking_s += stride.stride_s();
  if (w.minute_walking_s >= options_.minute_s) {
    GaitMinute minute;
    minute.wearer = wearer;
    minute.t_start = w.minute.front().heel_strike_s;
    minute.t_end = 0;
    for (const Stride& s : w.minute) {
      minute.t_start = std::min(minute.t_start, s.heel_strike_s);
      minute.t_end = std::max(minute.t_end, s.next_heel_strike_s);
    }
    minute.metrics = summarise(w.minute);
    minute.abnormal_score = mean_of_numbers(w.minute_scores);
    minute.baseline_change = mean_of_numbers(w.minute_changes);
    w.last = minute;
    w.has_last = true;
    minutes_.push_back(std::move(minute));
    ++counters_.minutes;
    w.minute.clear();
    w.minute_scores.clear();
    w.minute_changes.clear();
    w.minute_walking_s = 0;
  }

  // The walking bouts.
  if (options_.library && !std::isnan(score))
    feed_bout(wearer, w, w.abnormal_bout, stride, score, options_.library->params().threshold,
              BoutReason::kLikeAbnormalExamples, arrival_s);
  if (!std::isnan(change))
    feed_bout(wearer, w, w.change_bout, stride, change, options_.baseline.threshold,
              BoutReason::kChangedFromBaseline, arrival_s);
}

void GaitMonitor::feed_bout(std::uint32_t wearer, const WearerState& w, Bout& bout, const Stride& stride,
                            double value, double threshold, BoutReason reason, double arrival_s) {
  if (stride.heel_strike_s - bout.last_stride_end_s > options_.bout_gap_s) bout.strides.clear();
  bout.last_stride_end_s = std::max(bout.last_stride_end_s, stride.next_heel_strike_s);
  bout.strides.emplace_back(stride.heel_strike_s, value);
  while (static_cast<int>(bout.strides.size()) > options_.bout_strides) bout.strides.pop_front();
  if (static_cast<int>(bout.strides.size()) < options_.bout_strides) return;
  double sum = 0;
  for (const auto& [start, v] : bout.strides) sum += v;
  const double mean = sum / static_cast<double>(bout.strides.size());
  if (mean < threshold) return;
  if (stride.next_heel_strike_s - bout.last_alert_s < options_.cooldown_s) return;
  bout.last_alert_s = stride.next_heel_strike_s;
  AbnormalBout out;
  out.wearer = wearer;
  out.device = w.left_device;
  out.reason = reason;
  out.t_start = bout.strides.front().first;
  out.t_end = stride.next_heel_strike_s;
  out.score = mean;
  out.strides = static_cast<int>(bout.strides.size());
  out.arrival_s = arrival_s;
  abnormal_.push_back(out);
  ++counters_.abnormal_bouts;
}

std::vector<GaitMinute> GaitMonitor::take_minutes() { return std::exchange(minutes_, {}); }

std::vector<AbnormalBout> GaitMonitor::take_abnormal() { return std::exchange(abnormal_, {}); }

const GaitMinute* GaitMonitor::last_minute(std::uint32_t wearer) const {
  const auto it = wearers_.find(wearer);
  return it != wearers_.end() && it->second.has_last ? &it->second.last : nullptr;
}

}  // namespace gw::gait
