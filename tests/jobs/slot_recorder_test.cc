// SlotRecorder: frames to wearer-seconds. Each expectation is computed
// independently from the samples with classify_second()/summarize_second(),
// the functions the index is specified by.
#include "jobs/slot_recorder.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "common/error.h"
#include "common/worker_pool.h"

namespace gw::pipeline {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr int kRate = 50;

// A frame of `samples` samples starting at device time `t0_s`, channels
// [x, y, z, left, right] where the channel values come from `value(t, c)`.
template <typename Fn>
sensors::Frame frame(std::uint32_t wearer, std::uint16_t device, double t0_s, int samples,
                     int channels, Fn value) {
  sensors::Frame f;
  f.wearer_id = wearer;
  f.device_id = device;
  f.channels = static_cast<std::uint16_t>(channels);
  f.samples = static_cast<std::uint16_t>(samples);
  f.sample_rate_hz = kRate;
  f.device_time_us = static_cast<std::uint64_t>(std::llround(t0_s * 1e6));
  for (int s = 0; s < samples; ++s)
    for (int c = 0; c < channels; ++c) f.values.push_back(value(t0_s + double(s) / kRate, c));
  return f;
}

// Upright, still for t < 3 s, then walking (a 2 Hz bounce of 300 mg). A
// function of the sample number, so every way of computing t gives the same
// value.
float body(double t, int c) {
  const double n = static_cast<double>(std::llround(t * kRate));
  if (c != 1) return static_cast<float>(5 * std::sin(0.14 * n + c));
  return static_cast<float>(1000 + (n < 3 * kRate ? 0 : 300 * std::sin(2 * kPi * 2 * n / kRate)));
}

SlotSources accel_xyz() {
  SlotSources s;
  s.accel = {0, 1, 2};
  return s;
}

// classify/summarize over explicit samples: the specification.
SlotEntry expected(std::uint32_t wearer, std::int64_t second, int zone,
                   const std::vector<float>& xyz, const std::vector<float>& left,
                   const std::vector<float>& right, const ClassifyOptions& options = {}) {
  SecondSignals signals;
  if (!xyz.empty()) {
    signals.accel = xyz.data();
    signals.accel_samples = xyz.size() / 3;
  }
  if (!left.empty() || !right.empty()) {
    signals.left_total = left.empty() ? nullptr : left.data();
    signals.right_total = right.empty() ? nullptr : right.data();
    signals.insole_samples = left.empty() ? right.size()
                             : right.empty() ? left.size()
                                             : std::min(left.size(), right.size());
  }
  SlotEntry e;
  e.wearer = wearer;
  e.second = second;
  e.zone = zone;
  e.status = classify_second(signals, options);
  e.summary = summarize_second(signals);
  return e;
}

void check_entry(const SlotEntry& got, const SlotEntry& want) {
  CHECK(got.wearer == want.wearer);
  CHECK(got.second == want.second);
  CHECK(got.zone == want.zone);
  CHECK(got.status == want.status);
  CHECK(got.summary == want.summary);
}

std::vector<float> accel_of_second(double second) {
  std::vector<float> xyz;
  for (int s = 0; s < kRate; ++s)
    for (int c = 0; c < 3; ++c) xyz.push_back(body(second + double(s) / kRate, c));
  return xyz;
}

TEST_CASE("device clock: a second is complete when the stream moves past it", "[slot_recorder]") {
  SlotRecorderOptions options;
  options.clock = SlotClock::kDevice;
  SlotRecorder recorder(options, {{4, accel_xyz()}});
  const double t0 = 1700000000.0;  // a device on unix time
  // 0.2 s frames of 10 samples: seconds 0..5 of device time.
  for (int k = 0; k < 25; ++k)
    recorder.on_frame(frame(17, 4, t0 + k * 0.2, 10, 3, [&](double t, int c) { return body(t - t0, c); }),
                      /*zone=*/2, /*arrival_s=*/100.0);
  // Seconds 0..3 are complete (samples of second 4 arrived); 4 is not yet.
  const std::vector<SlotEntry> done = recorder.take_complete(100.0);
  REQUIRE(done.size() == 4);
  for (int i = 0; i < 4; ++i) {
    INFO("second " << i);
    check_entry(done[i], expected(17, 1700000000 + i, 2, accel_of_second(i), {}, {}));
  }
  CHECK(done[0].status.activity == kActivityStill);
  CHECK(done[0].status.posture == kPostureUpright);
  CHECK(done[3].status.activity == kActivityWalking);
  CHECK(recorder.pending_seconds() == 1);
  // The last second waits for max_wait_s of wall time, then leaves.
  CHECK(recorder.take_complete(101.9).empty());
  const std::vector<SlotEntry> last = recorder.take_complete(102.1);
  REQUIRE(last.size() == 1);
  check_entry(last[0], expected(17, 1700000004, 2, accel_of_second(4), {}, {}));

  // A frame for a second already returned is late: dropped and counted.
  recorder.on_frame(frame(17, 4, t0 + 4.5, 10, 3, body), 2, 102.2);
  CHECK(recorder.counters().late_samples == 10);
  CHECK(recorder.take_all().empty());
  CHECK(recorder.counters().seconds == 5);
  CHECK(recorder.counters().samples == 260);
}

TEST_CASE("take_complete in bounded steps returns what one unbounded call returns, in order",
          "[slot_recorder]") {
  SlotRecorderOptions options;
  options.clock = SlotClock::kDevice;
  const double t0 = 1700000000.0;
  const auto feed = [&](SlotRecorder& recorder) {
    // 5 wearers, 4 complete seconds each (and a fifth pending).
    for (std::uint32_t wearer = 1; wearer <= 5; ++wearer)
      for (int k = 0; k < 25; ++k)
        recorder.on_frame(
            frame(wearer, 4, t0 + k * 0.2, 10, 3, [&](double t, int c) { return body(t - t0, c); }),
            /*zone=*/static_cast<int>(wearer), /*arrival_s=*/100.0);
  };
  SlotRecorder whole(options, {{4, accel_xyz()}});
  SlotRecorder stepped(options, {{4, accel_xyz()}});
  feed(whole);
  feed(stepped);
  const std::vector<SlotEntry> at_once = whole.take_complete(100.0);
  REQUIRE(at_once.size() == 20);
  std::vector<SlotEntry> in_steps;
  for (int step = 0; step < 10; ++step) {
    const std::vector<SlotEntry> part = stepped.take_complete(100.0, 3);
    CHECK(part.size() <= 3);
    in_steps.insert(in_steps.end(), part.begin(), part.end());
  }
  REQUIRE(in_steps.size() == at_once.size());
  for (std::size_t i = 0; i < at_once.size(); ++i) {
    INFO("entry " << i);
    CHECK(in_steps[i].wearer == at_once[i].wearer);
    CHECK(in_steps[i].second == at_once[i].second);
    check_entry(in_steps[i], at_once[i]);
  }
  CHECK(stepped.pending_seconds() == 5);  // the fifth second of each: not complete
  CHECK(stepped.counters().seconds == 20);
  CHECK_THROWS_AS(stepped.take_complete(100.0, 0), Error);
}

TEST_CASE("anchored clock: labels are device seconds shifted by a whole-second anchor",
          "[slot_recorder]") {
  SlotRecorder recorder(SlotRecorderOptions{}, {{1, accel_xyz()}});
  // Device time counts from power-on; the first frame arrives at unix
  // 1700000123.7 for device time 10.0: anchor round(1700000113.7) = ...114.
  for (int k = 0; k < 15; ++k)
    recorder.on_frame(frame(5, 1, 10.0 + k * 0.2, 10, 3, body), 0, 1700000123.7 + k * 0.2);
  std::vector<SlotEntry> seconds = recorder.take_all();
  REQUIRE(seconds.size() == 3);
  for (int i = 0; i < 3; ++i) {
    check_entry(seconds[i], expected(5, 1700000114 + 10 + i, 0, accel_of_second(10 + i), {}, {}));
  }
  // The grouping follows device time even when frames arrive late: a frame
  // arriving 3 s late keeps the anchor.
  recorder.on_frame(frame(5, 1, 13.0, 50, 3, body), 0, 1700000130.0);
  seconds = recorder.take_all();
  REQUIRE(seconds.size() == 1);
  CHECK(seconds[0].second == 1700000114 + 13);
  CHECK(recorder.counters().anchors == 1);
  // A device restart (its clock goes back) re-anchors.
  recorder.on_frame(frame(5, 1, 0.0, 50, 3, body), 0, 1700000200.4);
  seconds = recorder.take_all();
  REQUIRE(seconds.size() == 1);
  CHECK(seconds[0].second == 1700000200);
  CHECK(recorder.counters().anchors == 2);
}

TEST_CASE("a wearer's devices combine: accelerometer, both feet, majority zone",
          "[slot_recorder]") {
  SlotSources insoles;  // one hub device sending both feet's 2 + 2 cells
  insoles.left_load = {0, 1};
  insoles.right_load = {2, 3};
  SlotSources left_only;
  left_only.left_load = {0};
  SlotRecorderOptions options;
  options.clock = SlotClock::kDevice;
  SlotRecorder recorder(options, {{1, accel_xyz()}, {2, insoles}, {3, left_only}});
  auto feet = [](double t, int c) {
    // Left cells carry weight (2 x 200 N); the right foot is lifted after t = 1.
    if (c < 2) return 200.0f;
    return t < 1 ? 150.0f : 5.0f;
  };
  // Second 0: accel 50 samples from zone 1; insoles 50 samples from zone 3;
  // device 3 (a second left source, higher id: ignored) 20 samples, zone 3.
  recorder.on_frame(frame(9, 1, 0.0, 50, 3, body), 1, 10.0);
  recorder.on_frame(frame(9, 2, 0.0, 50, 4, feet), 3, 10.0);
  recorder.on_frame(frame(9, 3, 0.0, 20, 1, [](double, int) { return 999.0f; }), 3, 10.0);
  // The accelerometer has moved on to second 1, the insoles have not: wait.
  recorder.on_frame(frame(9, 1, 1.0, 10, 3, body), 1, 10.1);
  CHECK(recorder.take_complete(10.2).empty());
  // Insoles of second 1 with one sample fewer than the accelerometer's.
  recorder.on_frame(frame(9, 2, 1.0, 49, 4, feet), 1, 10.3);
  recorder.on_frame(frame(9, 3, 1.0, 5, 1, [](double, int) { return 999.0f; }), 1, 10.3);
  // Every stream is in second 1 now: second 0 is complete, 1 is not.
  const std::vector<SlotEntry> first = recorder.take_complete(10.4);
  REQUIRE(first.size() == 1);
  std::vector<float> left0(50, 400.0f), right0(50, 300.0f);  // 2 cells each
  // Zone 3 delivered 70 samples of second 0, zone 1 50. Device 3's left foot
  // is ignored: device 2 (the lower id) gives it.
  check_entry(first[0], expected(9, 0, 3, accel_of_second(0), left0, right0));
  CHECK(first[0].status.loading == kLoadingBoth);

  recorder.on_frame(frame(9, 3, 2.0, 5, 1, [](double, int) { return 999.0f; }), 1, 10.4);
  recorder.on_frame(frame(9, 2, 2.0, 5, 4, feet), 1, 10.4);
  CHECK(recorder.take_complete(10.45).empty());  // the accelerometer is still in second 1
  recorder.on_frame(frame(9, 1, 2.0, 5, 3, body), 1, 10.5);
  const std::vector<SlotEntry> done = recorder.take_complete(10.5);
  REQUIRE(done.size() == 1);
  const std::vector<float> whole = accel_of_second(1);
  const std::vector<float> accel1(whole.begin(), whole.begin() + 30);
  // The feet's devices sent 49 samples each (min of the two = 49).
  std::vector<float> left1(49, 400.0f), right1(49, 10.0f);
  check_entry(done[0], expected(9, 1, 1, accel1, left1, right1));
  CHECK(done[0].status.loading == kLoadingLeft);
  CHECK(done[0].summary.samples == 10);
}

TEST_CASE("ties in zone go to the lower zone and a silent stream stops holding seconds back",
          "[slot_recorder]") {
  SlotRecorderOptions options;
  options.clock = SlotClock::kDevice;
  options.max_wait_s = 1.0;
  SlotRecorder recorder(options, {{1, accel_xyz()}, {2, accel_xyz()}});
  recorder.on_frame(frame(3, 1, 0.0, 25, 3, body), 7, 50.0);
  recorder.on_frame(frame(3, 2, 0.0, 25, 3, body), 4, 50.0);
  recorder.on_frame(frame(3, 1, 1.0, 5, 3, body), 7, 50.5);
  // Device 2 is silent from here on: until it is 1 s quiet it holds second 0.
  recorder.on_frame(frame(3, 1, 1.2, 5, 3, body), 7, 50.9);
  CHECK(recorder.take_complete(50.95).empty());
  recorder.on_frame(frame(3, 1, 1.4, 5, 3, body), 7, 51.05);
  const std::vector<SlotEntry> done = recorder.take_complete(51.05);
  REQUIRE(done.size() == 1);
  CHECK(done[0].zone == 4);
  // Device 1's accelerometer (the lower id) is the one classified.
  const std::vector<float> whole = accel_of_second(0);
  const std::vector<float> half(whole.begin(), whole.begin() + 75);
  check_entry(done[0], expected(3, 0, 4, half, {}, {}));
}

TEST_CASE("frames the key cannot hold are counted, bad sources rejected", "[slot_recorder]") {
  SlotRecorderOptions options;
  options.clock = SlotClock::kDevice;
  SlotRecorder recorder(options, {{1, accel_xyz()}});
  recorder.on_frame(frame(kMaxSlotWearer + 1, 1, 0.0, 10, 3, body), 0, 1.0);
  recorder.on_frame(frame(1, 1, 0.0, 10, 2, body), 0, 1.0);  // fewer channels than named
  recorder.on_frame(frame(1, 9, 0.0, 10, 3, body), 0, 1.0);  // a device without sources
  CHECK(recorder.counters().out_of_range_samples == 20);
  CHECK(recorder.counters().samples == 20);
  CHECK(recorder.take_all().empty());

  SlotSources two_axes;
  two_axes.accel = {0, 1};
  CHECK_THROWS_AS(SlotRecorder(options, {{1, two_axes}}), gw::Error);
  SlotSources bad_axis = accel_xyz();
  bad_axis.vertical_axis = 3;
  CHECK_THROWS_AS(SlotRecorder(options, {{1, bad_axis}}), gw::Error);
  options.max_wait_s = 0;
  CHECK_THROWS_AS(SlotRecorder(options, {}), gw::Error);
}

}  // namespace
}  // namespace gw::pipeline

namespace gw::pipeline {
namespace {

TEST_CASE("a frame of many samples, or its inputs reduced beforehand, records what its samples one at a time record",
          "[slot_recorder]") {
  // W1-like: 99 cells per foot summed per sample (the sums add the cells in
  // list order however a frame's samples are grouped), an accelerometer,
  // frames that cross second boundaries, zones that change between frames.
  SlotSources w1;
  for (int c = 0; c < 99; ++c) w1.left_load.push_back(c);
  for (int c = 99; c < 198; ++c) w1.right_load.push_back(c);
  w1.accel = {198, 199, 200};
  auto value = [](double t, int c) {
    const double n = static_cast<double>(std::llround(t * kRate));
    if (c >= 198) return body(t, c - 198);
    // Irregular magnitudes, so that the order of the additions shows.
    return static_cast<float>((1 + c % 7) * 37.125 * (1.3 + std::sin(0.37 * n + c)) + 1e-3 * c);
  };
  SlotRecorderOptions options;
  options.clock = SlotClock::kDevice;
  SlotRecorder whole(options, {{5, w1}});
  SlotRecorder single(options, {{5, w1}});
  SlotRecorder given(options, {{5, w1}});  // inputs reduced beforehand, as the ingest does
  // Frames of 10 samples at 50 Hz (0.2 s) that cross seconds; samples at
  // 0.905 + 0.02 j lie clear of the whole seconds and of value()'s rounding.
  const double t0 = 0.905;
  for (int k = 0; k < 30; ++k) {
    const int zone = (k / 4) % 3;
    const double start = t0 + k * 0.2;
    const sensors::Frame f = frame(3, 5, start, 10, 201, value);
    whole.on_frame(f, zone, 50.0 + k * 0.2);
    SlotSampleInputs inputs;
    reduce_slot_inputs(w1, f, inputs);
    REQUIRE(inputs.values.size() == 10 * 5);
    given.on_frame(f, zone, 50.0 + k * 0.2, &inputs);
    for (int s = 0; s < 10; ++s)
      single.on_frame(frame(3, 5, start + double(s) / kRate, 1, 201, value), zone, 50.0 + k * 0.2);
  }
  const std::vector<SlotEntry> got = whole.take_all();
  const std::vector<SlotEntry> want = single.take_all();
  const std::vector<SlotEntry> from_inputs = given.take_all();
  REQUIRE(got.size() == 7);  // seconds 0..6 (0.905 s .. 6.885 s)
  REQUIRE(want.size() == got.size());
  REQUIRE(from_inputs.size() == got.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("second " << got[i].second);
    check_entry(got[i], want[i]);
    check_entry(from_inputs[i], want[i]);
  }
  // And the totals are the specification's: per sample, the cells in order.
  std::vector<float> xyz, left, right;
  for (int n = 100; n < 150; ++n) {  // second 2: value() of sample j is that of n = 45 + j
    const double t = double(n) / kRate;
    float l = 0, r = 0;
    for (int c = 0; c < 99; ++c) l += value(t, c);
    for (int c = 99; c < 198; ++c) r += value(t, c);
    left.push_back(l);
    right.push_back(r);
    for (int c = 198; c < 201; ++c) xyz.push_back(value(t, c));
  }
  // Second 2: samples j = 55..104, i.e. the last 5 of frame 5, frames 6..9
  // and the first 5 of frame 10; zone 1 (frames 4..7) and zone 2 (8..11)
  // have 25 each, and a tie goes to the lower zone.
  const SlotEntry& second2 = got[2];
  REQUIRE(second2.second == 2);
  check_entry(second2, expected(3, 2, /*zone=*/1, xyz, left, right));
  CHECK(whole.counters().samples == 300);
  CHECK(single.counters().samples == 300);
}

TEST_CASE("frames spread over a pool record what they record one at a time",
          "[slot_recorder]") {
  // Many wearers with two devices each (an accelerometer, an insole pair),
  // a device restart (anchored clocks anchor again), samples for seconds
  // already returned (device clocks), frames of a device without sources and
  // of a wearer the key cannot hold: on_frames over four workers gives what
  // on_frame of each frame in turn gives, entry for entry and counter for
  // counter, with either clock; so do its complete seconds taken on the pool.
  SlotSources accel = accel_xyz();
  SlotSources feet;
  feet.left_load = {0, 1};
  feet.right_load = {2, 3};
  const SlotClock clock = GENERATE(SlotClock::kAnchored, SlotClock::kDevice);
  SlotRecorderOptions options;
  options.clock = clock;
  const std::map<std::uint16_t, SlotSources> sources{{1, accel}, {2, feet}};
  SlotRecorder serial(options, sources);
  SlotRecorder spread(options, sources);
  WorkerPool pool(4, "gw-test-pool");

  std::vector<sensors::Frame> frames;
  std::vector<int> zones;
  std::vector<double> arrivals;
  constexpr std::uint32_t kWearers = 100;
  for (int k = 0; k < 25; ++k)
    for (std::uint32_t w = 1; w <= kWearers; ++w) {
      // Wearer 7 restarts its accelerometer at k = 12 (its clock goes back).
      const double t0 = (w == 7 && k >= 12 ? 100.0 : 1000.0 + w) + 0.2 * (k % 12 + (k >= 12 ? 12 : 0));
      frames.push_back(frame(w, 1, t0 + 0.004 * w, 10, 3, body));
      frames.push_back(frame(w, 2, t0 + 0.002, 10, 4, [](double t, int c) {
        return static_cast<float>(200 + 30 * c + 50 * std::sin(3 * t));
      }));
      zones.push_back(static_cast<int>((w + k / 5) % 4));
      zones.push_back(static_cast<int>((w + k / 5) % 4));
      arrivals.push_back(5000.0 + 0.2 * k);
      arrivals.push_back(5000.0 + 0.2 * k + 0.01);
    }
  // A device without sources, a wearer past the key, a frame short of channels
  // (all three refused before the workers), and a wearer whose device clock
  // lies past the key's seconds (refused on a worker, with device clocks).
  frames.push_back(frame(3, 9, 1010.0, 10, 3, body));
  frames.push_back(frame(kMaxSlotWearer + 1, 1, 1010.0, 10, 3, body));
  frames.push_back(frame(4, 2, 1010.0, 10, 2, body));
  frames.push_back(frame(kWearers + 1, 1, 5e9, 10, 3, body));
  for (int i = 0; i < 4; ++i) {
    zones.push_back(0);
    arrivals.push_back(5010.0);
  }

  // Two bunches, with seconds taken in between, so that the second bunch's
  // early samples are late for some wearers.
  const std::size_t half = frames.size() / 2;
  // Every third frame comes with its inputs reduced beforehand, as the
  // daemon's ingest gives them.
  std::vector<SlotSampleInputs> reduced;
  reduced.reserve(frames.size() + kWearers);
  auto feed = [&](std::size_t begin, std::size_t end) {
    std::vector<SlotRecorder::FrameInput> inputs;
    for (std::size_t i = begin; i < end; ++i) {
      const SlotSampleInputs* given = nullptr;
      if (i % 3 == 0 && sources.count(frames[i].device_id) > 0) {
        reduced.emplace_back();
        reduce_slot_inputs(sources.at(frames[i].device_id), frames[i], reduced.back());
        given = &reduced.back();
      }
      serial.on_frame(frames[i], zones[i], arrivals[i], given);
      inputs.push_back({&frames[i], zones[i], arrivals[i], given});
    }
    spread.on_frames(inputs, &pool);
  };
  auto same = [](const std::vector<SlotEntry>& got, const std::vector<SlotEntry>& want) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("entry " << i << " wearer " << want[i].wearer << " second " << want[i].second);
      check_entry(got[i], want[i]);
    }
  };
  feed(0, half);
  // Enough complete seconds that their summaries go to the pool as well; a
  // bounded step first, so that a wearer's seconds are split between calls.
  const std::vector<SlotEntry> first = serial.take_complete(5003.0);
  REQUIRE(first.size() >= 2 * 64 + 2);
  const std::size_t step = first.size() / 2 + 1;
  std::vector<SlotEntry> spread_first = spread.take_complete(5003.0, step, &pool);
  CHECK(spread_first.size() == step);
  const std::vector<SlotEntry> rest = spread.take_complete(5003.0, first.size(), &pool);
  spread_first.insert(spread_first.end(), rest.begin(), rest.end());
  same(spread_first, first);
  CHECK(spread.take_complete(5003.0, first.size(), &pool).empty());
  // Late samples: frames of seconds already returned, again for every wearer.
  for (std::uint32_t w = 1; w <= kWearers; ++w) {
    frames.push_back(frame(w, 1, 1000.0 + w, 10, 3, body));
    zones.push_back(0);
    arrivals.push_back(5006.0);
  }
  feed(half, frames.size());
  same(spread.take_all(), serial.take_all());
  const SlotRecorderCounters& a = serial.counters();
  const SlotRecorderCounters& b = spread.counters();
  if (clock == SlotClock::kDevice) CHECK(a.late_samples > 0);
  if (clock == SlotClock::kAnchored) CHECK(a.anchors > kWearers * 2);  // the restart anchors again
  // 10 samples each: the wearer past the key, the frame short of channels,
  // and with device clocks the seconds past the key.
  CHECK(a.out_of_range_samples == (clock == SlotClock::kDevice ? 30 : 20));
  CHECK(b.samples == a.samples);
  CHECK(b.seconds == a.seconds);
  CHECK(b.late_samples == a.late_samples);
  CHECK(b.out_of_range_samples == a.out_of_range_samples);
  CHECK(b.anchors == a.anchors);
}

}  // namespace
}  // namespace gw::pipeline
