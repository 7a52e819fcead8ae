// The alert subscriber of a run: receives the daemon's alerts on ZeroMQ and times them.
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

namespace gw::bench::e2e {

// ---------------------------------------------------------------- subscriber

struct SeenAlert {
  double detected_at = 0;
  double daemon_ms = 0;      // ingest -> alert ready (the daemon's latency_ms)
  double subscriber_ms = 0;  // ingest -> received here (commit and publish included)
  double sample_ms = 0;      // device time of the completing sample -> received here
};

class Subscriber {
 public:
  explicit Subscriber(int port) : socket_(context_, zmq::socket_type::sub) {
    socket_.set(zmq::sockopt::subscribe, "alert.");
    socket_.set(zmq::sockopt::subscribe, "stats.");
    socket_.set(zmq::sockopt::rcvtimeo, 100);
    socket_.set(zmq::sockopt::rcvhwm, 0);
    socket_.connect("tcp://127.0.0.1:" + std::to_string(port));
    thread_ = std::thread([this] { loop(); });
  }
  ~Subscriber() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::vector<SeenAlert> alerts() {
    std::lock_guard<std::mutex> lock(mu_);
    return alerts_;
  }
  std::uint64_t bad_messages() const { return bad_; }
  // The last "stats." message (the daemon's counters; "reason": "shutdown"
  // once it has drained); null before the first.
  nlohmann::json last_stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  // Messages are timestamped as they come off the socket and parsed after
  // the burst they came in has been taken: a batch's ~1,700 alerts arrive
  // at once, and parsing each (~5-10 µs) before taking the next added this
  // load generator's own parsing, up to ~10 ms, to the last alerts' latency.
  struct Received {
    double at;
    zmq::message_t topic, body;
  };
  // Takes one topic + body message; false when none came (or a malformed
  // one, counted). `wait`: block up to the socket's receive timeout.
  bool take(std::vector<Received>& into, bool wait) {
    const auto flags = wait ? zmq::recv_flags::none : zmq::recv_flags::dontwait;
    zmq::message_t topic, body;
    if (!socket_.recv(topic, flags)) return false;
    if (!socket_.get(zmq::sockopt::rcvmore) || !socket_.recv(body, zmq::recv_flags::none)) {
      ++bad_;
      return false;
    }
    into.push_back({unix_now(), std::move(topic), std::move(body)});
    return true;
  }
  void loop() {
    constexpr std::size_t kMostAtOnce = 8192;
    std::vector<Received> burst;
    while (!stop_) {
      burst.clear();
      if (!take(burst, /*wait=*/true)) continue;
      while (burst.size() < kMostAtOnce && take(burst, /*wait=*/false)) {
      }
      for (const Received& r : burst) handle(r);
    }
  }
  void handle(const Received& r) {
    if (r.topic.to_string_view().substr(0, 6) == "stats.") {
      try {
        auto stats = nlohmann::json::parse(r.body.to_string_view());
        std::lock_guard<std::mutex> lock(mu_);
        stats_ = std::move(stats);
      } catch (const std::exception&) {
        ++bad_;
      }
      return;
    }
    try {
      const auto alert = nlohmann::json::parse(r.body.to_string_view());
      SeenAlert seen;
      seen.detected_at = alert.at("detected_at").get<double>();
      seen.daemon_ms = alert.at("latency_ms").get<double>();
      seen.subscriber_ms = (r.at - seen.detected_at) * 1000.0 + seen.daemon_ms;
      seen.sample_ms = (r.at - alert.at("t_end").get<double>()) * 1000.0;
      std::lock_guard<std::mutex> lock(mu_);
      alerts_.push_back(seen);
    } catch (const std::exception&) {
      ++bad_;
    }
  }
  zmq::context_t context_{1};
  zmq::socket_t socket_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> bad_{0};
  std::mutex mu_;
  std::vector<SeenAlert> alerts_;
  nlohmann::json stats_;
};

}  // namespace gw::bench::e2e
