// Gait cycles of a whole recording: which channels are the insoles, and the
// strides the online tracker finds in them (`gaitwatch gait --file`, the
// tests and the pack's examples).
#pragma once

#include <string>
#include <vector>

#include "gait/cycles.h"
#include "sensors/recording.h"

namespace gw::gait {

// The insole channels of a recording or device, found by name:
//   L1..L8 and R1..R8                  a force insole (gaitpdb layout)
//   left_p0..left_p98, right_p0..      the W1 pressure insole's 9 x 11 grid
struct InsoleChannels {
  std::vector<int> cells[2];  // channel indices per foot (left, right)
  FootLayout layout[2];
};
// Throws gw::Error naming what is missing when neither set is complete.
InsoleChannels insole_channels(const std::vector<std::string>& channel_names);

// Both feet's load at `sample` of a sample-major row of `row_values`.
void foot_loads(const InsoleChannels& insoles, const float* row_values, FootLoad& left, FootLoad& right);

// Every stride of `rec` (its own rate and time column), in completion order.
// Throws gw::Error when the recording has no insole channels.
std::vector<Stride> walk_strides(const sensors::Recording& rec, CycleParams params = {});

}  // namespace gw::gait
