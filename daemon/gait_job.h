// The daemon's gait work (gait/monitor.h) as its config sets it: which
// devices carry a foot, the monitor's options with the gait pack's example
// strides, and what the monitor's output becomes: an abnormal-gait alert
// (stored and published as any alert) per abnormal walking bout, and a
// `gait_minute` event (stored in the audit log, published) per minute of a
// wearer's walking.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "config/config.h"
#include "gait/hotspot_monitor.h"
#include "gait/monitor.h"
#include "sinks/alert.h"
#include "sinks/event.h"

namespace gw::daemon {

// Every device of the config that carries a foot (gait::device_feet); empty
// when gait is off.
std::map<std::uint16_t, std::vector<gait::FootSource>> gait_devices(const config::Config& config);

// The monitor's options; the pack's examples are read again from their file
// (the config checked it). Throws gw::Error when it no longer reads.
gait::MonitorOptions gait_monitor_options(const config::GaitConfig& gait);

// The alert of an abnormal bout: pattern and kind as the pack names them,
// no dims; distance = the bout's mean stride score; t_start/t_end the bout's
// device times; latency from the arrival of the frame that completed it.
pipeline::Alert abnormal_gait_alert(const gait::AbnormalBout& bout, const config::GaitConfig& gait,
                                    double now_s);

// {type gait_minute, wearer, actor gaitwatchd, details: {t_start, t_end,
// abnormal_score, and gait::metrics_json}}.
pipeline::Event gait_minute_event(const gait::GaitMinute& minute, double now_s);

// The monitor's counters for `status` (section "gait"); with a hotspot
// monitor, its counters under "hotspots".
nlohmann::json gait_counters_json(const gait::GaitMonitor& monitor, const gait::HotspotMonitor* hotspots);

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
