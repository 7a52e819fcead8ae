// Records the daemon's accepted samples into the raw-stream history
// (history/history_store.h): the pipeline thread cuts each (wearer, device)
// stream into chunks of history.chunk_s seconds; a writer thread compresses
// them and commits them in batched transactions, and deletes chunks older
// than the retention.
//
// Between the two threads sits a bounded queue of finished chunks with an
// explicit overflow policy (history.queue_overflow, default drop_newest:
// detection never waits for the history). Every chunk is accounted for:
// written, dropped on overflow, or failed (the store kept failing while
// stopping); the counters say how many, and a reader sees the lost time as
// a gap.
//
// Thread safety: append()/flush_idle()/flush() from one thread (the
// pipeline thread; after it has ended, the thread calling stop()).
// counters()/stats_json() from any thread. Blocking: append() blocks only
// with OverflowPolicy::kBlock while the queue is full.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "common/bounded_queue.h"
#include "pipeline/stream_state.h"
#include "sensors/frame.h"

namespace gw::pipeline {

struct HistoryOptions {
  std::string path;
  double retention_hours = 24;  // chunks received longer ago are deleted; 0 = keep forever
  double chunk_s = 10;          // longest chunk, in seconds of samples
  int zlib_level = 1;           // 0 = store float32 uncompressed
  std::size_t queue_chunks = 1024;
  OverflowPolicy overflow = OverflowPolicy::kDropNewest;
  int commit_interval_ms = 1000;       // longest a finished chunk waits for its transaction
  std::size_t max_batch_chunks = 256;  // most chunks in one transaction (>= 1)
  std::string config_path;             // recorded in the file (meta "config_path") for the CLI
  // The engine's ingest.stream_idle_s: a stream silent this long was removed
  // by the engine, so its next frame starts afresh there (baselines learned
  // again) and a run that relearns here; 0 = streams are never removed.
  double stream_idle_s = 0;
  // The daemon's clock in unix seconds (received_at, retention). An
  // Env-like seam: tests pass their own; empty = the system clock.
  std::function<double()> clock;
};

struct HistoryCounters {
  std::uint64_t chunks_queued = 0;
  std::uint64_t chunks_written = 0;
  std::uint64_t samples_written = 0;
  std::uint64_t chunks_dropped = 0;  // queue overflow (either drop policy)
  std::uint64_t chunks_failed = 0;   // given up after store errors while stopping
  std::uint64_t store_errors = 0;    // failed commits (retried)
  std::uint64_t transactions = 0;
  std::uint64_t retention_deleted = 0;  // chunks
  std::uint64_t raw_bytes = 0;          // float32 bytes of the chunks written
  std::uint64_t stored_bytes = 0;       // their BLOB bytes (after compression)
  std::uint64_t queue_depth = 0;
};

class HistoryRecorder {
 public:
  // Opens (creates, migrates) the store, records the config path, and starts
  // the writer thread, whose first act is a retention pass. Throws gw::Error.
  explicit HistoryRecorder(HistoryOptions options);
  ~HistoryRecorder();  // calls stop()
  HistoryRecorder(const HistoryRecorder&) = delete;
  HistoryRecorder& operator=(const HistoryRecorder&) = delete;

  // A frame the engine accepted into its stream, with the engine's verdict:
  // anything but kAccepted (a sequence gap, a restart) starts a new run, as
  // does a frame whose device time is more than half a sample period off
  // the end of the previous one or whose rate or channel count changed.
  // The run relearns (HistoryChunk::run_relearns) where the engine learns
  // the stream's baselines again: the stream's first frame in this recorder
  // (a daemon that starts learns afresh), a device restart, or a frame
  // after stream_idle_s of silence.
  void append(const sensors::Frame& frame, FrameVerdict verdict, double arrival_s);
  // Finishes the open chunk of every stream whose last frame arrived more
  // than chunk_s before `now_s` (unix s), so a stream that went quiet is
  // searchable without waiting for more samples. Cheap; call every tick.
  void flush_idle(double now_s);
  // Finishes every open chunk.
  void flush();
  // flush(), then the writer commits everything queued and exits. Idempotent.
  void stop();

  HistoryCounters counters() const;
  nlohmann::json stats_json() const;
  const std::string& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gw::pipeline
