#include "daemon/metrics.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include "common/error.h"
#include "daemon/accept_loop.h"
#include "daemon/log.h"
#include "daemon/process_metrics.h"

namespace gw::daemon {

namespace beast = boost::beast;
namespace http = beast::http;
using boost::asio::ip::tcp;

LatencyHistogram::LatencyHistogram()
    : bounds_ms_{1, 2, 5, 10, 25, 50, 75, 100, 150, 200, 250, 300, 400, 500, 750, 1000, 2500,
                 5000, 10000},
      counts_(bounds_ms_.size() + 1, 0) {}

void LatencyHistogram::observe(double ms) {
  if (!(ms >= 0)) ms = 0;
  const auto at = std::lower_bound(bounds_ms_.begin(), bounds_ms_.end(), ms) - bounds_ms_.begin();
  ++counts_[static_cast<std::size_t>(at)];
  ++count_;
  sum_ += ms;
  max_ = std::max(max_, ms);
}

double LatencyHistogram::quantile(double q) const {
  if (count_ == 0) return 0;
  const double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(count_);
  double below = 0;
  for (std::size_t b = 0; b < counts_.size(); ++b) {
    if (counts_[b] == 0) continue;
    const double next = below + static_cast<double>(counts_[b]);
    if (next >= rank) {
      const double lo = b == 0 ? 0 : bounds_ms_[b - 1];
      const double hi = b < bounds_ms_.size() ? std::min(bounds_ms_[b], max_) : max_;
      const double within = (rank - below) / static_cast<double>(counts_[b]);
      return std::min(max_, lo + (std::max(hi, lo) - lo) * within);
    }
    below = next;
  }
  return max_;
}

void LatencyHistogram::render(const std::string& name, const std::string& help,
                              std::string& out) const {
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  std::uint64_t cumulative = 0;
  for (std::size_t b = 0; b < bounds_ms_.size(); ++b) {
    cumulative += counts_[b];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_ms_[b] / 1000.0, cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, count_);
  out += fmt::format("{}_sum {}\n{}_count {}\n", name, sum_ / 1000.0, name, count_);
}

std::string render_prometheus(const MetricsSnapshot& s) {
  std::string out;
  render_counter_families(s.counters, out);
  s.alert_latency.render("gaitwatch_alert_latency_seconds",
                         "Sample arrival to alert ready, per alert.", out);
  s.batch_time.render("gaitwatch_batch_seconds",
                      "Search batch wall time (search backend included), per batch.", out);
  return out;
}

void MetricsBoard::publish(MetricsSnapshot snapshot) {
  std::lock_guard<std::mutex> lock(mu_);
  snapshot_ = std::move(snapshot);
}

void MetricsBoard::set_build_info(MetricLabels labels) {
  std::lock_guard<std::mutex> lock(mu_);
  build_info_ = std::move(labels);
}

std::string MetricsBoard::render() const {
  std::string out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out = render_prometheus(snapshot_);
    if (!build_info_.empty()) render_build_info(build_info_, out);
  }
  render_process_metrics(read_process_stats(), out);
  return out;
}

// One connection: read requests, answer each, until the peer closes.
struct MetricsServer::Session : std::enable_shared_from_this<Session> {
  Session(tcp::socket socket, const MetricsBoard& board) : stream(std::move(socket)), board(board) {}
  void read() {
    request = {};
    stream.expires_after(kMetricsIdleTimeout);
    http::async_read(stream, buffer, request,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       if (!ec) self->respond();
                     });
  }
  void respond() {
    const bool found = request.method() == http::verb::get &&
                       (request.target() == "/metrics" || request.target() == "/");
    response = http::response<http::string_body>(found ? http::status::ok : http::status::not_found,
                                                  request.version());
    response.set(http::field::server, "gaitwatchd");
    response.set(http::field::content_type,
                 found ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain");
    response.body() = found ? board.render() : "not found: GET /metrics\n";
    response.keep_alive(request.keep_alive());
    response.prepare_payload();
    http::async_write(stream, response, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return;
      if (self->response.keep_alive()) {
        self->read();
      } else {
        beast::error_code ignored;
        self->stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
      }
    });
  }
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  http::request<http::string_body> request;
  http::response<http::string_body> response;
  const MetricsBoard& board;
};

MetricsServer::MetricsServer(boost::asio::io_context& io, const std::string& bind,
                             std::uint16_t port, const MetricsBoard& board)
    : acceptor_(io), board_(board) {
  try {
    const tcp::endpoint endpoint(boost::asio::ip::make_address(bind), port);
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(boost::asio::socket_base::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen();
  } catch (const std::exception& e) {
    throw Error("metrics: cannot listen on " + bind + ":" + std::to_string(port) + ": " + e.what());
  }
  accept();
}

MetricsServer::~MetricsServer() { stop(); }

std::uint16_t MetricsServer::port() const { return acceptor_.local_endpoint().port(); }

void MetricsServer::stop() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  // Closing a stream cancels its read (or write) and timer: each handler
  // then runs with an error and lets its session go.
  for (const auto& weak : sessions_)
    if (const auto session = weak.lock()) session->stream.close();
  sessions_.clear();
}

void MetricsServer::accept() {
  // Out of descriptors, accepts wait rather than spin, and a connection
  // that would take one of the descriptors kept for the rest of the daemon
  // is closed at once (daemon/accept_loop.h); both logged, paced. Every
  // session is tracked, so that stop() can close the keep-alive ones.
  static LogThrottle refused_log, error_log;
  static std::atomic<std::uint64_t> refused{0}, errors{0};
  AcceptLoop::Handlers handlers;
  handlers.accepted = [this](tcp::socket socket) {
    if (within_fd_headroom(socket.native_handle())) {
      if (const auto since = refused_log.due(++refused))
        spdlog::warn("metrics: refused {} connection(s) near the open-file limit", *since);
      return;  // the socket closes here
    }
    if (!acceptor_.is_open()) return;  // stopping
    auto session = std::make_shared<Session>(std::move(socket), board_);
    sessions_.erase(std::remove_if(sessions_.begin(), sessions_.end(),
                                   [](const auto& weak) { return weak.expired(); }),
                    sessions_.end());
    sessions_.push_back(session);
    session->read();
  };
  handlers.failed = [](const boost::system::error_code& ec, std::chrono::milliseconds wait) {
    if (const auto since = error_log.due(++errors))
      spdlog::warn("metrics: accept failed: {} ({} time(s) since the last line); next accept in {} ms",
                   ec.message(), *since, wait.count());
  };
  AcceptLoop::start(acceptor_, std::move(handlers));  // runs until the acceptor is closed
}

}  // namespace gw::daemon
