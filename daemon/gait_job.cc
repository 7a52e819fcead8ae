#include "daemon/gait_job.h"

#include <cmath>
#include <memory>

#include "gait/examples.h"

namespace gw::daemon {

std::map<std::uint16_t, std::vector<gait::FootSource>> gait_devices(const config::Config& config) {
  std::map<std::uint16_t, std::vector<gait::FootSource>> out;
  if (!config.gait.enabled) return out;
  for (const config::DeviceProfile& device : config.devices) {
    std::vector<gait::FootSource> feet = gait::device_feet(device.kind, device.channels);
    if (!feet.empty()) out.emplace(device.id, std::move(feet));
  }
  return out;
}

gait::MonitorOptions gait_monitor_options(const config::GaitConfig& gait) {
  gait::MonitorOptions options;
  options.minute_s = gait.minute_s;
  options.max_join_lag_s = gait.max_join_lag_s;
  options.bout_strides = gait.bout_strides;
  options.cooldown_s = gait.cooldown_s;
  if (!gait.examples_file.empty()) {
    auto library = std::make_shared<gait::StrideLibrary>(
        options.cycles.curve_points, gait::AbnormalParams{gait.k, gait.band, gait.threshold});
    for (gait::StrideExample& e : gait::read_stride_examples(gait.examples_file, options.cycles.curve_points))
      library->add(std::move(e));
    options.library = std::move(library);
  }
  return options;
}

pipeline::Alert abnormal_gait_alert(const gait::AbnormalBout& bout, const config::GaitConfig& gait,
                                    double now_s) {
  pipeline::Alert alert;
  alert.wearer = bout.wearer;
  alert.device = bout.device;
  alert.pattern = gait.name;
  alert.kind = gait.kind;
  alert.severity = gait.severity;
  alert.t_start = bout.t_start;
  alert.t_end = bout.t_end;
  alert.distance = bout.score;
  alert.detected_at = now_s;
  alert.latency_ms = bout.arrival_s > 0 ? 1e3 * (now_s - bout.arrival_s) : 0;
  return alert;
}

pipeline::Event gait_minute_event(const gait::GaitMinute& minute, double now_s) {
  pipeline::Event event;
  event.type = pipeline::EventType::kGaitMinute;
  event.wearer = minute.wearer;
  event.actor = "gaitwatchd";
  event.at = now_s;
  event.details = {{"t_start", minute.t_start}, {"t_end", minute.t_end}};
  event.details.update(gait::metrics_json(minute.metrics));
  event.details["abnormal_score"] =
      std::isnan(minute.abnormal_score) ? nlohmann::json(nullptr) : nlohmann::json(minute.abnormal_score);
  return event;
}

nlohmann::json gait_counters_json(const gait::GaitMonitor& monitor, const gait::HotspotMonitor* hotspots) {
  const gait::MonitorCounters& c = monitor.counters();
  nlohmann::json out = {{"wearers", monitor.wearers()},           {"samples", c.samples},
                        {"unpaired_samples", c.unpaired_samples}, {"strides", c.strides},
                        {"scored_strides", c.scored_strides},     {"minutes", c.minutes},
                        {"abnormal_bouts", c.abnormal_bouts}};
  if (hotspots) {
    const gait::HotspotCounters h = hotspots->counters();
    out["hotspots"] = {
        {"samples", h.samples}, {"events", h.events}, {"resets", h.resets}, {"trackers", h.trackers}};
  }
  return out;
}

std::map<std::uint16_t, gait::HotspotSource> hotspot_devices(const config::Config& config) {
  std::map<std::uint16_t, gait::HotspotSource> out;
  if (!config.gait.enabled) return out;
  for (const config::DeviceProfile& device : config.devices) {
    const config::DeviceHotspots& h = device.hotspots;
    std::vector<gait::FootSource> feet = gait::device_feet(device.kind, device.channels);
    if (feet.empty() || !h.enabled) continue;
    gait::HotspotParams params;
    params.threshold = h.threshold;
    params.min_duration_s = h.min_duration_s;
    params.cooldown_s = h.cooldown_s;
    params.peak_window_s = h.peak_window_s;
    params.integral_window_s = h.integral_window_s;
    params.min_foot_load = h.min_foot_load;
    out.emplace(device.id, gait::HotspotSource{std::move(feet), params});
  }
  return out;
}

pipeline::Alert pressure_hotspot_alert(const gait::HotspotAlarm& alarm, const config::DeviceHotspots& hotspots,
                                       double now_s) {
  pipeline::Alert alert;
  alert.wearer = alarm.wearer;
  alert.device = alarm.device;
  alert.pattern = pipeline::kPressureHotspotPattern;
  alert.kind = pipeline::kPressureHotspotKind;
  alert.severity = config::name(hotspots.severity);
  alert.t_start = alarm.event.start_s;
  alert.t_end = alarm.event.t_s;
  alert.distance = alarm.event.peak;
  alert.region = alarm.event.region;
  alert.foot = gait::foot_name(alarm.event.foot);
  alert.detected_at = now_s;
  alert.latency_ms = alarm.arrival_s > 0 ? 1e3 * (now_s - alarm.arrival_s) : 0;
  return alert;
}

}  // namespace gw::daemon
