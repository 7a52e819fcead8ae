#include "jobs/slot_index.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "common/error.h"
#include "jobs/alert_dedup.h"  // run_inserts_growing_pool, delete_keys

namespace gw::pipeline {

namespace ht = kernels::hashtable;

namespace {

constexpr int kWearerShift = 44;
constexpr int kStatusShift = 38;
constexpr int kZoneShift = 32;
constexpr std::uint64_t kStatusMask = 0x3f;
constexpr std::uint64_t kZoneMask = 0x3f;
constexpr std::uint64_t kSecondMask = 0xffffffffull;

double magnitude(const float* sample) {
  const double x = sample[0], y = sample[1], z = sample[2];
  return std::sqrt(x * x + y * y + z * z);
}

std::uint16_t saturate_u16(double value) {
  if (!(value > 0)) return 0;  // also NaN
  if (value >= 65535.0) return 65535;
  return static_cast<std::uint16_t>(std::lround(value));
}

void check_signals(const SecondSignals& signals) {
  if (signals.accel && signals.accel_samples && signals.accel_stride < 3)
    throw Error("slot index: accel_stride must be >= 3 (x, y, z per sample)");
  if ((signals.left_total || signals.right_total) && signals.insole_samples &&
      signals.insole_stride < 1)
    throw Error("slot index: insole_stride must be >= 1");
}

bool valid_status(const SlotStatus& status) {
  return status.activity <= 3 && status.posture <= 2 && status.loading <= 3;
}

}  // namespace

std::uint8_t status_code(const SlotStatus& status) {
  if (!valid_status(status))
    throw Error("slot index: status out of range (activity " + std::to_string(status.activity) +
                " of 0..3, posture " + std::to_string(status.posture) + " of 0..2, loading " +
                std::to_string(status.loading) + " of 0..3)");
  return static_cast<std::uint8_t>(status.activity << 4 | status.posture << 2 | status.loading);
}

SlotStatus status_from_code(std::uint8_t code) {
  SlotStatus status;
  status.activity = static_cast<std::uint8_t>((code >> 4) & 3);
  status.posture = static_cast<std::uint8_t>((code >> 2) & 3);
  status.loading = static_cast<std::uint8_t>(code & 3);
  if (code > kStatusMask || status.posture > 2)
    throw Error("slot index: " + std::to_string(code) + " is not a status code");
  return status;
}

float accel_magnitude_mean(const float* accel, std::size_t samples, std::size_t stride) {
  if (!accel || samples == 0) return 0;
  double sum = 0;
  for (std::size_t s = 0; s < samples; ++s) sum += magnitude(accel + s * stride);
  return static_cast<float>(sum / samples);
}

float accel_magnitude_std(const float* accel, std::size_t samples, std::size_t stride) {
  if (!accel || samples == 0) return 0;
  // Two passes: the spread is small next to the 1 g mean, where the
  // one-pass sum-of-squares formula loses the digits that matter.
  const double mean = accel_magnitude_mean(accel, samples, stride);
  double sum_sq = 0;
  for (std::size_t s = 0; s < samples; ++s) {
    const double d = magnitude(accel + s * stride) - mean;
    sum_sq += d * d;
  }
  return static_cast<float>(std::sqrt(sum_sq / samples));
}

std::uint8_t classify_activity(float magnitude_std, const ClassifyOptions& options) {
  if (magnitude_std < options.still_max_std) return kActivityStill;
  if (magnitude_std < options.light_max_std) return kActivityLight;
  if (magnitude_std < options.walking_max_std) return kActivityWalking;
  return kActivityVigorous;
}

std::uint8_t classify_posture(const float* accel, std::size_t samples, std::size_t stride,
                              const ClassifyOptions& options) {
  if (options.vertical_axis < 0 || options.vertical_axis > 2)
    throw Error("slot index: vertical_axis must be 0, 1 or 2");
  if (!accel || samples == 0) return kPostureUnknown;
  double mean[3] = {0, 0, 0};
  for (std::size_t s = 0; s < samples; ++s)
    for (int c = 0; c < 3; ++c) mean[c] += accel[s * stride + c];
  const double threshold = static_cast<double>(options.posture_axis_min_g) * options.gravity;
  // Near 45° two axes can both pass the threshold; checking the vertical one
  // first makes the answer defined (upright) rather than order-dependent.
  if (std::fabs(mean[options.vertical_axis] / samples) > threshold) return kPostureUpright;
  for (int c = 0; c < 3; ++c)
    if (c != options.vertical_axis && std::fabs(mean[c] / samples) > threshold)
      return kPostureLying;
  return kPostureUnknown;
}

std::uint8_t classify_loading(const float* left_total, const float* right_total,
                              std::size_t samples, std::size_t stride,
                              const ClassifyOptions& options) {
  if (samples == 0) return kLoadingNone;
  auto loaded = [&](const float* total) {
    if (!total) return false;
    double sum = 0;
    for (std::size_t s = 0; s < samples; ++s) sum += total[s * stride];
    return sum / samples > options.foot_loaded_min_force;
  };
  const bool left = loaded(left_total);
  const bool right = loaded(right_total);
  if (left && right) return kLoadingBoth;
  if (left) return kLoadingLeft;
  if (right) return kLoadingRight;
  return kLoadingNone;
}

SlotStatus classify_second(const SecondSignals& signals, const ClassifyOptions& options) {
  check_signals(signals);
  SlotStatus status;
  status.activity = classify_activity(
      accel_magnitude_std(signals.accel, signals.accel_samples, signals.accel_stride), options);
  status.posture =
      classify_posture(signals.accel, signals.accel_samples, signals.accel_stride, options);
  status.loading = classify_loading(signals.left_total, signals.right_total,
                                    signals.insole_samples, signals.insole_stride, options);
  return status;
}

SlotSummary summarize_second(const SecondSignals& signals) {
  check_signals(signals);
  SlotSummary summary;
  summary.mean_magnitude = saturate_u16(
      accel_magnitude_mean(signals.accel, signals.accel_samples, signals.accel_stride));
  summary.magnitude_std = saturate_u16(
      accel_magnitude_std(signals.accel, signals.accel_samples, signals.accel_stride));
  summary.samples = saturate_u16(signals.accel ? static_cast<double>(signals.accel_samples) : 0);
  if (signals.insole_samples && (signals.left_total || signals.right_total)) {
    double sum = 0;
    for (std::size_t s = 0; s < signals.insole_samples; ++s) {
      if (signals.left_total) sum += signals.left_total[s * signals.insole_stride];
      if (signals.right_total) sum += signals.right_total[s * signals.insole_stride];
    }
    summary.mean_load = saturate_u16(sum / signals.insole_samples);
  }
  return summary;
}

std::uint64_t pack_slot_summary(const SlotSummary& summary) {
  return std::uint64_t{summary.mean_magnitude} << 48 | std::uint64_t{summary.magnitude_std} << 32 |
         std::uint64_t{summary.samples} << 16 | std::uint64_t{summary.mean_load};
}

SlotSummary unpack_slot_summary(std::uint64_t value) {
  SlotSummary summary;
  summary.mean_magnitude = static_cast<std::uint16_t>(value >> 48);
  summary.magnitude_std = static_cast<std::uint16_t>(value >> 32);
  summary.samples = static_cast<std::uint16_t>(value >> 16);
  summary.mean_load = static_cast<std::uint16_t>(value);
  return summary;
}

ht::HashKey pack_slot_key(const SlotKey& key) {
  if (key.wearer > kMaxSlotWearer)
    throw Error("slot index: wearer " + std::to_string(key.wearer) + " exceeds the key's 20-bit limit " +
                std::to_string(kMaxSlotWearer));
  if (key.zone < 0 || key.zone > kMaxSlotZone)
    throw Error("slot index: zone " + std::to_string(key.zone) + " is outside 0.." +
                std::to_string(kMaxSlotZone));
  if (key.second < 0 || key.second > kMaxSlotSecond)
    throw Error("slot index: slot second " + std::to_string(key.second) + " is outside 0.." +
                std::to_string(kMaxSlotSecond));
  status_from_code(key.status_code);  // throws for an invalid code
  return std::uint64_t{key.wearer} << kWearerShift |
         std::uint64_t{key.status_code} << kStatusShift |
         static_cast<std::uint64_t>(key.zone) << kZoneShift |
         static_cast<std::uint64_t>(key.second);
}

SlotKey unpack_slot_key(ht::HashKey key) {
  SlotKey fields;
  fields.wearer = static_cast<std::uint32_t>(key >> kWearerShift);
  fields.status_code = static_cast<std::uint8_t>((key >> kStatusShift) & kStatusMask);
  fields.zone = static_cast<int>((key >> kZoneShift) & kZoneMask);
  fields.second = static_cast<std::int64_t>(key & kSecondMask);
  return fields;
}

std::vector<std::uint8_t> matching_status_codes(const StatusFilter& filter) {
  auto check = [](int value, int max, const char* name) {
    if (value != kAnyField && (value < 0 || value > max))
      throw Error(std::string("slot index: status filter ") + name + " " + std::to_string(value) +
                  " is neither any (-1) nor in 0.." + std::to_string(max));
  };
  check(filter.activity, 3, "activity");
  check(filter.posture, 2, "posture");
  check(filter.loading, 3, "loading");
  std::vector<std::uint8_t> codes;
  for (int activity = 0; activity <= 3; ++activity) {
    if (filter.activity != kAnyField && filter.activity != activity) continue;
    for (int posture = 0; posture <= 2; ++posture) {
      if (filter.posture != kAnyField && filter.posture != posture) continue;
      for (int loading = 0; loading <= 3; ++loading) {
        if (filter.loading != kAnyField && filter.loading != loading) continue;
        SlotStatus status;
        status.activity = static_cast<std::uint8_t>(activity);
        status.posture = static_cast<std::uint8_t>(posture);
        status.loading = static_cast<std::uint8_t>(loading);
        codes.push_back(status_code(status));
      }
    }
  }
  std::sort(codes.begin(), codes.end());
  return codes;
}

SlotIndex::SlotIndex(std::unique_ptr<ht::HashTableBackend> table, const SlotIndexOptions& options)
    : table_(std::move(table)), options_(options) {
  if (!table_) throw Error("slot index: no hash table backend");
  if (options_.max_query_searches == 0) throw Error("slot index: max_query_searches must be > 0");
}

std::uint64_t SlotIndex::record(const std::vector<SlotEntry>& entries) {
  std::vector<ht::HashOp> ops(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const SlotEntry& entry = entries[i];
    ops[i].key = pack_slot_key({entry.wearer, status_code(entry.status), entry.zone, entry.second});
    ops[i].value = pack_slot_summary(entry.summary);
    ops[i].kind = ht::OpKind::kInsert;
  }
  if (ops.empty()) return 0;
  const std::vector<ht::HashResult> results =
      run_inserts_growing_pool(*table_, ops, &counters_.pool_growths, &counters_.pool_growth_s);
  std::uint64_t inserted = 0;
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (results[i].status == ht::OpStatus::kInserted) {
      ++inserted;
      keys_by_second_[entries[i].second].push_back(ops[i].key);
    } else if (results[i].status == ht::OpStatus::kDuplicate) {
      ++counters_.duplicates;
    } else {
      throw Error(std::string("slot index: unexpected insert status ") +
                  ht::to_string(results[i].status));
    }
  }
  counters_.recorded += inserted;
  return inserted;
}

std::vector<SlotHit> SlotIndex::query(std::uint32_t wearer, const StatusFilter& filter, int zone,
                                      std::int64_t from_s, std::int64_t to_s) {
  if (zone != kAnyZone && (zone < 0 || zone > kMaxSlotZone))
    throw Error("slot index: zone " + std::to_string(zone) + " is neither any (-1) nor in 0.." +
                std::to_string(kMaxSlotZone));
  std::vector<int> zones;
  if (zone == kAnyZone) {
    for (int z = 0; z <= kMaxSlotZone; ++z) zones.push_back(z);
  } else {
    zones.push_back(zone);
  }
  return query(wearer, filter, zones, from_s, to_s);
}

std::vector<SlotHit> SlotIndex::query(std::uint32_t wearer, const StatusFilter& filter,
                                      const std::vector<int>& zone_list, std::int64_t from_s,
                                      std::int64_t to_s) {
  if (wearer > kMaxSlotWearer)
    throw Error("slot index: wearer " + std::to_string(wearer) + " exceeds the key's 20-bit limit " +
                std::to_string(kMaxSlotWearer));
  for (int zone : zone_list)
    if (zone < 0 || zone > kMaxSlotZone)
      throw Error("slot index: zone " + std::to_string(zone) + " is outside 0.." +
                  std::to_string(kMaxSlotZone));
  std::vector<int> zones = zone_list;
  std::sort(zones.begin(), zones.end());
  zones.erase(std::unique(zones.begin(), zones.end()), zones.end());
  const std::vector<std::uint8_t> codes = matching_status_codes(filter);
  from_s = std::max<std::int64_t>(from_s, 0);
  to_s = std::min<std::int64_t>(to_s, kMaxSlotSecond + 1);
  ++counters_.queries;
  if (from_s >= to_s || codes.empty() || zones.empty()) return {};

  const std::uint64_t seconds = static_cast<std::uint64_t>(to_s - from_s);
  const std::uint64_t per_second = codes.size() * zones.size();
  if (seconds > options_.max_query_searches / per_second)
    throw Error("slot index: query of " + std::to_string(seconds) + " s x " +
                std::to_string(per_second) + " keys per second exceeds max_query_searches " +
                std::to_string(options_.max_query_searches) + "; narrow the range or the filter");

  // Ops in (second, zone, code) order, so hits come out sorted without a sort.
  std::vector<ht::HashOp> ops;
  ops.reserve(seconds * per_second);
  for (std::int64_t second = from_s; second < to_s; ++second)
    for (int z : zones)
      for (std::uint8_t code : codes) {
        ht::HashOp op;
        op.key = pack_slot_key({wearer, code, z, second});
        op.kind = ht::OpKind::kSearch;
        ops.push_back(op);
      }
  const std::vector<ht::HashResult> results = table_->run_batch(ops);
  counters_.searches += ops.size();

  std::vector<SlotHit> hits;
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (results[i].status == ht::OpStatus::kNotFound) continue;
    if (results[i].status != ht::OpStatus::kFound)
      throw Error(std::string("slot index: unexpected search status ") +
                  ht::to_string(results[i].status));
    const SlotKey fields = unpack_slot_key(ops[i].key);
    SlotHit hit;
    hit.second = fields.second;
    hit.status = status_from_code(fields.status_code);
    hit.zone = fields.zone;
    hit.summary = unpack_slot_summary(results[i].value);
    hits.push_back(hit);
  }
  return hits;
}

std::optional<std::int64_t> SlotIndex::oldest_second() const {
  if (keys_by_second_.empty()) return std::nullopt;
  return keys_by_second_.begin()->first;
}

std::optional<std::int64_t> SlotIndex::newest_second() const {
  if (keys_by_second_.empty()) return std::nullopt;
  return keys_by_second_.rbegin()->first;
}

std::uint64_t SlotIndex::expire(std::int64_t before_s) {
  std::vector<ht::HashKey> expired;
  auto it = keys_by_second_.begin();
  while (it != keys_by_second_.end() && it->first < before_s) {
    expired.insert(expired.end(), it->second.begin(), it->second.end());
    it = keys_by_second_.erase(it);
  }
  const std::uint64_t deleted = delete_keys(*table_, expired);
  counters_.expired += deleted;
  return deleted;
}

}  // namespace gw::pipeline
