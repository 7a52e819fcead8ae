// The raw-stream history: the accepted samples of every (wearer, device)
// stream, kept for a retention period in an SQLite file of its own
// (history.path), so that hours of recorded data can be searched by example
// later (history/history_search.h). docs/design.md says why SQLite BLOBs and
// why a file apart from the hit store.
//
// Layout: one row per chunk, up to history.chunk_s seconds of consecutive
// samples of one stream, all of its channels, float32 sample-major, stored
// raw or zlib-compressed. Chunks of one *run* (a stretch of a stream without
// sequence gap, device restart or clock jump) carry consecutive run offsets,
// so a reader can tell contiguous chunks from a gap even where a chunk was
// lost (queue overflow) or deleted (retention).
//
// Time: chunk and sample times are device time in seconds (the frames'
// timestamps, the axis of an alert's t_start/t_end); sample i of a chunk was
// taken at t0 + i / rate. Retention uses the daemon's clock instead
// (received_at), so a device clock far off cannot keep data forever or
// delete it early.
//
// Thread safety: a HistoryStore is one SQLite connection, used by one thread
// at a time. Any number of read-only HistoryStores (the CLI, a search job)
// may read while one writer (the daemon's HistoryRecorder) appends: WAL mode,
// readers see committed chunks. Errors: SQLite failures and damaged chunks
// throw gw::Error naming the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

struct sqlite3;

namespace gw::pipeline {

inline constexpr int kHistorySchemaVersion = 2;

// Consecutive samples of one stream.
struct HistoryChunk {
  std::int64_t id = 0;  // row id, assigned by HistoryStore::append
  std::uint32_t wearer = 0;
  std::uint16_t device = 0;
  std::int64_t run = 0;         // see the file comment
  std::int64_t run_offset = 0;  // index of the first sample within its run
  std::int64_t t0_us = 0;       // device time of the first sample [us]
  double sample_rate_hz = 0;
  int channels = 0;
  int samples = 0;
  double received_at = 0;     // daemon clock (unix s) when the first sample arrived
  // The run began where the daemon's engine learns a stream's baselines
  // again (HistoryRecorder::append): a history search of a normalised
  // pattern learns again at its start. Recorded for the run, so every chunk
  // of the run reads back true.
  bool run_relearns = false;
  std::vector<float> values;  // samples x channels, sample-major; empty in listings

  double t_start() const { return static_cast<double>(t0_us) * 1e-6; }
  double time_of(std::int64_t sample) const {
    return t_start() + static_cast<double>(sample) / sample_rate_hz;
  }
  // One sample period after the last sample.
  double t_end() const { return time_of(samples); }
};

// Samples [first, last) of `chunk` whose device time (chunk.time_of(i)) lies
// in [from, to): the one rule every history reader applies.
std::pair<std::int64_t, std::int64_t> samples_in(const HistoryChunk& chunk, double from, double to);

// One stream as the store holds it.
struct HistoryStreamSummary {
  std::uint32_t wearer = 0;
  std::uint16_t device = 0;
  std::int64_t chunks = 0;
  std::int64_t samples = 0;
  double t_first = 0;  // device time of the first sample held
  double t_end = 0;    // one sample period after the last sample held
  double sample_rate_hz = 0;
  int channels = 0;
  std::int64_t stored_bytes = 0;  // BLOB bytes (compressed)
};

struct TimeSpan {
  double begin = 0;
  double end = 0;  // exclusive
};

// Contiguous samples of one stream.
struct HistorySegment {
  std::uint32_t wearer = 0;
  std::uint16_t device = 0;
  double t_start = 0;  // device time of the first sample
  double sample_rate_hz = 0;
  int channels = 0;
  std::vector<float> values;  // sample-major, `channels` values per sample
  std::size_t samples() const {
    return channels ? values.size() / static_cast<std::size_t>(channels) : 0;
  }
  double t_end() const { return t_start + static_cast<double>(samples()) / sample_rate_hz; }
};

struct HistoryRead {
  // In (t_start, storage) order. Two segments overlap in time only when the
  // device clock went back (or one recording was replayed twice); both are
  // kept.
  std::vector<HistorySegment> segments;
  // The parts of [from, to) that no segment covers, in time order; an
  // infinite end of the range counts from the first / to the last sample
  // held. Adjacent segments closer than half a sample period leave no gap.
  std::vector<TimeSpan> gaps;
};

class HistoryStore {
 public:
  // Opens or creates `path` (mode 0600; schema versioned and migrated like
  // the hit store). Refuses a file that is not a history store.
  explicit HistoryStore(const std::string& path, bool read_only = false);
  ~HistoryStore();
  HistoryStore(const HistoryStore&) = delete;
  HistoryStore& operator=(const HistoryStore&) = delete;

  // Writes the chunks in one transaction and assigns their ids; nothing is
  // written when it throws. zlib_level 0 stores float32 as is, 1..9
  // compresses each chunk with zlib at that level. Returns the BLOB bytes
  // written.
  std::size_t append(std::vector<HistoryChunk>& chunks, int zlib_level);
  // Deletes chunks received before the cutoff (unix s) and returns the
  // freed pages to the file system; returns how many chunks went.
  std::int64_t delete_received_before(double cutoff_unix_s);
  // A run id never used in this file (max + 1).
  std::int64_t next_run() const;
  void set_meta(const std::string& key, const std::string& value);
  std::optional<std::string> meta(const std::string& key) const;

  std::vector<HistoryStreamSummary> streams() const;
  std::int64_t chunk_count() const;
  // Chunks of one stream holding a sample with device time in [from, to)
  // (from/to in seconds; infinities allowed), without values, in
  // (t0, id) order.
  std::vector<HistoryChunk> list_chunks(std::uint32_t wearer, std::uint16_t device, double from,
                                        double to) const;
  // Fills chunk.values (all channels) from the row chunk.id. Throws when
  // the chunk is gone (retention) or damaged.
  void load_values(HistoryChunk& chunk) const;
  // Samples of `channels` (device channel indices, in this order; empty =
  // all) whose device time lies in [from, to), as contiguous segments, with
  // the gaps. Holds the whole range in memory: for bounded reads (the
  // search reads chunk by chunk instead). Throws for a channel index out of
  // range.
  HistoryRead read(std::uint32_t wearer, std::uint16_t device, const std::vector<int>& channels,
                   double from, double to) const;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string label_;  // "history store 'PATH'"
  sqlite3* db_ = nullptr;
};

}  // namespace gw::pipeline
