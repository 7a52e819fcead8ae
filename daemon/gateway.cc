#include "daemon/gateway.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <iostream>
#include <thread>

#include <boost/asio.hpp>

#include "cluster/frame_publisher.h"
#include "common/error.h"
#include "config/config.h"
#include "daemon/ingest.h"
#include "daemon/log.h"
#include "daemon/notify.h"
#include "sensors/frame.h"

namespace gw::daemon {

void require_gateway_config(const config::Config& config, const std::string& config_path) {
  if (!config.nats.enabled)
    throw Error(config_path + ": nats: missing; the gateway publishes to the stream it names (docs/scale.md)");
}

int run_gateway(const std::string& config_path) {
  const config::Config config = config::load_config(config_path);
  set_log_level(config.daemon.log_level);
  require_gateway_config(config, config_path);

  cluster::FramePublisherOptions options;
  options.url = config.nats.url;
  options.stream = config.nats.frames_stream;
  options.subject = config.nats.frames_subject;
  options.partitions = static_cast<std::uint32_t>(config.nats.partitions);
  options.max_pending = config.nats.max_pending;
  options.max_age_s = config.nats.frames_max_age_s;
  options.replicas = config.nats.replicas;
  options.frames_per_message = static_cast<std::size_t>(config.nats.frames_per_message);
  cluster::FramePublisher publisher(options);

  boost::asio::io_context io;
  FrameQueue queue(config.ingest.queue_capacity, config.ingest.queue_overflow);
  // The gateway forwards frames as they came: what the ingest derives from
  // them for the daemon's own jobs (slot inputs, feet's loads, hotspot
  // regions) would be computed and thrown away, so those jobs are off here.
  config::Config ingest_config = config;
  ingest_config.slots.enabled = false;
  ingest_config.gait.enabled = false;
  Ingest ingest(io, ingest_config, queue);
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  std::atomic<bool> stopping{false};
  signals.async_wait([&](const boost::system::error_code& error, int signal) {
    if (error) return;
    spdlog::info("gateway: signal {}: stopping", signal);
    notify_stopping();
    ingest.stop();
    stopping = true;
  });
  std::thread io_thread([&io] { io.run(); });
  spdlog::info("gaitwatchd gateway ready: udp port {}, tcp port {} -> {} stream {} ({}.<partition>.<wearer>, {} "
               "partitions, up to {} frames per message)",
               ingest.udp_port(), ingest.tcp_port(), options.url, options.stream, options.subject,
               options.partitions, options.frames_per_message);
  notify_ready(fmt::format("gateway: udp port {}, tcp port {} -> {} stream {}", ingest.udp_port(),
                           ingest.tcp_port(), options.url, options.stream));
  // A publish that blocks (the server gone, acknowledgements stuck) stops
  // the pings, and systemd restarts the gateway.
  const auto watchdog = watchdog_ping_interval(config.daemon.watchdog_s);
  auto next_ping = std::chrono::steady_clock::now();

  // Publishing on this thread: the queue keeps the order frames came in,
  // so one wearer's frames reach the stream in order. A partition's frames
  // gather for kBatchLinger after the first of them (or until its batch is
  // full): at the rates where one message per frame is the limit, that is
  // tens of frames per partition, for a few milliseconds more latency.
  constexpr auto kBatchLinger = std::chrono::milliseconds(10);
  auto last_report = std::chrono::steady_clock::now();
  auto first_batched = last_report;
  // Closed once stopping and the TCP connections have finished reading
  // (Ingest::stop()): until then their frames keep coming into the queue.
  bool queue_closed = false;
  for (;;) {
    auto wait = std::chrono::steady_clock::duration(std::chrono::milliseconds(200));
    if (publisher.batched_frames() > 0)
      wait = std::max(std::chrono::steady_clock::duration::zero(),
                      first_batched + kBatchLinger - std::chrono::steady_clock::now());
    std::optional<ReceivedFrame> received = queue.pop_for(wait);
    const auto now = std::chrono::steady_clock::now();
    if (received) {
      if (publisher.batched_frames() == 0) first_batched = now;
      const std::vector<std::uint8_t> bytes = sensors::encode_frame(received->frame);
      publisher.publish(received->frame.wearer_id, bytes.data(), bytes.size());
    } else if (queue_closed) {
      break;  // closed and drained; flush() below publishes what gathered
    }
    if (stopping && !queue_closed && !ingest.reading()) {
      queue.close();
      queue_closed = true;
    }
    if (publisher.batched_frames() > 0 && now - first_batched >= kBatchLinger) publisher.flush_batches();
    if (watchdog.count() > 0 && now >= next_ping) {
      notify_watchdog();
      next_ping = now + watchdog;
    }
    if (now - last_report > std::chrono::seconds(10)) {
      last_report = now;
      const nlohmann::json counters = publisher.counters_json();
      spdlog::info("gateway: {}", counters.dump());
      notify_status(fmt::format("gateway: {} frames published, {} acknowledged, {} dropped",
                                counters.value("published", std::uint64_t{0}), counters.value("acked", std::uint64_t{0}),
                                counters.value("dropped", std::uint64_t{0})));
    }
  }
  const bool flushed = publisher.flush(5.0);
  if (!flushed) spdlog::warn("gateway: acknowledgements still pending after 5 s");
  io.stop();
  io_thread.join();
  const nlohmann::json final_counters = {
      {"gateway", {{"ingest", ingest.counters().to_json(queue)}, {"publisher", publisher.counters_json()}}}};
  std::cout << final_counters.dump() << std::endl;
  spdlog::info("gateway: stopped: {}", final_counters.dump());
  return 0;
}

}  // namespace gw::daemon
