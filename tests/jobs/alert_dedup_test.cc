// AlertDeduplicator on the CPU hash table: one event is admitted once, other
// events separately, linearizability inside one batch, expiry, pool growth,
// and the backend factory's fallback.
#include "jobs/alert_dedup.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "kernels/hashtable/hash_table.h"

namespace gw::pipeline {
namespace {

namespace ht = kernels::hashtable;

std::unique_ptr<ht::HashTableBackend> cpu_table(std::uint64_t node_capacity = 1024) {
  ht::HashTableConfig config;
  config.tables = 4;
  config.buckets_per_table = 64;
  config.node_capacity = node_capacity;
  config.cpu_threads = 4;  // more threads than the 2 cores: interleavings happen
  return ht::make_cpu_hash_table(config);
}

Alert candidate(std::uint32_t wearer, const std::string& pattern, double t_end) {
  Alert alert;
  alert.wearer = wearer;
  alert.pattern = pattern;
  alert.kind = "fall";
  alert.severity = "critical";
  alert.t_start = t_end - 2;
  alert.t_end = t_end;
  return alert;
}

AlertDedupOptions options(double bucket_s = 10, double retention_s = 60) {
  AlertDedupOptions o;
  o.bucket_s = bucket_s;
  o.retention_s = retention_s;
  return o;
}

int count_true(const std::vector<bool>& flags) {
  int n = 0;
  for (bool f : flags) n += f ? 1 : 0;
  return n;
}

TEST_CASE("repeated candidates of one event are admitted once", "[alert_dedup]") {
  AlertDeduplicator dedup(cpu_table(), options());
  // The detector keeps re-reporting the same fall while the window slides.
  CHECK(dedup.admit({candidate(7, "fall_a", 101.0)}) == std::vector<bool>{true});
  CHECK(dedup.admit({candidate(7, "fall_a", 101.5)}) == std::vector<bool>{false});
  CHECK(dedup.admit({candidate(7, "fall_a", 109.9), candidate(7, "fall_a", 100.0)}) ==
        std::vector<bool>{false, false});
  CHECK(dedup.counters().admitted == 1);
  CHECK(dedup.counters().duplicates == 3);
  CHECK(dedup.live_keys() == 1);
}

TEST_CASE("different buckets, patterns and wearers are separate events", "[alert_dedup]") {
  AlertDeduplicator dedup(cpu_table(), options());
  const std::vector<Alert> batch = {
      candidate(7, "fall_a", 101),  // the reference event
      candidate(7, "fall_a", 111),  // next bucket
      candidate(7, "fall_b", 101),  // other pattern
      candidate(8, "fall_a", 101),  // other wearer
      candidate(7, "fall_a", -5),   // negative device time: its own bucket
  };
  CHECK(dedup.admit(batch) == std::vector<bool>(batch.size(), true));
  // Each again: all suppressed.
  CHECK(count_true(dedup.admit(batch)) == 0);
  CHECK(dedup.event_bucket(101) == 10);
  CHECK(dedup.event_bucket(-5) == -1);
  CHECK(dedup.counters().admitted == batch.size());
}

TEST_CASE("the same key twice in one batch admits exactly one", "[alert_dedup]") {
  AlertDeduplicator dedup(cpu_table(), options());
  // 40 events, each offered by 25 candidates spread through the batch, so
  // concurrent inserts of one key race inside run_batch().
  std::vector<Alert> batch;
  for (int copy = 0; copy < 25; ++copy)
    for (std::uint32_t event = 0; event < 40; ++event)
      batch.push_back(candidate(event % 5, "p" + std::to_string(event / 5), 50.0 + copy * 0.1));
  const std::vector<bool> admitted = dedup.admit(batch);
  std::map<ht::HashKey, int> admitted_per_key;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const ht::HashKey key = dedup.event_key(batch[i]);
    admitted_per_key[key] += admitted[i] ? 1 : 0;
  }
  REQUIRE(admitted_per_key.size() == 40);
  for (const auto& entry : admitted_per_key) CHECK(entry.second == 1);
  CHECK(dedup.counters().admitted == 40);
  CHECK(dedup.counters().duplicates == batch.size() - 40);
  CHECK(dedup.table().validate().empty());
}

TEST_CASE("within one batch the first candidate of a new key is the admitted one",
          "[alert_dedup]") {
  // Whichever insert wins inside the table, the flag goes to the earliest
  // candidate in batch order; the daemon and the offline detector rely on it.
  for (int round = 0; round < 20; ++round) {
    AlertDeduplicator dedup(cpu_table(), options());
    std::vector<Alert> batch;
    for (int copy = 0; copy < 30; ++copy)
      for (std::uint32_t wearer = 0; wearer < 8; ++wearer)
        batch.push_back(candidate(wearer, "fog", 40.0 + copy * 0.2));
    const std::vector<bool> admitted = dedup.admit(batch);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      INFO("round " << round << " candidate " << i);
      CHECK(admitted[i] == (i < 8));
    }
  }
}

TEST_CASE("per-stream expiry uses each stream's clock and forgets a restarted clock",
          "[alert_dedup]") {
  AlertDeduplicator dedup(cpu_table(), options(/*bucket_s=*/10, /*retention_s=*/30));
  Alert early_clock = candidate(1, "fog", 105);  // a device counting from power-on
  early_clock.device = 1;
  Alert unix_clock = candidate(2, "fog", 1.7e9 + 5);  // a device on unix time
  unix_clock.device = 4;
  REQUIRE(count_true(dedup.admit({early_clock, unix_clock})) == 2);

  // The unix-time stream's clock is far ahead, but it does not expire the
  // other stream's bucket.
  CHECK(dedup.expire_streams({{1, 1, 120}, {2, 4, 1.7e9 + 20}}) == 0);
  CHECK(dedup.admit({early_clock}) == std::vector<bool>{false});
  CHECK(dedup.expire_streams({{1, 1, 140}, {2, 4, 1.7e9 + 20}}) == 1);
  CHECK(dedup.live_keys() == 1);
  // An unlisted stream keeps its keys.
  CHECK(dedup.expire_streams({StreamClock{9, 9, 1e12}}) == 0);

  // Stream 1 admits again, then its device restarts: its clock goes back and
  // its keys are forgotten, so the same bucket on the new clock is new.
  REQUIRE(dedup.admit({candidate(1, "fog", 150)}).size() == 1);
  Alert after_restart = candidate(1, "fog", 150);
  after_restart.device = 0;  // candidate() leaves device 0: the stream of the admit above
  CHECK(dedup.expire_streams({{1, 0, 160}}) == 0);
  CHECK(dedup.expire_streams({{1, 0, 3}}) == 1);
  CHECK(dedup.admit({after_restart}) == std::vector<bool>{true});
  CHECK(dedup.counters().expired == 2);
}

TEST_CASE("expiry frees the keys of old buckets", "[alert_dedup]") {
  AlertDeduplicator dedup(cpu_table(), options(/*bucket_s=*/10, /*retention_s=*/30));
  REQUIRE(count_true(dedup.admit({candidate(1, "fog", 105), candidate(1, "fog", 125)})) == 2);
  // Bucket [100, 110) ends at 110; with 30 s retention it goes at now >= 140.
  CHECK(dedup.expire(139.9) == 0);
  CHECK(dedup.admit({candidate(1, "fog", 106)}) == std::vector<bool>{false});
  CHECK(dedup.expire(140) == 1);
  CHECK(dedup.counters().expired == 1);
  CHECK(dedup.live_keys() == 1);
  // A late candidate of the expired bucket is a new event again; the newer
  // bucket is still remembered.
  CHECK(dedup.admit({candidate(1, "fog", 107), candidate(1, "fog", 121)}) ==
        std::vector<bool>{true, false});
  // Everything older than the horizon goes in one call.
  CHECK(dedup.expire(1000) == 2);
  CHECK(dedup.live_keys() == 0);
}

TEST_CASE("bounded per-stream expiry takes whole buckets, never early, and catches up",
          "[alert_dedup]") {
  AlertDeduplicator dedup(cpu_table(), options(/*bucket_s=*/10, /*retention_s=*/30));
  // 3 streams x 4 buckets (100.., 110.., 120.., 130..), 2 patterns each.
  std::vector<Alert> all;
  std::vector<StreamClock> clocks;
  for (std::uint32_t wearer = 1; wearer <= 3; ++wearer) {
    for (double t : {105.0, 115.0, 125.0, 135.0})
      for (const char* pattern : {"fog", "fall"}) all.push_back(candidate(wearer, pattern, t));
    clocks.push_back({wearer, 0, 0});
  }
  REQUIRE(count_true(dedup.admit(all)) == 24);
  const auto at = [&](double now_s) {
    for (StreamClock& c : clocks) c.now_s = now_s;
    return clocks;
  };
  // Nothing is due before 140 (bucket [100, 110) + 30 s), however large the bound.
  CHECK(dedup.expire_streams(at(139.9), 1) == 0);
  // At 165 three buckets per stream are due (18 keys). A bound of 3 takes
  // whole buckets (2 keys each), a stream's oldest first, until 3 are
  // reached: wearer 1's buckets 100 and 110, 4 keys.
  CHECK(dedup.expire_streams(at(165), 3) == 4);
  CHECK(dedup.live_keys() == 20);
  // Wearer 1's 100 bucket is free again; its 120 bucket is still remembered.
  CHECK(dedup.admit({candidate(1, "fog", 106), candidate(1, "fog", 126)}) ==
        std::vector<bool>{true, false});
  // Wearer 1: the re-admitted key (bucket 100) and bucket 120 (3 keys);
  // wearer 2: bucket 100 (2 keys), reaching 5.
  CHECK(dedup.expire_streams(at(165), 5) == 5);
  // Unbounded: the rest that is due (wearer 2's 110 and 120, wearer 3's
  // three), never the 130 buckets, which are not.
  CHECK(dedup.expire_streams(at(165)) == 10);
  CHECK(dedup.live_keys() == 6);
  CHECK(dedup.counters().expired == 19);
}

TEST_CASE("an exhausted pool grows and no candidate is lost", "[alert_dedup]") {
  AlertDeduplicator dedup(cpu_table(/*node_capacity=*/2), options());
  std::vector<Alert> batch;
  for (std::uint32_t wearer = 0; wearer < 300; ++wearer) {
    batch.push_back(candidate(wearer, "stumble", 20));
    batch.push_back(candidate(wearer, "stumble", 21));  // same event: one of the two
  }
  const std::vector<bool> admitted = dedup.admit(batch);
  for (std::size_t i = 0; i < batch.size(); i += 2) CHECK((admitted[i] != admitted[i + 1]));
  CHECK(dedup.counters().admitted == 300);
  CHECK(dedup.counters().duplicates == 300);
  CHECK(dedup.counters().pool_growths >= 1);
  CHECK(dedup.counters().pool_growth_s > 0);
  CHECK(dedup.table().node_capacity() >= 300);
  CHECK(dedup.live_keys() == 300);
  CHECK(dedup.table().validate().empty());
}

TEST_CASE("invalid options and a missing table are rejected", "[alert_dedup]") {
  CHECK_THROWS_AS(AlertDeduplicator(cpu_table(), options(0, 10)), gw::Error);
  CHECK_THROWS_AS(AlertDeduplicator(cpu_table(), options(10, -1)), gw::Error);
  CHECK_THROWS_AS(AlertDeduplicator(nullptr, options()), gw::Error);
}

TEST_CASE("the backend factory picks the table and falls back to the CPU", "[alert_dedup]") {
  ht::HashTableConfig config;
  config.node_capacity = 64;
  std::string note = "stale";
  CHECK(gw::kernels::hashtable::make_hash_table_backend("cpu", &note, config)->name() == "cpu");
  CHECK(note.empty());
  const auto automatic = gw::kernels::hashtable::make_hash_table_backend("auto", &note, config);
  if (ht::gpu_hash_table_available()) {
    CHECK((automatic->name() == "cuda" || !note.empty()));
  } else {
    CHECK(automatic->name() == "cpu");
    CHECK_FALSE(note.empty());
    CHECK_THROWS_AS(gw::kernels::hashtable::make_hash_table_backend("cuda", &note, config), gw::Error);
  }
  CHECK_THROWS_AS(gw::kernels::hashtable::make_hash_table_backend("gpu-please", &note, config), gw::Error);
}

}  // namespace
}  // namespace gw::pipeline
