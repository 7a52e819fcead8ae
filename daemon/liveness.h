// Sensor liveness: the last frame of every (wearer, device) and its state
// from the silence since, as carers need it to know that a detector is not
// silently off (docs/operations.md, "Wearers and sensor liveness").
//
// States, from the silence s since the device's last frame:
//   online   s < stale_after_s
//   stale    stale_after_s <= s < offline_after_s
//   offline  s >= offline_after_s; it stays offline until a frame comes,
//            whatever the settings do meanwhile (a reload)
// check() reports each device that went offline, once per silence; the
// caller decides whether that raises an alert (mark_alerted()), and a frame
// of a device with a standing alert is reported as a recovery by
// on_frame().
//
// Restart: restore() takes the persisted last frames; their silence counts
// from max(last arrival, the tracker's start), so a device that stays silent
// goes offline offline_after_s after the start at the latest, and one whose
// alert stood at the stop stays offline without a second alert.
//
// Sample indices: a device's samples are counted from its stream's first
// frame, as the engine counts them (end_index of its alerts). The engine
// drops a stream after ingest.stream_idle_s without a frame and after a
// daemon restart; the count starts again from 0 then too.
//
// Clock: every time is passed in (unix seconds, the frames' arrival clock),
// so tests step it. Thread safety: none (the daemon's pipeline thread).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "sinks/store.h"

namespace gw::daemon {

enum class Liveness { kOnline, kStale, kOffline };
const char* liveness_name(Liveness state);  // "online", "stale", "offline"

struct LivenessSettings {
  double stale_after_s = 5;
  double offline_after_s = 30;   // > stale_after_s
  double stream_idle_s = 0;      // ingest.stream_idle_s: the engine forgets a stream; 0 = never
};

// One (wearer, device) as the tracker holds it.
struct DeviceLiveness {
  std::uint32_t wearer = 0;
  std::uint16_t device = 0;
  double last_arrival = 0;       // unix s of its last frame
  double last_device_time = 0;   // device time [s] of its last sample
  std::int64_t last_index = -1;  // that sample's index in its stream; -1 = none yet
  double silent_since = 0;       // what the silence counts from: last_arrival, or the start
  // The silence went past offline_after_s and check() reported it.
  bool went_offline = false;
  // When an offline alert was raised for this silence (mark_alerted()).
  std::optional<double> offline_since;
  std::int64_t stream_samples = 0;  // samples of the engine's current stream
  bool changed = false;             // since the last take_changed()
};

// A device that sends again after its offline alert.
struct Recovery {
  std::uint32_t wearer = 0;
  std::uint16_t device = 0;
  double silent_s = 0;       // from its last frame before the silence to this one
  double offline_since = 0;  // when the alert was raised
};

class LivenessTracker {
 public:
  LivenessTracker(LivenessSettings settings, double start_s);
  void set_settings(const LivenessSettings& settings) { settings_ = settings; }
  const LivenessSettings& settings() const { return settings_; }

  // Persisted last frames (sinks/store.h), before any frame.
  void restore(const std::vector<pipeline::WearerDeviceRecord>& devices);

  // A frame the engine accepted: `samples` samples, the first at device
  // time `first_sample_s`, `rate_hz` apart. Returns the recovery when the
  // device had a standing offline alert.
  std::optional<Recovery> on_frame(std::uint32_t wearer, std::uint16_t device, double arrival_s,
                                   double first_sample_s, int samples, double rate_hz);

  // The devices whose silence reached offline_after_s since the last call
  // (each once per silence), in (wearer, device) order.
  std::vector<const DeviceLiveness*> check(double now_s);
  // An alert was raised for the device's current silence at `at_s`.
  void mark_alerted(std::uint32_t wearer, std::uint16_t device, double at_s);

  Liveness state(const DeviceLiveness& device, double now_s) const;
  // Every device, in (wearer, device) order.
  const std::map<std::pair<std::uint32_t, std::uint16_t>, DeviceLiveness>& devices() const {
    return devices_;
  }
  // Devices per state at `now_s`, indexed by Liveness.
  std::array<std::uint64_t, 3> count_by_state(double now_s) const;

  // The devices changed since the last call, as the store keeps them.
  std::vector<pipeline::WearerDeviceRecord> take_changed();
  // Those of `records` still known count as changed again (their write failed).
  void mark_unsaved(const std::vector<pipeline::WearerDeviceRecord>& records);

 private:
  DeviceLiveness& entry(std::uint32_t wearer, std::uint16_t device);

  LivenessSettings settings_;
  double start_s_;
  std::map<std::pair<std::uint32_t, std::uint16_t>, DeviceLiveness> devices_;
};

}  // namespace gw::daemon
