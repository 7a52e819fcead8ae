// Per-(wearer, device) stream state: sequence checking and the ring buffer of
// recent samples the batcher cuts search slices from.
//
// Thread safety: none; owned by the pipeline thread.
#pragma once

#include <cstdint>
#include <vector>

#include "sensors/frame.h"

namespace gw::pipeline {

enum class FrameVerdict {
  kAccepted,       // in order; samples appended
  kAcceptedAfterGap,  // sequence numbers were missing; appended, windows never span the gap
  kRestarted,      // sequence jumped far back (device restart): the stream was reset, then appended
  kOutOfOrder,     // duplicate or older than the last accepted frame: dropped
};

// A device restart is assumed when the sequence goes back by more than this;
// a smaller step back is a late or duplicate frame and is dropped.
inline constexpr std::uint32_t kRestartSequenceJump = 1024;

class StreamState {
 public:
  StreamState(int channels, std::size_t capacity_samples, double sample_rate_hz);

  // Checks the frame's sequence number and appends its samples. `arrival_s`
  // is the receive time (unix seconds) recorded for latency.
  FrameVerdict apply(const sensors::Frame& frame, double arrival_s);

  int channels() const { return channels_; }
  std::size_t capacity() const { return capacity_; }
  // Absolute index the next sample will get (= samples appended so far).
  std::int64_t next_index() const { return next_index_; }
  // Oldest index a window may start at: after the last gap/restart, and still in the ring.
  std::int64_t window_floor() const;
  // First window end not yet searched.
  std::int64_t searched_until() const { return searched_until_; }
  void mark_searched(std::int64_t until) { searched_until_ = until; }

  // Copies samples [begin, end) sample-major into `out` (appends). Both must
  // lie within [oldest_retained(), next_index()).
  void copy(std::int64_t begin, std::int64_t end, std::vector<float>& out) const;
  std::int64_t oldest_retained() const;
  double device_time_s(std::int64_t index) const;
  double arrival_s(std::int64_t index) const;

  std::uint64_t gaps() const { return gaps_; }
  std::uint64_t missing_frames() const { return missing_frames_; }
  std::uint64_t restarts() const { return restarts_; }
  // Samples overwritten before any window ending at them was searched.
  std::uint64_t overrun_samples() const { return overrun_samples_; }

 private:
  std::size_t slot(std::int64_t index) const { return static_cast<std::size_t>(index) % capacity_; }
  void append(const sensors::Frame& frame, double arrival_s);

  // Grows the storage to hold samples [0, samples) (no more than the
  // capacity): the ring fills from slot 0, so until it wraps only the slots
  // written so far need storage.
  void grow_to(std::size_t samples);

  int channels_;
  std::size_t capacity_;
  double sample_rate_hz_;
  // Slots [0, allocated_) of the ring have storage; allocated_ reaches
  // capacity_ before the ring wraps. A new stream holds none, so that many
  // streams that send little (or a sender inventing wearer ids) cost little,
  // and a daemon taking thousands of new streams at once does not stall on
  // page faults for rings it has not filled.
  std::size_t allocated_ = 0;
  std::vector<float> values_;        // allocated_ x channels
  std::vector<double> device_time_;  // allocated_
  std::vector<double> arrival_;      // allocated_
  bool has_sequence_ = false;
  std::uint32_t last_sequence_ = 0;
  std::int64_t next_index_ = 0;
  std::int64_t gap_floor_ = 0;
  std::int64_t searched_until_ = 0;
  std::uint64_t gaps_ = 0;
  std::uint64_t missing_frames_ = 0;
  std::uint64_t restarts_ = 0;
  std::uint64_t overrun_samples_ = 0;
};

}  // namespace gw::pipeline
