// The time-slot status index on the lock-free parallel hash table (Moazeni
// 2013, §4.6.2.9; docs/design.md, "Time-slot index"): for every
// wearer-second the daemon stores one key
//   (wearer, status, zone, slot second) -> packed slot summary
// so that a range question ("when was wearer 17 walking in zone 3 between
// t0 and t1?") is ONE batch of point searches, one per (second, status code,
// zone) it covers, and retention is ONE batch of deletes.
//
// Two parts:
//   * classify_second() and friends: pure functions from one second of plain
//     float samples to a SlotStatus (activity, posture, loading) and a
//     SlotSummary. No state, no allocation; easy to test on synthetic data.
//   * SlotIndex: owns the table, packs keys, records, queries and expires.
//
// Key packing (64 bits, most significant first; pack_slot_key() throws
// gw::Error for any field out of range, never truncates):
//   bits 63..44  wearer       20 bits  0 .. 1,048,575 (kMaxSlotWearer)
//   bits 43..38  status code   6 bits  activity << 4 | posture << 2 | loading
//                                      (activity 0..3, posture 0..2, loading 0..3)
//   bits 37..32  zone          6 bits  0 .. 63 (kMaxSlotZone)
//   bits 31..0   slot second  32 bits  0 .. 2^32 - 1 (kMaxSlotSecond): unix
//                                      seconds fit until 2106; device seconds
//                                      work too if the caller uses one clock
// Value packing: SlotSummary, four 16-bit fields (pack_slot_summary()).
//
// Threads: SlotIndex is used by one thread at a time (the table's rule);
// every call blocks until its batch is done. Errors (common/error.h): bad
// arguments and table failures throw gw::Error; a re-recorded key is a
// counted duplicate, not an error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/hashtable/hash_table.h"

namespace gw::pipeline {

// ---------------------------------------------------------------------------
// Status of one second
// ---------------------------------------------------------------------------

inline constexpr std::uint8_t kActivityStill = 0;
inline constexpr std::uint8_t kActivityLight = 1;
inline constexpr std::uint8_t kActivityWalking = 2;
inline constexpr std::uint8_t kActivityVigorous = 3;

inline constexpr std::uint8_t kPostureUnknown = 0;
inline constexpr std::uint8_t kPostureUpright = 1;
inline constexpr std::uint8_t kPostureLying = 2;

inline constexpr std::uint8_t kLoadingNone = 0;
inline constexpr std::uint8_t kLoadingLeft = 1;
inline constexpr std::uint8_t kLoadingRight = 2;
inline constexpr std::uint8_t kLoadingBoth = 3;

// The names the control interface and the CLI use, indexed by the codes
// above.
inline constexpr const char* kActivityNames[] = {"still", "light", "walking", "vigorous"};
inline constexpr const char* kPostureNames[] = {"unknown", "upright", "lying"};
inline constexpr const char* kLoadingNames[] = {"none", "left", "right", "both"};

struct SlotStatus {
  std::uint8_t activity = kActivityStill;  // 0 still, 1 light, 2 walking, 3 vigorous
  std::uint8_t posture = kPostureUnknown;  // 0 unknown, 1 upright, 2 lying
  std::uint8_t loading = kLoadingNone;     // 0 none, 1 left, 2 right, 3 both
  bool operator==(const SlotStatus& other) const {
    return activity == other.activity && posture == other.posture && loading == other.loading;
  }
  bool operator!=(const SlotStatus& other) const { return !(*this == other); }
};

// activity << 4 | posture << 2 | loading; throws gw::Error for a field out
// of its range (activity > 3, posture > 2, loading > 3).
std::uint8_t status_code(const SlotStatus& status);
// Inverse of status_code(); throws gw::Error for a code no status maps to.
SlotStatus status_from_code(std::uint8_t code);

// Default classification thresholds. Activity is graded by the standard
// deviation over the second of the accelerometer magnitude |a| (gravity
// adds a constant to |a|, so its spread measures movement whatever the
// sensor's orientation). The values are for a body-worn sensor in mg
// (Daphnet's unit) and are deliberately coarse: they sort seconds for the
// index, they do not detect anything.
inline constexpr float kStillMaxStdMg = 30.0f;     // below: still (sensor noise, breathing)
inline constexpr float kLightMaxStdMg = 120.0f;    // below: light (shifting, slow steps)
inline constexpr float kWalkingMaxStdMg = 600.0f;  // below: walking; at or above: vigorous
// 1 g in the accelerometer's unit.
inline constexpr float kGravityMg = 1000.0f;
// An axis carries gravity when |mean over the second| exceeds this fraction
// of 1 g. Just under cos 45° (0.707), so two axes pass together only for a
// sensor held near 45° reading about 1 g or more; then the vertical axis
// wins (classify_posture()).
inline constexpr float kPostureAxisMinG = 0.7f;
// A foot is loaded when the mean of its insole total over the second
// exceeds this, in the insole's unit (newtons for PhysioNet gaitpdb, where a
// foot in stance carries several hundred).
inline constexpr float kFootLoadedMinForce = 50.0f;

struct ClassifyOptions {
  // Which of the three accelerometer channels (0, 1, 2) lies along the
  // body's long axis when the wearer is upright (Daphnet: 1 = "vert").
  int vertical_axis = 1;
  float gravity = kGravityMg;  // 1 g in the accelerometer's unit (9.81 for m/s^2)
  float still_max_std = kStillMaxStdMg;      // in the accelerometer's unit
  float light_max_std = kLightMaxStdMg;      // in the accelerometer's unit
  float walking_max_std = kWalkingMaxStdMg;  // in the accelerometer's unit
  float posture_axis_min_g = kPostureAxisMinG;
  float foot_loaded_min_force = kFootLoadedMinForce;
};

// One second of one wearer's samples, borrowed (the caller keeps the memory
// alive during the call). Both inputs are strided views, so a sample-major
// frame or Recording is used in place: for sample s, accelerometer channel c
// is accel[s * accel_stride + c] and the left total is
// left_total[s * insole_stride].
struct SecondSignals {
  const float* accel = nullptr;  // three consecutive channels x, y, z; null = no accelerometer
  std::size_t accel_samples = 0;
  std::size_t accel_stride = 3;  // floats between consecutive samples, >= 3
  const float* left_total = nullptr;   // per-sample total force under the left foot; null = no insole
  const float* right_total = nullptr;  // same for the right foot; null = no insole
  std::size_t insole_samples = 0;
  std::size_t insole_stride = 1;  // floats between consecutive samples, >= 1
};

// Standard deviation (population) of |a| over the samples; 0 for none.
float accel_magnitude_std(const float* accel, std::size_t samples, std::size_t stride);
// Mean of |a| over the samples; 0 for none.
float accel_magnitude_mean(const float* accel, std::size_t samples, std::size_t stride);
// Activity grade of a magnitude standard deviation (thresholds above).
std::uint8_t classify_activity(float magnitude_std, const ClassifyOptions& options);
// Upright when |mean| of the vertical axis exceeds posture_axis_min_g * g,
// lying when another axis does, unknown when none does (mid-transition, or
// no samples). The sign is ignored: a sensor worn upside down still counts.
std::uint8_t classify_posture(const float* accel, std::size_t samples, std::size_t stride,
                              const ClassifyOptions& options);
// From the per-foot means over the second; none when there are no samples.
std::uint8_t classify_loading(const float* left_total, const float* right_total,
                              std::size_t samples, std::size_t stride,
                              const ClassifyOptions& options);
// All three. Missing inputs give still / unknown / none. Throws gw::Error
// for a vertical_axis outside 0..2 or a stride too small for its input.
SlotStatus classify_second(const SecondSignals& signals, const ClassifyOptions& options = {});

// ---------------------------------------------------------------------------
// Summary value and key packing
// ---------------------------------------------------------------------------

// What the index stores per wearer-second: 4 x 16 bits = the 64-bit value.
struct SlotSummary {
  std::uint16_t mean_magnitude = 0;  // mean |a| in the accelerometer's unit (mg), saturated
  std::uint16_t magnitude_std = 0;   // standard deviation of |a|, same unit, saturated
  std::uint16_t samples = 0;         // accelerometer samples in the second, saturated
  std::uint16_t mean_load = 0;       // mean of left + right insole totals, saturated; 0 without insole
  bool operator==(const SlotSummary& other) const {
    return mean_magnitude == other.mean_magnitude && magnitude_std == other.magnitude_std &&
           samples == other.samples && mean_load == other.mean_load;
  }
};
// Measures one second: values are rounded and clamped to 0 .. 65535 (a
// measurement beyond the field is data, not an error).
SlotSummary summarize_second(const SecondSignals& signals);
std::uint64_t pack_slot_summary(const SlotSummary& summary);
SlotSummary unpack_slot_summary(std::uint64_t value);

inline constexpr std::uint32_t kMaxSlotWearer = (1u << 20) - 1;
inline constexpr int kMaxSlotZone = 63;
inline constexpr std::int64_t kMaxSlotSecond = (std::int64_t{1} << 32) - 1;

struct SlotKey {
  std::uint32_t wearer = 0;
  std::uint8_t status_code = 0;
  int zone = 0;
  std::int64_t second = 0;
};
// Throws gw::Error naming the field when wearer > kMaxSlotWearer, zone not
// in 0..kMaxSlotZone, second not in 0..kMaxSlotSecond or status_code not a
// valid status_code().
kernels::hashtable::HashKey pack_slot_key(const SlotKey& key);
SlotKey unpack_slot_key(kernels::hashtable::HashKey key);

// ---------------------------------------------------------------------------
// The index
// ---------------------------------------------------------------------------

struct SlotEntry {
  std::uint32_t wearer = 0;
  SlotStatus status;
  int zone = 0;
  std::int64_t second = 0;
  SlotSummary summary;
};

// Which statuses a query matches; kAnyField matches every value of a field.
inline constexpr int kAnyField = -1;
struct StatusFilter {
  int activity = kAnyField;
  int posture = kAnyField;
  int loading = kAnyField;
};
// Every valid status code the filter matches, ascending; throws gw::Error
// for a field that is neither kAnyField nor in range.
std::vector<std::uint8_t> matching_status_codes(const StatusFilter& filter);

// Pass as `zone` to query() to search all 64 zones (64 times the searches).
inline constexpr int kAnyZone = -1;

struct SlotHit {
  std::int64_t second = 0;
  SlotStatus status;
  int zone = 0;
  SlotSummary summary;
};

struct SlotIndexOptions {
  // query() refuses (gw::Error) a range that would need more point searches
  // than this (seconds x matching status codes x zones), so one careless
  // question cannot allocate gigabytes; 2^22 is 48 days of one status code.
  std::uint64_t max_query_searches = std::uint64_t{1} << 22;
};

struct SlotIndexCounters {
  std::uint64_t recorded = 0;      // keys inserted as new
  std::uint64_t duplicates = 0;    // record() of a key already present (first summary kept)
  std::uint64_t queries = 0;
  std::uint64_t searches = 0;      // point searches run by queries
  std::uint64_t expired = 0;       // keys deleted by expire()
  std::uint64_t pool_growths = 0;  // reserve() calls after kPoolExhausted
  double pool_growth_s = 0;        // wall time of those reserve() calls
};

class SlotIndex {
 public:
  // Takes ownership of `table` (non-null; should be empty: the index only
  // expires keys it recorded itself). Throws gw::Error on bad arguments.
  explicit SlotIndex(std::unique_ptr<kernels::hashtable::HashTableBackend> table,
                     const SlotIndexOptions& options = {});

  // Inserts every entry in ONE batch (plus a resubmission of the inserts
  // that found the pool exhausted, after growing it). All keys are packed
  // first, so an out-of-range entry throws gw::Error before anything
  // changes. The intended use is one entry per wearer-second; re-recording
  // the same (wearer, status, zone, second) keeps the first summary and is
  // counted as a duplicate; the same second with a different status or
  // zone is a different key and both are kept (the index does not read
  // before it writes). Returns the number of keys inserted as new.
  std::uint64_t record(const std::vector<SlotEntry>& entries);

  // Seconds in [from_s, to_s) at which `wearer` was recorded with a status
  // matching `filter` in `zone` (or any zone: kAnyZone), sorted by second,
  // then zone, then status code. ONE batch of point searches over every
  // (second, zone, status code) of the question. The range is clipped to
  // 0 .. kMaxSlotSecond; from_s >= to_s gives no hits. Throws gw::Error for
  // a wearer/zone/filter out of range or a question above
  // max_query_searches.
  std::vector<SlotHit> query(std::uint32_t wearer, const StatusFilter& filter, int zone,
                             std::int64_t from_s, std::int64_t to_s);
  // The same over an explicit set of zones (each in 0..kMaxSlotZone; order
  // and repeats do not matter), still ONE batch: what a daemon with a few
  // configured zones runs for "any zone" instead of searching all 64.
  std::vector<SlotHit> query(std::uint32_t wearer, const StatusFilter& filter,
                             const std::vector<int>& zones, std::int64_t from_s,
                             std::int64_t to_s);

  // Deletes, in ONE batch, every key this index recorded with a second
  // < before_s. Returns the number deleted.
  std::uint64_t expire(std::int64_t before_s);

  // The oldest and the newest second that still have keys, if any: a
  // question need not search outside them.
  std::optional<std::int64_t> oldest_second() const;
  std::optional<std::int64_t> newest_second() const;

  const SlotIndexCounters& counters() const { return counters_; }
  std::uint64_t live_keys() const { return table_->size(); }
  const kernels::hashtable::HashTableBackend& table() const { return *table_; }

 private:
  std::unique_ptr<kernels::hashtable::HashTableBackend> table_;
  SlotIndexOptions options_;
  SlotIndexCounters counters_;
  // Host-side record of the inserted keys per second: the table cannot be
  // scanned by time, and expire() needs the exact keys (their status and
  // zone are not derivable from the second). 8 bytes per key.
  std::map<std::int64_t, std::vector<kernels::hashtable::HashKey>> keys_by_second_;
};

}  // namespace gw::pipeline
