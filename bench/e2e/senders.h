// The load generator: sender threads that play W1 wearers' frames at real time over TCP or UDP.
// A part of bench/e2e_bench.cc (which alone includes it), split out by topic.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>
#include "bench/w1_workload.h"
#include "common/error.h"
#include "config/config.h"
#include "daemon/ingest.h"
#include "daemon/metrics_families.h"
#include "sinks/alert.h"
#include "sinks/sink.h"
#include "sinks/store.h"
#include "sensors/frame.h"
#include "sensors/recording.h"
#include "sensors/synthetic.h"
#include "common/child_process.h"
#include "bench/e2e/options.h"
#include "bench/e2e/workload.h"
#include "bench/e2e/scrape.h"
#include "bench/e2e/subscriber.h"

namespace gw::bench::e2e {

// ---------------------------------------------------------------- sender

struct SenderStats {
  std::uint64_t frames = 0;
  std::uint64_t bytes = 0;
  std::uint64_t late_frames = 0;  // sent more than one tick after their due time
  double max_lag_ms = 0;          // latest send after its due time
  double cpu_s = 0;
  double wall_s = 0;
  std::string error;
};

inline gw::sensors::Frame frame_of(const WearerPool& pool, int wearer, std::uint32_t sequence,
                            std::uint64_t device_time_us, bool int16) {
  gw::sensors::Frame frame;
  frame.kind = gw::sensors::DeviceKind::kGeneric;
  frame.format =
      int16 ? gw::sensors::SampleFormat::kInt16Scaled : gw::sensors::SampleFormat::kFloat32;
  frame.wearer_id = static_cast<std::uint32_t>(wearer + 1);
  frame.device_id = kDeviceId;
  frame.channels = kW1Channels;
  frame.samples = kFrameSamples;
  frame.sample_rate_hz = kSampleRateHz;
  frame.sequence = sequence;
  frame.device_time_us = device_time_us;
  frame.values.resize(static_cast<std::size_t>(kFrameSamples) * kW1Channels);
  for (int s = 0; s < kFrameSamples; ++s) {
    const float* from =
        pool.sample(wearer, static_cast<std::int64_t>(sequence) * kFrameSamples + s);
    std::copy_n(from, kW1Channels, frame.values.data() + static_cast<std::size_t>(s) * kW1Channels);
  }
  if (int16) frame.scales = gw::sensors::fit_int16_scales(frame.values, kW1Channels);
  return frame;
}

// Which wearers send, shared by the sender threads and the run: wearers
// 0 .. active-1 send each tick (the overload mode changes it between
// phases), and the frames sent so far by all threads.
struct SendControl {
  std::atomic<int> active{0};
  std::atomic<std::uint64_t> frames{0};
};

// Sends the frames of wearers t, t + T, t + 2T, ... (of max_wearers; those
// below control.active in each tick) from `start` to `end`: wearer w's frame
// k is due at start + k ticks + w's phase (phases spread the active wearers
// evenly over a tick, as unsynchronised devices would), and carries the 10
// samples taken up to its due time. Over TCP the frames that came due within
// kCoalesceMs of each other leave in one write (one connection carries
// thousands of wearers here; a write per frame made the sender, and the
// daemon's reads, cost a system call per frame); over UDP each frame is a
// datagram.
inline SenderStats send_frames(const Options& options, const WearerPool& pool, int max_wearers,
                        SendControl& control, int index, int threads, Clock::time_point start,
                        Clock::time_point end, double start_unix, int port) {
  SenderStats stats;
  const double cpu_start = thread_cpu_s();
  const auto wall_start = Clock::now();
  try {
    asio::io_context io;
    asio::ip::tcp::socket tcp(io);
    asio::ip::udp::socket udp(io);
    const auto address = asio::ip::make_address("127.0.0.1");
    if (options.transport == "tcp") {
      tcp.connect({address, static_cast<unsigned short>(port)});
      tcp.set_option(asio::ip::tcp::no_delay(true));
    } else {
      udp.open(asio::ip::udp::v4());
      udp.set_option(asio::socket_base::send_buffer_size(8 << 20));
      udp.connect({address, static_cast<unsigned short>(port)});
    }
    const bool int16 = options.format == "int16";
    const auto tick = std::chrono::milliseconds(kFramePeriodMs);
    const bool tcp_stream = options.transport == "tcp";
    std::vector<std::uint8_t> pending;  // TCP: length-prefixed frames not written yet
    std::vector<std::uint8_t> datagram;  // UDP: the frame being sent
    Clock::time_point pending_since{};  // the due time of its first frame
    constexpr std::size_t kCoalesceBytes = 256 * 1024;
    const auto coalesce = std::chrono::microseconds(static_cast<int>(kCoalesceMs * 1000));
    const auto flush = [&] {
      if (pending.empty()) return;
      asio::write(tcp, asio::buffer(pending));
      pending.clear();
    };
    std::vector<int> mine;
    for (int w = index; w < max_wearers; w += threads) mine.push_back(w);
    for (std::uint32_t k = 0;; ++k) {
      const auto tick_start = start + k * tick;
      if (tick_start >= end) break;
      const int active = std::max(1, control.active.load());
      for (int w : mine) {
        if (w >= active) break;
        const auto phase =
            std::chrono::microseconds(static_cast<std::int64_t>(kFramePeriodMs) * 1000 * w / active);
        const auto due = tick_start + phase;
        if (Clock::now() < due) {
          if (!pending.empty() && due - pending_since > coalesce) flush();
          // Half the coalescing time later than due, so that one wake-up
          // finds several frames due (thousands of wearers on a thread are
          // tens of µs apart; a sleep per frame cost more than encoding it).
          std::this_thread::sleep_until(due + coalesce / 2);
        }
        const double due_unix = start_unix + std::chrono::duration<double>(due - start).count();
        const auto first_sample_us =
            static_cast<std::uint64_t>(std::llround(due_unix * 1e6)) -
            static_cast<std::uint64_t>((kFrameSamples - 1) * 1000000 / kSampleRateHz);
        const std::vector<std::uint8_t>& encoded = pool.encoded(w, k, int16);
        const auto n = static_cast<std::uint32_t>(encoded.size());
        std::vector<std::uint8_t>& out = tcp_stream ? pending : datagram;
        if (tcp_stream) {
          if (pending.empty()) pending_since = due;
          pending.insert(pending.end(),
                         {static_cast<std::uint8_t>(n), static_cast<std::uint8_t>(n >> 8),
                          static_cast<std::uint8_t>(n >> 16), static_cast<std::uint8_t>(n >> 24)});
        } else {
          datagram.clear();
        }
        const std::size_t at = out.size();
        out.insert(out.end(), encoded.begin(), encoded.end());
        gw::sensors::restamp_frame(out.data() + at, n, static_cast<std::uint32_t>(w + 1), k,
                                   first_sample_us);
        if (!tcp_stream)
          udp.send(asio::buffer(datagram));
        else if (pending.size() >= kCoalesceBytes || Clock::now() - pending_since > coalesce)
          flush();
        ++stats.frames;
        control.frames.fetch_add(1);
        stats.bytes += n;
        // Lag at encoding; a TCP frame may wait up to kCoalesceMs more for its write.
        const double lag = std::chrono::duration<double, std::milli>(Clock::now() - due).count();
        stats.max_lag_ms = std::max(stats.max_lag_ms, lag);
        if (lag > kFramePeriodMs) ++stats.late_frames;
      }
    }
    flush();
  } catch (const std::exception& e) {
    stats.error = e.what();
  }
  stats.cpu_s = thread_cpu_s() - cpu_start;
  stats.wall_s = std::chrono::duration<double>(Clock::now() - wall_start).count();
  return stats;
}


// The sender threads of one run, from `start` to `end`, up to max_wearers.
class Senders {
 public:
  Senders(const Options& options, const WearerPool& pool, int max_wearers, SendControl& control,
          Clock::time_point start, Clock::time_point end, double start_unix, int port)
      : threads_(options.sender_threads > 0 ? options.sender_threads
                                            : default_sender_threads(max_wearers)),
        stats_(static_cast<std::size_t>(threads_)) {
    for (int t = 0; t < threads_; ++t)
      threads_list_.emplace_back([this, &options, &pool, &control, t, max_wearers, start, end,
                                  start_unix, port] {
        stats_[static_cast<std::size_t>(t)] = send_frames(options, pool, max_wearers, control, t,
                                                          threads_, start, end, start_unix, port);
      });
  }
  ~Senders() { join(); }
  int count() const { return threads_; }
  void join() {
    for (auto& t : threads_list_)
      if (t.joinable()) t.join();
  }
  // After join(): the threads' stats summed (rates over the longest thread).
  struct Totals {
    std::uint64_t frames = 0, bytes = 0, late_frames = 0;
    double max_lag_ms = 0, cpu_fraction = 0, wall_s = 0;
    std::string error;
  };
  Totals totals() const {
    Totals t;
    for (const auto& s : stats_) {
      t.frames += s.frames;
      t.bytes += s.bytes;
      t.late_frames += s.late_frames;
      t.max_lag_ms = std::max(t.max_lag_ms, s.max_lag_ms);
      t.cpu_fraction = std::max(t.cpu_fraction, s.cpu_s / std::max(1e-9, s.wall_s));
      t.wall_s = std::max(t.wall_s, s.wall_s);
      if (!s.error.empty()) t.error = s.error;
    }
    return t;
  }

 private:
  int threads_;
  std::vector<SenderStats> stats_;
  std::vector<std::thread> threads_list_;
};

}  // namespace gw::bench::e2e
