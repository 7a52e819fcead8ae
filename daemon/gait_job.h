// The daemon's gait work (gait/monitor.h) as its config sets it: which
// devices carry a foot, the monitor's options with the gait pack's example
// strides, and what the monitor's output becomes: an abnormal-gait alert
// (stored and published as any alert) per abnormal walking bout, and a
// `gait_minute` event (stored in the audit log, published) per minute of a
// wearer's walking.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "common/bounded_queue.h"
#include "config/config.h"
#include "gait/hotspot_monitor.h"
#include "gait/monitor.h"
#include "sinks/alert.h"
#include "sinks/event.h"

namespace gw::daemon {

// Every device of the config that carries a foot (gait::device_feet); empty
// when gait is off.
std::map<std::uint16_t, std::vector<gait::FootSource>> gait_devices(const config::Config& config);

// Frames' loads the gait thread's queue holds at most: about 6 s of 1,000
// wearers' 10-sample frames.
inline constexpr std::size_t kGaitQueueFrames = 65536;

// The monitor's options; the pack's examples are read again from their file
// (the config checked it). Throws gw::Error when it no longer reads.
gait::MonitorOptions gait_monitor_options(const config::GaitConfig& gait);

// The alert of an abnormal bout: pattern, kind and severity as the pack
// names them (its `abnormal_gait` rule, or its `gait_change` rule for a bout
// of reason kChangedFromBaseline), no dims; distance = the bout's mean
// stride score (or mean change); t_start/t_end the bout's
// device times; latency from the arrival of the frame that completed it.
pipeline::Alert abnormal_gait_alert(const gait::AbnormalBout& bout, const config::GaitConfig& gait,
                                    double now_s);

// {type gait_minute, wearer, actor gaitwatchd, details: {t_start, t_end,
// abnormal_score, baseline_change (null before the wearer's baseline is
// learned or without one), and gait::metrics_json}}.
pipeline::Event gait_minute_event(const gait::GaitMinute& minute, double now_s);

// The gait monitor on a thread of its own, so that neither its per-sample
// work nor the scoring of strides against the pack is on the pipeline
// thread's way. The pipeline thread offers each accepted frame's loads (in
// bunches, one lock per bunch) to a bounded queue. While a quarter of the
// queue or more waits, strides are measured but not scored against the pack
// (the expensive part; `gait.strides` - `gait.scored_strides` shows it); when
// the queue is full a frame's loads are dropped and counted (`gait.dropped_frames`, a log line at
// most once a minute), so a monitor that falls behind (too many wearers for
// its core) loses gait samples, never detection's. What the monitor produced
// is taken back by the pipeline thread (take()), which stores and publishes
// it as it does the engine's alerts.
class GaitWorker {
 public:
  struct FrameLoads {
    std::uint32_t wearer = 0;
    std::uint16_t device = 0;
    double first_sample_s = 0;
    double rate_hz = 0;
    int samples = 0;
    std::vector<gait::FootLoad> loads;
    double arrival_s = 0;
  };
  struct Output {
    std::vector<gait::GaitMinute> minutes;
    std::vector<gait::AbnormalBout> bouts;
  };

  GaitWorker(gait::MonitorOptions options, std::map<std::uint16_t, std::vector<gait::FootSource>> devices,
             std::size_t queue_frames);
  ~GaitWorker();  // stops the thread; what is still queued is dropped
  GaitWorker(const GaitWorker&) = delete;
  GaitWorker& operator=(const GaitWorker&) = delete;

  // Queues the bunch (left empty); counts what did not fit.
  void offer(std::vector<FrameLoads>& bunch);
  // What the monitor produced since the last take.
  Output take();
  // Waits up to `timeout` until every queued frame went through the
  // monitor (a stop's drain); false when it did not.
  bool wait_idle(std::chrono::milliseconds timeout);
  // The monitor's counters with the queue's (section "gait" of `status`).
  nlohmann::json counters_json() const;

 private:
  void run();

  gait::GaitMonitor monitor_;  // the worker thread's alone
  BoundedQueue<FrameLoads> queue_;
  mutable std::mutex mu_;      // guards output_ and counters_
  Output output_;
  gait::MonitorCounters counters_;
  std::size_t wearers_ = 0;
  std::atomic<std::uint64_t> handled_{0};
  std::atomic<std::uint64_t> offered_{0};
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<double> last_drop_log_s_{0};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// The hotspot monitor's counters (`status` section "gait.hotspots").
nlohmann::json hotspot_counters_json(const gait::HotspotMonitor& hotspots);

// Every device of the config whose feet are watched for pressure hotspots
// (gait on, the device carries a foot, devices[].hotspots.enabled), with
// its tracker parameters; empty when none is.
std::map<std::uint16_t, gait::HotspotSource> hotspot_devices(const config::Config& config);

// The alert of a pressure hotspot: pattern and kind pressure_hotspot, the
// device's hotspots.severity, region and foot set, t_start the episode's
// start and t_end the sample that completed it (device times), distance the
// episode's peak region pressure, no dims; latency from the arrival of the
// frame that completed it.
pipeline::Alert pressure_hotspot_alert(const gait::HotspotAlarm& alarm, const config::DeviceHotspots& hotspots,
                                       double now_s);

}  // namespace gw::daemon
