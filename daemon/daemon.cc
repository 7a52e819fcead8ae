#include "daemon/daemon.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <mutex>
#include <optional>
#include <thread>

#include <boost/asio.hpp>
#include <spdlog/spdlog.h>

#include "common/error.h"
#include "config/config.h"
#include "daemon/ingest.h"
#include "daemon/log.h"
#include "daemon/notify.h"
#include "kernels/search.h"
#include "pipeline/engine.h"
#include "pipeline/history_recorder.h"
#include "pipeline/sink.h"

namespace gw::daemon {
namespace {

using Clock = std::chrono::steady_clock;

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool history_differs(const config::HistoryConfig& a, const config::HistoryConfig& b) {
  return a.enabled != b.enabled || a.path != b.path || a.retention_hours != b.retention_hours ||
         a.chunk_s != b.chunk_s || a.compression != b.compression ||
         a.queue_chunks != b.queue_chunks || a.queue_overflow != b.queue_overflow ||
         a.commit_interval_ms != b.commit_interval_ms;
}

// The raw-stream history recorder, when history.enabled (throws gw::Error).
std::unique_ptr<pipeline::HistoryRecorder> make_history(const config::Config& config) {
  if (!config.history.enabled) return nullptr;
  pipeline::HistoryOptions options;
  options.path = config.history.path;
  options.retention_hours = config.history.retention_hours;
  options.chunk_s = config.history.chunk_s;
  options.zlib_level = config.history.compression == "zlib" ? 1 : 0;
  options.queue_chunks = config.history.queue_chunks;
  options.overflow = parse_overflow_policy(config.history.queue_overflow);
  options.commit_interval_ms = config.history.commit_interval_ms;
  options.config_path = config.source_file;
  return std::make_unique<pipeline::HistoryRecorder>(std::move(options));
}

// Sections that only a restart can change: the sockets, the devices the
// ingest validates against, and the store.
bool restart_sections_differ(const config::Config& a, const config::Config& b) {
  auto listen_eq = [](const config::ListenConfig& x, const config::ListenConfig& y) {
    return x.bind == y.bind && x.port == y.port;
  };
  bool devices_eq = a.devices.size() == b.devices.size();
  for (std::size_t i = 0; devices_eq && i < a.devices.size(); ++i)
    devices_eq = a.devices[i].id == b.devices[i].id && a.devices[i].name == b.devices[i].name &&
                 a.devices[i].kind == b.devices[i].kind &&
                 a.devices[i].channels == b.devices[i].channels &&
                 a.devices[i].sample_rate_hz == b.devices[i].sample_rate_hz;
  return !devices_eq || !listen_eq(a.ingest.udp, b.ingest.udp) ||
         !listen_eq(a.ingest.tcp, b.ingest.tcp) ||
         a.ingest.queue_capacity != b.ingest.queue_capacity ||
         a.ingest.queue_overflow != b.ingest.queue_overflow ||
         a.ingest.max_frame_bytes != b.ingest.max_frame_bytes ||
         a.ingest.ring_capacity_samples != b.ingest.ring_capacity_samples ||
         a.storage.path != b.storage.path || history_differs(a.history, b.history) ||
         a.publish.endpoint != b.publish.endpoint || a.publish.send_hwm != b.publish.send_hwm ||
         a.search.backend != b.search.backend || a.search.threads != b.search.threads;
}

class Daemon {
 public:
  explicit Daemon(std::string config_path)
      : config_path_(std::move(config_path)), config_(config::load_config(config_path_)) {}

  int run() {
    setup_logging(config_.daemon.log_level);
    std::string note;
    auto backend = kernels::make_backend(config_.search.backend, config_.search.threads, &note);
    spdlog::info("search backend: {}", note);
    pipeline::Engine engine(config_, std::move(backend));

    pipeline::SinkOptions sink_options;
    sink_options.db_path = config_.storage.path;
    sink_options.retention_days = config_.storage.retention_days;
    sink_options.commit_interval_ms = config_.storage.commit_interval_ms;
    sink_options.max_batch = config_.storage.max_batch;
    sink_options.publish_endpoint = config_.publish.endpoint;
    sink_options.send_hwm = config_.publish.send_hwm;
    pipeline::AlertSink sink(sink_options);
    spdlog::info("storing hits in {}; publishing alerts on {}", config_.storage.path,
                 sink.bound_endpoint());
    history_ = make_history(config_);
    if (history_) {
      spdlog::info("recording raw streams in {} for {} h", history_->path(),
                   config_.history.retention_hours);
      engine.set_frame_observer([history = history_.get()](const sensors::Frame& frame,
                                                           pipeline::FrameVerdict verdict,
                                                           double arrival_s) {
        history->append(frame, verdict, arrival_s);
      });
    }

    FrameQueue queue(config_.ingest.queue_capacity,
                     parse_overflow_policy(config_.ingest.queue_overflow));
    boost::asio::io_context io;
    Ingest ingest(io, config_, queue);
    spdlog::info("ingest: udp {}:{} tcp {}:{}", config_.ingest.udp.bind, ingest.udp_port(),
                 config_.ingest.tcp.bind, ingest.tcp_port());

    boost::asio::signal_set signals(io, SIGINT, SIGTERM, SIGHUP);
    std::function<void()> wait_signal = [&] {
      signals.async_wait([&](const boost::system::error_code& ec, int signo) {
        if (ec) return;
        if (signo == SIGHUP) {
          reload();
          wait_signal();
          return;
        }
        spdlog::info("signal {}: stopping", signo);
        notify_stopping();
        ingest.stop();
        signals.cancel();
        stopping_ = true;
      });
    };
    wait_signal();

    const auto watchdog = watchdog_ping_interval(config_.daemon.watchdog_s);
    std::thread pipeline_thread([&] { pipeline_loop(engine, sink, ingest, queue, watchdog); });
    notify_ready("ready; backend " + engine.backend_name());
    spdlog::info("gaitwatchd ready (config {})", config_path_);

    io.run();  // returns once the sockets and the signal set are closed
    stopping_ = true;
    pipeline_thread.join();
    sink.stop();
    const auto c = sink.counters();
    spdlog::info("stopped: {} alerts committed, {} published, last seq {}", c.committed,
                 c.published, c.last_seq);
    return 0;
  }

 private:
  void reload() {
    spdlog::info("SIGHUP: reloading {}", config_path_);
    try {
      config::Config fresh = config::load_config(config_path_);
      if (restart_sections_differ(fresh, config_))
        spdlog::warn(
            "reload: ingest, devices, storage, history, publish endpoint and backend changes "
            "need a restart; keeping the running values of those");
      fresh.ingest = config_.ingest;
      fresh.devices = config_.devices;
      fresh.storage = config_.storage;
      fresh.history = config_.history;
      fresh.publish.endpoint = config_.publish.endpoint;
      fresh.publish.send_hwm = config_.publish.send_hwm;
      fresh.search.backend = config_.search.backend;
      fresh.search.threads = config_.search.threads;
      std::lock_guard<std::mutex> lock(reload_mu_);
      pending_ = std::move(fresh);
    } catch (const std::exception& e) {
      spdlog::error("reload rejected, still running the previous config: {}", e.what());
    }
  }

  void pipeline_loop(pipeline::Engine& engine, pipeline::AlertSink& sink, const Ingest& ingest,
                     FrameQueue& queue, std::chrono::milliseconds watchdog) {
    auto next_tick = Clock::now() + std::chrono::milliseconds(engine.tick_ms());
    auto next_stats = Clock::now() + stats_interval();
    auto next_ping = Clock::now();
    auto publish_stats = [&](const char* reason) {
      nlohmann::json stats = {{"type", "stats"},
                              {"reason", reason},
                              {"time", unix_now()},
                              {"ingest", ingest.counters().to_json(queue)},
                              {"engine", engine.stats_json()}};
      const auto c = sink.counters();
      stats["sink"] = {{"committed", c.committed},   {"published", c.published},
                       {"transactions", c.transactions}, {"last_seq", c.last_seq},
                       {"store_errors", c.store_errors}};
      if (history_) stats["history"] = history_->stats_json();
      sink.submit_stats(stats);
      const auto& e = engine.counters();
      notify_status(fmt::format("{} streams, {} frames, {} alerts, {} deadline misses", e.streams,
                                e.frames_accepted, e.alerts, e.deadline_misses));
      return stats;
    };
    auto run_tick = [&] {
      apply_pending_reload(engine);
      if (history_) history_->flush_idle(unix_now());
      for (auto& alert : engine.run_batch(unix_now)) {
        spdlog::info("alert: {} wearer {} device {} t={:.2f}s distance {:.3f} dims {}/{}",
                     alert.pattern, alert.wearer, alert.device, alert.t_end, alert.distance,
                     alert.matched_dims, alert.pattern_dims);
        sink.submit(std::move(alert));
      }
    };
    while (!stopping_) {
      auto frame = queue.pop_for(std::min(next_tick - Clock::now(), Clock::duration(
                                                                         std::chrono::milliseconds(50))));
      if (frame) engine.on_frame(frame->frame, frame->arrival_s);
      const auto now = Clock::now();
      if (now >= next_tick) {
        run_tick();
        next_tick += std::chrono::milliseconds(engine.tick_ms());
        if (next_tick < now) next_tick = now + std::chrono::milliseconds(engine.tick_ms());
      }
      if (stats_interval().count() > 0 && now >= next_stats) {
        publish_stats("interval");
        next_stats = now + stats_interval();
      }
      if (watchdog.count() > 0 && now >= next_ping) {
        notify_watchdog();
        next_ping = now + watchdog;
      }
    }
    // Drain: every frame that was accepted into the queue is searched.
    std::vector<ReceivedFrame> rest;
    queue.close();
    queue.drain(rest);
    for (auto& f : rest) engine.on_frame(f.frame, f.arrival_s);
    run_tick();
    // Every accepted sample is committed to the history before the final
    // counters go out.
    if (history_) history_->stop();
    const auto stats = publish_stats("shutdown");
    spdlog::info("final counters: {}", stats.dump());
  }

  void apply_pending_reload(pipeline::Engine& engine) {
    std::optional<config::Config> fresh;
    {
      std::lock_guard<std::mutex> lock(reload_mu_);
      fresh.swap(pending_);
    }
    if (!fresh) return;
    try {
      engine.reconfigure(*fresh);
      set_log_level(fresh->daemon.log_level);
      stats_interval_ms_ = static_cast<long>(fresh->publish.stats_interval_s * 1000);
      spdlog::info("reload applied: {} patterns, tick {} ms, deadline {} ms",
                   fresh->patterns.size(), fresh->search.tick_ms, fresh->search.deadline_ms);
    } catch (const std::exception& e) {
      spdlog::error("reload rejected, still running the previous config: {}", e.what());
    }
  }

  std::chrono::milliseconds stats_interval() const {
    return std::chrono::milliseconds(stats_interval_ms_.load());
  }

  std::string config_path_;
  config::Config config_;
  std::atomic<bool> stopping_{false};
  std::mutex reload_mu_;
  std::optional<config::Config> pending_;
  std::unique_ptr<pipeline::HistoryRecorder> history_;  // null unless history.enabled
  std::atomic<long> stats_interval_ms_{static_cast<long>(config_.publish.stats_interval_s * 1000)};
};

}  // namespace

int run_daemon(const std::string& config_path) {
  Daemon daemon(config_path);
  return daemon.run();
}

}  // namespace gw::daemon
