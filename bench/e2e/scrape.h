// Reading the daemon's Prometheus endpoint: scrapes, histogram quantiles between two scrapes.
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

namespace gw::bench::e2e {

// ---------------------------------------------------------------- metrics

inline std::string http_get(int port, const std::string& target) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  http::request<http::empty_body> request{http::verb::get, target, 11};
  request.set(http::field::host, "127.0.0.1");
  http::write(socket, request);
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  http::read(socket, buffer, response);
  if (response.result() != http::status::ok)
    throw gw::Error("GET " + target + ": HTTP " + std::to_string(response.result_int()));
  return response.body();
}

// One scrape of the Prometheus text: "name{labels}" -> value.
struct Scrape {
  double time = 0;  // unix s
  std::map<std::string, double> values;
  double get(const std::string& name) const {
    const auto it = values.find(name);
    return it == values.end() ? 0.0 : it->second;
  }
  // The sample of the daemon's counters-JSON leaf `json_path`
  // ("/engine/last_batch_ms"), in the JSON's unit: the bench names what it
  // reads as the "stats." message does, the daemon's family table
  // (daemon/metrics_families.h) says where /metrics has it.
  double counter(const std::string& json_path) const {
    const auto mapped = gw::daemon::sample_for_counter(json_path);
    if (!mapped) throw gw::Error("no /metrics sample for counter " + json_path);
    return get(mapped->sample) / mapped->scale;
  }
};

// The samples of a Prometheus text page.
inline Scrape parse_scrape(const std::string& text) {
  Scrape s;
  s.time = unix_now();
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.rfind(' ');
    if (space == std::string::npos) continue;
    try {
      s.values[line.substr(0, space)] = std::stod(line.substr(space + 1));
    } catch (const std::exception&) {
    }
  }
  return s;
}

inline Scrape scrape(int port) { return parse_scrape(http_get(port, "/metrics")); }

// Quantiles of a Prometheus histogram between two scrapes (cumulative
// buckets, seconds), in ms; interpolated inside the bucket as the daemon's
// LatencyHistogram does, so exact to the bucket's width.
struct HistogramWindow {
  std::uint64_t count = 0;
  double p50_ms = 0, p99_ms = 0;
  double mean_ms = 0;
};

inline HistogramWindow histogram_window(const Scrape& a, const Scrape& b, const std::string& name) {
  std::vector<std::pair<double, double>> buckets;  // (le ms, count in window, cumulative)
  const std::string prefix = name + "_bucket{le=\"";
  for (const auto& [key, value] : b.values) {
    if (key.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string le = key.substr(prefix.size(), key.size() - prefix.size() - 2);
    const double bound = le == "+Inf" ? INFINITY : std::stod(le) * 1000.0;
    buckets.push_back({bound, value - a.get(key)});
  }
  std::sort(buckets.begin(), buckets.end());
  HistogramWindow h;
  h.count = static_cast<std::uint64_t>(b.get(name + "_count") - a.get(name + "_count"));
  if (h.count == 0) return h;
  h.mean_ms = (b.get(name + "_sum") - a.get(name + "_sum")) * 1000.0 / h.count;
  const auto quantile = [&](double q) {
    const double rank = q * h.count;
    double below = 0, lower = 0;
    for (const auto& [bound, cumulative] : buckets) {
      if (cumulative >= rank && cumulative > below) {
        if (std::isinf(bound)) return lower;  // beyond the last bound: its lower edge
        return lower + (bound - lower) * (rank - below) / (cumulative - below);
      }
      below = cumulative;
      lower = bound;
    }
    return lower;
  };
  h.p50_ms = quantile(0.5);
  h.p99_ms = quantile(0.99);
  return h;
}

// Exact quantile of observed values (nearest rank).
inline double quantile_of(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * v.size()));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace gw::bench::e2e
