// Shared helpers of the history tests: frames cut from a real recording the
// way `gaitwatch replay` cuts them, and a history file filled through the
// daemon's recorder.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "history/history_recorder.h"
#include "history/history_store.h"
#include "sensors/frame.h"
#include "sensors/framing.h"
#include "sensors/recording.h"

namespace gw::test {

// A bundled Daphnet recording ("S02R01"), read once per test binary.
inline const sensors::Recording& daphnet(const std::string& name) {
  static std::map<std::string, sensors::Recording> cache;
  auto it = cache.find(name);
  if (it == cache.end())
    it = cache.emplace(name, sensors::read_daphnet(std::string(GW_DATA_DIR) + "/daphnet/" +
                                                   name + ".txt"))
             .first;
  return it->second;
}

// Frames of `per_frame` samples over samples [begin, end) of `rec`, cut as
// `gaitwatch replay` cuts them, with sequence numbers from `first_sequence`
// and device times from the recording's time column (+ offset_s), or with
// `regular_clock` exactly offset_s + s / rate (1/64 s is a whole number of
// microseconds, so sample index and device time then agree exactly).
inline std::vector<sensors::Frame> frames_of(const sensors::Recording& rec, std::uint32_t wearer,
                                             std::uint16_t device, std::size_t begin,
                                             std::size_t end, int per_frame,
                                             std::uint32_t first_sequence = 0,
                                             double offset_s = 0, bool regular_clock = false) {
  auto frames = sensors::frames_from_recording(rec, wearer, device, sensors::DeviceKind::kGeneric,
                                               per_frame, begin, end, false);
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const std::size_t s = begin + i * static_cast<std::size_t>(per_frame);
    const double t = regular_clock ? static_cast<double>(s) / rec.sample_rate_hz : rec.time_s[s];
    frames[i].sequence += first_sequence;
    frames[i].device_time_us = static_cast<std::uint64_t>(std::llround((t + offset_s) * 1e6));
  }
  return frames;
}

// Options for a recorder in a test: no retention, no waiting for batches.
inline pipeline::HistoryOptions test_history_options(const std::string& path, double chunk_s) {
  pipeline::HistoryOptions o;
  o.path = path;
  o.retention_hours = 0;
  o.chunk_s = chunk_s;
  o.commit_interval_ms = 0;
  o.overflow = OverflowPolicy::kBlock;  // lose nothing unless a test asks for it
  return o;
}

// Appends frames in order; the frame after a skipped sequence number gets
// the verdict the engine would give it (kAcceptedAfterGap).
inline void record(pipeline::HistoryRecorder& recorder, const std::vector<sensors::Frame>& frames,
                   double arrival_s = 1000) {
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const bool after_gap = i > 0 && frames[i].sequence != frames[i - 1].sequence + 1;
    recorder.append(
        frames[i],
        after_gap ? pipeline::FrameVerdict::kAcceptedAfterGap : pipeline::FrameVerdict::kAccepted,
        arrival_s);
  }
}

}  // namespace gw::test
