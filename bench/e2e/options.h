// The e2e benchmark's options, constants and small host helpers.
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

namespace gw::bench::e2e {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using json = nlohmann::ordered_json;
using gw::bench::kSampleRateHz;
using gw::bench::kW1Dims;
using gw::bench::kW1Length;
using gw::bench::kW1Patterns;
using gw::sensors::kW1Channels;
using gw::sensors::kW1InsoleChannels;

// Every wearer sends one frame of 10 samples each 100 ms (W1); the daemon's
// batcher tick (--tick-ms) is a separate setting.
constexpr int kFramePeriodMs = 100;
constexpr int kFrameSamples = kSampleRateHz * kFramePeriodMs / 1000;
constexpr int kDeviceId = 1;
constexpr double kDeadlineMs = 250;
// A sender wakes up to half this long after a frame's due time and, over
// TCP, holds a frame at most this long, so that frames due together leave
// in one write.
constexpr double kCoalesceMs = 1.0;
static_assert(kW1Dims == kW1Channels);

struct Options {
  std::string daemon;
  gw::config::BackendKind backend = gw::config::BackendKind::kCpu;
  int threads = 0;
  std::string wearers;  // explicit list; empty: search
  int start = 0;        // 0: 1 for the CPU backend, 1000 otherwise
  int max_wearers = 100000;
  double duration_s = 600;
  double sweep_duration_s = 30;
  double warmup_s = 10;
  double resolution = 0.05;
  bool quick = false;
  bool micro = false;
  bool no_confirm = false;
  std::string transport = "tcp";
  std::string format = "int16";
  int sender_threads = 0;
  int ingest_threads = 0;  // ingest.threads; 0: by wearer count
  std::string patterns = "random-walk";
  int tick_ms = 100;     // search.tick_ms
  std::vector<int> devices;  // search.devices; empty: the daemon's default (every visible GPU)
  bool warm_up = false;      // search.warm_up_streams = the run's wearers
  int commit_ms = 50;    // storage.commit_interval_ms
  // dedup.node_capacity and slots.node_capacity; 0: the daemon's defaults.
  // A pool that fills doubles, on the pipeline thread (docs/hashtable.md).
  std::uint64_t node_capacity = 0;
  double threshold = 0;  // 0: the default of the pattern source
  int min_dims = 0;      // 0: the default of the pattern source
  std::string data;
  // Top-level YAML sections appended to the daemon's config as they are
  // (sections the bench does not write itself, e.g. "marks: {alert_windows: false}").
  std::vector<std::string> config_sections;
  std::string workdir;
  bool keep = false;
  std::uint64_t seed = 1;
  double pool_s = 30;
  // micro benchmarks
  double micro_seconds = 3;
  int micro_hits = 200000;
  // Alerts per transaction in the writer measurements; 0: the sink's own
  // batching of single submits, and max_batch per HitStore transaction.
  int micro_batch = 0;
  int micro_dims = 3;  // dims per alert
  // With --micro-batch: after each group, one episode_ended event for every
  // second alert of the group before it (already committed), as the daemon
  // hands the writer about one such event per two alerts in an alert storm.
  bool micro_episodes = false;
  // overload mode
  bool overload = false;
  double overload_factor = 3;
  std::string overload_of = "normal";  // normal | sustainable (estimated in the warm-up)
  int overload_max = 64;               // --overload-of sustainable: largest overload count
  double overload_s = 60;
  double recover_s = 60;
  double recovered_s = 20;
  gw::config::OverloadPolicy policy = gw::config::OverloadPolicy::kDefer;
  // --via-jetstream NATS_SERVER: frames through a gateway and JetStream, the
  // daemon a worker (bench/e2e/jetstream_path.h); empty: straight to it.
  std::string nats_server;
  int frames_per_message = 64;  // the gateway's nats.frames_per_message
};

inline void progress(const std::string& text) { std::cerr << "e2e_bench: " << text << std::endl; }

inline std::string self_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

inline double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The host's load average (1, 5, 15 min); other work on the host shows here.
inline json loadavg() {
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) != 3) return nullptr;
  return {load[0], load[1], load[2]};
}

inline double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

}  // namespace gw::bench::e2e
