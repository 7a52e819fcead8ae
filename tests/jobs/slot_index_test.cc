// The time-slot status index: classification of synthetic seconds, key and
// summary packing, and SlotIndex on the CPU hash table against a std::map
// model of what was recorded.
#include "jobs/slot_index.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "kernels/hashtable/hash_table.h"

namespace gw::pipeline {
namespace {

namespace ht = kernels::hashtable;

constexpr double kPi = 3.14159265358979323846;
constexpr int kRateHz = 64;  // Daphnet's rate

std::unique_ptr<ht::HashTableBackend> cpu_table(std::uint64_t node_capacity = 4096) {
  ht::HashTableConfig config;
  config.tables = 4;
  config.buckets_per_table = 128;
  config.node_capacity = node_capacity;
  config.cpu_threads = 4;
  return ht::make_cpu_hash_table(config);
}

// One second of x, y, z in mg: gravity of 1 g along `gravity_axis` plus a
// sinusoid of `swing_mg` amplitude at `step_hz` along the same axis (a
// bouncing trunk), plus small deterministic noise on every axis.
std::vector<float> accel_second(int gravity_axis, double swing_mg, double step_hz) {
  std::vector<float> xyz(kRateHz * 3);
  std::mt19937 rng(42);
  std::normal_distribution<double> noise(0, 3);
  for (int s = 0; s < kRateHz; ++s) {
    for (int c = 0; c < 3; ++c) xyz[s * 3 + c] = static_cast<float>(noise(rng));
    xyz[s * 3 + gravity_axis] +=
        static_cast<float>(1000 + swing_mg * std::sin(2 * kPi * step_hz * s / kRateHz));
  }
  return xyz;
}

SecondSignals accel_only(const std::vector<float>& xyz) {
  SecondSignals signals;
  signals.accel = xyz.data();
  signals.accel_samples = xyz.size() / 3;
  return signals;
}

TEST_CASE("classify_second tells still, walking and lying apart", "[slot_index]") {
  const std::vector<float> standing = accel_second(1, 0, 0);
  const std::vector<float> walking = accel_second(1, 300, 2);
  const std::vector<float> running = accel_second(1, 1200, 3);
  const std::vector<float> shifting = accel_second(1, 100, 1);
  const std::vector<float> lying = accel_second(0, 0, 0);

  const SlotStatus s = classify_second(accel_only(standing));
  CHECK(s.activity == kActivityStill);
  CHECK(s.posture == kPostureUpright);
  CHECK(s.loading == kLoadingNone);  // no insole
  CHECK(classify_second(accel_only(walking)).activity == kActivityWalking);
  CHECK(classify_second(accel_only(walking)).posture == kPostureUpright);
  CHECK(classify_second(accel_only(running)).activity == kActivityVigorous);
  CHECK(classify_second(accel_only(shifting)).activity == kActivityLight);
  const SlotStatus l = classify_second(accel_only(lying));
  CHECK(l.activity == kActivityStill);
  CHECK(l.posture == kPostureLying);

  // The same lying signal is upright for a sensor whose long axis is x.
  ClassifyOptions x_vertical;
  x_vertical.vertical_axis = 0;
  CHECK(classify_second(accel_only(lying), x_vertical).posture == kPostureUpright);
  // Mid-transition, gravity split over two axes below the threshold: unknown.
  std::vector<float> tilted(kRateHz * 3, 0.0f);
  for (int s = 0; s < kRateHz; ++s) tilted[s * 3 + 0] = tilted[s * 3 + 1] = 650.0f;
  CHECK(classify_second(accel_only(tilted)).posture == kPostureUnknown);
  // Exactly 45° with a slightly strong reading passes on both axes: the
  // vertical axis wins, as documented.
  for (int s = 0; s < kRateHz; ++s) tilted[s * 3 + 0] = tilted[s * 3 + 1] = 710.0f;
  CHECK(classify_second(accel_only(tilted)).posture == kPostureUpright);
  // A sensor worn upside down reads -1 g: still upright.
  std::vector<float> inverted = standing;
  for (int s = 0; s < kRateHz; ++s) inverted[s * 3 + 1] = -inverted[s * 3 + 1];
  CHECK(classify_second(accel_only(inverted)).posture == kPostureUpright);
  // No samples at all.
  CHECK(classify_second(SecondSignals{}) == SlotStatus{});

  ClassifyOptions bad_axis;
  bad_axis.vertical_axis = 3;
  CHECK_THROWS_AS(classify_second(accel_only(standing), bad_axis), gw::Error);
}

TEST_CASE("classify_second reads strided frames and insole totals", "[slot_index]") {
  // A sample-major frame of 5 channels: L_total, x, y, z, R_total.
  const std::vector<float> walking = accel_second(1, 300, 2);
  std::vector<float> frame(kRateHz * 5);
  for (int s = 0; s < kRateHz; ++s) {
    frame[s * 5 + 0] = 400;                  // left foot carries weight
    for (int c = 0; c < 3; ++c) frame[s * 5 + 1 + c] = walking[s * 3 + c];
    frame[s * 5 + 4] = (s % 2) ? 20 : 30;    // right foot barely touches
  }
  SecondSignals signals;
  signals.accel = frame.data() + 1;
  signals.accel_samples = kRateHz;
  signals.accel_stride = 5;
  signals.left_total = frame.data() + 0;
  signals.right_total = frame.data() + 4;
  signals.insole_samples = kRateHz;
  signals.insole_stride = 5;
  SlotStatus status = classify_second(signals);
  CHECK(status.activity == kActivityWalking);
  CHECK(status.posture == kPostureUpright);
  CHECK(status.loading == kLoadingLeft);

  for (int s = 0; s < kRateHz; ++s) frame[s * 5 + 4] = 350;
  CHECK(classify_second(signals).loading == kLoadingBoth);
  for (int s = 0; s < kRateHz; ++s) frame[s * 5 + 0] = 0;
  CHECK(classify_second(signals).loading == kLoadingRight);
  for (int s = 0; s < kRateHz; ++s) frame[s * 5 + 4] = 0;
  CHECK(classify_second(signals).loading == kLoadingNone);

  const SlotSummary summary = summarize_second(accel_only(walking));
  CHECK(summary.samples == kRateHz);
  CHECK(std::abs(summary.mean_magnitude - 1000) < 20);
  CHECK(std::abs(summary.magnitude_std - 300 / std::sqrt(2.0)) < 20);  // sine: A / sqrt 2
  CHECK(summary.mean_load == 0);

  signals.accel_stride = 2;
  CHECK_THROWS_AS(classify_second(signals), gw::Error);
}

TEST_CASE("slot keys and summaries pack losslessly and reject out-of-range fields",
          "[slot_index]") {
  const SlotStatus status{kActivityWalking, kPostureLying, kLoadingBoth};
  CHECK(status_from_code(status_code(status)) == status);
  const SlotKey key{kMaxSlotWearer, status_code(status), kMaxSlotZone, kMaxSlotSecond};
  const SlotKey back = unpack_slot_key(pack_slot_key(key));
  CHECK(back.wearer == key.wearer);
  CHECK(back.status_code == key.status_code);
  CHECK(back.zone == key.zone);
  CHECK(back.second == key.second);
  CHECK(pack_slot_key({0, 0, 0, 0}) == 0);
  // Distinct fields, distinct keys (no field bleeds into another).
  CHECK(pack_slot_key({1, 0, 0, 0}) != pack_slot_key({0, 0, 0, 1}));
  CHECK(pack_slot_key({0, 1, 0, 0}) != pack_slot_key({0, 0, 1, 0}));

  CHECK_THROWS_AS(pack_slot_key({kMaxSlotWearer + 1, 0, 0, 0}), gw::Error);
  CHECK_THROWS_AS(pack_slot_key({0, 0, kMaxSlotZone + 1, 0}), gw::Error);
  CHECK_THROWS_AS(pack_slot_key({0, 0, -1, 0}), gw::Error);
  CHECK_THROWS_AS(pack_slot_key({0, 0, 0, kMaxSlotSecond + 1}), gw::Error);
  CHECK_THROWS_AS(pack_slot_key({0, 0, 0, -1}), gw::Error);
  CHECK_THROWS_AS(pack_slot_key({0, 0x0c, 0, 0}), gw::Error);  // posture 3
  CHECK_THROWS_AS(status_code(SlotStatus{4, 0, 0}), gw::Error);

  const SlotSummary summary{1234, 56, 64, 65535};
  CHECK(unpack_slot_summary(pack_slot_summary(summary)) == summary);

  SlotIndex index(cpu_table());
  SlotEntry too_far;
  too_far.wearer = kMaxSlotWearer + 1;
  // A bad entry anywhere in the batch rejects the whole batch before any insert.
  SlotEntry fine;
  CHECK_THROWS_AS(index.record({fine, too_far}), gw::Error);
  CHECK(index.live_keys() == 0);
  CHECK_THROWS_AS(index.query(kMaxSlotWearer + 1, {}, 0, 0, 10), gw::Error);
  CHECK_THROWS_AS(index.query(1, {}, 64, 0, 10), gw::Error);
  CHECK_THROWS_AS(index.query(1, StatusFilter{kAnyField, 3, kAnyField}, 0, 0, 10), gw::Error);
}

// The model: (wearer, second) -> what was recorded.
struct ModelSlot {
  SlotStatus status;
  int zone = 0;
  SlotSummary summary;
};
using Model = std::map<std::pair<std::uint32_t, std::int64_t>, ModelSlot>;

bool matches(const StatusFilter& filter, const SlotStatus& status) {
  return (filter.activity == kAnyField || filter.activity == status.activity) &&
         (filter.posture == kAnyField || filter.posture == status.posture) &&
         (filter.loading == kAnyField || filter.loading == status.loading);
}

std::vector<SlotHit> model_query(const Model& model, std::uint32_t wearer,
                                 const StatusFilter& filter, int zone, std::int64_t from_s,
                                 std::int64_t to_s) {
  std::vector<SlotHit> hits;
  for (auto it = model.lower_bound({wearer, from_s});
       it != model.end() && it->first.first == wearer && it->first.second < to_s; ++it) {
    const ModelSlot& slot = it->second;
    if (!matches(filter, slot.status) || (zone != kAnyZone && zone != slot.zone)) continue;
    hits.push_back({it->first.second, slot.status, slot.zone, slot.summary});
  }
  return hits;
}

void check_same(const std::vector<SlotHit>& got, const std::vector<SlotHit>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].second == want[i].second);
    CHECK(got[i].status == want[i].status);
    CHECK(got[i].zone == want[i].zone);
    CHECK(got[i].summary == want[i].summary);
  }
}

TEST_CASE("record then query returns exactly the recorded matching seconds", "[slot_index]") {
  // A tiny pool: recording must grow it without losing entries.
  SlotIndex index(cpu_table(/*node_capacity=*/8));
  Model model;
  std::mt19937 rng(7);
  const std::int64_t start = 1700000000;  // unix seconds
  const std::vector<std::uint32_t> wearers = {3, 17, kMaxSlotWearer};
  for (int minute = 0; minute < 5; ++minute) {
    // One batch per minute, as the daemon would flush.
    std::vector<SlotEntry> batch;
    for (std::uint32_t wearer : wearers)
      for (int s = 0; s < 60; ++s) {
        if (rng() % 5 == 0) continue;  // seconds without data
        SlotEntry entry;
        entry.wearer = wearer;
        entry.second = start + minute * 60 + s;
        entry.status.activity = static_cast<std::uint8_t>(rng() % 4);
        entry.status.posture = static_cast<std::uint8_t>(rng() % 3);
        entry.status.loading = static_cast<std::uint8_t>(rng() % 4);
        entry.zone = static_cast<int>(rng() % 3) * 21;  // zones 0, 21, 42
        entry.summary = {static_cast<std::uint16_t>(rng() % 2000),
                         static_cast<std::uint16_t>(rng() % 500), 64,
                         static_cast<std::uint16_t>(rng() % 800)};
        batch.push_back(entry);
        model[{wearer, entry.second}] = {entry.status, entry.zone, entry.summary};
      }
    CHECK(index.record(batch) == batch.size());
  }
  CHECK(index.live_keys() == model.size());
  CHECK(index.counters().pool_growths >= 1);
  CHECK(index.counters().pool_growth_s > 0);
  CHECK(index.table().validate().empty());

  const std::vector<StatusFilter> filters = {
      {}, {kActivityWalking, kAnyField, kAnyField}, {kAnyField, kPostureLying, kAnyField},
      {kActivityStill, kPostureUpright, kLoadingBoth}, {kAnyField, kAnyField, kLoadingLeft}};
  const std::vector<int> zones = {kAnyZone, 0, 21, 42, 5};
  for (std::uint32_t wearer : {3u, 17u, kMaxSlotWearer, 4u /* never recorded */})
    for (const StatusFilter& filter : filters)
      for (int zone : zones) {
        const std::int64_t from = start + static_cast<std::int64_t>(rng() % 200) - 20;
        const std::int64_t to = from + 1 + static_cast<std::int64_t>(rng() % 150);
        INFO("wearer " << wearer << " zone " << zone << " [" << from << ", " << to << ")");
        check_same(index.query(wearer, filter, zone, from, to),
                   model_query(model, wearer, filter, zone, from, to));
      }
  // The whole recording, every status, every zone: each recorded second once.
  CHECK(index.query(17, {}, kAnyZone, start, start + 300).size() ==
        model_query(model, 17, {}, kAnyZone, start, start + 300).size());
  CHECK(index.query(17, {}, 0, start + 10, start + 10).empty());  // empty range
}

TEST_CASE("re-recording keeps the first summary and oversized queries are refused",
          "[slot_index]") {
  SlotIndexOptions options;
  options.max_query_searches = 1000;
  SlotIndex index(cpu_table(), options);
  SlotEntry entry;
  entry.wearer = 9;
  entry.second = 500;
  entry.status = {kActivityWalking, kPostureUpright, kLoadingBoth};
  entry.zone = 2;
  entry.summary.samples = 64;
  SlotEntry again = entry;
  again.summary.samples = 1;
  CHECK(index.record({entry, again}) == 1);  // same key twice in one batch: one insert
  CHECK(index.record({again}) == 0);
  CHECK(index.counters().duplicates == 2);
  const StatusFilter exact{kActivityWalking, kPostureUpright, kLoadingBoth};
  const std::vector<SlotHit> hits = index.query(9, exact, 2, 0, 1000);
  REQUIRE(hits.size() == 1);
  CHECK(hits[0].second == 500);
  CHECK(hits[0].summary.samples == 64);
  // Walking with any posture and loading is 12 status codes: 12 x 80 s fits.
  CHECK(index.query(9, {kActivityWalking, kAnyField, kAnyField}, 2, 450, 530).size() == 1);
  CHECK_THROWS_AS(index.query(9, {kActivityWalking, kAnyField, kAnyField}, 2, 450, 550),
                  gw::Error);
  // 1000 seconds x 1 code x 1 zone fits; x 64 zones does not.
  CHECK_THROWS_AS(index.query(9, exact, kAnyZone, 0, 1000), gw::Error);
}

TEST_CASE("a query over a zone list equals the union of single-zone queries", "[slot_index]") {
  SlotIndex index(cpu_table());
  CHECK_FALSE(index.oldest_second().has_value());
  CHECK_FALSE(index.newest_second().has_value());
  std::vector<SlotEntry> batch;
  for (std::int64_t second = 1000; second < 1060; ++second) {
    SlotEntry entry;
    entry.wearer = 17;
    entry.second = second;
    entry.status.activity = static_cast<std::uint8_t>(second % 4);
    entry.zone = static_cast<int>(second % 5);  // zones 0..4
    batch.push_back(entry);
  }
  REQUIRE(index.record(batch) == batch.size());
  CHECK(index.oldest_second() == 1000);
  CHECK(index.newest_second() == 1059);

  const StatusFilter walking{kActivityWalking, kAnyField, kAnyField};
  std::vector<SlotHit> want;
  for (int zone : {1, 3})
    for (const SlotHit& hit : index.query(17, walking, zone, 990, 1070)) want.push_back(hit);
  std::sort(want.begin(), want.end(),
            [](const SlotHit& a, const SlotHit& b) { return a.second < b.second; });
  // Unsorted, repeated zones: same answer, sorted by second.
  check_same(index.query(17, walking, std::vector<int>{3, 1, 3}, 990, 1070), want);
  CHECK_FALSE(want.empty());
  CHECK(index.query(17, walking, std::vector<int>{}, 990, 1070).empty());
  CHECK_THROWS_AS(index.query(17, walking, std::vector<int>{64}, 990, 1070), gw::Error);
  // All 64 zones as a list is the same question as kAnyZone.
  std::vector<int> every_zone;
  for (int z = 0; z <= kMaxSlotZone; ++z) every_zone.push_back(z);
  check_same(index.query(17, {}, every_zone, 990, 1070),
             index.query(17, {}, kAnyZone, 990, 1070));
  index.expire(1030);
  CHECK(index.oldest_second() == 1030);
}

TEST_CASE("expire removes the seconds before the cut and only those", "[slot_index]") {
  SlotIndex index(cpu_table());
  std::vector<SlotEntry> batch;
  for (std::uint32_t wearer : {1u, 2u})
    for (std::int64_t second = 100; second < 200; ++second) {
      SlotEntry entry;
      entry.wearer = wearer;
      entry.second = second;
      entry.status.activity = static_cast<std::uint8_t>(second % 4);
      entry.zone = static_cast<int>(second % 2);
      batch.push_back(entry);
    }
  REQUIRE(index.record(batch) == 200);
  CHECK(index.expire(100) == 0);
  CHECK(index.expire(150) == 100);
  CHECK(index.live_keys() == 100);
  CHECK(index.counters().expired == 100);
  for (std::uint32_t wearer : {1u, 2u}) {
    const std::vector<SlotHit> hits = index.query(wearer, {}, kAnyZone, 0, 300);
    REQUIRE(hits.size() == 50);
    CHECK(hits.front().second == 150);
    CHECK(hits.back().second == 199);
  }
  // An expired second can be recorded again.
  CHECK(index.record({batch.front()}) == 1);
  CHECK(index.expire(1000) == 101);
  CHECK(index.live_keys() == 0);
  CHECK(index.table().validate().empty());
}

}  // namespace
}  // namespace gw::pipeline
