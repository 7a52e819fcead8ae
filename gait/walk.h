// Gait cycles of a whole recording: which channels are the insoles, and the
// strides and minutes the online code finds in them (`gaitwatch gait
// --file`, the tests and the pack's examples).
#pragma once

#include <string>
#include <vector>

#include "gait/cycles.h"
#include "gait/monitor.h"
#include "sensors/recording.h"

namespace gw::gait {

// The feet a recording carries, found by channel name: L1..L8 and R1..R8 (a
// force insole pair, as gaitpdb names them), or left_p0..left_p98 and
// right_p0..right_p98 (the W1 pressure insoles). Throws gw::Error naming
// what is missing when neither foot is there.
std::vector<FootSource> recording_feet(const std::vector<std::string>& channel_names);

// Every stride of `rec` (its own rate and time column), in completion order.
// Throws gw::Error when the recording has no insole channels.
std::vector<Stride> walk_strides(const sensors::Recording& rec, CycleParams params = {});

// The minutes of walking and the abnormal bouts of `rec` as the daemon's
// monitor finds them when `gaitwatch replay` sends it as wearer 1's frames
// of `frame_samples` samples from one device carrying both feet: the same
// frames (sensors::frames_from_recording), the same sample times, the same
// code. Throws gw::Error as walk_strides.
struct WalkMinutes {
  std::vector<GaitMinute> minutes;
  std::vector<AbnormalBout> abnormal;
};
WalkMinutes walk_minutes(const sensors::Recording& rec, const MonitorOptions& options, int frame_samples);

}  // namespace gw::gait
