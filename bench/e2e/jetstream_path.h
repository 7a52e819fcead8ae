// Frames through JetStream (--via-jetstream): the run's frames go to a
// `gaitwatchd --gateway` on its own ports, which publishes them to a
// nats-server with JetStream in the run's directory; the run's daemon is a
// worker (ingest.nats) that consumes every partition. What the path adds is
// read beside the daemon's own figures: the gateway's final counters, and
// from the server's monitoring endpoint the frame stream's largest size and
// the server's largest resident memory while the run sends.
// A part of bench/e2e_bench.cc (which alone includes it), split out by topic.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/e2e/options.h"
#include "bench/e2e/scrape.h"
#include "bench/e2e/workload.h"
#include "common/child_process.h"

namespace gw::bench::e2e {

// The `nats:` section both sides share, and the worker's line in `ingest:`.
inline std::string nats_section(int nats_port, int frames_per_message) {
  return fmt::format(
      "nats:\n  url: nats://127.0.0.1:{}\n  partitions: 64\n  worker_id: bench-worker\n  lease_ttl_s: 5\n"
      "  retain_s: 15\n  frames_max_age_s: 120\n  max_pending: 1000000\n  frames_per_message: {}\n",
      nats_port, frames_per_message);
}

struct JetStreamPath {
  fs::path dir;
  int nats_port = gw::free_port(false);
  int monitor_port = gw::free_port(false);
  Ports gateway_ports;
  std::unique_ptr<gw::Process> server;
  std::unique_ptr<gw::Process> gateway;
  std::string error;
  double stream_bytes_max = 0, stream_messages_max = 0, server_rss_max = 0;

  // Starts the server and the gateway (same W1 config as the daemon, its
  // own ports, the `nats:` section). On failure `error` says why.
  JetStreamPath(const Options& options, int max_wearers, const gw::bench::W1PatternSet& patterns,
                const fs::path& workdir, const fs::path& run_dir)
      : dir(run_dir / "jetstream") {
    fs::create_directories(dir / "store");
    server = std::make_unique<gw::Process>(
        std::vector<std::string>{options.nats_server, "-a", "127.0.0.1", "-p", std::to_string(nats_port), "-m",
                                 std::to_string(monitor_port), "-js", "-sd", (dir / "store").string()},
        dir / "nats.out", dir / "nats.err");
    if (!wait_until([&] { return server_json("/varz").is_object(); })) {
      error = "nats-server did not start: " + server->err().substr(0, 1000);
      return;
    }
    gateway_ports.udp = gw::free_port(true);
    gateway_ports.tcp = gw::free_port(false);
    gateway_ports.publish = gw::free_port(false);
    gateway_ports.control = gw::free_port(false);
    gateway_ports.metrics = gw::free_port(false);
    const fs::path config = dir / "gateway.yaml";
    {
      // At info level: the gateway says when it is ready.
      std::string yaml = w1_config(options, max_wearers, patterns, workdir / "patterns", dir, gateway_ports);
      const std::string quiet = "log_level: warn";
      yaml.replace(yaml.find(quiet), quiet.size(), "log_level: info");
      std::ofstream out(config);
      out << yaml << nats_section(nats_port, options.frames_per_message);
    }
    gateway = std::make_unique<gw::Process>(
        std::vector<std::string>{options.daemon, "--gateway", "--config", config.string()}, dir / "gateway.out",
        dir / "gateway.err");
    if (!wait_until([&] { return gateway->err().find("gateway ready") != std::string::npos; })) {
      error = "gateway did not start: " + gateway->err().substr(0, 1000);
      return;
    }
  }

  int port(const Options& options) const {
    return options.transport == "tcp" ? gateway_ports.tcp : gateway_ports.udp;
  }

  // The server's monitoring JSON at `target` ("/varz", "/jsz"); null when
  // it does not answer.
  json server_json(const std::string& target) const {
    try {
      return json::parse(http_get(monitor_port, target));
    } catch (const std::exception&) {
      return nullptr;
    }
  }

  // Samples the stream's size and the server's memory (the largest are kept).
  void sample() {
    const json jsz = server_json("/jsz");
    if (jsz.is_object()) {
      stream_bytes_max = std::max(stream_bytes_max, jsz.value("bytes", 0.0));
      stream_messages_max = std::max(stream_messages_max, jsz.value("messages", 0.0));
    }
    const json varz = server_json("/varz");
    if (varz.is_object()) server_rss_max = std::max(server_rss_max, varz.value("mem", 0.0));
  }

  // Stops the gateway (SIGTERM: it publishes what it holds, waits for the
  // acknowledgements, prints its counters) and the server; what the path
  // cost, per 1,000 wearers too.
  json stop(int wearers) {
    json out;
    if (gateway) {
      gateway->signal(SIGTERM);
      const auto code = gateway->wait(std::chrono::seconds(30));
      out["gateway_exit_code"] = code ? *code : -1;
      std::istringstream lines(gateway->out());
      for (std::string line; std::getline(lines, line);) {
        const json j = json::parse(line, nullptr, false);
        if (j.is_object() && j.contains("gateway")) out["gateway"] = j["gateway"];
      }
    }
    std::uintmax_t store_bytes = 0;
    std::error_code ec;
    for (const auto& entry : fs::recursive_directory_iterator(dir / "store", ec))
      if (entry.is_regular_file(ec)) store_bytes += entry.file_size(ec);
    const double per_1000 = 1000.0 / std::max(1, wearers);
    out["stream_bytes_max"] = stream_bytes_max;
    out["stream_messages_max"] = stream_messages_max;
    out["server_rss_bytes_max"] = server_rss_max;
    out["store_disk_bytes_at_end"] = static_cast<double>(store_bytes);
    out["per_1000_wearers"] = {{"stream_mb_max", stream_bytes_max * per_1000 / 1e6},
                               {"server_rss_mb_max", server_rss_max * per_1000 / 1e6}};
    if (server) server->signal(SIGTERM);
    return out;
  }

 private:
  template <typename Predicate>
  static bool wait_until(Predicate ready) {
    const auto until = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < until) {
      if (ready()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
};

}  // namespace gw::bench::e2e
