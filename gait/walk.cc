#include "gait/walk.h"

#include <algorithm>

#include "common/error.h"
#include "sensors/framing.h"

namespace gw::gait {

namespace {
// Indices of `prefix`0..count-1 in `names`; empty when any is missing.
std::vector<int> grid_cells(const std::vector<std::string>& names, const std::string& prefix, int count) {
  std::vector<int> out;
  for (int i = 0; i < count; ++i) {
    const auto it = std::find(names.begin(), names.end(), prefix + std::to_string(i));
    if (it == names.end()) return {};
    out.push_back(static_cast<int>(it - names.begin()));
  }
  return out;
}

// Both feet's loads at every sample, sample-major (left, right), and each
// sample's time.
void both_feet(const sensors::Recording& rec, std::vector<FootLoad>& loads, std::vector<double>& times) {
  const std::vector<FootSource> feet = recording_feet(rec.channel_names);
  sensors::Frame frame;
  frame.channels = static_cast<std::uint16_t>(rec.channels());
  frame.samples = static_cast<std::uint16_t>(1);
  std::vector<FootLoad> row;
  loads.assign(2 * rec.samples(), FootLoad{});
  times.resize(rec.samples());
  for (std::size_t s = 0; s < rec.samples(); ++s) {
    frame.values.assign(rec.values.begin() + static_cast<std::ptrdiff_t>(s * rec.channels()),
                        rec.values.begin() + static_cast<std::ptrdiff_t>((s + 1) * rec.channels()));
    reduce_foot_loads(feet, frame, row);
    for (std::size_t i = 0; i < feet.size(); ++i) loads[2 * s + static_cast<int>(feet[i].foot)] = row[i];
    times[s] = s < rec.time_s.size() ? rec.time_s[s] : static_cast<double>(s) / rec.sample_rate_hz;
  }
}
}  // namespace

std::vector<FootSource> recording_feet(const std::vector<std::string>& channel_names) {
  std::vector<FootSource> feet = device_feet(sensors::DeviceKind::kGeneric, channel_names);
  if (!feet.empty()) return feet;
  const int cells = static_cast<int>(pressure_grid_layout().x.size());
  for (const Foot f : {Foot::kLeft, Foot::kRight}) {
    std::vector<int> found = grid_cells(channel_names, f == Foot::kLeft ? "left_p" : "right_p", cells);
    if (!found.empty())
      feet.push_back(FootSource{f, std::move(found), pressure_grid_layout(), InsoleForm::kPressureGrid});
  }
  if (feet.empty())
    throw Error("no insole channels: expected L1..L8 and R1..R8 (force insoles) or left_p0..left_p98 and "
                "right_p0..right_p98 (pressure insoles)");
  return feet;
}

std::vector<Stride> walk_strides(const sensors::Recording& rec, CycleParams params) {
  std::vector<FootLoad> loads;
  std::vector<double> times;
  both_feet(rec, loads, times);
  params.sample_rate_hz = rec.sample_rate_hz;
  StrideTracker tracker(params);
  std::vector<Stride> strides;
  for (std::size_t s = 0; s < times.size(); ++s) tracker.push(times[s], loads[2 * s], loads[2 * s + 1], strides);
  return strides;
}

WalkMinutes walk_minutes(const sensors::Recording& rec, const MonitorOptions& options, int frame_samples) {
  const std::vector<FootSource> feet = recording_feet(rec.channel_names);
  constexpr std::uint16_t kDevice = 1;
  GaitMonitor monitor(options, {{kDevice, feet}});
  std::vector<FootLoad> loads;
  for (const sensors::Frame& frame : sensors::frames_from_recording(
           rec, 1, kDevice, sensors::DeviceKind::kGeneric, frame_samples, 0, rec.samples(), false)) {
    reduce_foot_loads(feet, frame, loads);
    monitor.on_frame(frame.wearer_id, frame.device_id, static_cast<double>(frame.device_time_us) / 1e6,
                     frame.sample_rate_hz, frame.samples, loads.data(), 0);
  }
  return {monitor.take_minutes(), monitor.take_abnormal()};
}

}  // namespace gw::gait
