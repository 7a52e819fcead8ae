// From accepted frames to one SlotEntry per wearer-second: the producer side
// of the time-slot status index (jobs/slot_index.h). The daemon's pipeline
// thread hands it every frame the engine accepted, with the frame's receiving
// zone, and records what take_complete() returns in ONE SlotIndex batch.
//
// What a wearer-second is (docs/design.md "Time-slot index" has the why):
//   * Sample i of a frame is taken at t = device_time_us / 1e6 + i / rate
//     (docs/protocol.md). Its slot second is floor(t) + anchor, where
//     anchor = 0 with SlotClock::kDevice (device clocks already count unix
//     seconds) and, with SlotClock::kAnchored, the whole number of seconds
//     round(arrival - t) fixed at the stream's first frame and again when
//     the stream's device clock goes back (a device restart). The grouping
//     of samples into seconds therefore depends on device time only, never
//     on network timing; the label is wall-clock time to about a second.
//   * A wearer's devices contribute what their SlotSources name: the
//     accelerometer of the lowest device id that has one gives activity and
//     posture; the lowest device id with a left (right) foot load gives that
//     foot. When both feet come from devices with different sample counts in
//     the second, the first min(left, right) samples of each are used.
//   * The second's zone is the zone that delivered most of its samples (over
//     all of the wearer's devices); a tie goes to the lower zone id.
//   * classify_second() and summarize_second() turn the gathered samples
//     into the status and the summary; nothing else is computed here.
//
// Completion: a wearer-second is returned once every stream of that wearer
// that delivered a frame within the last max_wait_s has moved past it (has a
// sample in a later second), or once max_wait_s passed since its first
// sample arrived. Seconds leave in order; a sample of a second at or before
// the last one returned is late: dropped and counted.
//
// Threads: none inside; one thread owns a SlotRecorder (the pipeline thread).
// Errors: data-path outcomes are counters (late samples, a wearer id or a
// second the 64-bit slot key cannot hold); gw::Error only for bad options.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <vector>

#include "config/config.h"
#include "jobs/slot_index.h"
#include "sensors/frame.h"

namespace gw {
class WorkerPool;
}  // namespace gw

namespace gw::pipeline {

// What one device profile contributes to its wearer's seconds. Channel
// indices are the device's channels (frame order).
struct SlotSources {
  std::vector<int> accel;       // empty, or x, y, z of a 3-axis accelerometer
  int vertical_axis = 1;        // 0..2: which of `accel` lies along the body when upright
  float gravity = kGravityMg;   // 1 g in the accelerometer's unit
  std::vector<int> left_load;   // channels summed per sample = left foot's total; empty = none
  std::vector<int> right_load;  // same for the right foot
  bool empty() const { return accel.empty() && left_load.empty() && right_load.empty(); }
};

// The config's `slots.clock` choice, used as it is.
using SlotClock = config::SlotClock;

struct SlotRecorderOptions {
  SlotClock clock = SlotClock::kAnchored;
  // Wall-clock seconds a wearer-second waits for a lagging stream, > 0.
  double max_wait_s = 2.0;
  // Activity thresholds on the standard deviation of |a|, in g; each device's
  // `gravity` converts them to its unit (ClassifyOptions' mg defaults / 1000).
  float still_max_std_g = kStillMaxStdMg / kGravityMg;
  float light_max_std_g = kLightMaxStdMg / kGravityMg;
  float walking_max_std_g = kWalkingMaxStdMg / kGravityMg;
  float posture_axis_min_g = kPostureAxisMinG;
  // A foot is loaded when its mean total over the second exceeds this (the
  // insoles' unit).
  float foot_loaded_min = kFootLoadedMinForce;
};

// The classification options a wearer-second gets when `accel_device`
// supplies its accelerometer (or the defaults' axis and gravity when no
// device does). Exposed so an offline check classifies exactly alike.
ClassifyOptions classify_options(const SlotRecorderOptions& options,
                                 const SlotSources& accel_device);

// A frame's per-sample inputs to the recorder under one device's
// SlotSources: for each sample, the accelerometer's x, y, z (if the source
// has one), then the left foot's total, then the right foot's (if it has
// them). Empty when the frame has fewer channels than the source names.
struct SlotSampleInputs {
  std::vector<float> values;
};

// Pure and thread-safe: the inputs on_frame() takes from `frame`. The daemon's
// ingest threads compute them as frames are decoded, so that the pipeline
// thread does not sum ~200 channels per sample; each total adds its channels
// in list order from 0, exactly as on_frame() would.
void reduce_slot_inputs(const SlotSources& source, const sensors::Frame& frame,
                        SlotSampleInputs& out);

struct SlotRecorderCounters {
  std::uint64_t samples = 0;        // samples of frames from devices with sources
  std::uint64_t seconds = 0;        // wearer-seconds returned
  std::uint64_t late_samples = 0;   // for a second already returned: dropped
  // wearer > kMaxSlotWearer, a second outside the key, or a frame with fewer
  // channels than its sources name
  std::uint64_t out_of_range_samples = 0;
  std::uint64_t anchors = 0;        // stream clocks anchored (first frames and restarts)
};

class SlotRecorder {
 public:
  // `sources` by device id; devices not listed (or with empty sources)
  // contribute nothing. Throws gw::Error for max_wait_s <= 0 or an accel
  // that is not 3 channels / a vertical_axis outside 0..2.
  SlotRecorder(const SlotRecorderOptions& options, std::map<std::uint16_t, SlotSources> sources);

  // Gathers the samples of a frame the engine accepted (in sequence order,
  // channels as its profile). `zone` in 0..kMaxSlotZone; `arrival_s` is the
  // wall clock at receipt (unix seconds).
  // `inputs`, when given, are reduce_slot_inputs() of the frame under its
  // device's sources (computed elsewhere); otherwise, or when they do not fit
  // the frame, they are computed here.
  void on_frame(const sensors::Frame& frame, int zone, double arrival_s,
                const SlotSampleInputs* inputs = nullptr);

  // What on_frame() takes, for on_frames().
  struct FrameInput {
    const sensors::Frame* frame = nullptr;
    int zone = 0;
    double arrival_s = 0;
    const SlotSampleInputs* inputs = nullptr;
  };
  // on_frame() of every frame, in order per wearer: the same entries and
  // counters as calling it for each in turn. With a `pool` of more than one
  // worker, the wearers are spread over its workers (one wearer's frames
  // stay in order on one worker), so that the per-sample work of a large
  // bunch does not run on the caller alone. Call from one thread at a time;
  // `pool` must not be running anything else. If filing throws (memory),
  // the frames filed before stay filed and counted, the rest are not.
  void on_frames(const std::vector<FrameInput>& frames, WorkerPool* pool);

  // The wearer-seconds complete at wall time `now_s` (see above), ordered by
  // wearer, then second. A caller that lags behind its input passes the
  // arrival time of the newest frame it handed over instead of the wall
  // clock, so that frames still waiting in its queue are not taken for a
  // silent stream. At most `max_entries` (> 0) per call: the rest stay
  // pending, complete, for the next call (at 10,000 wearers all seconds
  // complete at once, and the caller spreads them over its turns).
  // With a `pool` of more than one worker, the seconds' summaries (the
  // per-sample part) are made on its workers, one wearer's seconds on one
  // worker; the entries and counters are those of the call without it. The
  // pool's contract as in on_frames().
  std::vector<SlotEntry> take_complete(
      double now_s, std::size_t max_entries = std::numeric_limits<std::size_t>::max(),
      WorkerPool* pool = nullptr);
  // Every pending wearer-second, complete or not (at shutdown).
  std::vector<SlotEntry> take_all();

  const SlotRecorderCounters& counters() const { return counters_; }
  // Wearer-seconds gathered but not returned yet.
  std::size_t pending_seconds() const;

 private:
  struct DeviceSamples {
    std::vector<float> accel;  // x, y, z per sample
    std::vector<float> left;
    std::vector<float> right;
  };
  struct PendingSecond {
    double first_arrival_s = 0;
    std::map<std::uint16_t, DeviceSamples> devices;
    std::map<int, std::size_t> zone_samples;
  };
  struct StreamClockState {
    bool anchored = false;
    std::int64_t anchor_s = 0;
    double last_device_s = 0;
    double last_arrival_s = 0;
    std::int64_t newest_second = 0;
  };
  struct WearerState {
    std::map<std::int64_t, PendingSecond> pending;
    bool any_returned = false;
    std::int64_t returned_through = 0;
    std::map<std::uint16_t, StreamClockState> streams;
  };

  struct Source;
  // The samples of one frame into its wearer's state: on_frame() after the
  // source and wearer are known. Counts into `counters`; `scratch` holds the
  // frame's reduced inputs when none are given.
  void record_frame(WearerState& wearer, const Source& source, const sensors::Frame& frame,
                    int zone, double arrival_s, const SlotSampleInputs* inputs,
                    SlotRecorderCounters& counters, SlotSampleInputs& scratch);
  // The source of a frame's device, or nullptr when it has none; counts the
  // frame's samples (and those a wearer or channel count out of range makes
  // unusable, returning nullptr then).
  const Source* admit(const sensors::Frame& frame);

  SlotEntry finish(std::uint32_t wearer, std::int64_t second, const PendingSecond& pending) const;
  struct CompleteRun;
  // The first `seconds` pending seconds of each of complete_runs_' wearers
  // (`seconds` in all) as entries, marked returned and erased; on `pool`
  // when one is given (take_complete's contract).
  std::vector<SlotEntry> finish_runs(std::size_t seconds, WorkerPool* pool);
  bool complete(const WearerState& wearer, std::int64_t second, const PendingSecond& pending,
                double now_s) const;

  SlotRecorderOptions options_;
  struct Source {
    SlotSources sources;
    int highest_channel = -1;  // of all the channels `sources` names
  };
  std::map<std::uint16_t, Source> sources_;
  std::map<std::uint32_t, WearerState> wearers_;
  SlotRecorderCounters counters_;
  SlotSampleInputs scratch_;  // on_frame's, for frames that come without inputs
  // on_frames' working space, kept between calls.
  struct BunchTarget {
    WearerState* wearer;
    const Source* source;
  };
  // take_complete's and take_all's: a wearer whose first `seconds` pending
  // seconds are taken, and where their entries go in the result.
  struct CompleteRun {
    std::uint32_t id;
    WearerState* wearer;
    std::size_t seconds;
    std::size_t first_entry;
  };
  std::vector<CompleteRun> complete_runs_;
  struct Bunch {
    std::vector<BunchTarget> targets;
    std::vector<std::vector<std::size_t>> by_bucket;
    std::vector<SlotRecorderCounters> counts;   // per worker
    std::vector<SlotSampleInputs> scratch;      // per worker
  } bunch_;
};

}  // namespace gw::pipeline
