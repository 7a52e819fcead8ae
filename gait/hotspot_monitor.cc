#include "gait/hotspot_monitor.h"

#include <algorithm>

namespace gw::gait {

namespace {
// How often (arrival time) idle streams are looked for.
constexpr double kSweepInterval_s = 60;
}  // namespace

std::size_t region_count(const std::vector<FootSource>& feet) {
  std::size_t count = 0;
  for (const FootSource& foot : feet) count += insole_regions(foot.form).size();
  return count;
}

void reduce_region_pressures(const std::vector<FootSource>& feet, const sensors::Frame& frame,
                             std::vector<float>& out) {
  std::vector<std::vector<InsoleRegion>> regions;
  for (const FootSource& foot : feet) regions.push_back(insole_regions(foot.form));
  const std::size_t per_sample = region_count(feet);
  out.resize(static_cast<std::size_t>(frame.samples) * per_sample);
  std::vector<float> cells;
  for (std::size_t s = 0; s < frame.samples; ++s) {
    const float* row = frame.values.data() + s * frame.channels;
    float* dst = out.data() + s * per_sample;
    for (std::size_t i = 0; i < feet.size(); ++i) {
      const FootSource& foot = feet[i];
      cells.resize(foot.cells.size());
      for (std::size_t c = 0; c < foot.cells.size(); ++c) {
        const int channel = foot.cells[c];
        cells[c] = channel < frame.channels ? row[channel] : 0.0f;
      }
      // A foot with fewer cells than its form's regions name reads the rest as zero.
      int needed = 0;
      for (const InsoleRegion& region : regions[i])
        for (int cell : region.cells) needed = std::max(needed, cell + 1);
      if (static_cast<int>(cells.size()) < needed)
        cells.resize(static_cast<std::size_t>(needed), 0.0f);
      region_pressures(regions[i], cells.data(), dst);
      dst += regions[i].size();
    }
  }
}

HotspotMonitor::HotspotMonitor(std::map<std::uint16_t, HotspotSource> devices)
    : devices_(std::move(devices)) {}

void HotspotMonitor::on_frame(std::uint32_t wearer, std::uint16_t device, double first_sample_s,
                              double rate_hz, int samples, const FootLoad* loads,
                              const float* pressures, double arrival_s) {
  const auto source_it = devices_.find(device);
  if (source_it == devices_.end() || samples <= 0 || !(rate_hz > 0)) return;
  const HotspotSource& source = source_it->second;
  if (arrival_s - last_sweep_s_ >= kSweepInterval_s) drop_idle(arrival_s);

  Stream& stream = streams_[{wearer, device}];
  const double period = 1.0 / rate_hz;
  if (stream.trackers.empty() || stream.rate_hz != rate_hz) {
    stream.trackers.clear();
    for (const FootSource& foot : source.feet)
      stream.trackers.emplace_back(foot.foot, insole_regions(foot.form), source.params, rate_hz);
    stream.rate_hz = rate_hz;
  } else if (first_sample_s < stream.next_t_s - 0.5 * period) {
    for (HotspotTracker& tracker : stream.trackers) tracker.reset();
    ++counters_.resets;
  }
  stream.next_t_s = first_sample_s + samples * period;
  stream.last_arrival_s = arrival_s;

  const std::size_t feet = stream.trackers.size();
  std::size_t per_sample = 0;
  for (const HotspotTracker& tracker : stream.trackers) per_sample += tracker.regions().size();
  for (int s = 0; s < samples; ++s) {
    const float* row = pressures + static_cast<std::size_t>(s) * per_sample;
    const double t_s = first_sample_s + s * period;
    for (std::size_t i = 0; i < feet; ++i) {
      HotspotTracker& tracker = stream.trackers[i];
      scratch_.clear();
      tracker.push_regions(t_s, row, loads[static_cast<std::size_t>(s) * feet + i].load, scratch_);
      row += tracker.regions().size();
      ++counters_.samples;
      for (HotspotEvent& event : scratch_) {
        alarms_.push_back(HotspotAlarm{wearer, device, std::move(event), arrival_s});
        ++counters_.events;
      }
    }
  }
}

void HotspotMonitor::drop_idle(double arrival_s) {
  last_sweep_s_ = arrival_s;
  for (auto it = streams_.begin(); it != streams_.end();) {
    const HotspotParams& params = devices_.at(it->first.second).params;
    if (arrival_s - it->second.last_arrival_s > params.cooldown_s + params.peak_window_s)
      it = streams_.erase(it);
    else
      ++it;
  }
}

std::vector<HotspotAlarm> HotspotMonitor::take_alarms() {
  std::vector<HotspotAlarm> out;
  out.swap(alarms_);
  return out;
}

HotspotCounters HotspotMonitor::counters() const {
  HotspotCounters c = counters_;
  c.trackers = 0;
  for (const auto& [key, stream] : streams_) c.trackers += stream.trackers.size();
  return c;
}

}  // namespace gw::gait
