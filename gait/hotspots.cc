#include "gait/hotspots.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/error.h"

namespace gw::gait {

namespace {

constexpr int kGridColumns = 9;
constexpr int kGridRows = 11;
constexpr int kForceSensors = 8;

// The cells of grid rows [row_from, row_to] and columns [column_from, column_to].
InsoleRegion grid_block(std::string name, int row_from, int row_to, int column_from, int column_to) {
  InsoleRegion region{std::move(name), {}};
  for (int row = row_from; row <= row_to; ++row)
    for (int column = column_from; column <= column_to; ++column) region.cells.push_back(row * kGridColumns + column);
  return region;
}

// Appends (index, value) to a monotonic maximum deque and drops what left the
// `window` samples ending at `index`.
void push_window_max(std::deque<std::pair<std::int64_t, float>>& window, std::int64_t index, float value,
                     std::int64_t samples) {
  while (!window.empty() && window.back().second <= value) window.pop_back();
  window.emplace_back(index, value);
  while (window.front().first <= index - samples) window.pop_front();
}

bool positive(double value) { return std::isfinite(value) && value > 0; }

}  // namespace

std::vector<InsoleRegion> pressure_grid_regions() {
  static_assert(kGridColumns * kGridRows == 99);
  return {grid_block("heel", 0, 2, 0, 8),
          grid_block("midfoot_lateral", 3, 5, 0, 4),
          grid_block("midfoot_medial", 3, 5, 5, 8),
          grid_block("metatarsal_lateral", 6, 8, 0, 2),
          grid_block("metatarsal_central", 6, 8, 3, 5),
          grid_block("metatarsal_medial", 6, 8, 6, 8),
          grid_block("lesser_toes", 9, 10, 0, 5),
          grid_block("hallux", 9, 10, 6, 8)};
}

std::vector<InsoleRegion> force_insole_regions() {
  static const char* const kNames[kForceSensors] = {
      "heel",           "rear_midfoot_lateral", "rear_midfoot_medial", "midfoot_lateral",
      "midfoot_medial", "forefoot_lateral",     "forefoot_medial",     "toe"};
  std::vector<InsoleRegion> regions;
  for (int sensor = 0; sensor < kForceSensors; ++sensor) regions.push_back({kNames[sensor], {sensor}});
  return regions;
}

HotspotParams hotspot_defaults_force_insole() { return HotspotParams{}; }

HotspotParams hotspot_defaults_pressure_insole() {
  HotspotParams params;
  params.min_foot_load = HotspotParams{}.min_foot_load * 99.0 / kForceSensors;
  return params;
}

HotspotParams hotspot_defaults(InsoleForm form) {
  return form == InsoleForm::kPressureGrid ? hotspot_defaults_pressure_insole() : hotspot_defaults_force_insole();
}

std::vector<InsoleRegion> insole_regions(InsoleForm form) {
  return form == InsoleForm::kPressureGrid ? pressure_grid_regions() : force_insole_regions();
}

void region_pressures(const std::vector<InsoleRegion>& regions, const float* cells, float* out) {
  for (std::size_t r = 0; r < regions.size(); ++r) {
    float pressure = 0;
    for (int cell : regions[r].cells) pressure = std::max(pressure, cells[cell]);
    out[r] = pressure;
  }
}

HotspotTracker::HotspotTracker(Foot foot, std::vector<InsoleRegion> regions, HotspotParams params,
                               double rate_hz)
    : foot_(foot), regions_(std::move(regions)), params_(params), rate_hz_(rate_hz) {
  if (regions_.empty()) throw Error("hotspot tracker: no insole regions");
  for (const InsoleRegion& region : regions_) {
    if (region.cells.empty()) throw Error("hotspot tracker: region '" + region.name + "' has no cells");
    for (int cell : region.cells) {
      if (cell < 0) throw Error("hotspot tracker: region '" + region.name + "' has a negative cell index");
      needed_cells_ = std::max(needed_cells_, cell + 1);
    }
  }
  const std::pair<const char*, double> checked[] = {
      {"rate_hz", rate_hz_},
      {"threshold", params_.threshold},
      {"peak_window_s", params_.peak_window_s},
      {"min_duration_s", params_.min_duration_s},
      {"integral_window_s", params_.integral_window_s}};
  for (const auto& [name, value] : checked)
    if (!positive(value)) throw Error(std::string("hotspot tracker: ") + name + " must be a positive number");
  if (!std::isfinite(params_.cooldown_s) || params_.cooldown_s < 0 || !std::isfinite(params_.min_foot_load) ||
      params_.min_foot_load < 0) {
    throw Error("hotspot tracker: cooldown_s and min_foot_load must be finite numbers >= 0");
  }
  peak_window_samples_ = std::max<std::int64_t>(1, std::llround(params_.peak_window_s * rate_hz_));
  integral_window_samples_ =
      static_cast<std::size_t>(std::max<long long>(1, std::llround(params_.integral_window_s * rate_hz_)));
  state_.resize(regions_.size());
  pressures_.resize(regions_.size());
  history_.assign(integral_window_samples_ * regions_.size(), 0.0f);
}

void HotspotTracker::reset() {
  for (RegionState& region : state_) region = RegionState{};
  restart_windows();
}

void HotspotTracker::restart_windows() {
  for (RegionState& region : state_) {
    region.window_max.clear();
    region.integral_sum = 0;
    region.in_episode = false;
    region.reported = false;
  }
  history_fill_ = 0;
  foot_load_max_.clear();
  started_ = false;
}

double HotspotTracker::peak(int region) const {
  const auto& window = state_.at(static_cast<std::size_t>(region)).window_max;
  return window.empty() ? 0.0 : window.front().second;
}

double HotspotTracker::pressure_time_integral(int region) const {
  return state_.at(static_cast<std::size_t>(region)).integral_sum / rate_hz_;
}

void HotspotTracker::push(double t_s, const float* cells, int count, std::vector<HotspotEvent>& out) {
  if (count < needed_cells_) {
    throw Error("hotspot tracker: a frame of " + std::to_string(count) + " cells, the regions need " +
                std::to_string(needed_cells_));
  }
  double foot_load = 0;
  for (int i = 0; i < count; ++i) foot_load += std::max(0.0f, cells[i]);
  region_pressures(regions_, cells, pressures_.data());
  push_regions(t_s, pressures_.data(), foot_load, out);
}

void HotspotTracker::push_regions(double t_s, const float* pressures, double foot_load,
                                  std::vector<HotspotEvent>& out) {
  const double period_s = 1.0 / rate_hz_;
  if (started_ && (t_s <= last_t_s_ || t_s - last_t_s_ > 2 * period_s)) restart_windows();
  started_ = true;
  last_t_s_ = t_s;
  ++index_;

  push_window_max(foot_load_max_, index_, static_cast<float>(foot_load), peak_window_samples_);
  const bool active = foot_load_max_.front().second > params_.min_foot_load;

  const std::size_t slot = static_cast<std::size_t>(index_ % static_cast<std::int64_t>(integral_window_samples_));
  const bool window_full = history_fill_ == integral_window_samples_;
  if (!window_full) ++history_fill_;
  for (std::size_t r = 0; r < regions_.size(); ++r) {
    RegionState& region = state_[r];
    const float pressure = pressures[r];
    push_window_max(region.window_max, index_, pressure, peak_window_samples_);
    float& oldest = history_[slot * regions_.size() + r];
    if (window_full) region.integral_sum -= oldest;
    oldest = pressure;
    region.integral_sum += pressure;

    if (region.in_episode && t_s - region.last_above_s > params_.peak_window_s) region.in_episode = false;
    if (region.in_episode) {
      region.episode_sum += pressure;
      region.episode_peak = std::max(region.episode_peak, static_cast<double>(pressure));
    }
    if (!active || pressure <= params_.threshold) continue;
    if (!region.in_episode) {
      region.in_episode = true;
      region.reported = false;
      region.episode_start_s = t_s;
      region.episode_sum = pressure;
      region.episode_peak = pressure;
    }
    region.last_above_s = t_s;
    const bool long_enough = t_s - region.episode_start_s >= params_.min_duration_s - 0.5 * period_s;
    const bool cooled = !region.has_event || t_s - region.last_event_s >= params_.cooldown_s;
    if (region.reported || !long_enough || !cooled) continue;
    region.reported = true;
    region.has_event = true;
    region.last_event_s = t_s;
    HotspotEvent event;
    event.foot = foot_;
    event.region = regions_[r].name;
    event.start_s = region.episode_start_s;
    event.t_s = t_s;
    event.duration_s = t_s - region.episode_start_s;
    event.peak = region.episode_peak;
    event.pressure_time_integral = region.episode_sum * period_s;
    out.push_back(std::move(event));
  }
}

}  // namespace gw::gait
