// What a run sends (pre-generated W1 wearer streams) and the daemon configuration of a run.
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

namespace gw::bench::e2e {

// ---------------------------------------------------------------- workload

// Per-wearer sample streams, generated once before a run so that the sender
// threads only encode and send: `distinct` synthetic W1 wearers of `length`
// samples each (sample-major); wearer w plays stream w % distinct from an
// offset of 37 * (w / distinct) samples, looping. A frame's samples depend
// only on (stream, first sample), so each such frame is encoded once, when
// first sent, and later sends copy it and restamp its header (wearer,
// sequence, time; sensors::restamp_frame): encoding every frame would take
// the load generator cores it shares with the daemon (docs/benchmarks.md).
struct WearerPool {
  int distinct = 0;
  int length = 0;
  std::vector<std::vector<float>> streams;
  const float* sample(int wearer, std::int64_t index) const {
    const auto& s = streams[static_cast<std::size_t>(wearer % distinct)];
    const std::int64_t at = (index + 37LL * (wearer / distinct)) % length;
    return s.data() + static_cast<std::size_t>(at) * kW1Channels;
  }
  // The encoded frame `sequence` of `wearer` as encode_frame writes it for
  // wearer id 0, sequence 0, device time 0 (thread-safe; built once).
  const std::vector<std::uint8_t>& encoded(int wearer, std::uint32_t sequence, bool int16) const;

  struct Encoded {
    std::once_flag once;
    std::vector<std::uint8_t> bytes;
  };
  // [stream * length + first sample], per format (0: float32, 1: int16).
  std::unique_ptr<Encoded[]> cache[2];
};

inline WearerPool make_pool(const gw::sensors::Recording& base, int wearers, const Options& options) {
  WearerPool pool;
  pool.distinct = std::min(wearers, 32);
  pool.length = static_cast<int>(options.pool_s * kSampleRateHz);
  gw::sensors::SyntheticW1Source source(base, pool.distinct, options.seed);
  for (auto& cache : pool.cache)
    cache = std::make_unique<WearerPool::Encoded[]>(static_cast<std::size_t>(pool.distinct) *
                                                    static_cast<std::size_t>(pool.length));
  pool.streams.resize(pool.distinct);
  for (int w = 0; w < pool.distinct; ++w) source.next(w, pool.length, pool.streams[w]);
  return pool;
}

inline gw::sensors::Frame frame_of(const WearerPool& pool, int wearer, std::uint32_t sequence,
                            std::uint64_t device_time_us, bool int16);

inline const std::vector<std::uint8_t>& WearerPool::encoded(int wearer, std::uint32_t sequence,
                                                     bool int16) const {
  const int stream = wearer % distinct;
  const std::int64_t first =
      (static_cast<std::int64_t>(sequence) * kFrameSamples + 37LL * (wearer / distinct)) % length;
  Encoded& entry = cache[int16 ? 1 : 0][static_cast<std::size_t>(stream) * length +
                                        static_cast<std::size_t>(first)];
  std::call_once(entry.once, [&] {
    // The frame of (wearer, sequence) has these samples; its header zeroed,
    // it serves every wearer and sequence that sends them.
    gw::sensors::Frame frame = frame_of(*this, wearer, sequence, 0, int16);
    frame.wearer_id = 0;
    frame.sequence = 0;
    entry.bytes = gw::sensors::encode_frame(frame);
  });
  return entry.bytes;
}

struct Ports {
  int udp = 0, tcp = 0, publish = 0, control = 0, metrics = 0;
};

// Load generator threads for N wearers, each with its own connection; the
// daemon gets as many ingest threads (ingest.threads) unless told.
inline int default_sender_threads(int wearers) {
  // One thread keeps up with a few thousand frames/s (it mostly encodes:
  // int16 conversion and CRC of ~5 KB); more threads only for large N.
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::clamp(wearers / 1500 + 1, 1, std::max(1, hw / 4));
}

// The W1 daemon configuration of one run.
inline std::string w1_config(const Options& options, int wearers, const gw::bench::W1PatternSet& set,
                      const fs::path& templates, const fs::path& run_dir, const Ports& ports) {
  const gw::config::BackendKind hashtable = options.backend == gw::config::BackendKind::kCpu
                                                ? gw::config::BackendKind::kCpu
                                                : gw::config::BackendKind::kAuto;
  // A few ticks of every wearer's frames fit the queue; a ring holds the
  // pattern (128) and 12 ticks of frames (deferred ticks), the transforms'
  // nothing. Not more: a ring's first pass page-faults its memory in, which
  // at thousands of wearers costs the pipeline thread (docs/benchmarks.md).
  const int queue = std::max(8192, 8 * wearers);
  std::string yaml = fmt::format(
      R"(daemon:
  log_level: warn
ingest:
  udp: {{bind: 127.0.0.1, port: {udp}}}
  tcp: {{bind: 127.0.0.1, port: {tcp}}}
  threads: {ingest_threads}
  queue_capacity: {queue}
  queue_overflow: drop_newest
  ring_capacity_samples: 256
search:
  backend: {backend}
  threads: {threads}
  tick_ms: {tick}
  deadline_ms: {deadline}
  overload_policy: {policy}
)",
      fmt::arg("udp", ports.udp), fmt::arg("tcp", ports.tcp), fmt::arg("queue", queue),
      fmt::arg("ingest_threads", options.ingest_threads > 0 ? options.ingest_threads
                                 : options.sender_threads > 0
                                     ? options.sender_threads
                                     : default_sender_threads(wearers)),
      fmt::arg("backend", gw::config::name(options.backend)), fmt::arg("threads", options.threads),
      fmt::arg("tick", options.tick_ms), fmt::arg("policy", gw::config::name(options.policy)),
      fmt::arg("deadline", static_cast<int>(kDeadlineMs)));
  if (!options.devices.empty()) {
    yaml += "  devices: [";
    for (std::size_t i = 0; i < options.devices.size(); ++i)
      yaml += (i == 0 ? "" : ", ") + std::to_string(options.devices[i]);
    yaml += "]\n";
  }
  if (options.warm_up) yaml += fmt::format("  warm_up_streams: {}\n", wearers);
  yaml += gw::bench::w1_devices_yaml(kDeviceId);
  yaml += gw::bench::w1_patterns_yaml(set.values.size(), templates,
                                      options.threshold > 0 ? options.threshold : set.threshold,
                                      options.min_dims > 0 ? options.min_dims : set.min_dims);
  if (options.node_capacity > 0)
    yaml += fmt::format("dedup:\n  node_capacity: {0}\nslots:\n  node_capacity: {0}\n",
                        options.node_capacity);
  yaml += fmt::format(R"(storage:
  path: {db}
  commit_interval_ms: {commit}
metrics:
  bind: 127.0.0.1
  port: {metrics}
publish:
  endpoint: tcp://127.0.0.1:{publish}
  stats_interval_s: 5
control:
  endpoint: tcp://127.0.0.1:{control}
hashtable:
  backend: {hashtable}
zones:
  - name: loopback
    sources: [127.0.0.1]
)",
                      fmt::arg("db", (run_dir / "hits.db").string()), fmt::arg("commit", options.commit_ms),
                      fmt::arg("metrics", ports.metrics), fmt::arg("publish", ports.publish),
                      fmt::arg("control", ports.control),
                      fmt::arg("hashtable", gw::config::name(hashtable)));
  for (const std::string& section : options.config_sections) yaml += section + "\n";
  return yaml;
}

}  // namespace gw::bench::e2e
