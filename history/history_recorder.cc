#include "history/history_recorder.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/thread_name.h"
#include "history/history_store.h"

namespace gw::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kRetentionPeriod = std::chrono::minutes(1);
// Most raw bytes in one transaction.
constexpr std::size_t kMaxBatchBytes = 32u << 20;
// A failing commit is retried with a back-off doubling up to kMaxBackoff
// while running (the queue fills meanwhile and overflows as configured);
// once stopping, it gets kAttemptsWhenStopping attempts and is then counted
// as failed, so stop() terminates.
constexpr auto kFirstBackoff = std::chrono::milliseconds(50);
constexpr auto kMaxBackoff = std::chrono::seconds(2);
constexpr int kAttemptsWhenStopping = 3;

double system_unix_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// "<3>" is the syslog priority "err"; journald records it (sd-daemon(3)).
void log_error(const std::string& message) {
  std::fprintf(stderr, "<3>gaitwatch history: %s\n", message.c_str());
}

void validate(const HistoryOptions& o) {
  auto fail = [](const std::string& m) { throw Error("history: " + m); };
  if (o.path.empty()) fail("path is empty");
  if (!(o.retention_hours >= 0)) fail("retention_hours must be >= 0 (0 keeps everything)");
  if (!(o.chunk_s > 0)) fail("chunk_s must be > 0");
  if (o.zlib_level < 0 || o.zlib_level > 9) fail("zlib_level must be in 0..9");
  if (o.commit_interval_ms < 0) fail("commit_interval_ms must be >= 0");
  if (o.max_batch_chunks < 1) fail("max_batch_chunks must be >= 1");
}

}  // namespace

struct HistoryRecorder::Impl {
  // Pipeline-thread state of one (wearer, device) stream.
  struct OpenStream {
    std::int64_t run = -1;
    std::int64_t next_offset = 0;  // run offset of the next sample
    double rate = 0;
    int channels = 0;
    double next_time_us = 0;  // device time the next sample should have
    double last_arrival = 0;
    bool relearns = false;  // the open run's HistoryChunk::run_relearns
    HistoryChunk pending;  // the open chunk; samples == 0 when none
  };

  explicit Impl(HistoryOptions o)
      : options((validate(o), std::move(o))),
        store(options.path),
        queue(options.queue_chunks, options.overflow) {
    if (!options.clock) options.clock = system_unix_s;
    if (!options.config_path.empty()) store.set_meta("config_path", options.config_path);
    next_run = store.next_run();
    writer = std::thread([this] {
      set_thread_name("gw-history");
      run_writer();
    });
  }

  // --- pipeline thread ---

  void append(const sensors::Frame& frame, FrameVerdict verdict, double arrival_s) {
    if (frame.samples == 0 || frame.channels == 0 || !(frame.sample_rate_hz > 0)) return;
    const std::uint64_t key = (static_cast<std::uint64_t>(frame.wearer_id) << 16) | frame.device_id;
    OpenStream& s = streams[key];
    const double rate = frame.sample_rate_hz;
    const double period_us = 1e6 / rate;
    const auto t0 = static_cast<double>(frame.device_time_us);
    const bool relearns = s.run < 0 || verdict == FrameVerdict::kRestarted ||
                          (options.stream_idle_s > 0 &&
                           arrival_s - s.last_arrival >= options.stream_idle_s);
    const bool continues = !relearns && verdict == FrameVerdict::kAccepted && rate == s.rate &&
                           frame.channels == s.channels &&
                           std::abs(t0 - s.next_time_us) <= 0.5 * period_us;
    if (!continues) {
      finish(s);
      s.relearns = relearns;
      s.run = next_run++;
      s.next_offset = 0;
      s.rate = rate;
      s.channels = frame.channels;
    }
    const int chunk_samples = std::max(1, static_cast<int>(std::lround(options.chunk_s * rate)));
    const auto width = static_cast<std::size_t>(frame.channels);
    int k = 0;
    while (k < frame.samples) {
      HistoryChunk& c = s.pending;
      if (c.samples == 0) {
        c.wearer = frame.wearer_id;
        c.device = frame.device_id;
        c.run = s.run;
        c.run_offset = s.next_offset;
        c.run_relearns = s.relearns;
        c.t0_us = std::llround(t0 + k * period_us);
        c.sample_rate_hz = rate;
        c.channels = frame.channels;
        c.received_at = arrival_s;
        c.values.clear();
        c.values.reserve(static_cast<std::size_t>(chunk_samples) * width);
      }
      const int take = std::min(frame.samples - k, chunk_samples - c.samples);
      const auto from = frame.values.begin() + static_cast<std::ptrdiff_t>(k * width);
      c.values.insert(c.values.end(), from, from + static_cast<std::ptrdiff_t>(take * width));
      c.samples += take;
      s.next_offset += take;
      k += take;
      if (c.samples >= chunk_samples) finish(s);
    }
    s.next_time_us = t0 + frame.samples * period_us;
    s.last_arrival = arrival_s;
  }

  void finish(OpenStream& s) {
    if (s.pending.samples == 0) return;
    ++chunks_queued;
    queue.push(std::move(s.pending));  // a drop is counted by the queue
    s.pending = HistoryChunk{};
  }

  void flush_idle(double now_s) {
    for (auto& [key, s] : streams)
      if (s.pending.samples > 0 && now_s - s.last_arrival > options.chunk_s) finish(s);
  }

  void flush() {
    for (auto& [key, s] : streams) finish(s);
  }

  void stop() {
    if (stopped.exchange(true)) return;
    flush();
    stopping = true;
    queue.close();
    writer.join();
  }

  // --- writer thread: the only user of `store` after the constructor ---

  void run_writer() {
    const bool retention = options.retention_hours > 0;
    auto next_retention = Clock::now();
    std::vector<HistoryChunk> batch;
    for (;;) {
      if (retention && Clock::now() >= next_retention) {
        apply_retention();
        next_retention = Clock::now() + kRetentionPeriod;
      }
      auto first = queue.pop_for(std::chrono::milliseconds(200));
      if (!first) {
        if (stopping && queue.size() == 0) break;
        continue;
      }
      std::size_t bytes = first->values.size() * sizeof(float);
      batch.push_back(std::move(*first));
      const auto deadline = Clock::now() + std::chrono::milliseconds(options.commit_interval_ms);
      while (batch.size() < options.max_batch_chunks && bytes < kMaxBatchBytes) {
        const auto left = std::max(Clock::duration::zero(), deadline - Clock::now());
        auto more = queue.pop_for(left);
        if (!more) break;
        bytes += more->values.size() * sizeof(float);
        batch.push_back(std::move(*more));
      }
      commit(batch);
      batch.clear();
    }
  }

  void commit(std::vector<HistoryChunk>& batch) {
    std::chrono::milliseconds backoff = kFirstBackoff;
    for (int attempt = 1;; ++attempt) {
      try {
        stored_bytes += store.append(batch, options.zlib_level);
        ++transactions;
        for (const auto& c : batch) {
          ++chunks_written;
          samples_written += static_cast<std::uint64_t>(c.samples);
          raw_bytes += c.values.size() * sizeof(float);
        }
        return;
      } catch (const std::exception& e) {
        ++store_errors;
        log_error(std::string("commit of ") + std::to_string(batch.size()) +
                  " chunks failed (attempt " + std::to_string(attempt) + "): " + e.what());
        if (stopping && attempt >= kAttemptsWhenStopping) {
          chunks_failed += batch.size();
          log_error("giving up on " + std::to_string(batch.size()) + " chunks while stopping");
          return;
        }
        std::this_thread::sleep_for(backoff);
        backoff = std::min<std::chrono::milliseconds>(backoff * 2, kMaxBackoff);
      }
    }
  }

  void apply_retention() {
    try {
      const double cutoff = options.clock() - options.retention_hours * 3600.0;
      retention_deleted += static_cast<std::uint64_t>(store.delete_received_before(cutoff));
    } catch (const std::exception& e) {
      ++store_errors;
      log_error(std::string("retention failed: ") + e.what());
    }
  }

  HistoryOptions options;
  HistoryStore store;
  BoundedQueue<HistoryChunk> queue;
  std::map<std::uint64_t, OpenStream> streams;  // key: wearer << 16 | device
  std::int64_t next_run = 1;
  std::atomic<bool> stopping{false};
  std::atomic<bool> stopped{false};
  std::atomic<std::uint64_t> chunks_queued{0}, chunks_written{0}, samples_written{0},
      chunks_failed{0}, store_errors{0}, transactions{0}, retention_deleted{0}, raw_bytes{0},
      stored_bytes{0};
  std::thread writer;
};

HistoryRecorder::HistoryRecorder(HistoryOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

HistoryRecorder::~HistoryRecorder() { stop(); }

void HistoryRecorder::append(const sensors::Frame& frame, FrameVerdict verdict, double arrival_s) {
  impl_->append(frame, verdict, arrival_s);
}
void HistoryRecorder::flush_idle(double now_s) { impl_->flush_idle(now_s); }
void HistoryRecorder::flush() { impl_->flush(); }
void HistoryRecorder::stop() { impl_->stop(); }
const std::string& HistoryRecorder::path() const { return impl_->options.path; }

HistoryCounters HistoryRecorder::counters() const {
  HistoryCounters c;
  c.chunks_queued = impl_->chunks_queued;
  c.chunks_written = impl_->chunks_written;
  c.samples_written = impl_->samples_written;
  c.chunks_dropped = impl_->queue.dropped();
  c.chunks_failed = impl_->chunks_failed;
  c.store_errors = impl_->store_errors;
  c.transactions = impl_->transactions;
  c.retention_deleted = impl_->retention_deleted;
  c.raw_bytes = impl_->raw_bytes;
  c.stored_bytes = impl_->stored_bytes;
  c.queue_depth = impl_->queue.size();
  return c;
}

nlohmann::json HistoryRecorder::stats_json() const {
  const HistoryCounters c = counters();
  return {{"chunks_queued", c.chunks_queued},
          {"chunks_written", c.chunks_written},
          {"samples_written", c.samples_written},
          {"chunks_dropped", c.chunks_dropped},
          {"chunks_failed", c.chunks_failed},
          {"store_errors", c.store_errors},
          {"transactions", c.transactions},
          {"retention_deleted", c.retention_deleted},
          {"raw_bytes", c.raw_bytes},
          {"stored_bytes", c.stored_bytes},
          {"queue_depth", c.queue_depth}};
}

}  // namespace gw::pipeline
