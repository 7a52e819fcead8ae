// Pressure hotspots of every wearer (gait/hotspots.h) in the daemon: one
// HotspotTracker per (wearer, device, foot), fed with each sample's region
// pressures. The per-cell work, the reduction of a frame to its regions'
// pressures, is reduce_region_pressures, run on the ingest threads; the
// monitor runs on the pipeline thread beside the GaitMonitor.
//
// Device time: a frame that starts before the previous one's last sample
// (a restarted device, a replay from the start) resets the stream's
// trackers, cooldowns included; a forward gap only restarts their windows
// (the tracker's rule). A change of sample rate rebuilds them.
//
// Memory: the trackers of a stream that sent nothing for its cooldown_s
// plus peak_window_s of arrival time are dropped; by then a gap would have
// restarted their windows and their cooldowns would have run out, so a
// tracker built afresh behaves as the dropped one would have.
//
// Threads: none inside; one thread owns a monitor.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gait/hotspots.h"
#include "gait/monitor.h"
#include "sensors/frame.h"

namespace gw::gait {

// What a device's feet are watched with.
struct HotspotSource {
  std::vector<FootSource> feet;  // as device_feet gives them
  HotspotParams params;
};

// The region pressures of every sample of the frame, sample-major: for
// sample s, foot 0's regions (insole_regions of its form), then foot 1's.
// Channels beyond the frame's count read as zero.
void reduce_region_pressures(const std::vector<FootSource>& feet, const sensors::Frame& frame,
                             std::vector<float>& out);
// Values per sample of reduce_region_pressures.
std::size_t region_count(const std::vector<FootSource>& feet);

struct HotspotAlarm {
  std::uint32_t wearer = 0;
  std::uint16_t device = 0;
  HotspotEvent event;
  double arrival_s = 0;  // arrival of the frame that completed the event
};

struct HotspotCounters {
  std::uint64_t samples = 0;  // a foot's samples fed to its tracker
  std::uint64_t events = 0;
  std::uint64_t resets = 0;    // streams reset by device time going back
  std::uint64_t trackers = 0;  // feet tracked now
};

class HotspotMonitor {
 public:
  explicit HotspotMonitor(std::map<std::uint16_t, HotspotSource> devices);

  bool watches(std::uint16_t device) const { return devices_.count(device) != 0; }

  // One frame: `loads` as reduce_foot_loads gives it (the feet's totals),
  // `pressures` as reduce_region_pressures does.
  void on_frame(std::uint32_t wearer, std::uint16_t device, double first_sample_s, double rate_hz,
                int samples, const FootLoad* loads, const float* pressures, double arrival_s);

  std::vector<HotspotAlarm> take_alarms();
  HotspotCounters counters() const;

 private:
  struct Stream {
    std::vector<HotspotTracker> trackers;  // one per foot of the device
    double rate_hz = 0;
    double next_t_s = 0;  // device time of the sample after the last one
    double last_arrival_s = 0;
  };
  void drop_idle(double arrival_s);

  std::map<std::uint16_t, HotspotSource> devices_;
  std::map<std::pair<std::uint32_t, std::uint16_t>, Stream> streams_;
  std::vector<HotspotAlarm> alarms_;
  std::vector<HotspotEvent> scratch_;
  HotspotCounters counters_;
  double last_sweep_s_ = 0;
};

}  // namespace gw::gait
