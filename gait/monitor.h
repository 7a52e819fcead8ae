// Gait of every wearer from the frames of the devices that carry a foot's
// pressure: the two feet joined by device time, strides tracked online
// (gait/cycles.h), gait metrics per minute of walking (gait/metrics.h) and
// abnormal walking bouts against the pack's stride examples
// (gait/abnormal.h). The daemon's pipeline thread runs one; the frames'
// loads are reduced on the ingest threads (reduce_foot_loads).
//
// Joining the feet: a device that carries both feet (a gaitpdb-style force
// insole pair) gives both at each sample. Two devices (a left and a right
// insole) give one foot each; their samples are paired when their device
// times lie within half a sample period, in time order. A foot's sample
// without a partner after `max_join_lag_s` of the other foot's device time
// (or when the other foot's device sends nothing) is dropped and counted.
// Both devices must then share a rate and a clock.
//
// A minute of walking: strides are gathered per wearer until their walking
// time (gait/metrics.h walking_s) reaches `minute_s`; then one GaitMinute is
// emitted and the next begins. Standing adds nothing, so a minute may span
// more wall time than a minute.
//
// Abnormal bouts: a walking bout is a run of strides each starting within
// `bout_gap_s` of the previous one's end. When the bout's last
// `bout_strides` strides score (mean) at least the library's threshold, one
// AbnormalBout is raised, then none for that wearer for `cooldown_s` of
// device time.
//
// The wearer's own baseline (gait/baseline.h), when the options enable it:
// learned from the wearer's first strides; afterwards each scored stride's
// change against it feeds a second bout of the same rule (last
// `bout_strides` strides, mean change at least the baseline's threshold,
// its own cooldown), raised as an AbnormalBout of reason kChangedFromBaseline.
//
// Threads: none inside; one thread owns a monitor.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "gait/abnormal.h"
#include "gait/baseline.h"
#include "gait/cycles.h"
#include "gait/hotspots.h"
#include "gait/metrics.h"
#include "sensors/frame.h"

namespace gw::gait {

// One foot a device carries: which of its channels are the cells, where
// they lie.
struct FootSource {
  Foot foot = Foot::kLeft;
  std::vector<int> cells;
  FootLayout layout;
  InsoleForm form = InsoleForm::kForceInsole;
};
// What a device carries, by its kind and channel names: a pressure insole
// of kind pressure_insole_left/right gives that foot (all cells, the 9 x 11
// grid); channels named L1..L8 give the left foot and R1..R8 the right (a
// force insole, the gaitpdb layout). Empty: no foot.
std::vector<FootSource> device_feet(sensors::DeviceKind kind, const std::vector<std::string>& channels);

// The frame's loads, sample-major: out[s * feet.size() + i] is foot i of
// `feet` at sample s. Channels beyond the frame's count read as zero.
void reduce_foot_loads(const std::vector<FootSource>& feet, const sensors::Frame& frame,
                       std::vector<FootLoad>& out);

struct MonitorOptions {
  CycleParams cycles;                 // sample_rate_hz is taken from each stream
  double minute_s = 60;
  double max_join_lag_s = 2;
  // Abnormal bouts; no scoring without a library.
  std::shared_ptr<const StrideLibrary> library;
  int bout_strides = 20;
  double bout_gap_s = 3;
  double cooldown_s = 600;
  // The wearer's own baseline; off unless baseline.learn_walking_s > 0.
  BaselineParams baseline;
};

struct GaitMinute {
  std::uint32_t wearer = 0;
  double t_start = 0;                 // device time of the first stride's heel strike
  double t_end = 0;                   // and of the last stride's end
  GaitMetrics metrics;
  double abnormal_score = 0;          // mean stride score; NaN without a library
  double baseline_change = 0;         // mean stride change; NaN before the baseline is learned
};

enum class BoutReason : std::uint8_t {
  kLikeAbnormalExamples,  // the pack's examples: strides like the abnormal ones
  kChangedFromBaseline,   // the wearer's own baseline: strides unlike it
};

struct AbnormalBout {
  std::uint32_t wearer = 0;
  std::uint16_t device = 0;           // the left foot's device
  double t_start = 0;                 // device time: the bout's first scored stride's heel strike
  double t_end = 0;                   // the last stride's end
  BoutReason reason = BoutReason::kLikeAbnormalExamples;
  double score = 0;                   // mean score (or change) of the last bout_strides strides
  int strides = 0;
  double arrival_s = 0;               // arrival of the frame that completed the last stride
};

struct MonitorCounters {
  std::uint64_t samples = 0;          // joined samples of both feet
  std::uint64_t unpaired_samples = 0; // a foot's samples dropped without a partner
  std::uint64_t strides = 0;
  std::uint64_t scored_strides = 0;
  std::uint64_t minutes = 0;
  std::uint64_t abnormal_bouts = 0;   // of either reason
  std::uint64_t baselines_learned = 0;
  std::uint64_t change_scored_strides = 0;
};

class GaitMonitor {
 public:
  GaitMonitor(MonitorOptions options, std::map<std::uint16_t, std::vector<FootSource>> devices);

  // Whether `device` carries a foot (its frames are worth reducing).
  bool watches(std::uint16_t device) const { return devices_.count(device) != 0; }
  const std::vector<FootSource>* feet_of(std::uint16_t device) const;

  // One frame's loads (reduce_foot_loads of it under feet_of(device)).
  void on_frame(std::uint32_t wearer, std::uint16_t device, double first_sample_s, double rate_hz,
                int samples, const FootLoad* loads, double arrival_s);

  std::vector<GaitMinute> take_minutes();
  std::vector<AbnormalBout> take_abnormal();
  // The last complete minute of a wearer, if any.
  const GaitMinute* last_minute(std::uint32_t wearer) const;
  std::size_t wearers() const { return wearers_.size(); }
  // Whether strides are scored against the library (default true): a caller
  // that falls behind turns it off for a while rather than lose samples. An
  // unscored stride counts in minutes and metrics but not in a bout.
  void set_scoring(bool on) { scoring_ = on; }
  const MonitorCounters& counters() const { return counters_; }

 private:
  struct Pending {
    double t_s;
    FootLoad load;
    std::uint16_t device;
    double arrival_s;
  };
  // One rule's walking bout: its last strides (heel strike, value).
  struct Bout {
    std::deque<std::pair<double, double>> strides;
    double last_stride_end_s = -1e300;
    double last_alert_s = -1e300;
  };
  struct WearerState {
    explicit WearerState(const CycleParams& params) : tracker(params) {}
    StrideTracker tracker;
    bool rate_known = false;
    std::deque<Pending> waiting[2];   // a foot's samples from its own device, not yet paired
    std::vector<Stride> minute;       // strides of the minute in progress (without curves)
    std::vector<double> minute_scores;
    std::vector<double> minute_changes;
    double minute_walking_s = 0;
    Bout abnormal_bout;
    Bout change_bout;
    std::unique_ptr<StrideBaseline> baseline;
    std::uint16_t left_device = 0;
    GaitMinute last;
    bool has_last = false;
  };

  WearerState& wearer_state(std::uint32_t wearer, double rate_hz);
  void push_joined(std::uint32_t wearer, WearerState& w, double t_s, const FootLoad& left,
                   const FootLoad& right, double arrival_s);
  void on_stride(std::uint32_t wearer, WearerState& w, const Stride& stride, double arrival_s);
  // Adds a scored stride to `bout`; an AbnormalBout when the rule holds.
  void feed_bout(std::uint32_t wearer, const WearerState& w, Bout& bout, const Stride& stride, double value,
                 double threshold, BoutReason reason, double arrival_s);
  void pair_waiting(std::uint32_t wearer, WearerState& w, double period);

  MonitorOptions options_;
  std::map<std::uint16_t, std::vector<FootSource>> devices_;
  std::unordered_map<std::uint32_t, WearerState> wearers_;
  std::vector<GaitMinute> minutes_;
  std::vector<AbnormalBout> abnormal_;
  std::vector<Stride> scratch_;
  MonitorCounters counters_;
  bool scoring_ = true;
};

}  // namespace gw::gait
