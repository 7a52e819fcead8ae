#include "pipeline/stream_state.h"

#include <algorithm>

namespace gw::pipeline {

StreamState::StreamState(int channels, std::size_t capacity_samples, double sample_rate_hz)
    : channels_(channels),
      capacity_(std::max<std::size_t>(capacity_samples, 1)),
      sample_rate_hz_(sample_rate_hz) {}

void StreamState::grow_to(std::size_t samples) {
  samples = std::min(samples, capacity_);
  if (samples <= allocated_) return;
  // Doubling keeps the copies to about one per sample over the ring's
  // filling; the first storage holds a few frames.
  constexpr std::size_t kFirstSamples = 64;
  const std::size_t size = std::min(capacity_, std::max({samples, 2 * allocated_, kFirstSamples}));
  // reserve first: resize alone may allocate more than asked for.
  const auto fit = [](auto& v, std::size_t n) {
    v.reserve(n);
    v.resize(n);
  };
  fit(values_, size * static_cast<std::size_t>(channels_));
  fit(device_time_, size);
  fit(arrival_, size);
  allocated_ = size;
}

FrameVerdict StreamState::apply(const sensors::Frame& frame, double arrival_s) {
  FrameVerdict verdict = FrameVerdict::kAccepted;
  if (has_sequence_) {
    const std::uint32_t expected = last_sequence_ + 1;  // wraps at 2^32 like the device counter
    const std::uint32_t ahead = frame.sequence - expected;
    const std::uint32_t behind = last_sequence_ - frame.sequence;
    if (frame.sequence != expected) {
      if (behind < kRestartSequenceJump) return FrameVerdict::kOutOfOrder;  // late or duplicate
      gap_floor_ = next_index_;  // no window may span the discontinuity
      if (ahead < (1u << 31)) {
        ++gaps_;
        missing_frames_ += ahead;
        verdict = FrameVerdict::kAcceptedAfterGap;
      } else {
        ++restarts_;
        verdict = FrameVerdict::kRestarted;
      }
    }
  }
  has_sequence_ = true;
  last_sequence_ = frame.sequence;
  append(frame, arrival_s);
  return verdict;
}

void StreamState::append(const sensors::Frame& frame, double arrival_s) {
  const double t0 = static_cast<double>(frame.device_time_us) * 1e-6;
  const double rate = frame.sample_rate_hz > 0 ? frame.sample_rate_hz : sample_rate_hz_;
  const auto c = static_cast<std::size_t>(channels_);
  if (allocated_ < capacity_) grow_to(static_cast<std::size_t>(next_index_) + frame.samples);
  for (std::size_t s = 0; s < frame.samples; ++s) {
    // The slot about to be overwritten: count it if no window ending there was searched.
    if (next_index_ >= static_cast<std::int64_t>(capacity_)) {
      const std::int64_t evicted = next_index_ - static_cast<std::int64_t>(capacity_);
      if (evicted >= searched_until_) {
        ++overrun_samples_;
        searched_until_ = evicted + 1;
      }
    }
    const std::size_t at = slot(next_index_);
    std::copy_n(frame.values.begin() + static_cast<std::ptrdiff_t>(s * c), c,
                values_.data() + at * c);
    device_time_[at] = t0 + static_cast<double>(s) / rate;
    arrival_[at] = arrival_s;
    ++next_index_;
  }
}

std::int64_t StreamState::oldest_retained() const {
  return std::max<std::int64_t>(0, next_index_ - static_cast<std::int64_t>(capacity_));
}

std::int64_t StreamState::window_floor() const { return std::max(gap_floor_, oldest_retained()); }

void StreamState::copy(std::int64_t begin, std::int64_t end, std::vector<float>& out) const {
  const auto c = static_cast<std::size_t>(channels_);
  out.reserve(out.size() + static_cast<std::size_t>(end - begin) * c);
  // At most two contiguous runs of the ring: up to its end, then from slot 0.
  while (begin < end) {
    const std::size_t at = slot(begin);
    const auto run = static_cast<std::int64_t>(
        std::min<std::size_t>(capacity_ - at, static_cast<std::size_t>(end - begin)));
    const float* from = values_.data() + at * c;
    out.insert(out.end(), from, from + static_cast<std::size_t>(run) * c);
    begin += run;
  }
}

double StreamState::device_time_s(std::int64_t index) const { return device_time_[slot(index)]; }
double StreamState::arrival_s(std::int64_t index) const { return arrival_[slot(index)]; }

}  // namespace gw::pipeline
