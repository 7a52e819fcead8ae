// The daemon's configuration: one YAML file (config/gaitwatch.yaml documents
// every key). load_config() validates everything before anything runs: unknown
// keys and wrong types are errors that name the key path and the line.
//
// Relative file paths inside the config are resolved against the directory of
// the config file.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/bounded_queue.h"
#include "common/error.h"
#include "sensors/frame.h"

namespace gw::config {

// The config's choices among fixed words, parsed once when the file is read
// (an unknown word is an issue naming its key and the allowed words); code
// past the config compares enum values, never text.
enum class PatternMode { kWindow, kStreaming };  // sliding windows | SPRING streaming
enum class Measure { kDtw, kEuclidean };         // MD-DTW | Moazeni's EDT baseline
enum class BackendKind { kAuto, kCpu, kCuda };   // search.backend, hashtable.backend
enum class OverloadPolicy { kNone, kDefer, kShed, kDropPatterns };
enum class HistoryCompression { kZlib, kNone };
enum class SlotClock { kAnchored, kDevice };  // jobs/slot_recorder.h says what each means
enum class AlertSeverity { kInfo, kWarning, kCritical };  // wearers.offline_severity
// ingest.queue_overflow and history.queue_overflow are gw::OverflowPolicy,
// the queue's own enum (common/bounded_queue.h).

// Each choice enum's values with the word the file, the logs, JSON output
// and command-line options use for it. The order is the order an error
// message lists them in.
template <typename E>
struct Choices;
template <>
struct Choices<PatternMode> {
  static constexpr std::pair<PatternMode, const char*> values[] = {
      {PatternMode::kWindow, "window"}, {PatternMode::kStreaming, "streaming"}};
};
template <>
struct Choices<Measure> {
  static constexpr std::pair<Measure, const char*> values[] = {{Measure::kDtw, "dtw"},
                                                               {Measure::kEuclidean, "euclidean"}};
};
template <>
struct Choices<BackendKind> {
  static constexpr std::pair<BackendKind, const char*> values[] = {
      {BackendKind::kAuto, "auto"}, {BackendKind::kCpu, "cpu"}, {BackendKind::kCuda, "cuda"}};
};
template <>
struct Choices<OverloadPolicy> {
  static constexpr std::pair<OverloadPolicy, const char*> values[] = {
      {OverloadPolicy::kNone, "none"},
      {OverloadPolicy::kDefer, "defer"},
      {OverloadPolicy::kShed, "shed"},
      {OverloadPolicy::kDropPatterns, "drop_patterns"}};
};
template <>
struct Choices<HistoryCompression> {
  static constexpr std::pair<HistoryCompression, const char*> values[] = {
      {HistoryCompression::kZlib, "zlib"}, {HistoryCompression::kNone, "none"}};
};
template <>
struct Choices<OverflowPolicy> {
  static constexpr std::pair<OverflowPolicy, const char*> values[] = {
      {OverflowPolicy::kBlock, "block"},
      {OverflowPolicy::kDropOldest, "drop_oldest"},
      {OverflowPolicy::kDropNewest, "drop_newest"}};
};
template <>
struct Choices<SlotClock> {
  static constexpr std::pair<SlotClock, const char*> values[] = {
      {SlotClock::kAnchored, "anchored"}, {SlotClock::kDevice, "device"}};
};

template <>
struct Choices<AlertSeverity> {
  static constexpr std::pair<AlertSeverity, const char*> values[] = {
      {AlertSeverity::kInfo, "info"},
      {AlertSeverity::kWarning, "warning"},
      {AlertSeverity::kCritical, "critical"}};
};

// The word for a choice (for logs, JSON and --check-config output).
template <typename E, typename = decltype(Choices<E>::values)>
const char* name(E value) {
  for (const auto& [choice, word] : Choices<E>::values)
    if (choice == value) return word;
  return "?";
}

// The choice a word names, as the config file spells it; nullopt for any
// other word. Command-line options that override a config key parse with it.
template <typename E>
std::optional<E> parse_choice(std::string_view word) {
  for (const auto& [choice, word_of_choice] : Choices<E>::values)
    if (word == word_of_choice) return choice;
  return std::nullopt;
}

// Every word of a choice, in Choices order.
template <typename E>
std::vector<std::string> choice_words() {
  std::vector<std::string> words;
  for (const auto& [choice, word] : Choices<E>::values) words.emplace_back(word);
  return words;
}

// "a | b | c": the words of a choice for messages.
template <typename E>
std::string choice_list() {
  std::string out;
  for (const std::string& word : choice_words<E>()) out += (out.empty() ? "" : " | ") + word;
  return out;
}

struct ConfigIssue {
  std::string path;   // key path, e.g. "patterns[2].threshold"
  int line = 0;       // 1-based line in the file, 0 when unknown
  std::string message;
  // The file the issue is in when it is not the loaded config itself (a
  // pattern pack pulled in by `include`); empty for the config's own issues.
  std::string file;
  // "file:line: path: message", naming `file` above when set, else
  // `config_file`.
  std::string to_string(const std::string& config_file) const;
};

struct ListenConfig {
  std::string bind = "127.0.0.1";
  int port = 0;          // 0 = disabled
};

// An IPv4 or IPv6 address or network, e.g. "10.0.2.0/24", "127.0.0.2",
// "fd00::/8". Stored as 16 bytes; IPv4 as an IPv4-mapped IPv6 address
// (::ffff:a.b.c.d), so one comparison serves both families.
struct AddressRange {
  std::array<std::uint8_t, 16> bytes{};
  int prefix_bits = 128;
  bool contains(const std::array<std::uint8_t, 16>& address) const;
  // Nullopt with `error` set when `text` is neither an address nor ADDRESS/BITS.
  static std::optional<AddressRange> parse(const std::string& text, std::string& error);
};

// A device allowed to send (ingest.allowed_devices): frames of `wearer` from
// `device` (every device of the wearer when unset), optionally only from
// `sources` and only with a valid MAC under the key in `mac_key`.
struct AllowedDevice {
  std::uint32_t wearer = 0;
  std::optional<std::uint16_t> device;
  std::vector<std::string> sources;   // as written; empty = any sender address
  std::vector<AddressRange> ranges;
  std::string mac_key;                // key file (sensors/frame.h); empty = no MAC required
  // Equal entries as written (ranges follow from sources).
  bool operator==(const AllowedDevice& other) const;
  bool operator!=(const AllowedDevice& other) const { return !(*this == other); }
};

// The TCP listener with its connection limits.
struct TcpListenConfig : ListenConfig {
  int max_connections = 1024;   // open connections; more are accepted and closed at once
  double idle_timeout_s = 120;  // a connection silent this long is closed; 0 = never
};

struct IngestConfig {
  ListenConfig udp{"127.0.0.1", 7700};
  TcpListenConfig tcp{{"127.0.0.1", 7701}};
  std::size_t max_frame_bytes = 65507;
  // Threads reading TCP connections (each connection on one). 1: the
  // daemon's I/O thread, which also serves UDP, metrics and signals.
  int threads = 1;
  std::size_t queue_capacity = 8192;         // decoded frames between ingest and pipeline
  OverflowPolicy queue_overflow = OverflowPolicy::kDropNewest;
  std::size_t ring_capacity_samples = 8192;   // per stream; must exceed max pattern length + samples per tick
  // Live streams (wearer, device) at the most: a frame that would open one
  // more is dropped and counted (engine streams_refused).
  std::size_t max_streams = 65536;
  // A stream with no frame for this long is removed with its ring and state
  // (engine streams_evicted); 0 = never.
  double stream_idle_s = 600;
  // Operator states by the age of a stream's last frame: online below
  // stream_stale_s, stale below stream_offline_s, offline from there on.
  double stream_stale_s = 5;
  double stream_offline_s = 60;
  // Present in the file (even empty): only listed devices' frames are
  // accepted, the rest are counted and dropped. Absent: any frame whose device
  // id has a profile (without MAC checks).
  bool restrict_devices = false;
  std::vector<AllowedDevice> allowed_devices;
  // Frames also from the JetStream frame stream of the `nats:` section: the
  // daemon is one of the workers that share its partitions
  // (cluster/partition_leases.h, docs/scale.md).
  bool nats = false;
};

struct ChannelGroup {
  std::string name;
  int first = 0;  // inclusive channel indices
  int last = 0;
  bool operator==(const ChannelGroup& other) const;
  bool operator!=(const ChannelGroup& other) const { return !(*this == other); }
};

// What a device contributes to its wearer's per-second status in the
// time-slot index (jobs/slot_recorder.h). Channel indices into the
// device's channels. Defaults by kind: accelerometer_3 -> accel x, y, z;
// pressure_insole_left/right -> that foot's load = the sum of all cells;
// other kinds contribute nothing unless configured.
struct StatusChannels {
  std::vector<int> accel;       // empty or 3 channels: x, y, z
  int vertical_axis = 1;        // which of `accel` (0..2) is along the body when upright
  double gravity = 1000;        // 1 g in the accelerometer's unit (mg: 1000, m/s^2: 9.81)
  std::vector<int> left_load;   // summed per sample: the left foot's total load
  std::vector<int> right_load;  // summed per sample: the right foot's total load
  bool operator==(const StatusChannels& other) const;
  bool operator!=(const StatusChannels& other) const { return !(*this == other); }
};

// Pressure hotspots under the feet a device carries (gait/hotspots.h,
// docs/gait.md "Pressure hotspots"): the tracker's parameters and the
// alerts' severity. Watched only while gait is on, and only on a device
// that carries a foot; the numbers default to the tracker's defaults for
// the device's insole (hotspot_defaults: the 99-cell pressure insole or
// the 8-sensor force insole).
struct DeviceHotspots {
  bool enabled = false;           // true by default on a device that carries a foot
  double threshold = 500;         // device unit, per region
  double min_duration_s = 30;
  double cooldown_s = 300;
  double peak_window_s = 2.5;
  double integral_window_s = 10;
  double min_foot_load = 200;     // device unit, the foot's sum of cells
  AlertSeverity severity = AlertSeverity::kWarning;
  bool operator==(const DeviceHotspots& o) const {
    return enabled == o.enabled && threshold == o.threshold && min_duration_s == o.min_duration_s &&
           cooldown_s == o.cooldown_s && peak_window_s == o.peak_window_s &&
           integral_window_s == o.integral_window_s && min_foot_load == o.min_foot_load &&
           severity == o.severity;
  }
  bool operator!=(const DeviceHotspots& o) const { return !(*this == o); }
};

struct DeviceProfile {
  std::uint16_t id = 0;                 // device id on the wire
  std::string name;
  sensors::DeviceKind kind = sensors::DeviceKind::kGeneric;
  double sample_rate_hz = 100;
  std::vector<std::string> channels;    // names; defaults from the kind
  std::vector<ChannelGroup> groups;     // neighbour ranges (nr) never cross a group; default: one group
  StatusChannels status;                // the time-slot index's inputs
  DeviceHotspots hotspots;
};

struct ExampleSource {
  std::string file;       // resolved path
  std::string format;     // gaitpdb | daphnet | csv | values
  std::int64_t start = 0; // sample index, inclusive
  std::int64_t end = 0;   // sample index, exclusive
};

// One step of a pattern's channel transform chain. The steps are pure
// functions of a finite stretch of past samples (no state beyond it), so a
// transformed sample is the same however the stream was cut into batches and
// wherever the stream started; pipeline/transforms.h computes them.
struct TransformStep {
  enum class Kind {
    kRaw,          // identity
    kMagnitude,    // per sensor: sqrt of the sum of squares of the pattern's channels in one
                   // device group (ankle x,y,z -> |a|); only as the first step
    kLowpass,      // causal windowed-sinc FIR (Hamming), unit gain at 0 Hz
    kDerivative,   // (x[t] - x[t-1]) * rate: acceleration -> jerk
    kFreezeIndex,  // ln((P_freeze + floor) / (P_locomotion + floor)), band powers of the DFT of
                   // the last window_s seconds (Baechlin et al. 2010's freeze index, in logs)
    kOrientationChange,  // per sensor: the angle in degrees between the mean acceleration vector
                         // of the last window_s seconds and that of the window_s seconds ending
                         // lag_s earlier (how far the sensor turned against gravity); unchanged by
                         // any rotation of the sensor on the body; only as the first step
  };
  Kind kind = Kind::kRaw;
  double cutoff_hz = 0;                     // lowpass
  double window_s = 4;                      // freeze_index, orientation_change (default 1 there)
  double lag_s = 3;                         // orientation_change
  double locomotion_band_hz[2] = {0.5, 3};  // freeze_index: [low, high)
  double freeze_band_hz[2] = {3, 8};        // freeze_index: [low, high)
  double power_floor = 1;                   // freeze_index: added to both powers (squared units)

  // Samples of a lowpass FIR at this rate: odd, about two periods of the cutoff.
  int lowpass_taps(double rate_hz) const;
  // Samples of the freeze-index DFT window, or of an orientation_change
  // mean, at this rate.
  int window_samples(double rate_hz) const;
  // Samples between an orientation_change's two means at this rate.
  int lag_samples(double rate_hz) const;
  // Every option equal: two chains of equal steps yield the same samples.
  bool operator==(const TransformStep& other) const {
    return kind == other.kind && cutoff_hz == other.cutoff_hz && window_s == other.window_s &&
           lag_s == other.lag_s && locomotion_band_hz[0] == other.locomotion_band_hz[0] &&
           locomotion_band_hz[1] == other.locomotion_band_hz[1] &&
           freeze_band_hz[0] == other.freeze_band_hz[0] &&
           freeze_band_hz[1] == other.freeze_band_hz[1] && power_floor == other.power_floor;
  }
  // True for the steps that combine a device group's channels into one
  // (magnitude, orientation_change): only as the first step.
  bool combines_group() const {
    return kind == Kind::kMagnitude || kind == Kind::kOrientationChange;
  }
  // How many samples before an output sample the step reads (0 for raw and
  // magnitude): the output at t is a function of inputs t-history .. t.
  int history_samples(double rate_hz) const;
  static const char* name(Kind kind);
};

// The channels a pattern's transform chain produces (its dimensions), in order.
struct DerivedChannel {
  std::string name;         // the raw channel's name, "|group|" for a magnitude, "turn(group)"
                            // for an orientation change
  std::vector<int> inputs;  // raw channel indices of the device it is computed from
  int group = 0;            // neighbour ranges (nr) stay inside one group
};
// Without a magnitude or orientation_change step: one channel per pattern
// channel, in the device's groups. With one: one channel per device group the pattern's channels touch
// (in order of first appearance), all in one group. `channels` are indices
// into device.channels.
std::vector<DerivedChannel> derived_channels(const DeviceProfile& device,
                                             const std::vector<int>& channels,
                                             const std::vector<TransformStep>& steps);
// Sum of the steps' histories at this rate.
int transform_history(const std::vector<TransformStep>& steps, double rate_hz);
// True when the chain leaves the channels as they are (no steps, or only raw):
// such patterns search the device's own channels (its groups bound nr).
bool uses_raw_channels(const std::vector<TransformStep>& steps);

// Per-wearer normalisation of a pattern's transformed channels
// (`normalise:`, docs/detection.md "Per-wearer normalisation"): each channel
// becomes (x - center) / spread, where center and spread are learned from the
// first learn_s seconds of the stream's own transformed samples (then frozen),
// and an example is normalised with the baseline of its own wearer's recording.
// With active_above > 0 only active samples count towards those seconds: a
// sample is active when some channel's |value| is above active_above (for a
// freeze index, when the wearer moves: quiet standing reads 0).
struct NormaliseConfig {
  enum class Statistic { kMedian, kMean };  // the center
  enum class Scale { kNone, kMad, kStd };   // the spread: 1, median |x - median|, standard deviation
  bool enabled = false;
  double learn_s = 120;
  Statistic statistic = Statistic::kMedian;
  Scale scale = Scale::kNone;
  double active_above = 0;  // 0: every sample is learned from
  bool gated() const { return active_above > 0; }
  // Samples learned at `rate_hz` (at least 1).
  int learn_samples(double rate_hz) const;
  static const char* name(Statistic statistic);
  static const char* name(Scale scale);
  bool operator==(const NormaliseConfig& other) const;
  bool operator!=(const NormaliseConfig& other) const { return !(*this == other); }
};

// A wearer's baseline of a normalised pattern's transformed channels: one
// center and one spread per pattern dim (spread 1 where the scale is none).
struct ChannelBaseline {
  std::vector<float> center;
  std::vector<float> spread;
};

// One example of a pattern: a window of a recording or a template file.
struct PatternExample {
  bool negative = false;                // a counter-example (normal activity)
  std::optional<ExampleSource> source;  // a window of a recording ...
  std::string template_file;            // ... or a template CSV (header = channel names)
  // Raw values of the pattern's channels, dim-major: channels.size() rows of
  // lead_in + length samples. The first lead_in samples precede the window:
  // the transforms need them (lead_in = transform_history()).
  int lead_in = 0;
  std::vector<float> raw;
  // Whose movement it is (`subject:`), for leave-one-subject-out evaluation;
  // empty: taken from the source's or template's file name
  // (pipeline/evaluation.h, recording_name).
  std::string subject;
  // The wearer the example speaks for (a carer's mark of one wearer's alert,
  // pipeline/marks.h): only that wearer's streams decide with it; unset =
  // every wearer (the config file's examples).
  std::optional<std::uint32_t> wearer;
  // The baseline of the example's wearer (normalised patterns only): given as
  // `baseline:` in the config (pattern export writes it), or else learned when
  // the pattern is compiled from baseline_rows, the first transform-history +
  // learn samples of the example's recording (the whole recording when only
  // active samples are learned from; sample-major, the pattern's channels;
  // shared by the examples of one recording).
  std::optional<ChannelBaseline> baseline;
  std::shared_ptr<const std::vector<float>> baseline_rows;
  std::string describe() const;  // "FILE:START:END" or the template path, for messages
};

// The inputs of a learned decision (docs/detection.md, "A learned decision"),
// computed by pipeline::decision_features from the examples' matches at one
// window end. Distances are completed distances over dims * unmatched cost,
// so 0 = identical and 1 = nothing matched; an example nothing matched counts
// as 1.
enum class DecisionFeature {
  kNearestPositive,   // nearest positive example
  kNearestNegative,   // nearest negative example (1 without negatives)
  kPositiveMean3,     // mean of the 3 nearest positives
  kNegativeMean3,     // mean of the 3 nearest negatives
  kPositiveDims,      // matched dims of the nearest positive / dims
  kVote5,             // (positives - negatives) among the 5 nearest matched, / 5
};
inline constexpr std::size_t kDecisionFeatureCount = 6;
// The names the decision file uses, in DecisionFeature order.
inline constexpr std::array<const char*, kDecisionFeatureCount> kDecisionFeatureNames = {
    "nearest_positive", "nearest_negative", "positive_mean3",
    "negative_mean3",   "positive_dims",    "vote5"};

// A logistic decision over the features: evidence = bias + sum of
// weight * feature (the log-odds that the window is an event), fitted by
// `gaitwatch train` and read from the file a pattern's `decision.learned`
// names. margin and hysteresis then apply in log-odds.
struct LearnedDecision {
  std::string file;  // where it was read from (resolved path)
  double bias = 0;
  std::array<double, kDecisionFeatureCount> weights{};
};

struct PatternConfig {
  std::string name;
  std::string kind;              // fall | stumble | freezing_of_gait | limp | other
  std::string severity;          // info | warning | critical
  std::string device;            // name of a DeviceProfile
  std::vector<std::string> channels;      // channel names of that profile, the transforms' inputs
  std::vector<TransformStep> transforms;  // applied in order; empty = raw channels
  int dim_count = 0;                      // pattern dimensions = derived_channels().size()
  int length = 0;                // m
  Measure measure = Measure::kDtw;  // dtw (Moazeni's MD-DTW) | euclidean (Moazeni's EDT baseline:
                                    // band 0, every dim matched at the same window end, nr 0)
  double band = 0.1;             // R; r = floor(R * m)
  bool znorm = true;
  PatternMode mode = PatternMode::kWindow;  // window (Moazeni's sliding windows) | streaming
                                            // (SPRING; no band, no znorm)
  int nr = 0;                    // neighbour range: pattern dim on channel c is compared with c-nr..c+nr
  double threshold = 0;          // per-dim DTW distance cutoff
  int min_dims = 1;              // an alert needs at least this many matched dims
  double alpha = 1.0;            // weight of a switched dim in the ranking distance (>= 1)
  double margin = 0;             // decision margin (distance units), see docs/detection.md
  double hysteresis = 0;         // extra margin needed to start a detection episode
  // The decision's rule (docs/detection.md): 0 = nearest positive against
  // nearest negative (evidence in distance units); k >= 1 = a vote of the k
  // nearest matched examples (evidence = positive minus negative votes).
  int neighbours = 0;
  // Set: the decision is this learned rule instead (neighbours must be 0).
  std::optional<LearnedDecision> learned_decision;
  double min_duration_s = 0;     // the decision must hold this long before an alert
  double cooldown_s = 5;         // no second alert of this pattern for this stream within this time
  // Query segmentation (Moazeni 2013 §7.4.4): 0 = off; N >= 2 also searches each
  // of N equal parts of every example, a part's match counting as a partial
  // match of the whole (docs/detection.md).
  int segments = 0;
  // Search exhausting (Moazeni 2013 §7.4.5): 0 = off; F >= 1 also searches every
  // example at threshold * F with band exhaust_band, and fills pattern dims a
  // feasible match misses from those looser matches (docs/detection.md).
  double exhaust_factor = 0;
  double exhaust_band = -1;  // R of the exhausting search; < 0 = the pattern's band
  // Per-wearer normalisation of the transformed channels; off by default.
  NormaliseConfig normalise;
  // Positive examples first (example, template, examples), then negatives.
  std::vector<PatternExample> examples;
  // Views of one event that must agree (docs/detection.md §7). A pattern
  // with publish false is a view only: searched and decided as any other,
  // but its detections raise no alert (nothing stored or published); other
  // patterns' `agree` use them.
  bool publish = true;
  // Empty `with`: alerts as soon as detected. Otherwise a detection becomes
  // an alert only when every pattern named here (same device, hence same
  // stream) has a confirmed detection whose window end lies within within_s
  // seconds of this one's, before or after; a detection that waits longer
  // is dropped.
  struct Agreement {
    std::vector<std::string> with;
    double within_s = 0;
  };
  Agreement agree;
  bool has_negatives() const;
};

struct SearchConfig {
  BackendKind backend = BackendKind::kAuto;
  int threads = 0;               // CPU backend threads; 0 = all cores
  int tick_ms = 100;
  int deadline_ms = 250;
  int max_matches_per_pair = 4096;  // cap per (pair, batch); keep above samples per tick so it never binds
  // What a batch predicted to finish after its deadline does (docs/design.md):
  // none | defer (search the most urgent streams, the rest next tick) |
  // shed (skip the rest's new samples) | drop_patterns (skip the views of
  // lower-severity patterns for this batch).
  OverloadPolicy overload_policy = OverloadPolicy::kDefer;
  int deadline_safety_ms = 25;  // kept free for combination, commit and publish
  // The GPUs the CUDA backend searches on (CUDA device ordinals, distinct);
  // empty = every visible GPU. Two or more: streams are partitioned across
  // them (kernels/multi_device_backend.h).
  std::vector<int> devices;
  // Streams per device kind the engine's search is warmed up for at the
  // start, before the first frame (Engine::warm_up); 0 = no warm-up.
  int warm_up_streams = 0;
};

struct StorageConfig {
  std::string path = "gaitwatch.db";
  double retention_days = 30;
  int commit_interval_ms = 50;
  int max_batch = 4096;
  // Detections held in memory while commits fail; beyond it new ones are
  // dropped and counted (sinks/sink.h).
  std::size_t max_pending_alerts = 100000;
  double max_size_mb = 0;  // the database's size limit; 0 = none
};

// The raw-stream history (history/history_recorder.h): every accepted sample
// kept for retention_hours in its own SQLite file, for `gaitwatch search
// --history` and the control interface's history search.
struct HistoryConfig {
  bool enabled = false;
  std::string path = "gaitwatch-history.db";
  double retention_hours = 24;                 // 0 = keep forever
  double chunk_s = 10;                         // samples per stored chunk, in seconds
  HistoryCompression compression = HistoryCompression::kZlib;
  std::size_t queue_chunks = 1024;             // finished chunks waiting for the writer
  OverflowPolicy queue_overflow = OverflowPolicy::kDropNewest;
  int commit_interval_ms = 1000;
};

// ZeroMQ endpoints (publish.endpoint, control.endpoint) are transport://address.
// A relative ipc:// path (ipc://gaitwatch-control.sock) is resolved against
// the config file's directory like the other paths; the result is what the
// daemon binds and what clients reading the same file connect to.
struct PublishConfig {
  std::string endpoint = "tcp://127.0.0.1:7710";
  // ZeroMQ CURVE (sinks/curve.h): the server's key file and a directory of
  // authorized client .pub files; both empty = no encryption (loopback use).
  std::string curve_secret_key;
  std::string curve_authorized_keys;
  int send_hwm = 10000;
  double stats_interval_s = 5;   // "stats." messages on the same socket; 0 = only at shutdown
};

struct ControlConfig {
  bool enabled = true;
  // ZeroMQ ROUTER (daemon/control.h). A unix socket by default, in systemd's
  // RuntimeDirectory for the service: only the daemon's user and group reach
  // it (the daemon makes it 0660). tcp:// works too (with CURVE off loopback).
  std::string endpoint = "ipc:///run/gaitwatch/control.sock";
  int max_jobs = 4;                    // long-running requests at once; more get "busy"
  std::size_t queue_capacity = 64;     // requests waiting for the pipeline thread; more get "busy"
  std::size_t max_request_bytes = 65536;
  // ZeroMQ CURVE, as publish.curve_*: both empty = no encryption.
  std::string curve_secret_key;
  std::string curve_authorized_keys;
};

// Shared by the two hash tables of the daemon (dedup and the slot index).
struct HashTableSettings {
  BackendKind backend = BackendKind::kAuto;
  int cpu_threads = 0;           // CPU table workers; 0 = all cores
  int tables = 16;               // PH n
  int buckets_per_table = 1024;  // m
};

struct DedupConfig {
  bool enabled = true;
  double bucket_s = 5;                   // event bucket of t_end; keep <= the patterns' cooldown_s
  double retention_s = 600;              // keys kept after their bucket ends (device clock)
  std::uint64_t node_capacity = 65536;   // initial pool; grows on demand
};

struct SlotsConfig {
  bool enabled = true;
  SlotClock clock = SlotClock::kAnchored;
  double retention_s = 86400;            // wall clock
  double max_wait_s = 2;                 // a wearer-second waits this long for lagging streams
  std::uint64_t node_capacity = 1 << 20; // initial pool; grows on demand
  std::uint64_t query_chunk_searches = 65536;  // point searches per pipeline-thread step of a query
  double still_max_std_g = 0.03;         // activity thresholds on std of |a|, in g
  double light_max_std_g = 0.12;
  double walking_max_std_g = 0.6;
  double posture_axis_min_g = 0.7;
  double foot_loaded_min = 50;           // a foot's mean total load above this = loaded
};


// A receiving zone: frames whose sender address lies in one of `sources`
// are received in this zone (docs/design.md "Time-slot index").
struct ZoneConfig {
  std::string name;
  int id = 0;                        // 1.. in list order; 0 is "none"
  std::vector<std::string> sources;  // as written
  std::vector<AddressRange> ranges;  // parsed
  // Equal zones as written (ranges follow from sources).
  bool operator==(const ZoneConfig& other) const;
  bool operator!=(const ZoneConfig& other) const { return !(*this == other); }
};
inline constexpr int kMaxZones = 63;
inline constexpr const char* kNoZoneName = "none";

// Carers' marks of alerts (docs/interfaces.md, `alert.mark`): each active
// mark adds its alert's window as a wearer-scoped example of its pattern.
struct MarksConfig {
  // Most active marks' examples per (wearer, pattern); beyond it the oldest
  // are left out (logged), so that marks cannot make the search unbounded.
  int max_examples_per_wearer = 50;
  // Whether the engine cuts each alert's window and the store keeps it (what
  // a mark turns into an example). false: no windows are kept, and alerts
  // cannot be marked (for deployments without marks, or alert storms in
  // tests: a window is the pattern's channels x (lead-in + length) floats).
  bool alert_windows = true;
  // Megabytes of windows a second the engine cuts at most (a token bucket
  // holding at most one second's worth); alerts beyond it are raised
  // without their window (engine.alert_windows_over_budget). 0 = no limit.
  // Bounds what an alert storm costs the engine, the writer and the disk.
  double window_budget_mb_per_s = 16;
};

// The MQTT bridge (bridges/mqtt_bridge.h, docs/integrations.md): every
// alert and event also goes to an MQTT broker.
struct MqttBridgeConfig {
  bool enabled = false;
  std::string host = "127.0.0.1";
  int port = 1883;
  std::string client_id = "gaitwatchd";
  std::string topic_prefix = "gaitwatch";
  std::string username;       // empty = anonymous
  std::string password_file;  // its first line is the password (kept out of the YAML)
  // TLS when tls.ca_file is set; cert_file + key_file: a client certificate.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  int qos = 1;
  int keepalive_s = 30;
  std::size_t max_queued = 10000;  // waiting for the broker; beyond it the oldest is dropped
  bool operator==(const MqttBridgeConfig& other) const;
  bool operator!=(const MqttBridgeConfig& other) const { return !(*this == other); }
};

// The webhook bridge (bridges/webhook.h): alerts POSTed as JSON.
struct WebhookBridgeConfig {
  bool enabled = false;
  std::string url = "http://127.0.0.1:8080/gaitwatch";  // http:// only
  std::vector<std::string> topics = {"alert."};        // publisher topic prefixes
  std::string bearer_token_file;  // its first line is sent as "Authorization: Bearer ..."
  double timeout_s = 5;
  double retry_initial_s = 1;
  double retry_max_s = 60;
  int max_attempts = 10;
  std::size_t max_queued = 1000;
  bool operator==(const WebhookBridgeConfig& other) const;
  bool operator!=(const WebhookBridgeConfig& other) const { return !(*this == other); }
};

struct BridgesConfig {
  MqttBridgeConfig mqtt;
  WebhookBridgeConfig webhook;
};

// Wearers' sensor liveness (daemon/liveness.h): a (wearer, device) is
// online while its last frame is younger than stale_after_s, stale until
// offline_after_s, offline from then on; going offline raises one
// sensor_offline alert per silence (unless off or the wearer is registered
// as inactive).
struct WearersConfig {
  double stale_after_s = 5;
  double offline_after_s = 30;  // > stale_after_s
  bool offline_alerts = true;
  AlertSeverity offline_severity = AlertSeverity::kWarning;
};

// The alert lifecycle (docs/operations.md, "Alert lifecycle"): a critical
// alert nobody acknowledges escalates (an alert_escalated event) every
// escalation_s after it was raised, up to max_escalations times.
struct AlertsConfig {
  double escalation_s = 120;  // 0 = critical alerts never escalate
  int max_escalations = 3;
  bool operator==(const AlertsConfig& other) const {
    return escalation_s == other.escalation_s && max_escalations == other.max_escalations;
  }
};

// Where the daemon runs, as people there read it.
struct SiteConfig {
  // The IANA zone of the wall-clock times in messages (detected_at_iso,
  // at_iso); empty = the system's zone (UTC when it cannot be found).
  std::string time_zone;
};

// The ward console (console/server.h): web pages and a JSON API served by
// gaitwatchd for people with a login (users: `gaitwatch user`). Port 0 = off:
// the default of a config without the section; the shipped config turns it on.
struct ConsoleConfig {
  std::string bind = "127.0.0.1";
  int port = 0;
  std::string static_dir;  // the pages (index.html, login.html, static/); resolved, must exist
  // HTTPS when both are set (PEM); plain HTTP otherwise (keep it on loopback then).
  std::string tls_certificate_file;
  std::string tls_private_key_file;
  double session_idle_s = 43200;   // a session unused this long ends (a shift)
  double session_max_s = 86400;    // and every session ends after this long
  int max_sessions = 256;
  int login_max_failures = 5;      // per client address within login_window_s; then 429
  double login_window_s = 300;
  int max_connections = 64;
  int max_stream_clients = 32;
  bool operator==(const ConsoleConfig& o) const {
    return bind == o.bind && port == o.port && static_dir == o.static_dir &&
           tls_certificate_file == o.tls_certificate_file &&
           tls_private_key_file == o.tls_private_key_file && session_idle_s == o.session_idle_s &&
           session_max_s == o.session_max_s && max_sessions == o.max_sessions &&
           login_max_failures == o.login_max_failures && login_window_s == o.login_window_s &&
           max_connections == o.max_connections && max_stream_clients == o.max_stream_clients;
  }
  bool operator!=(const ConsoleConfig& o) const { return !(*this == o); }
};

// Gait from the insoles (gait/, docs/gait.md): strides and gait metrics per
// wearer from the devices that give a foot's pressure, and the abnormal-gait
// alert of the pack. Off when the section is absent.
struct GaitConfig {
  bool enabled = false;
  std::string pack;                 // the pack file, resolved; empty = no abnormal-gait alert
  double minute_s = 60;             // walking time (sum of stride times) per stored metrics row
  double max_join_lag_s = 2;        // a foot's samples wait this long for the other foot's device
  // From the pack (`abnormal_gait:`):
  std::string name = "abnormal_gait";  // the alert's pattern name
  std::string kind = "abnormal_gait";
  std::string severity = "info";
  std::string examples_file;        // resolved; gait/examples.h format
  std::size_t examples_digest = 0;  // of the file's bytes: a changed file is a changed config
  int k = 15;                       // nearest examples voting per stride
  double band = 0.1;                // DTW band, a fraction of the curve length
  double threshold = 0.5;           // mean stride score at or above it: abnormal
  int bout_strides = 20;            // strides of one walking bout the alert looks at
  double cooldown_s = 600;          // per wearer, between abnormal-gait alerts (each rule its own)
  // From the pack's optional `gait_change:`: change against the wearer's
  // own baseline (gait/baseline.h); bout_strides and cooldown_s as above.
  bool change = false;
  std::string change_name = "gait_change";
  std::string change_kind = "gait_change";
  std::string change_severity = "info";
  double change_learn_walking_s = 120;  // walking time the baseline learns from
  int change_strides = 24;              // stride curves the baseline keeps
  int change_k = 5;                     // nearest baseline strides averaged
  double change_threshold = 1.75;       // a bout's mean change at or above it: changed
  bool operator==(const GaitConfig& o) const {
    return enabled == o.enabled && pack == o.pack && minute_s == o.minute_s &&
           max_join_lag_s == o.max_join_lag_s && name == o.name && kind == o.kind &&
           severity == o.severity && examples_file == o.examples_file &&
           examples_digest == o.examples_digest && k == o.k && band == o.band &&
           threshold == o.threshold && bout_strides == o.bout_strides && cooldown_s == o.cooldown_s &&
           change == o.change && change_name == o.change_name && change_kind == o.change_kind &&
           change_severity == o.change_severity && change_learn_walking_s == o.change_learn_walking_s &&
           change_strides == o.change_strides && change_k == o.change_k &&
           change_threshold == o.change_threshold;
  }
  bool operator!=(const GaitConfig& o) const { return !(*this == o); }
};

// The NATS JetStream paths (docs/scale.md): `gaitwatchd --gateway`
// publishes every frame it accepts to the stream `frames_stream`, subject
// `<frames_subject>.<partition>.<wearer>` (cluster/partition.h); a daemon
// with ingest.nats consumes its share of the partitions, leased in the
// bucket `leases_bucket`; every daemon with this section sends its alerts to
// `alerts_stream` (empty: not sent). Absent: none of these.
struct NatsConfig {
  bool enabled = false;                        // the section is present
  std::string url = "nats://127.0.0.1:4222";
  std::string frames_stream = "GW_FRAMES";
  std::string frames_subject = "gw.frames";
  int partitions = 64;
  std::size_t max_pending = 65536;             // publishes awaiting their ack; beyond it frames are dropped
  // Gateway: a partition's frames gathered for 10 ms go out as one message
  // of up to this many (cluster/frame_batch.h); 1 = a message each.
  int frames_per_message = 64;
  double frames_max_age_s = 30;                // the stream keeps no frame longer
  int replicas = 1;                            // JetStream replicas of the streams and bucket (a cluster: 3)
  // Workers (ingest.nats):
  std::string worker_id;                       // empty: "<host>-<pid>"
  std::string leases_bucket = "GW_LEASES";
  double lease_ttl_s = 5;                      // a dead worker's partitions move after this (+ ttl/3)
  // A frame is acknowledged (leaves the stream) this long after receipt:
  // at least the longest detection window, so a takeover replays it.
  double retain_s = 15;
  // Alerts:
  std::string alerts_stream = "GW_ALERTS";
  std::string alerts_subject = "gw.alerts";
  double alert_dedup_window_s = 120;           // JetStream's duplicate window of the alert stream
  bool operator==(const NatsConfig& o) const {
    return enabled == o.enabled && url == o.url && frames_stream == o.frames_stream &&
           frames_subject == o.frames_subject && partitions == o.partitions && max_pending == o.max_pending &&
           frames_per_message == o.frames_per_message && frames_max_age_s == o.frames_max_age_s && replicas == o.replicas && worker_id == o.worker_id &&
           leases_bucket == o.leases_bucket && lease_ttl_s == o.lease_ttl_s && retain_s == o.retain_s &&
           alerts_stream == o.alerts_stream && alerts_subject == o.alerts_subject &&
           alert_dedup_window_s == o.alert_dedup_window_s;
  }
  bool operator!=(const NatsConfig& o) const { return !(*this == o); }
};

struct DaemonConfig {
  std::string log_level = "info";  // trace | debug | info | warn | error
  double watchdog_s = 0;           // 0 = follow $WATCHDOG_USEC when systemd sets it
  // Longest a stop (SIGTERM/SIGINT) takes, from the signal to the final
  // commit; what is not searched or committed by then is counted and logged.
  double stop_timeout_s = 20;
};

struct Config {
  std::string source_file;
  DaemonConfig daemon;
  ListenConfig metrics{"127.0.0.1", 9710};  // Prometheus text at http://bind:port/metrics; port 0 = off
  IngestConfig ingest;
  std::vector<DeviceProfile> devices;
  SearchConfig search;
  std::vector<PatternConfig> patterns;
  StorageConfig storage;
  HistoryConfig history;
  PublishConfig publish;
  ControlConfig control;
  HashTableSettings hashtable;
  DedupConfig dedup;
  SlotsConfig slots;
  std::vector<ZoneConfig> zones;
  MarksConfig marks;
  BridgesConfig bridges;
  WearersConfig wearers;
  AlertsConfig alerts;
  SiteConfig site;
  ConsoleConfig console;
  GaitConfig gait;
  NatsConfig nats;

  const DeviceProfile* device_by_id(std::uint16_t id) const;
  const DeviceProfile* device_by_name(const std::string& name) const;
  // The zone of a sender address (16-byte form of AddressRange): the first
  // zone, in list order, one of whose sources contains it; 0 = none.
  int zone_of(const std::array<std::uint8_t, 16>& address) const;
  // "none" for 0, the zone's name for 1..zones.size(); "" otherwise.
  std::string zone_name(int id) const;
  // A zone by name ("none" = 0) or by decimal id; nullopt if there is none.
  std::optional<int> zone_id(const std::string& name_or_id) const;
};

// Parses and validates a daemon's config file; on any problem throws
// ConfigError listing every issue found (not only the first). Loads pattern
// shapes from examples/templates. The file must name its patterns: an empty
// file, or one without a `patterns` key (a file cut short), is rejected;
// `patterns: []` runs without detection on purpose.
//
// A `patterns` item `{include: FILE}` (FILE relative to the config's
// directory) reads a pattern pack: a YAML map with the keys description,
// built_by, evaluation (documentation, any YAML, not interpreted) and
// patterns (REQUIRED, items as the config's own, no further includes). Its
// patterns stand in the include's place, with relative paths resolved
// against the pack's directory; pattern names are unique across config and
// packs. Issues inside a pack carry the pack's file (ConfigIssue::file), its
// line and its own key path, and name the include item that pulled it in.
Config load_config(const std::string& path);
// The same validation of a config text whose absent sections, `patterns`
// included, take their defaults (fragments for tests and benchmarks).
// Relative paths resolve against base_dir (includes as well; packs named in
// issues relative to source_name's directory).
Config parse_config(const std::string& yaml_text, const std::string& source_name,
                    const std::string& base_dir);

// What a client of the daemon reads from its config: the publish and control
// sections alone, validated and resolved exactly as load_config does (the
// endpoints and CURVE key paths); the rest of the file (patterns, devices) is
// not read, so this is quick and needs none of the files the patterns name.
// Throws ConfigError like load_config.
struct ClientEndpoints {
  PublishConfig publish;
  ControlConfig control;
};
ClientEndpoints load_endpoints(const std::string& path);

class ConfigError : public gw::Error {
 public:
  ConfigError(std::string file, std::vector<ConfigIssue> issues);
  const std::vector<ConfigIssue>& issues() const { return issues_; }
 private:
  std::vector<ConfigIssue> issues_;
};

}  // namespace gw::config
