// The daemon of one run: the real gaitwatchd on a W1 config in its own directory.
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
#include "bench/e2e/senders.h"
#include "bench/e2e/jetstream_path.h"

namespace gw::bench::e2e {

// ---------------------------------------------------------------- one daemon

// The daemon of one run, on a W1 config in its own directory (sized for
// max_wearers), with a subscriber connected; stop() drains and stops it.
struct DaemonRun {
  fs::path dir;
  Ports ports;
  std::unique_ptr<gw::Process> daemon;
  std::unique_ptr<Subscriber> subscriber;
  std::string error;  // set when the daemon did not start
  std::optional<int> exit_code;
  // --via-jetstream: the gateway and server in front of the daemon.
  std::unique_ptr<JetStreamPath> jetstream;

  DaemonRun(const Options& options, int max_wearers, const gw::bench::W1PatternSet& patterns,
            const fs::path& workdir, const fs::path& run_dir)
      : dir(run_dir) {
    fs::create_directories(dir);
    ports.udp = gw::free_port(true);
    ports.tcp = gw::free_port(false);
    ports.publish = gw::free_port(false);
    ports.control = gw::free_port(false);
    ports.metrics = gw::free_port(false);
    const fs::path config = dir / "w1.yaml";
    std::string yaml = w1_config(options, max_wearers, patterns, workdir / "patterns", dir, ports);
    if (!options.nats_server.empty()) {
      jetstream = std::make_unique<JetStreamPath>(options, max_wearers, patterns, workdir, dir);
      if (!jetstream->error.empty()) {
        error = jetstream->error;
        return;
      }
      // The daemon as the worker of every partition.
      const std::string ring = "  ring_capacity_samples: 256\n";
      yaml.replace(yaml.find(ring), ring.size(), ring + "  nats: true\n");
      yaml += nats_section(jetstream->nats_port, options.frames_per_message);
    }
    {
      std::ofstream out(config);
      out << yaml;
    }
    daemon = std::make_unique<gw::Process>(
        std::vector<std::string>{options.daemon, "--config", config.string()}, dir / "daemon.out",
        dir / "daemon.err");
    const auto ready_by = Clock::now() + std::chrono::seconds(180);
    bool ready = false;
    while (Clock::now() < ready_by && daemon->running()) {
      try {
        scrape(ports.metrics);
        ready = true;
        break;
      } catch (const std::exception&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    if (!ready) {
      error = "daemon did not start: " + daemon->err().substr(0, 2000);
      return;
    }
    // No check of which backend runs: search.backend "cuda" makes the daemon
    // refuse to start without a usable GPU, and a later fall-back to the CPU
    // counts backend_failovers, one of kDropCounters.
    subscriber = std::make_unique<Subscriber>(ports.publish);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the SUB connects
  }
  int port(const Options& options) const {
    if (jetstream) return jetstream->port(options);
    return options.transport == "tcp" ? ports.tcp : ports.udp;
  }

  // Scrapes once a second (and at `until`) until then or the daemon's end,
  // handing each scrape to `each`.
  void watch(Clock::time_point until, const std::function<void(const Scrape&)>& each) {
    while (Clock::now() < until) {
      std::this_thread::sleep_for(
          std::min<Clock::duration>(std::chrono::seconds(1), until - Clock::now()));
      try {
        each(scrape(ports.metrics));
      } catch (const std::exception& e) {
        progress(std::string("  metrics scrape failed: ") + e.what());
      }
      if (!daemon->running()) break;
    }
  }

  // After the senders: waits until every frame sent was accepted or dropped
  // (up to drain_s) and the last commit, then returns the last scrape.
  Scrape drain(std::uint64_t frames_sent, double drain_s = 20) {
    Scrape last;
    const auto drain_by =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(drain_s));
    do {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      try {
        last = scrape(ports.metrics);
      } catch (const std::exception&) {
      }
    } while (Clock::now() < drain_by && daemon->running() &&
             last.counter("/engine/frames_accepted") +
                     last.counter("/ingest/queue_dropped") <
                 static_cast<double>(frames_sent));
    std::this_thread::sleep_for(std::chrono::milliseconds(2 * kFramePeriodMs + 500));  // the last commit
    try {
      last = scrape(ports.metrics);
    } catch (const std::exception&) {
    }
    return last;
  }

  // SIGTERM (the daemon drains its queue, commits and publishes the rest);
  // the subscriber listens until it has exited. Returns the hits stored.
  std::uint64_t stop(json& line) {
    daemon->signal(SIGTERM);
    exit_code = daemon->wait(std::chrono::seconds(60));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    subscriber->stop();
    try {
      gw::pipeline::HitStore store((dir / "hits.db").string(), true);
      return store.count();
    } catch (const std::exception& e) {
      line["store_error"] = e.what();
    }
    return 0;
  }
};

inline json sender_json(const Options& options, const Senders& senders, const Senders::Totals& t,
                 double frames_per_s_target) {
  return {{"threads", senders.count()},
          {"transport", options.transport},
          {"format", options.format},
          {"frames_sent", t.frames},
          {"frames_per_s_target", frames_per_s_target},
          {"frames_per_s_sent", t.frames / std::max(1e-9, t.wall_s)},
          {"mb_per_s_sent", t.bytes / std::max(1e-9, t.wall_s) / 1e6},
          {"max_lag_ms", t.max_lag_ms},
          {"late_frames", t.late_frames},
          {"max_thread_cpu_fraction", t.cpu_fraction},
          {"error", t.error}};
}

}  // namespace gw::bench::e2e
