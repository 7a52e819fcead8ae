// Recordings cut into wire frames: the one framing behind `gaitwatch replay`
// (to the daemon), the offline engine (`detect`, `eval`, `plot`), `gaitwatch
// history fill` and the tests, so all of them see identical samples.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sensors/frame.h"
#include "sensors/recording.h"

namespace gw::sensors {

// Cuts samples [begin, end) of `rec` into frames of `frame_samples` samples
// with consecutive sequence numbers from 0 and device times from the
// recording's time column. With `int16` the values are what a receiver sees
// after int16 quantisation (per-channel scales fitted to the range). Throws
// gw::Error for frame_samples < 1.
std::vector<Frame> frames_from_recording(const Recording& rec, std::uint32_t wearer,
                                         std::uint16_t device, DeviceKind kind, int frame_samples,
                                         std::size_t begin, std::size_t end, bool int16);

}  // namespace gw::sensors
