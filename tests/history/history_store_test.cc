// The raw-stream history against real parts: SQLite files in a temporary
// directory, the recorder's writer thread, and samples of a real Daphnet
// recording.
#include "history/history_store.h"

#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "common/error.h"
#include "history/history_recorder.h"
#include "sinks/store.h"
#include "sensors/recording.h"
#include "tests/common/temp_dir.h"
#include "tests/history/history_test_support.h"

namespace {

using gw::pipeline::HistoryChunk;
using gw::pipeline::HistoryRecorder;
using gw::pipeline::HistoryStore;
using gw::test::frames_of;
using gw::test::record;
using gw::test::TempDir;

constexpr double kInf = std::numeric_limits<double>::infinity();

const gw::sensors::Recording& s02r01() { return gw::test::daphnet("S02R01"); }

// Samples [begin, end) of the recording, sample-major, all channels.
std::vector<float> samples_of(const gw::sensors::Recording& rec, std::size_t begin,
                              std::size_t end) {
  return {rec.values.begin() + static_cast<std::ptrdiff_t>(begin * rec.channels()),
          rec.values.begin() + static_cast<std::ptrdiff_t>(end * rec.channels())};
}

HistoryChunk random_chunk(std::uint32_t wearer, std::uint16_t device, std::int64_t run,
                          std::int64_t offset, double t0_s, int samples, int channels,
                          std::uint32_t seed) {
  HistoryChunk c;
  c.wearer = wearer;
  c.device = device;
  c.run = run;
  c.run_offset = offset;
  c.t0_us = std::llround(t0_s * 1e6);
  c.sample_rate_hz = 100;
  c.channels = channels;
  c.samples = samples;
  c.received_at = 5000;
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.f, 100.f);
  for (int i = 0; i < samples * channels; ++i) c.values.push_back(std::round(noise(rng)));
  return c;
}

template <typename Fn>
bool eventually(Fn done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace

TEST_CASE("history store: chunks round-trip raw and zlib-compressed, listed by device time",
          "[pipeline][history]") {
  TempDir dir("gw_history_store");
  const std::string path = dir.file("history.db");
  const HistoryChunk a = random_chunk(1, 3, 1, 0, 10.0, 50, 2, 1);
  const HistoryChunk b = random_chunk(1, 3, 1, 50, 10.5, 50, 2, 2);
  const HistoryChunk c = random_chunk(2, 3, 2, 0, 10.0, 40, 2, 3);
  {
    HistoryStore store(path);
    std::vector<HistoryChunk> raw = {a, b};
    std::vector<HistoryChunk> compressed = {c};
    CHECK(store.append(raw, 0) == 2 * 50 * 2 * sizeof(float));
    CHECK(store.append(compressed, 6) < 40 * 2 * sizeof(float));  // rounded noise compresses
    CHECK(raw[0].id > 0);
    CHECK(raw[1].id > raw[0].id);
    CHECK(compressed[0].id > raw[1].id);
    CHECK(store.next_run() == 3);
  }
  const HistoryStore store(path, /*read_only=*/true);
  CHECK(store.chunk_count() == 3);

  auto listed = store.list_chunks(1, 3, -kInf, kInf);
  REQUIRE(listed.size() == 2);
  CHECK(listed[0].values.empty());
  CHECK(listed[0].t0_us == 10'000'000);
  CHECK(listed[1].run_offset == 50);
  store.load_values(listed[0]);
  store.load_values(listed[1]);
  CHECK(listed[0].values == a.values);
  CHECK(listed[1].values == b.values);
  auto other = store.list_chunks(2, 3, -kInf, kInf);
  REQUIRE(other.size() == 1);
  store.load_values(other[0]);
  CHECK(other[0].values == c.values);

  // A chunk is listed when one of its samples lies in [from, to): chunk a
  // holds 10.00 .. 10.49 s, chunk b 10.50 .. 10.99 s.
  CHECK(store.list_chunks(1, 3, 10.495, 10.5).empty());
  REQUIRE(store.list_chunks(1, 3, 10.49, 10.5).size() == 1);
  CHECK(store.list_chunks(1, 3, 10.49, 10.5)[0].run_offset == 0);
  REQUIRE(store.list_chunks(1, 3, 10.5, 10.51).size() == 1);
  CHECK(store.list_chunks(1, 3, 10.5, 10.51)[0].run_offset == 50);
  CHECK(store.list_chunks(1, 4, -kInf, kInf).empty());

  const auto streams = store.streams();
  REQUIRE(streams.size() == 2);
  CHECK(streams[0].wearer == 1);
  CHECK(streams[0].samples == 100);
  CHECK(streams[0].chunks == 2);
  CHECK(streams[0].t_first == Approx(10.0));
  CHECK(streams[0].t_end == Approx(11.0));
  CHECK(streams[1].wearer == 2);

  // Channel 1 of both chunks: one segment (same run, consecutive offsets).
  const auto read = store.read(1, 3, {1}, -kInf, kInf);
  REQUIRE(read.segments.size() == 1);
  CHECK(read.gaps.empty());
  const auto& segment = read.segments[0];
  CHECK(segment.channels == 1);
  REQUIRE(segment.samples() == 100);
  CHECK(segment.t_start == Approx(10.0));
  for (std::size_t s = 0; s < 50; ++s) {
    CHECK(segment.values[s] == a.values[s * 2 + 1]);
    CHECK(segment.values[50 + s] == b.values[s * 2 + 1]);
  }
  CHECK_THROWS_AS(store.read(1, 3, {2}, -kInf, kInf), gw::Error);
}

TEST_CASE("history store: refuses a hit store and reports a damaged chunk", "[pipeline][history]") {
  TempDir dir("gw_history_store");
  { gw::pipeline::HitStore hits(dir.file("hits.db")); }
  try {
    HistoryStore wrong(dir.file("hits.db"));
    FAIL("a hit store opened as a history store");
  } catch (const gw::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("not a history store"));
  }

  const std::string path = dir.file("history.db");
  {
    HistoryStore store(path);
    std::vector<HistoryChunk> chunks = {random_chunk(1, 1, 1, 0, 0, 20, 3, 4)};
    store.append(chunks, 1);
  }
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, "UPDATE chunks SET data = x'0102'", nullptr, nullptr, nullptr) ==
          SQLITE_OK);
  sqlite3_close(db);
  const HistoryStore store(path, true);
  auto listed = store.list_chunks(1, 1, -kInf, kInf);
  REQUIRE(listed.size() == 1);
  try {
    store.load_values(listed[0]);
    FAIL("a damaged chunk decoded");
  } catch (const gw::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("chunk " + std::to_string(listed[0].id)) &&
                             Catch::Contains("damaged"));
  }
}

TEST_CASE("history recorder: a real recording's samples read back exactly, in chunk_s chunks",
          "[pipeline][history]") {
  TempDir dir("gw_history_recorder");
  const auto& rec = s02r01();
  const std::size_t begin = 53000, end = 56000;  // 3000 samples at 64 Hz
  {
    HistoryRecorder recorder(gw::test::test_history_options(dir.file("h.db"), 2.0));
    record(recorder, frames_of(rec, 7, 1, begin, end, 6));
    recorder.stop();
    const auto c = recorder.counters();
    CHECK(c.chunks_queued == 24);  // ceil(3000 / 128)
    CHECK(c.chunks_written == 24);
    CHECK(c.samples_written == 3000);
    CHECK(c.chunks_dropped == 0);
    CHECK(c.chunks_failed == 0);
    CHECK(c.raw_bytes == 3000 * 9 * sizeof(float));
    CHECK(c.stored_bytes < c.raw_bytes);  // zlib on integer-valued mg readings
  }
  const HistoryStore store(dir.file("h.db"), true);
  const auto chunks = store.list_chunks(7, 1, -kInf, kInf);
  REQUIRE(chunks.size() == 24);
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    CHECK(chunks[i].run == chunks[0].run);
    CHECK(chunks[i].run_offset == static_cast<std::int64_t>(i) * 128);
    CHECK(chunks[i].samples == (i + 1 < chunks.size() ? 128 : 3000 - 23 * 128));
  }

  const auto all = store.read(7, 1, {}, -kInf, kInf);
  REQUIRE(all.segments.size() == 1);
  CHECK(all.gaps.empty());
  CHECK(all.segments[0].t_start == Approx(rec.time_s[begin]).margin(1e-6));
  CHECK(all.segments[0].values == samples_of(rec, begin, end));

  // A range inside: exactly the samples whose time lies in it. The
  // recording's time column is in whole ms, 15.6 ms apart; sample times in
  // the store are t0 + i / 64, so the range is cut between samples.
  const double from = rec.time_s[53100] - 0.005, to = rec.time_s[53200] - 0.005;
  const auto part = store.read(7, 1, {}, from, to);
  REQUIRE(part.segments.size() == 1);
  CHECK(part.gaps.empty());
  CHECK(part.segments[0].values == samples_of(rec, 53100, 53200));

  // Before the first sample: a gap from `from` to it.
  const auto early = store.read(7, 1, {0}, rec.time_s[begin] - 5, rec.time_s[begin + 10] - 0.005);
  REQUIRE(early.gaps.size() == 1);
  CHECK(early.gaps[0].begin == Approx(rec.time_s[begin] - 5));
  CHECK(early.gaps[0].end == Approx(rec.time_s[begin]).margin(1e-6));
  REQUIRE(early.segments.size() == 1);
  CHECK(early.segments[0].samples() == 10);
}

TEST_CASE("history recorder: a lost frame and a device clock jump start new runs, read as gaps",
          "[pipeline][history]") {
  TempDir dir("gw_history_recorder");
  const auto& rec = s02r01();
  auto frames = frames_of(rec, 1, 1, 53000, 54200, 8);
  const auto continuing = static_cast<std::uint32_t>(frames.size());
  frames.erase(frames.begin() + 50);  // samples 53400 .. 53407 never arrive
  // Sequence numbers continue, but the device clock jumps 30 s ahead.
  const auto jumped = frames_of(rec, 1, 1, 54200, 55000, 8, continuing, 30.0);
  frames.insert(frames.end(), jumped.begin(), jumped.end());
  {
    HistoryRecorder recorder(gw::test::test_history_options(dir.file("h.db"), 10.0));
    record(recorder, frames);
  }
  const HistoryStore store(dir.file("h.db"), true);
  const auto read = store.read(1, 1, {}, -kInf, kInf);
  REQUIRE(read.segments.size() == 3);
  CHECK(read.segments[0].values == samples_of(rec, 53000, 53400));
  CHECK(read.segments[1].values == samples_of(rec, 53408, 54200));
  CHECK(read.segments[2].values == samples_of(rec, 54200, 55000));
  CHECK(read.segments[2].t_start == Approx(rec.time_s[54200] + 30).margin(1e-6));
  REQUIRE(read.gaps.size() == 2);
  // The missing 8 samples (8 / 64 s), and the clock jump (1 sample period + 30 s).
  CHECK(read.gaps[0].begin == Approx(read.segments[0].t_end()));
  CHECK(read.gaps[0].end - read.gaps[0].begin == Approx(8 / 64.0).margin(2e-3));
  CHECK(read.gaps[1].end - read.gaps[1].begin == Approx(30.0).margin(2e-3));

  std::set<std::int64_t> runs;
  for (const auto& c : store.list_chunks(1, 1, -kInf, kInf)) runs.insert(c.run);
  CHECK(runs.size() == 3);
}

// Where the daemon's engine learns a stream's baselines again, the run is
// marked so that a history search learns again there too.
TEST_CASE("history recorder: a run relearns at the stream's first frame, a device restart and "
          "after stream_idle_s of silence, not after a lost frame",
          "[pipeline][history]") {
  TempDir dir("gw_history_relearn");
  const auto& rec = s02r01();
  auto frames = frames_of(rec, 1, 1, 53000, 54600, 8, 0, 0, true);  // 200 frames
  frames.erase(frames.begin() + 50);  // a lost frame: a new run, learning goes on
  {
    auto options = gw::test::test_history_options(dir.file("h.db"), 10.0);
    options.stream_idle_s = 60;
    HistoryRecorder recorder(options);
    record(recorder, {frames.begin(), frames.begin() + 100}, /*arrival_s=*/1000);
    recorder.append(frames[100], gw::pipeline::FrameVerdict::kRestarted, 1000);
    record(recorder, {frames.begin() + 101, frames.begin() + 150}, 1000);
    // The same stream, its clock and sequence going on, after 100 s of silence.
    record(recorder, {frames.begin() + 150, frames.end()}, 1100);
  }
  {
    // A daemon that starts again learns afresh: so does its first run here.
    HistoryRecorder recorder(gw::test::test_history_options(dir.file("h.db"), 10.0));
    record(recorder, frames_of(rec, 1, 1, 54600, 54800, 8, 200, 0, true), 1200);
  }
  const HistoryStore store(dir.file("h.db"), true);
  std::map<std::int64_t, bool> relearns;  // by run, in run order
  for (const auto& c : store.list_chunks(1, 1, -kInf, kInf)) {
    const auto [it, added] = relearns.emplace(c.run, c.run_relearns);
    CHECK(it->second == c.run_relearns);  // every chunk of a run says the same
  }
  std::vector<bool> in_order;
  for (const auto& [run, flag] : relearns) in_order.push_back(flag);
  CHECK(in_order == std::vector<bool>{true, false, true, true, true});
}

TEST_CASE("history retention deletes the chunks received before the cutoff",
          "[pipeline][history]") {
  TempDir dir("gw_history_retention");
  const auto& rec = s02r01();
  const std::string path = dir.file("h.db");
  {
    HistoryRecorder recorder(gw::test::test_history_options(path, 2.0));
    const auto frames = frames_of(rec, 1, 1, 53000, 55048, 8);  // 16 chunks of 128 samples
    const std::vector<gw::sensors::Frame> old_part(frames.begin(), frames.begin() + 128);
    const std::vector<gw::sensors::Frame> new_part(frames.begin() + 128, frames.end());
    record(recorder, old_part, /*arrival_s=*/1000);
    record(recorder, new_part, /*arrival_s=*/100000);
  }
  {
    auto options = gw::test::test_history_options(path, 2.0);
    options.retention_hours = 1;
    options.clock = [] { return 100000.0 + 60; };  // cutoff 96460: the old part goes
    HistoryRecorder recorder(options);
    recorder.stop();
    CHECK(recorder.counters().retention_deleted == 8);
  }
  const HistoryStore store(path, true);
  CHECK(store.chunk_count() == 8);
  const auto read = store.read(1, 1, {}, rec.time_s[53000], kInf);
  REQUIRE(read.segments.size() == 1);
  CHECK(read.segments[0].values == samples_of(rec, 54024, 55048));
  REQUIRE(read.gaps.size() == 1);
  CHECK(read.gaps[0].begin == rec.time_s[53000]);
  CHECK(read.gaps[0].end == Approx(read.segments[0].t_start));
}

TEST_CASE("history recorder: a full queue drops chunks by its policy and counts every one",
          "[pipeline][history]") {
  const bool drop_newest = GENERATE(true, false);
  INFO((drop_newest ? "drop_newest" : "drop_oldest"));
  TempDir dir("gw_history_overflow");
  const auto& rec = s02r01();
  const std::string path = dir.file("h.db");
  { HistoryStore create(path); }
  auto options = gw::test::test_history_options(path, 1.0);  // 64 samples a chunk
  options.queue_chunks = 3;
  options.overflow =
      drop_newest ? gw::OverflowPolicy::kDropNewest : gw::OverflowPolicy::kDropOldest;
  options.max_batch_chunks = 1;
  HistoryRecorder recorder(options);
  const auto frames = frames_of(rec, 1, 1, 53000, 53000 + 8 * 64, 64);  // a chunk each

  // Another connection holds the write lock: the writer takes chunk 0 and
  // waits in its commit, so the queue fills.
  sqlite3* blocker = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &blocker) == SQLITE_OK);
  REQUIRE(sqlite3_exec(blocker, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  recorder.append(frames[0], gw::pipeline::FrameVerdict::kAccepted, 1000);
  REQUIRE(eventually([&] { return recorder.counters().queue_depth == 0; }));
  for (std::size_t i = 1; i < frames.size(); ++i)
    recorder.append(frames[i], gw::pipeline::FrameVerdict::kAccepted, 1000);
  CHECK(recorder.counters().chunks_queued == 8);
  CHECK(recorder.counters().chunks_dropped == 4);  // 7 for 3 places
  REQUIRE(sqlite3_exec(blocker, "ROLLBACK", nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(blocker);
  recorder.stop();
  const auto c = recorder.counters();
  CHECK(c.chunks_written == 4);
  CHECK(c.chunks_written + c.chunks_dropped + c.chunks_failed == c.chunks_queued);

  const HistoryStore store(path, true);
  std::vector<std::int64_t> offsets;
  for (const auto& chunk : store.list_chunks(1, 1, -kInf, kInf))
    offsets.push_back(chunk.run_offset);
  const auto read = store.read(1, 1, {}, -kInf, kInf);
  if (drop_newest) {
    CHECK(offsets == std::vector<std::int64_t>{0, 64, 128, 192});
    CHECK(read.gaps.empty());
  } else {
    CHECK(offsets == std::vector<std::int64_t>{0, 320, 384, 448});
    REQUIRE(read.gaps.size() == 1);  // chunks 1 .. 4 were dropped
    CHECK(read.gaps[0].end - read.gaps[0].begin == Approx(4 * 64 / 64.0).margin(2e-3));
  }
}

TEST_CASE("history store: a hit store refuses a history file instead of migrating it",
          "[pipeline][history]") {
  TempDir dir("gw_history_store");
  { HistoryStore history(dir.file("history.db")); }
  try {
    gw::pipeline::HitStore wrong(dir.file("history.db"));
    FAIL("a history store opened as a hit store");
  } catch (const gw::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("not a hit store"));
  }
  HistoryStore again(dir.file("history.db"));  // untouched
}
