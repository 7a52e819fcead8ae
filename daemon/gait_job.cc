#include "daemon/gait_job.h"

#include <cmath>
#include <chrono>
#include <memory>
#include <utility>

#include <spdlog/spdlog.h>

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
  if (gait.change) {
    options.baseline.learn_walking_s = gait.change_learn_walking_s;
    options.baseline.strides = gait.change_strides;
    options.baseline.k = gait.change_k;
    options.baseline.band_fraction = gait.band;
    options.baseline.threshold = gait.change_threshold;
  }
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
  const bool change = bout.reason == gait::BoutReason::kChangedFromBaseline;
  alert.pattern = change ? gait.change_name : gait.name;
  alert.kind = change ? gait.change_kind : gait.kind;
  alert.severity = change ? gait.change_severity : gait.severity;
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
  event.details["abnormal_score"] = gait::metric_json(minute.abnormal_score);
  event.details["baseline_change"] = gait::metric_json(minute.baseline_change);
  return event;
}

GaitWorker::GaitWorker(gait::MonitorOptions options, std::map<std::uint16_t, std::vector<gait::FootSource>> devices,
                       std::size_t queue_frames)
    : monitor_(std::move(options), std::move(devices)),
      queue_(queue_frames, OverflowPolicy::kDropNewest),
      thread_([this] { run(); }) {}

GaitWorker::~GaitWorker() {
  stopping_ = true;
  queue_.close();
  if (thread_.joinable()) thread_.join();
}

void GaitWorker::offer(std::vector<FrameLoads>& bunch) {
  const std::size_t offered = bunch.size();
  const std::size_t queued = queue_.push_all(bunch);
  offered_ += offered;
  if (queued == offered) return;
  dropped_ += offered - queued;
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (now - last_drop_log_s_.load() >= 60) {
    last_drop_log_s_ = now;
    spdlog::warn("gait: the monitor is behind; {} frames' loads dropped so far (gait.dropped_frames)",
                 dropped_.load());
  }
}

void GaitWorker::run() {
  std::vector<FrameLoads> bunch;
  for (;;) {
    std::optional<FrameLoads> first = queue_.pop_for(std::chrono::milliseconds(100));
    if (!first) {
      if (stopping_) return;
      continue;
    }
    bunch.clear();
    bunch.push_back(std::move(*first));
    queue_.drain(bunch, 1023);
    // Behind: strides are still found and measured, not scored, until the
    // queue is short again.
    monitor_.set_scoring(queue_.size() < queue_.capacity() / 4);
    for (const FrameLoads& item : bunch)
      monitor_.on_frame(item.wearer, item.device, item.first_sample_s, item.rate_hz, item.samples,
                        item.loads.data(), item.arrival_s);
    std::vector<gait::GaitMinute> minutes = monitor_.take_minutes();
    std::vector<gait::AbnormalBout> bouts = monitor_.take_abnormal();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& m : minutes) output_.minutes.push_back(std::move(m));
      for (auto& b : bouts) output_.bouts.push_back(b);
      counters_ = monitor_.counters();
      wearers_ = monitor_.wearers();
    }
    handled_ += bunch.size();
  }
}

GaitWorker::Output GaitWorker::take() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(output_, Output{});
}

bool GaitWorker::wait_idle(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (handled_.load() + dropped_.load() < offered_.load()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

nlohmann::json GaitWorker::counters_json() const {
  std::lock_guard<std::mutex> lock(mu_);
  const gait::MonitorCounters& c = counters_;
  return {{"wearers", wearers_},
          {"samples", c.samples},
          {"unpaired_samples", c.unpaired_samples},
          {"strides", c.strides},
          {"scored_strides", c.scored_strides},
          {"minutes", c.minutes},
          {"abnormal_bouts", c.abnormal_bouts},
          {"baselines_learned", c.baselines_learned},
          {"change_scored_strides", c.change_scored_strides},
          {"dropped_frames", dropped_.load()},
          {"queue_depth", queue_.size()}};
}

nlohmann::json hotspot_counters_json(const gait::HotspotMonitor& hotspots) {
  const gait::HotspotCounters h = hotspots.counters();
  return {{"samples", h.samples}, {"events", h.events}, {"resets", h.resets}, {"trackers", h.trackers}};
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
