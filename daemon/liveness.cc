#include "daemon/liveness.h"

#include <algorithm>

namespace gw::daemon {

const char* liveness_name(Liveness state) {
  switch (state) {
    case Liveness::kOnline:
      return "online";
    case Liveness::kStale:
      return "stale";
    case Liveness::kOffline:
      return "offline";
  }
  return "?";
}

LivenessTracker::LivenessTracker(LivenessSettings settings, double start_s)
    : settings_(settings), start_s_(start_s) {}

void LivenessTracker::restore(const std::vector<pipeline::WearerDeviceRecord>& devices) {
  for (const pipeline::WearerDeviceRecord& r : devices) {
    DeviceLiveness& d = entry(r.wearer, r.device);
    d.last_arrival = r.last_arrival;
    d.last_device_time = r.last_device_time;
    d.last_index = r.last_index;
    d.silent_since = std::max(r.last_arrival, start_s_);
    d.offline_since = r.offline_since;
    d.went_offline = r.offline_since.has_value();
    d.stream_samples = 0;  // the engine starts every stream afresh
    d.changed = false;
  }
}

DeviceLiveness& LivenessTracker::entry(std::uint32_t wearer, std::uint16_t device) {
  DeviceLiveness& d = devices_[{wearer, device}];
  d.wearer = wearer;
  d.device = device;
  return d;
}

std::optional<Recovery> LivenessTracker::on_frame(std::uint32_t wearer, std::uint16_t device,
                                                  double arrival_s, double first_sample_s,
                                                  int samples, double rate_hz) {
  DeviceLiveness& d = entry(wearer, device);
  std::optional<Recovery> recovery;
  if (d.offline_since)
    recovery = Recovery{wearer, device, arrival_s - d.last_arrival, *d.offline_since};
  // The engine removed the stream (its sweep runs about once a second, so
  // this follows it to within that).
  if (settings_.stream_idle_s > 0 && arrival_s - d.last_arrival >= settings_.stream_idle_s)
    d.stream_samples = 0;
  const int n = std::max(samples, 1);
  d.stream_samples += n;
  d.last_index = d.stream_samples - 1;
  d.last_device_time = first_sample_s + (rate_hz > 0 ? (n - 1) / rate_hz : 0.0);
  d.last_arrival = arrival_s;
  d.silent_since = arrival_s;
  d.went_offline = false;
  d.offline_since.reset();
  d.changed = true;
  return recovery;
}

Liveness LivenessTracker::state(const DeviceLiveness& d, double now_s) const {
  if (d.went_offline) return Liveness::kOffline;
  const double silent = now_s - d.silent_since;
  if (silent >= settings_.offline_after_s) return Liveness::kOffline;
  if (silent >= settings_.stale_after_s) return Liveness::kStale;
  return Liveness::kOnline;
}

std::vector<const DeviceLiveness*> LivenessTracker::check(double now_s) {
  std::vector<const DeviceLiveness*> offline;
  for (auto& [key, d] : devices_) {
    if (d.went_offline || now_s - d.silent_since < settings_.offline_after_s) continue;
    d.went_offline = true;
    offline.push_back(&d);
  }
  return offline;
}

void LivenessTracker::mark_alerted(std::uint32_t wearer, std::uint16_t device, double at_s) {
  const auto it = devices_.find({wearer, device});
  if (it == devices_.end()) return;
  it->second.offline_since = at_s;
  it->second.changed = true;
}

std::array<std::uint64_t, 3> LivenessTracker::count_by_state(double now_s) const {
  std::array<std::uint64_t, 3> counts{0, 0, 0};
  for (const auto& [key, d] : devices_) ++counts[static_cast<std::size_t>(state(d, now_s))];
  return counts;
}

std::vector<pipeline::WearerDeviceRecord> LivenessTracker::take_changed() {
  std::vector<pipeline::WearerDeviceRecord> out;
  for (auto& [key, d] : devices_) {
    if (!d.changed) continue;
    d.changed = false;
    out.push_back({d.wearer, d.device, d.last_arrival, d.last_device_time,
                   std::max<std::int64_t>(d.last_index, 0), d.offline_since});
  }
  return out;
}

void LivenessTracker::mark_unsaved(const std::vector<pipeline::WearerDeviceRecord>& records) {
  for (const pipeline::WearerDeviceRecord& r : records) {
    const auto it = devices_.find({r.wearer, r.device});
    if (it != devices_.end()) it->second.changed = true;
  }
}

}  // namespace gw::daemon
