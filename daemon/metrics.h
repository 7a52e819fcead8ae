// Operational metrics of gaitwatchd, served as Prometheus text exposition
// (version 0.0.4) over HTTP (Boost.Beast) at GET /metrics.
//
// The pipeline thread owns the numbers: after each tick it publishes a
// snapshot (counters as JSON, the latency and batch-time histograms); the
// HTTP handlers on the I/O thread render the latest snapshot, with the build
// info and the process metrics read at that moment. Which families the
// counters become is declared in daemon/metrics_families.h. Thread safety:
// MetricsBoard is safe from any thread; MetricsServer lives on one io_context.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio.hpp>
#include <nlohmann/json.hpp>

#include "daemon/metrics_families.h"

namespace gw::daemon {

// How long a metrics connection may stay idle between requests.
inline constexpr std::chrono::seconds kMetricsIdleTimeout{10};

// A fixed-bucket histogram of milliseconds (Prometheus cumulative buckets);
// quantiles are interpolated inside the bucket that holds them, so they are
// exact to the bucket's width; max is exact.
class LatencyHistogram {
 public:
  LatencyHistogram();
  void observe(double ms);
  double quantile(double q) const;  // 0 when empty
  double max() const { return max_; }
  std::uint64_t count() const { return count_; }
  double sum() const { return sum_; }
  // Appends `name`_bucket/_sum/_count lines (seconds, as Prometheus expects).
  void render(const std::string& name, const std::string& help, std::string& out) const;

 private:
  std::vector<double> bounds_ms_;       // upper bounds, ascending; +inf implicit
  std::vector<std::uint64_t> counts_;   // per bucket (not cumulative), size bounds + 1
  std::uint64_t count_ = 0;
  double sum_ = 0;
  double max_ = 0;
};

struct MetricsSnapshot {
  // The daemon's counters as in its "stats." message: sections engine,
  // ingest, sink, dedup, slots, control, latency.
  nlohmann::json counters;
  LatencyHistogram alert_latency;  // ingest (sample arrival) -> alert ready, per alert
  LatencyHistogram batch_time;     // search batch wall time, per batch
};

// Renders a snapshot as Prometheus text: the counters as the families of
// metric_families() (leaves the table does not know are left out), then the
// histograms gaitwatch_alert_latency_seconds and gaitwatch_batch_seconds.
std::string render_prometheus(const MetricsSnapshot& snapshot);

class MetricsBoard {
 public:
  void publish(MetricsSnapshot snapshot);
  // The labels of gaitwatch_build_info (build_info_labels()); none set: the
  // family is left out.
  void set_build_info(MetricLabels labels);
  // The latest snapshot, gaitwatch_build_info and the process metrics.
  std::string render() const;

 private:
  mutable std::mutex mu_;
  MetricsSnapshot snapshot_;
  MetricLabels build_info_;
};

// Serves GET /metrics (anything else: 404) on bind:port (port 0: an
// ephemeral port, see port()). Throws gw::Error when the port cannot be bound.
// Connections are kept alive for as long as the client sends a request
// within kMetricsIdleTimeout of the last answer.
// Thread safety: the io_context must be run by one thread; stop() from that
// thread or before it runs.
class MetricsServer {
 public:
  MetricsServer(boost::asio::io_context& io, const std::string& bind, std::uint16_t port,
                const MetricsBoard& board);
  ~MetricsServer();
  std::uint16_t port() const;
  // Closes the listening socket and every open connection (a keep-alive
  // scraper's included): no handler of this server is left on the
  // io_context afterwards.
  void stop();

 private:
  struct Session;
  void accept();
  boost::asio::ip::tcp::acceptor acceptor_;
  const MetricsBoard& board_;
  std::vector<std::weak_ptr<Session>> sessions_;  // open connections, for stop()
};

}  // namespace gw::daemon
