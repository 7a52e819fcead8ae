#include "pipeline/stream_state.h"

#include <catch2/catch.hpp>

using gw::pipeline::FrameVerdict;
using gw::pipeline::StreamState;
using gw::sensors::Frame;

namespace {

Frame frame(std::uint32_t seq, int samples, int channels, float first_value) {
  Frame f;
  f.channels = static_cast<std::uint16_t>(channels);
  f.samples = static_cast<std::uint16_t>(samples);
  f.sample_rate_hz = 100;
  f.sequence = seq;
  f.device_time_us = seq * 1000000ull;
  for (int s = 0; s < samples; ++s)
    for (int c = 0; c < channels; ++c) f.values.push_back(first_value + s + 100.0f * c);
  return f;
}

}  // namespace

TEST_CASE("in-order frames append and keep values per channel", "[stream]") {
  StreamState st(2, 16, 100);
  CHECK(st.apply(frame(0, 4, 2, 0), 1.0) == FrameVerdict::kAccepted);
  CHECK(st.apply(frame(1, 4, 2, 4), 2.0) == FrameVerdict::kAccepted);
  CHECK(st.next_index() == 8);
  std::vector<float> out;
  st.copy(2, 6, out);
  REQUIRE(out.size() == 8);
  CHECK(out[0] == 2.0f);
  CHECK(out[1] == 102.0f);
  CHECK(out[6] == 5.0f);
  CHECK(st.arrival_s(7) == 2.0);
  CHECK(st.device_time_s(5) == Approx(1.01));
}

TEST_CASE("duplicates and late frames are dropped", "[stream]") {
  StreamState st(1, 16, 100);
  st.apply(frame(5, 2, 1, 0), 0);
  st.apply(frame(6, 2, 1, 2), 0);
  CHECK(st.apply(frame(6, 2, 1, 2), 0) == FrameVerdict::kOutOfOrder);
  CHECK(st.apply(frame(4, 2, 1, 2), 0) == FrameVerdict::kOutOfOrder);
  CHECK(st.next_index() == 4);
}

TEST_CASE("a sequence gap is counted and windows never span it", "[stream]") {
  StreamState st(1, 64, 100);
  st.apply(frame(0, 4, 1, 0), 0);
  st.apply(frame(1, 4, 1, 4), 0);
  CHECK(st.window_floor() == 0);
  CHECK(st.apply(frame(4, 4, 1, 100), 0) == FrameVerdict::kAcceptedAfterGap);
  CHECK(st.gaps() == 1);
  CHECK(st.missing_frames() == 2);
  CHECK(st.window_floor() == 8);
  CHECK(st.apply(frame(5, 4, 1, 104), 0) == FrameVerdict::kAccepted);
  CHECK(st.window_floor() == 8);
}

TEST_CASE("a large step back is a device restart, not a late frame", "[stream]") {
  StreamState st(1, 64, 100);
  st.apply(frame(5000, 4, 1, 0), 0);
  CHECK(st.apply(frame(0, 4, 1, 0), 0) == FrameVerdict::kRestarted);
  CHECK(st.restarts() == 1);
  CHECK(st.window_floor() == 4);
  CHECK(st.apply(frame(1, 4, 1, 0), 0) == FrameVerdict::kAccepted);
}

TEST_CASE("sequence numbers wrap at 2^32", "[stream]") {
  StreamState st(1, 64, 100);
  st.apply(frame(0xffffffffu, 1, 1, 0), 0);
  CHECK(st.apply(frame(0, 1, 1, 0), 0) == FrameVerdict::kAccepted);
  CHECK(st.gaps() == 0);
}

TEST_CASE("the ring keeps the newest capacity samples and counts unsearched overwrites",
          "[stream]") {
  StreamState st(1, 8, 100);
  st.apply(frame(0, 6, 1, 0), 0);
  st.mark_searched(6);
  st.apply(frame(1, 6, 1, 6), 0);  // 12 samples in an 8-sample ring: 0..3 evicted, all searched
  CHECK(st.overrun_samples() == 0);
  CHECK(st.oldest_retained() == 4);
  std::vector<float> out;
  st.copy(4, 12, out);
  CHECK(out.front() == 4.0f);
  CHECK(out.back() == 11.0f);
  st.apply(frame(2, 6, 1, 12), 0);  // evicts 4..9; 6..9 were never searched
  CHECK(st.overrun_samples() == 4);
  CHECK(st.searched_until() == 10);
}

TEST_CASE("copy reads a range that wraps around the ring's end in order", "[stream]") {
  StreamState st(2, 8, 100);
  st.apply(frame(0, 6, 2, 0), 0);
  st.apply(frame(1, 4, 2, 6), 0);  // samples 0..9; 8 and 9 in slots 0 and 1
  std::vector<float> out = {-1.0f};  // copy() appends
  st.copy(5, 10, out);                // slots 5, 6, 7, 0, 1
  REQUIRE(out.size() == 11);
  CHECK(out[0] == -1.0f);
  for (int s = 0; s < 5; ++s) {
    CHECK(out[1 + 2 * s] == static_cast<float>(5 + s));
    CHECK(out[2 + 2 * s] == static_cast<float>(105 + s));
  }
}

TEST_CASE("a ring grows as samples come and keeps them through growth and wrap", "[stream]") {
  // Frames of 7 samples into a 1000-sample ring: storage grows several times
  // before the ring wraps; every retained sample keeps its values and times.
  StreamState st(3, 1000, 100);
  std::uint32_t seq = 0;
  for (; seq < 400; ++seq) {
    REQUIRE(st.apply(frame(seq, 7, 3, static_cast<float>(seq * 7)), seq * 0.5) ==
            FrameVerdict::kAccepted);
    const std::int64_t first = st.oldest_retained();
    std::vector<float> out;
    st.copy(first, st.next_index(), out);
    REQUIRE(out.size() == static_cast<std::size_t>(st.next_index() - first) * 3);
    for (std::int64_t i = first; i < st.next_index(); i += 97) {
      const std::int64_t frame_of = i / 7, within = i % 7;
      const auto at = static_cast<std::size_t>(i - first) * 3;
      REQUIRE(out[at] == static_cast<float>(frame_of * 7 + within));
      REQUIRE(out[at + 2] == static_cast<float>(frame_of * 7 + within + 200));
      REQUIRE(st.arrival_s(i) == frame_of * 0.5);
      REQUIRE(st.device_time_s(i) == Approx(static_cast<double>(frame_of) + within * 0.01));
    }
  }
  CHECK(st.next_index() == 2800);
  CHECK(st.oldest_retained() == 1800);
}
