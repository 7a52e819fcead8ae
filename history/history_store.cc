#include "history/history_store.h"

#include <sqlite3.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "common/error.h"
#include "sinks/sqlite_db.h"

namespace gw::pipeline {
namespace {

using sqlite::Statement;

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "history chunks store float32 little-endian; add a byte swap for this host");

// "GWHS": marks the file as a gaitwatch history store.
constexpr std::int32_t kApplicationId = 0x47574853;

enum Encoding : int { kFloat32 = 0, kZlibFloat32 = 1 };

const char* const kMigrations[] = {
    // 0 -> 1
    "CREATE TABLE chunks ("
    "  id INTEGER PRIMARY KEY,"
    "  wearer INTEGER NOT NULL,"
    "  device INTEGER NOT NULL,"
    "  run INTEGER NOT NULL,"
    "  run_offset INTEGER NOT NULL,"
    "  t0_us INTEGER NOT NULL,"     // device time of the first sample
    "  t_end_us INTEGER NOT NULL,"  // one sample period after the last
    "  sample_rate_hz REAL NOT NULL,"
    "  channels INTEGER NOT NULL,"
    "  samples INTEGER NOT NULL,"
    "  received_at REAL NOT NULL,"  // daemon clock, unix s; retention
    "  encoding INTEGER NOT NULL,"  // 0 float32 LE sample-major, 1 zlib of that
    "  data BLOB NOT NULL"          // last: listings never touch its pages
    ");"
    "CREATE INDEX chunks_stream_time ON chunks(wearer, device, t0_us);"
    "CREATE INDEX chunks_received_at ON chunks(received_at);"
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);",
    // 1 -> 2: the runs that begin where the engine learns baselines again
    // (a table of its own: a column after `data` would make listings read
    // the BLOBs' overflow pages). A file of version 1 has none: its runs
    // search as one learning, as before.
    "CREATE TABLE relearn_runs (run INTEGER PRIMARY KEY);",
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == kHistorySchemaVersion,
              "one migration per schema version");

const char* const kChunkColumns =
    "SELECT id, wearer, device, run, run_offset, t0_us, sample_rate_hz, channels, samples, "
    "received_at, EXISTS (SELECT 1 FROM relearn_runs r WHERE r.run = chunks.run) FROM chunks";

HistoryChunk chunk_from_row(const Statement& row) {
  HistoryChunk c;
  c.id = row.column_int64(0);
  c.wearer = static_cast<std::uint32_t>(row.column_int64(1));
  c.device = static_cast<std::uint16_t>(row.column_int64(2));
  c.run = row.column_int64(3);
  c.run_offset = row.column_int64(4);
  c.t0_us = row.column_int64(5);
  c.sample_rate_hz = row.column_double(6);
  c.channels = static_cast<int>(row.column_int64(7));
  c.samples = static_cast<int>(row.column_int64(8));
  c.received_at = row.column_double(9);
  c.run_relearns = row.column_int64(10) != 0;
  return c;
}

std::int64_t end_us(const HistoryChunk& c) {
  return c.t0_us + std::llround(static_cast<double>(c.samples) * 1e6 / c.sample_rate_hz);
}

// Seconds to whole microseconds, rounded outwards so SQL pre-filters never
// drop a chunk the exact test keeps; infinities saturate.
std::int64_t floor_us(double s) {
  if (s <= -9.2e12) return std::numeric_limits<std::int64_t>::min();
  if (s >= 9.2e12) return std::numeric_limits<std::int64_t>::max();
  return static_cast<std::int64_t>(std::floor(s * 1e6)) - 1;
}
std::int64_t ceil_us(double s) {
  if (s <= -9.2e12) return std::numeric_limits<std::int64_t>::min();
  if (s >= 9.2e12) return std::numeric_limits<std::int64_t>::max();
  return static_cast<std::int64_t>(std::ceil(s * 1e6)) + 1;
}

std::vector<unsigned char> encode(const std::vector<float>& values, int zlib_level, int& encoding) {
  const auto raw_bytes = values.size() * sizeof(float);
  std::vector<unsigned char> out;
  if (zlib_level <= 0) {
    encoding = kFloat32;
    out.resize(raw_bytes);
    if (raw_bytes) std::memcpy(out.data(), values.data(), raw_bytes);
    return out;
  }
  encoding = kZlibFloat32;
  uLongf size = compressBound(static_cast<uLong>(raw_bytes));
  out.resize(size);
  const int rc = compress2(out.data(), &size, reinterpret_cast<const Bytef*>(values.data()),
                           static_cast<uLong>(raw_bytes), std::min(zlib_level, 9));
  if (rc != Z_OK) throw Error("history: zlib compress2 failed (" + std::to_string(rc) + ")");
  out.resize(size);
  return out;
}

void decode(const std::string& label, std::int64_t id, int encoding, const void* data,
            std::size_t bytes, std::vector<float>& values) {
  const std::size_t raw_bytes = values.size() * sizeof(float);
  auto damaged = [&](const std::string& why) {
    throw Error(label + ": chunk " + std::to_string(id) + " is damaged: " + why);
  };
  if (encoding == kFloat32) {
    if (bytes != raw_bytes)
      damaged(std::to_string(bytes) + " bytes, expected " + std::to_string(raw_bytes));
    if (bytes) std::memcpy(values.data(), data, bytes);
  } else if (encoding == kZlibFloat32) {
    uLongf size = static_cast<uLongf>(raw_bytes);
    const int rc = uncompress(reinterpret_cast<Bytef*>(values.data()), &size,
                              static_cast<const Bytef*>(data), static_cast<uLong>(bytes));
    if (rc != Z_OK || size != raw_bytes) damaged("zlib data does not inflate to the samples");
  } else {
    damaged("unknown encoding " + std::to_string(encoding));
  }
}

}  // namespace

HistoryStore::HistoryStore(const std::string& path, bool read_only)
    : path_(path), label_("history store '" + path + "'") {
  sqlite::SchemaSpec spec;
  spec.kind = "history store";
  spec.migrations.assign(std::begin(kMigrations), std::end(kMigrations));
  spec.application_id = kApplicationId;
  // NORMAL: a commit survives a crash of the process; on power loss the last
  // commits may roll back. For raw samples (unlike alerts, which are
  // published after their commit) that costs seconds of history, and it
  // saves an fsync per transaction.
  spec.synchronous = "NORMAL";
  // Retention deletes old chunks all the time; incremental vacuum lets the
  // file shrink again (auto_vacuum only applies to a file without tables).
  spec.on_create = "PRAGMA auto_vacuum = INCREMENTAL";
  db_ = sqlite::open(path_, read_only, spec);
}

HistoryStore::~HistoryStore() { sqlite::close(db_); }

std::size_t HistoryStore::append(std::vector<HistoryChunk>& chunks, int zlib_level) {
  if (chunks.empty()) return 0;
  // Encode before taking the write lock: readers and the lock holder never
  // wait for zlib.
  std::vector<std::vector<unsigned char>> blobs;
  std::vector<int> encodings(chunks.size());
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const HistoryChunk& c = chunks[i];
    if (c.samples < 1 || c.channels < 1 || !(c.sample_rate_hz > 0) ||
        c.values.size() !=
            static_cast<std::size_t>(c.samples) * static_cast<std::size_t>(c.channels))
      throw Error(label_ + ": refusing a malformed chunk (wearer " + std::to_string(c.wearer) +
                  ", device " + std::to_string(c.device) + ")");
    blobs.push_back(encode(c.values, zlib_level, encodings[i]));
  }
  std::vector<std::int64_t> ids(chunks.size());
  sqlite::in_transaction(db_, label_, [&] {
    Statement insert(db_, label_,
                     "INSERT INTO chunks(wearer, device, run, run_offset, t0_us, t_end_us, "
                     "sample_rate_hz, channels, samples, received_at, encoding, data) VALUES "
                     "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
    Statement relearns(db_, label_, "INSERT OR IGNORE INTO relearn_runs(run) VALUES (?1)");
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      const HistoryChunk& c = chunks[i];
      if (c.run_relearns) {
        relearns.bind(1, c.run);
        relearns.run();
        relearns.reset();
      }
      insert.bind(1, static_cast<std::int64_t>(c.wearer));
      insert.bind(2, static_cast<std::int64_t>(c.device));
      insert.bind(3, c.run);
      insert.bind(4, c.run_offset);
      insert.bind(5, c.t0_us);
      insert.bind(6, end_us(c));
      insert.bind(7, c.sample_rate_hz);
      insert.bind(8, static_cast<std::int64_t>(c.channels));
      insert.bind(9, static_cast<std::int64_t>(c.samples));
      insert.bind(10, c.received_at);
      insert.bind(11, static_cast<std::int64_t>(encodings[i]));
      insert.bind_blob(12, blobs[i].data(), blobs[i].size());
      insert.run();
      ids[i] = sqlite3_last_insert_rowid(db_);
      insert.reset();
    }
  });
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    chunks[i].id = ids[i];
    bytes += blobs[i].size();
  }
  return bytes;
}

std::int64_t HistoryStore::delete_received_before(double cutoff_unix_s) {
  std::int64_t deleted = 0;
  {
    Statement remove(db_, label_, "DELETE FROM chunks WHERE received_at < ?1");
    remove.bind(1, cutoff_unix_s);
    remove.run();
    deleted = static_cast<std::int64_t>(sqlite3_changes64(db_));
  }
  if (deleted > 0) {
    sqlite::exec(db_, label_,
                 "DELETE FROM relearn_runs WHERE run NOT IN (SELECT run FROM chunks)");
    sqlite::exec(db_, label_, "PRAGMA incremental_vacuum");
  }
  return deleted;
}

std::int64_t HistoryStore::next_run() const {
  return sqlite::single_integer(db_, label_, "SELECT max(coalesce((SELECT max(run) FROM chunks), 0), "
                              "coalesce((SELECT max(run) FROM relearn_runs), 0)) + 1");
}

void HistoryStore::set_meta(const std::string& key, const std::string& value) {
  Statement upsert(db_, label_,
                   "INSERT INTO meta(key, value) VALUES (?1, ?2) "
                   "ON CONFLICT(key) DO UPDATE SET value = excluded.value");
  upsert.bind(1, key);
  upsert.bind(2, value);
  upsert.run();
}

std::optional<std::string> HistoryStore::meta(const std::string& key) const {
  Statement select(db_, label_, "SELECT value FROM meta WHERE key = ?1");
  select.bind(1, key);
  if (!select.step()) return std::nullopt;
  return select.column_text(0);
}

std::vector<HistoryStreamSummary> HistoryStore::streams() const {
  Statement select(db_, label_,
                   "SELECT wearer, device, count(*), sum(samples), min(t0_us), max(t_end_us), "
                   "max(sample_rate_hz), max(channels), sum(length(data)) FROM chunks "
                   "GROUP BY wearer, device ORDER BY wearer, device");
  std::vector<HistoryStreamSummary> out;
  while (select.step()) {
    HistoryStreamSummary s;
    s.wearer = static_cast<std::uint32_t>(select.column_int64(0));
    s.device = static_cast<std::uint16_t>(select.column_int64(1));
    s.chunks = select.column_int64(2);
    s.samples = select.column_int64(3);
    s.t_first = static_cast<double>(select.column_int64(4)) * 1e-6;
    s.t_end = static_cast<double>(select.column_int64(5)) * 1e-6;
    s.sample_rate_hz = select.column_double(6);
    s.channels = static_cast<int>(select.column_int64(7));
    s.stored_bytes = select.column_int64(8);
    out.push_back(s);
  }
  return out;
}

std::int64_t HistoryStore::chunk_count() const {
  return sqlite::single_integer(db_, label_, "SELECT count(*) FROM chunks");
}

std::vector<HistoryChunk> HistoryStore::list_chunks(std::uint32_t wearer, std::uint16_t device,
                                                    double from, double to) const {
  std::vector<HistoryChunk> out;
  if (!(from < to)) return out;
  Statement select(db_, label_,
                   std::string(kChunkColumns) +
                       " WHERE wearer = ?1 AND device = ?2 AND t0_us < ?3 AND t_end_us > ?4"
                       " ORDER BY t0_us, id");
  select.bind(1, static_cast<std::int64_t>(wearer));
  select.bind(2, static_cast<std::int64_t>(device));
  select.bind(3, ceil_us(to));
  select.bind(4, floor_us(from));
  while (select.step()) {
    HistoryChunk c = chunk_from_row(select);
    const auto [first, last] = samples_in(c, from, to);
    if (first < last) out.push_back(std::move(c));
  }
  return out;
}

void HistoryStore::load_values(HistoryChunk& chunk) const {
  Statement select(db_, label_, "SELECT encoding, data FROM chunks WHERE id = ?1");
  select.bind(1, chunk.id);
  if (!select.step())
    throw Error(label_ + ": chunk " + std::to_string(chunk.id) +
                " is gone (deleted by retention while being read?)");
  std::size_t bytes = 0;
  const void* data = select.column_blob(1, bytes);
  chunk.values.assign(
      static_cast<std::size_t>(chunk.samples) * static_cast<std::size_t>(chunk.channels), 0.0f);
  decode(label_, chunk.id, static_cast<int>(select.column_int64(0)), data, bytes, chunk.values);
}

HistoryRead HistoryStore::read(std::uint32_t wearer, std::uint16_t device,
                               const std::vector<int>& channels, double from, double to) const {
  HistoryRead out;
  struct Open {
    std::size_t segment;
    std::int64_t next_offset;
  };
  std::map<std::int64_t, Open> open_by_run;  // runs whose last chunk was taken whole
  for (HistoryChunk& chunk : list_chunks(wearer, device, from, to)) {
    for (const int c : channels)
      if (c < 0 || c >= chunk.channels)
        throw Error(label_ + ": wearer " + std::to_string(wearer) + " device " +
                    std::to_string(device) + " has " + std::to_string(chunk.channels) +
                    " channels; no channel " + std::to_string(c));
    load_values(chunk);
    const auto [first, last] = samples_in(chunk, from, to);
    const std::vector<int>* picked = &channels;
    std::vector<int> all;
    if (channels.empty()) {
      for (int c = 0; c < chunk.channels; ++c) all.push_back(c);
      picked = &all;
    }
    auto it = open_by_run.find(chunk.run);
    if (it == open_by_run.end() || it->second.next_offset != chunk.run_offset + first) {
      HistorySegment segment;
      segment.wearer = wearer;
      segment.device = device;
      segment.t_start = chunk.time_of(first);
      segment.sample_rate_hz = chunk.sample_rate_hz;
      segment.channels = static_cast<int>(picked->size());
      out.segments.push_back(std::move(segment));
      it = open_by_run.insert_or_assign(chunk.run, Open{out.segments.size() - 1, 0}).first;
    }
    HistorySegment& segment = out.segments[it->second.segment];
    const auto width = static_cast<std::size_t>(chunk.channels);
    for (std::int64_t s = first; s < last; ++s)
      for (const int c : *picked)
        segment.values.push_back(
            chunk.values[static_cast<std::size_t>(s) * width + static_cast<std::size_t>(c)]);
    // A chunk cut short by `to` ends its run here.
    it->second.next_offset = last == chunk.samples ? chunk.run_offset + last : -1;
  }
  std::stable_sort(
      out.segments.begin(), out.segments.end(),
      [](const HistorySegment& a, const HistorySegment& b) { return a.t_start < b.t_start; });

  // Gaps: [from, to) minus the union of the segments' spans.
  if (out.segments.empty()) {
    if (std::isfinite(from) && std::isfinite(to)) out.gaps.push_back({from, to});
    return out;
  }
  double cursor = std::isfinite(from) ? from : out.segments.front().t_start;
  double upper = out.segments.front().t_end();
  for (const auto& s : out.segments) upper = std::max(upper, s.t_end());
  if (std::isfinite(to)) upper = to;
  for (const auto& s : out.segments) {
    const double tolerance = 0.5 / s.sample_rate_hz;
    if (s.t_start > cursor + tolerance) out.gaps.push_back({cursor, s.t_start});
    cursor = std::max(cursor, s.t_end());
  }
  const double tolerance = 0.5 / out.segments.back().sample_rate_hz;
  if (upper > cursor + tolerance) out.gaps.push_back({cursor, upper});
  return out;
}

std::pair<std::int64_t, std::int64_t> samples_in(const HistoryChunk& chunk, double from,
                                                 double to) {
  // The smallest i in [0, samples] with time_of(i) >= t, found from an
  // estimate and then settled with the same time_of() every reader uses.
  auto first_at_or_after = [&](double t) -> std::int64_t {
    if (t == -std::numeric_limits<double>::infinity()) return 0;
    if (t == std::numeric_limits<double>::infinity()) return chunk.samples;
    const double estimate = std::ceil((t - chunk.t_start()) * chunk.sample_rate_hz);
    std::int64_t i =
        static_cast<std::int64_t>(std::clamp(estimate, 0.0, static_cast<double>(chunk.samples)));
    while (i > 0 && chunk.time_of(i - 1) >= t) --i;
    while (i < chunk.samples && chunk.time_of(i) < t) ++i;
    return i;
  };
  const std::int64_t first = first_at_or_after(from);
  return {first, std::max(first, first_at_or_after(to))};
}

}  // namespace gw::pipeline
