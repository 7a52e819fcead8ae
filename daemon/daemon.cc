#include "daemon/daemon.h"

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <boost/asio.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "common/diagnostics.h"
#include "common/error.h"
#include "bridges/mqtt_bridge.h"
#include "bridges/webhook.h"
#include "common/thread_name.h"
#include "common/worker_pool.h"
#include "config/config.h"
#include "config/reload_rules.h"
#include "daemon/commands.h"
#include "daemon/control.h"
#include "daemon/gait_job.h"
#include "daemon/ipc_socket.h"
#include "daemon/ingest.h"
#include "daemon/nats_paths.h"
#include "daemon/lifecycle.h"
#include "daemon/log.h"
#include "daemon/marks.h"
#include "console/server.h"
#include "daemon/metrics.h"
#include "daemon/notify.h"
#include "daemon/pause_monitor.h"
#include "daemon/preflight.h"
#include "daemon/tick_scheduler.h"
#include "daemon/wearers.h"
#include "kernels/search.h"
#include "jobs/daemon_jobs.h"
#include "pipeline/engine.h"
#include "history/history_recorder.h"
#include "sinks/sink.h"

namespace gw::daemon {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The raw-stream history recorder, when history.enabled (throws gw::Error).
std::unique_ptr<pipeline::HistoryRecorder> make_history(const config::Config& config) {
  if (!config.history.enabled) return nullptr;
  pipeline::HistoryOptions options;
  options.path = config.history.path;
  options.retention_hours = config.history.retention_hours;
  options.chunk_s = config.history.chunk_s;
  options.zlib_level = config.history.compression == config::HistoryCompression::kZlib ? 1 : 0;
  options.queue_chunks = config.history.queue_chunks;
  options.overflow = config.history.queue_overflow;
  options.commit_interval_ms = config.history.commit_interval_ms;
  options.config_path = config.source_file;
  options.stream_idle_s = config.ingest.stream_idle_s;
  return std::make_unique<pipeline::HistoryRecorder>(std::move(options));
}

// The two hash-table jobs of the pipeline thread. A table failure (a CUDA
// error) must not stop detection: the job is rebuilt on the CPU table, with
// an error logged and counted; what the failed table held is lost (dedup may
// let one repeat of a recent event through; earlier slots are gone).
class TableJobs {
 public:
  explicit TableJobs(const config::Config& config) : config_(config) {
    std::string note;
    dedup_ = pipeline::make_alert_deduplicator(config_, &note);
    if (!note.empty()) spdlog::info("dedup: {}", note);
    slots_ = pipeline::make_slot_index(config_, &note);
    if (!note.empty()) spdlog::info("slots: {}", note);
    if (slots_)
      recorder_.emplace(pipeline::slot_recorder_options(config_), pipeline::slot_sources(config_));
    if (dedup_)
      spdlog::info("dedup: {} table, bucket {} s, retention {} s", dedup_->table().name(),
                   config_.dedup.bucket_s, config_.dedup.retention_s);
    if (slots_)
      spdlog::info("slots: {} table, {} clock, retention {} s, {} device(s) with status inputs",
                   slots_->table().name(), config::name(config_.slots.clock),
                   config_.slots.retention_s,
                   pipeline::slot_sources(config_).size());
  }

  // The alerts to store and publish out of the engine's candidates.
  std::vector<pipeline::Alert> admit(const pipeline::Engine& engine,
                                     std::vector<pipeline::Alert> candidates) {
    if (!dedup_) return candidates;
    try {
      return pipeline::admit_new_alerts(*dedup_, engine.batch_stream_clocks(), candidates);
    } catch (const std::exception& e) {
      ++table_failures_;
      spdlog::error("dedup table failed ({}); continuing on a new CPU table", e.what());
      dedup_ = pipeline::make_alert_deduplicator(cpu_config(), nullptr);
      return pipeline::admit_new_alerts(*dedup_, engine.batch_stream_clocks(), std::move(candidates));
    }
  }

  // The slot recorder's share of the frames the engine accepted
  // (accepted[i] for frames[i]), spread over `pool` when one is given.
  void on_frames(const std::vector<ReceivedFrame>& frames, const std::vector<char>& accepted,
                 WorkerPool* pool) {
    if (!recorder_) return;
    slot_frames_.clear();
    for (std::size_t i = 0; i < frames.size(); ++i)
      if (accepted[i])
        slot_frames_.push_back({&frames[i].frame, frames[i].zone, frames[i].arrival_s,
                                &frames[i].slot_inputs});
    recorder_->on_frames(slot_frames_, pool);
  }

  // Records the complete wearer-seconds (all of them when `final`) and, once
  // a second, expires what is older than the retention.
  // Returns how many wearer-seconds it recorded: every pending one when
  // `final`, else up to `max_seconds` complete ones.
  // The seconds' summaries are made on `pool` when one is given.
  std::size_t record_slots(double now_s, bool final, std::size_t max_seconds, WorkerPool* pool) {
    if (!recorder_) return 0;
    const std::vector<pipeline::SlotEntry> entries =
        final ? recorder_->take_all() : recorder_->take_complete(now_s, max_seconds, pool);
    try {
      if (!entries.empty()) slots_->record(entries);
      if (now_s >= next_expiry_s_) {
        slots_->expire(static_cast<std::int64_t>(std::floor(now_s - config_.slots.retention_s)));
        next_expiry_s_ = now_s + 1;
      }
    } catch (const std::exception& e) {
      ++table_failures_;
      spdlog::error("slot index table failed ({}); continuing on a new, empty CPU table", e.what());
      *slots_ = std::move(*pipeline::make_slot_index(cpu_config(), nullptr));
    }
    return entries.size();
  }

  // The slot index for the control commands; pipeline thread only. The
  // object stays the same for the daemon's life (a rebuild replaces its
  // contents), so commands may keep the pointer.
  pipeline::SlotIndex* slot_index() { return slots_.get(); }

  nlohmann::json stats_json() const {
    nlohmann::json dedup = {{"enabled", dedup_ != nullptr}};
    if (dedup_) {
      const auto& c = dedup_->counters();
      dedup.update({{"backend", dedup_->table().name()},
                    {"admitted", c.admitted},
                    {"duplicates", c.duplicates},
                    {"expired", c.expired},
                    {"live_keys", dedup_->live_keys()},
                    {"pool_nodes", dedup_->table().node_capacity()},
                    {"pool_growths", c.pool_growths},
                    {"pool_growth_s", c.pool_growth_s}});
    }
    nlohmann::json slots = {{"enabled", slots_ != nullptr}};
    if (slots_) {
      const auto& c = slots_->counters();
      const auto& r = recorder_->counters();
      slots.update({{"backend", slots_->table().name()},
                    {"clock", config::name(config_.slots.clock)},
                    {"samples", r.samples},
                    {"seconds", r.seconds},
                    {"pending_seconds", recorder_->pending_seconds()},
                    {"late_samples", r.late_samples},
                    {"out_of_range_samples", r.out_of_range_samples},
                    {"recorded", c.recorded},
                    {"duplicates", c.duplicates},
                    {"queries", c.queries},
                    {"searches", c.searches},
                    {"expired", c.expired},
                    {"live_keys", slots_->live_keys()},
                    {"pool_nodes", slots_->table().node_capacity()},
                    {"pool_growths", c.pool_growths},
                    {"pool_growth_s", c.pool_growth_s}});
    }
    return {{"dedup", dedup}, {"slots", slots}, {"table_failures", table_failures_}};
  }

 private:
  config::Config cpu_config() const {
    config::Config cpu = config_;
    cpu.hashtable.backend = config::BackendKind::kCpu;
    return cpu;
  }

  config::Config config_;
  std::unique_ptr<pipeline::AlertDeduplicator> dedup_;
  std::unique_ptr<pipeline::SlotIndex> slots_;
  std::optional<pipeline::SlotRecorder> recorder_;
  std::vector<pipeline::SlotRecorder::FrameInput> slot_frames_;  // on_frames' scratch
  double next_expiry_s_ = 0;
  std::uint64_t table_failures_ = 0;
};

// The first line of `path`, a secret kept out of the config file.
std::string read_secret(const std::string& path, const std::string& key) {
  std::string secret;
  std::ifstream in(path);
  if (!in || !std::getline(in, secret)) throw Error(key + ": cannot read " + path);
  return secret;
}

// How long each bridge may take at stop to hand on what is queued.
constexpr std::chrono::milliseconds kBridgeFlushLimit{2000};

// The bridge `config` asks for, or none; its password is read here, at start.
// A config's seconds as a duration (whole seconds, at least one).
std::chrono::seconds seconds_of(double seconds) {
  return std::chrono::seconds(std::max<std::int64_t>(1, static_cast<std::int64_t>(seconds)));
}

std::unique_ptr<bridges::MqttBridge> make_mqtt_bridge(const config::MqttBridgeConfig& config) {
  if (!config.enabled) return nullptr;
  bridges::MqttBridgeOptions options;
  options.host = config.host;
  options.port = config.port;
  options.client_id = config.client_id;
  options.topic_prefix = config.topic_prefix;
  options.username = config.username;
  if (!config.password_file.empty())
    options.password = read_secret(config.password_file, "bridges.mqtt.password_file");
  options.tls_ca_file = config.tls_ca_file;
  options.tls_cert_file = config.tls_cert_file;
  options.tls_key_file = config.tls_key_file;
  options.qos = config.qos;
  options.keepalive_s = config.keepalive_s;
  options.max_queued = config.max_queued;
  spdlog::info("MQTT bridge to {}:{} under {}/ (QoS {})", config.host, config.port,
               config.topic_prefix, config.qos);
  return std::make_unique<bridges::MqttBridge>(std::move(options));
}

std::unique_ptr<bridges::WebhookBridge> make_webhook(const config::WebhookBridgeConfig& config) {
  if (!config.enabled) return nullptr;
  bridges::WebhookOptions options;
  options.url = config.url;
  options.topics = config.topics;
  if (!config.bearer_token_file.empty())
    options.bearer_token =
        read_secret(config.bearer_token_file, "bridges.webhook.bearer_token_file");
  options.timeout_s = config.timeout_s;
  options.retry_initial_s = config.retry_initial_s;
  options.retry_max_s = config.retry_max_s;
  options.max_attempts = config.max_attempts;
  options.max_queued = config.max_queued;
  spdlog::info("webhook: POSTing {} to {}", fmt::join(config.topics, ", "), config.url);
  return std::make_unique<bridges::WebhookBridge>(std::move(options));
}

class Daemon {
 public:
  explicit Daemon(std::string config_path)
      : config_path_(std::move(config_path)), config_(config::load_config(config_path_)) {}

  int run() {
    setup_logging(config_.daemon.log_level);
    // Read here, before the other threads start; listed so that a run's log
    // says which diagnostics were on.
    if (!diagnostics().set.empty())
      spdlog::info("diagnostics: {}", fmt::join(diagnostics().set, " "));
    for (const std::string& ignored : diagnostics().ignored)
      spdlog::warn("diagnostics: {} (ignored)", ignored);
    // Before anything is opened, so that a failure names its key.
    if (auto issues = preflight_checks(config_); !issues.empty())
      throw config::ConfigError(config_path_, std::move(issues));
    if (config_.patterns.empty())
      spdlog::warn("{}: patterns: [] - running without detection", config_path_);
    std::string note;
    auto backend =
        kernels::make_backend(config::name(config_.search.backend), config_.search.threads,
                              config_.search.devices, &note);
    spdlog::info("search backend: {}", note);
    pipeline::Engine engine(config_, std::move(backend));
    metrics_board_.set_build_info(build_info_labels(engine.backend_name()));
    TableJobs jobs(config_);

    pipeline::SinkOptions sink_options;
    sink_options.db_path = config_.storage.path;
    sink_options.retention_days = config_.storage.retention_days;
    sink_options.commit_interval_ms = config_.storage.commit_interval_ms;
    sink_options.max_batch = config_.storage.max_batch;
    sink_options.publish_endpoint = config_.publish.endpoint;
    sink_options.send_hwm = config_.publish.send_hwm;
    sink_options.curve_secret_key = config_.publish.curve_secret_key;
    sink_options.curve_authorized_keys = config_.publish.curve_authorized_keys;
    sink_options.max_pending_alerts = config_.storage.max_pending_alerts;
    sink_options.max_size_bytes =
        static_cast<std::uint64_t>(config_.storage.max_size_mb * 1024 * 1024);
    // Before the sink, so that it outlives the sink's last commit.
    std::unique_ptr<bridges::MqttBridge> mqtt = make_mqtt_bridge(config_.bridges.mqtt);
    std::unique_ptr<bridges::WebhookBridge> webhook = make_webhook(config_.bridges.webhook);
    std::unique_ptr<StreamAlertOutput> alert_stream = make_stream_alert_output(config_.nats, config_.dedup.bucket_s);
    // The console starts after the control interface it answers through; it
    // is stopped after the sink's last commit (below) and destroyed after
    // the sink, so the writer thread's hook may offer to it until then.
    std::unique_ptr<console::ConsoleServer> console;
    std::atomic<console::ConsoleServer*> console_feed{nullptr};
    if (mqtt || webhook || alert_stream || config_.console.port != 0)
      sink_options.on_committed = [mqtt = mqtt.get(), webhook = webhook.get(), alert_stream = alert_stream.get(),
                                   &console_feed](const std::string& topic, const std::string& body) {
        if (mqtt) mqtt->offer(topic, body);
        if (webhook) webhook->offer(topic, body);
        if (alert_stream) alert_stream->offer(topic, body);
        if (console::ConsoleServer* feed = console_feed.load()) feed->offer(topic, body);
      };
    sink_options.time_zone = config_.site.time_zone;
    pipeline::AlertSink sink(sink_options);
    if (config_.publish.send_hwm > 0 && config_.publish.send_hwm <= config_.storage.max_batch)
      spdlog::warn("publish.send_hwm {} is not above storage.max_batch {}: a transaction's alerts "
                   "go out at once, so a subscriber that keeps up may lose part of a burst",
                   config_.publish.send_hwm, config_.storage.max_batch);
    spdlog::info("storing hits in {}; publishing alerts on {}", config_.storage.path,
                 sink.bound_endpoint());
    // Carers' marks: their examples join the patterns before the first tick.
    MarkBook marks(config_.storage.path, config_);
    marks_ = &marks;
    const auto submit_event = [&sink](pipeline::Event event) { sink.submit_event(std::move(event)); };
    marks.set_event_publisher(submit_event);
    apply_marks(engine);
    // The wearer registry and the sensors' liveness: offline alerts and
    // recovery events take the detections' way out.
    WearerOutputs wearer_outputs{
        [&sink](pipeline::Alert alert) { sink.submit(std::move(alert)); }, submit_event, {},
        [&sink](std::vector<pipeline::WearerDeviceRecord> rows) {
          return sink.submit_wearer_devices(std::move(rows));
        }};
    if (mqtt)
      wearer_outputs.state = [bridge = mqtt.get()](std::uint32_t wearer, const nlohmann::json& state) {
        bridge->set_retained(wearer, "state", state.dump());
      };
    WearerBook wearers(config_.storage.path, config_, unix_now(), std::move(wearer_outputs));
    wearers_ = &wearers;
    // Gait from the insoles (gait.*): strides, minutes of walking, abnormal bouts.
    std::optional<GaitWorker> gait;
    if (config_.gait.enabled) {
      gait.emplace(gait_monitor_options(config_.gait), gait_devices(config_), kGaitQueueFrames);
      spdlog::info("gait: {} device(s) carry a foot; abnormal gait {}; gait change {}", gait_devices(config_).size(),
                   config_.gait.examples_file.empty() ? std::string("off (no pack)")
                                                      : "by the examples of " + config_.gait.examples_file,
                   config_.gait.change ? "against each wearer's own baseline" : "off");
    } else {
      // Hotspots run beside the gait monitor: say so when a device asks for them.
      std::vector<std::string> asking;
      for (const config::DeviceProfile& device : config_.devices)
        if (device.hotspots.enabled) asking.push_back(device.name);
      if (!asking.empty())
        spdlog::warn("gait is off (no gait section, or gait.enabled false): pressure hotspots of device(s) {} "
                     "are not watched",
                     fmt::join(asking, ", "));
    }
    gait_ = gait ? &*gait : nullptr;
    // Pressure hotspots under the feet (devices[].hotspots), beside the gait monitor.
    std::optional<gait::HotspotMonitor> hotspots;
    if (std::map<std::uint16_t, gait::HotspotSource> sources = hotspot_devices(config_); !sources.empty()) {
      spdlog::info("gait: pressure hotspots watched on {} device(s)", sources.size());
      hotspots.emplace(std::move(sources));
    }
    hotspots_ = hotspots ? &*hotspots : nullptr;
    // Acknowledgements, resolutions and escalations (docs/operations.md).
    AlertLifecycle lifecycle(config_.storage.path, escalation_policy(config_.alerts), submit_event,
                             unix_now);
    lifecycle_ = &lifecycle;
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

    // From here to the stop: the warm-up, every tick and the drain.
    const PauseMonitor pauses;

    // Before ingest opens, so that no frame waits for it, and after the
    // marks' examples joined the patterns (a library change empties what
    // the backend holds).
    if (config_.search.warm_up_streams > 0) {
      notify_status(fmt::format("warming the search up for {} streams",
                                config_.search.warm_up_streams));
      const auto started = Clock::now();
      // A backend that fails here (a lost GPU, counted and noted, aside)
      // fails the first real batch too, which then goes to the CPU backend
      // as every failed search does.
      try {
        const pipeline::Engine::WarmUp warm =
            engine.warm_up(static_cast<std::size_t>(config_.search.warm_up_streams), unix_now);
        spdlog::info("search warmed up for {} streams in {:.2f} s: {} batches of {} slices "
                     "(first {:.0f} ms, last {:.0f} ms, up to {} matches, {} buffer growths)",
                     config_.search.warm_up_streams, seconds_between(started, Clock::now()),
                     warm.batches, warm.slices, warm.first_ms, warm.last_ms, warm.matches,
                     warm.buffer_growths);
      } catch (const std::exception& e) {
        spdlog::error("search warm-up failed after {:.2f} s, starting without it: {}",
                      seconds_between(started, Clock::now()), e.what());
      }
      metrics_board_.set_build_info(build_info_labels(engine.backend_name()));
    }

    FrameQueue queue(config_.ingest.queue_capacity, config_.ingest.queue_overflow);
    boost::asio::io_context io;
    Ingest ingest(io, config_, queue);
    spdlog::info("ingest: udp {}:{} tcp {}:{}", config_.ingest.udp.bind, ingest.udp_port(),
                 config_.ingest.tcp.bind, ingest.tcp_port());
    // After the ingest and queue it feeds, so that it goes first.
    std::unique_ptr<StreamFrameSource> stream_source;
    if (config_.ingest.nats) stream_source = make_stream_frame_source(config_.nats, ingest);

    // Every counter of the daemon: the "stats." message and `status`. Runs
    // on the pipeline thread (it reads the engine and the tables).
    std::unique_ptr<ControlServer> control;
    const auto counters = [&]() -> nlohmann::json {
      nlohmann::json stats = {{"ingest", ingest.counters().to_json(queue)},
                              {"engine", engine.stats_json()}};
      stats["engine"]["stop_abandoned_frames"] = stop_abandoned_frames_;
      stats["engine"]["stop_abandoned_windows"] = stop_abandoned_windows_;
      const auto c = sink.counters();
      stats["sink"] = {{"submitted", c.submitted},     {"committed", c.committed},
                       {"store_dropped", c.store_dropped}, {"pending", c.pending},
                       {"stop_abandoned", c.stop_abandoned}, {"published", c.published},
                       {"transactions", c.transactions}, {"last_seq", c.last_seq},
                       {"store_errors", c.store_errors}, {"checkpoints", c.checkpoints},
                       {"wal_restarts", c.wal_restarts},
                       {"wal_restarts_busy", c.wal_restarts_busy},
                       {"windows_shed", c.windows_shed},
                       {"commit_s", c.commit_s},
                       {"publish_s", c.publish_s},
                       {"events_committed", c.events_committed},
                       {"events_dropped", c.events_dropped},
                       {"wearer_devices_saved", c.wearer_devices_saved},
                       {"wearer_devices_errors", c.wearer_devices_errors},
                       {"committed_by_severity", alerts_by_severity_json(c.committed_by_severity)}};
      stats.update(jobs.stats_json());
      if (history_) stats["history"] = history_->stats_json();
      stats["marks"] = marks.stats_json();
      if (mqtt) {
        const bridges::MqttBridgeCounters m = mqtt->counters();
        stats["bridges"]["mqtt"] = {{"offered", m.offered},     {"sent", m.sent},
                                    {"delivered", m.delivered}, {"dropped", m.dropped},
                                    {"connects", m.connects},   {"queued", m.queued},
                                    {"connected", m.connected ? 1 : 0}};
      }
      if (webhook) {
        const bridges::WebhookCounters w = webhook->counters();
        stats["bridges"]["webhook"] = {{"offered", w.offered}, {"delivered", w.delivered},
                                       {"retries", w.retries}, {"failed", w.failed},
                                       {"dropped", w.dropped}, {"queued", w.queued}};
      }
      if (stream_source) stats["nats"]["ingest"] = stream_source->counters_json();
      if (alert_stream) stats["nats"]["alerts"] = alert_stream->counters_json();
      stats["wearers"] = wearers.stats_json(unix_now());
      if (gait) {
        stats["gait"] = gait->counters_json();
        if (hotspots) stats["gait"]["hotspots"] = hotspot_counters_json(*hotspots);
      }
      stats["latency"] = {{"alert_p50_ms", alert_latency_.quantile(0.5)},
                          {"alert_p99_ms", alert_latency_.quantile(0.99)},
                          {"alert_max_ms", alert_latency_.max()}};
      if (control) stats["control"] = control->counters_json();
      if (console) stats["console"] = console->counters_json();
      stats["pipeline_thread"] = pipeline_seconds_.to_json();
      stats["process"] = pauses.to_json();
      return stats;
    };

    PipelineTasks tasks(config_.control.queue_capacity);
    if (config_.control.enabled) {
      ControlRegistry registry;
      DaemonCommandDeps deps;
      deps.config = config_;
      deps.status = [&counters] {
        nlohmann::json status = counters();
        status["time"] = unix_now();
        return status;
      };
      deps.slots = jobs.slot_index();
      deps.live_config = [&engine] { return engine.config(); };
      deps.marks = &marks;
      add_daemon_commands(registry, std::move(deps));
      add_wearer_commands(registry, &wearers);
      add_lifecycle_commands(registry, &lifecycle, config_);
      ControlOptions options;
      options.endpoint = config_.control.endpoint;
      options.max_jobs = config_.control.max_jobs;
      options.max_request_bytes = config_.control.max_request_bytes;
      options.curve_secret_key = config_.control.curve_secret_key;
      options.curve_authorized_keys = config_.control.curve_authorized_keys;
      control = std::make_unique<ControlServer>(options, std::move(registry), tasks);
      spdlog::info("control interface on {}", control->bound_endpoint());
      if (const std::string path = ipc_socket_path(options.endpoint); !path.empty()) {
        // The daemon's user and the members of its group may connect; nobody else.
        const SocketAccess access = restrict_ipc_socket(path, 0660, "gaitwatch");
        spdlog::info("control socket {}: {}", path, access.done);
        if (!access.warning.empty()) spdlog::warn("control socket: {}", access.warning);
      }
    }

    // The console is for people, like the metrics for machines: a port that
    // cannot be bound is logged, and detection runs on without it.
    if (config_.console.port != 0 && control) {
      console::ConsoleOptions options;
      options.bind = config_.console.bind;
      options.port = static_cast<std::uint16_t>(config_.console.port);
      options.static_dir = config_.console.static_dir;
      options.users_db = config_.storage.path;
      options.tls_certificate_file = config_.console.tls_certificate_file;
      options.tls_private_key_file = config_.console.tls_private_key_file;
      options.session_idle = seconds_of(config_.console.session_idle_s);
      options.session_max_age = seconds_of(config_.console.session_max_s);
      options.max_sessions = static_cast<std::size_t>(config_.console.max_sessions);
      options.login_max_failures = config_.console.login_max_failures;
      options.login_window = seconds_of(config_.console.login_window_s);
      options.max_connections = static_cast<std::size_t>(config_.console.max_connections);
      options.max_stream_clients = static_cast<std::size_t>(config_.console.max_stream_clients);
      try {
        console = std::make_unique<console::ConsoleServer>(
            options, [server = control.get()](nlohmann::json request,
                                              std::function<void(const nlohmann::json&)> reply) {
              server->call(std::move(request), std::move(reply));
            });
        console_feed.store(console.get());
        spdlog::info("console: {}://{}:{}/", console->tls() ? "https" : "http",
                     config_.console.bind, console->port());
      } catch (const std::exception& e) {
        spdlog::error("{}; running without the console", e.what());
      }
    }

    // Metrics are auxiliary: a port that cannot be bound must not stop detection.
    std::unique_ptr<MetricsServer> metrics;
    if (config_.metrics.port != 0) {
      try {
        metrics = std::make_unique<MetricsServer>(io, config_.metrics.bind,
                                                  static_cast<std::uint16_t>(config_.metrics.port),
                                                  metrics_board_);
        spdlog::info("metrics: http://{}:{}/metrics", config_.metrics.bind, metrics->port());
      } catch (const std::exception& e) {
        spdlog::error("{}; running without metrics", e.what());
      }
    }

    boost::asio::signal_set signals(io, SIGINT, SIGTERM, SIGHUP);
    std::function<void()> wait_signal = [&] {
      signals.async_wait([&](const boost::system::error_code& ec, int signo) {
        if (ec) return;
        if (signo == SIGHUP) {
          reload();
          wait_signal();
          return;
        }
        spdlog::info("signal {}: stopping within {} s (daemon.stop_timeout_s)", signo,
                     config_.daemon.stop_timeout_s);
        stop_requested_at_ = Clock::now().time_since_epoch().count();
        notify_stopping();
        ingest.stop();
        // Its partitions go to the other workers now, not at the lease's
        // expiry; they read the unacknowledged frames again.
        if (stream_source) stream_source->stop();
        if (metrics) metrics->stop();
        signals.cancel();
        stopping_ = true;
      });
    };
    wait_signal();

    const auto watchdog = watchdog_ping_interval(config_.daemon.watchdog_s);
    Pipeline parts{engine, jobs, sink, queue, ingest, tasks, counters};
    std::thread pipeline_thread([&] {
      set_thread_name("gw-pipeline");
      pipeline_loop(parts, watchdog);
    });
    notify_ready("ready; backend " + engine.backend_name());
    spdlog::info("gaitwatchd ready (config {})", config_path_);

    io.run();  // returns once the sockets and the signal set are closed
    stopping_ = true;
    pipeline_thread.join();
    if (control) control->stop();
    marks_ = nullptr;
    wearers_ = nullptr;
    gait_ = nullptr;
    hotspots_ = nullptr;
    lifecycle_ = nullptr;
    sink.stop();  // publishes the final counters; everything was drained before
    if (console) console->stop();  // before the control server it calls goes away
    const auto c = sink.counters();
    spdlog::info("stopped: {} alerts committed, {} published, last seq {}", c.committed,
                 c.published, c.last_seq);
    if (alert_stream) {
      if (!alert_stream->flush(std::chrono::duration<double>(kBridgeFlushLimit).count()))
        spdlog::warn("alert stream: acknowledgements still pending at stop");
      spdlog::info("alert stream: {}", alert_stream->counters_json().dump());
    }
    if (mqtt) {
      mqtt->stop(kBridgeFlushLimit);
      const bridges::MqttBridgeCounters m = mqtt->counters();
      spdlog::info("MQTT bridge: {} messages offered, {} delivered, {} dropped", m.offered,
                   m.delivered, m.dropped);
    }
    if (webhook) {
      webhook->stop(kBridgeFlushLimit);
      const bridges::WebhookCounters w = webhook->counters();
      spdlog::info("webhook: {} messages offered, {} delivered, {} failed, {} dropped", w.offered,
                   w.delivered, w.failed, w.dropped);
    }
    return 0;
  }

 private:
  // What the pipeline thread owns or drives.
  struct Pipeline {
    pipeline::Engine& engine;
    TableJobs& jobs;
    pipeline::AlertSink& sink;
    FrameQueue& queue;
    const Ingest& ingest;  // stop(): its connections finish reading into the queue
    PipelineTasks& tasks;
    const std::function<nlohmann::json()>& counters;
  };

  void reload() {
    spdlog::info("SIGHUP: reloading {}", config_path_);
    try {
      config::Config fresh = config::load_config(config_path_);
      // config_ is the config the daemon started with: what runs of every
      // restart-only key (config/reload_rules.h).
      const std::vector<std::string> kept = config::keep_restart_values(config_, fresh);
      if (!kept.empty())
        spdlog::warn("reload: {} need a restart; keeping the running values of those",
                     fmt::join(kept, ", "));
      std::lock_guard<std::mutex> lock(reload_mu_);
      pending_ = std::move(fresh);
    } catch (const std::exception& e) {
      spdlog::error("reload rejected, still running the previous config: {}", e.what());
    }
  }

  void pipeline_loop(Pipeline& p, std::chrono::milliseconds watchdog) {
    // When to tick, end a search, record slots, reconfigure and drain: the
    // scheduler decides, this loop does.
    TickScheduler schedule([] { return Clock::now(); }, p.engine.tick_ms());
    auto next_stats = Clock::now() + stats_interval();
    auto next_ping = Clock::now();
    auto publish_stats = [&](const char* reason) {
      nlohmann::json stats = p.counters();
      stats["type"] = "stats";
      stats["reason"] = reason;
      stats["time"] = unix_now();
      p.sink.submit_stats(stats);
      const auto& e = p.engine.counters();
      notify_status(fmt::format("{} streams, {} frames, {} alerts (latency p50 {:.0f} ms, p99 "
                                "{:.0f} ms, max {:.0f} ms), {} deadline misses, {} deferred, {} "
                                "shed; backend {}",
                                e.streams, e.frames_accepted, e.alerts,
                                alert_latency_.quantile(0.5), alert_latency_.quantile(0.99),
                                alert_latency_.max(), e.deadline_misses, e.deferred_streams,
                                e.shed_streams, p.engine.backend_name()));
      return stats;
    };
    double newest_arrival = 0;
    // A tick starts a batch; the search runs on the engine's thread while
    // this one goes on taking frames, and the tick ends (phase 2, alerts out)
    // when the search is done (the rules: daemon/tick_scheduler.h).
    const auto batch_state = [&p] {
      const bool in_flight = p.engine.batch_in_flight();
      return BatchState{in_flight, in_flight && p.engine.search_done(), p.engine.batch_searched()};
    };
    // GW_DAEMON_TICK_LOG=FILE: one line per tick step of this thread, with
    // its parts' times in ms (docs/benchmarks.md reads them): where a tick's
    // time goes when the GPU waits for the next batch.
    //   S t frames take begin late   a tick's batch starts: frames taken at
    //                                the tick, their ms, the engine's start
    //                                ms, ms past the tick
    //   D t phase2 admit submit metrics final   a batch's phase 2 and
    //                                what follows it (final: the slots
    //                                recorded at the drain)
    //   R t ms seconds in_flight     wearer-seconds to the slot index, and
    //                                whether a search ran meanwhile
    //   F t frames ms                a turn's frames, when > 2 ms
    //   P t ms                       control requests, when > 1 ms
    DiagnosticLog tick_log(diagnostics().daemon_tick_log, "GW_DAEMON_TICK_LOG");
    const auto ms_between = [](Clock::time_point a, Clock::time_point b) {
      return 1e3 * seconds_between(a, b);
    };
    bool windows_paused = false;
    Clock::time_point windows_pause_logged{};
    auto begin_tick = [&] {
      // A reload (or changed marks) changes the patterns the waiting phase 2
      // reads: it waits for a tick without one.
      if (TickScheduler::may_reconfigure(batch_state())) apply_pending_reload(p.engine);
      if (history_) history_->flush_idle(unix_now());
      // Windows give way to detection while the writer is behind.
      const std::uint64_t waiting = p.sink.pending();
      const bool pause_windows = waiting >= pipeline::kWindowsShedBacklog;
      if (pause_windows && !windows_paused &&
          Clock::now() - windows_pause_logged >= pipeline::kSinkReportPeriod) {
        windows_pause_logged = Clock::now();
        spdlog::warn("alert windows paused: {} alerts wait for the store; alerts go out without "
                     "their windows (they cannot be marked) until it catches up",
                     waiting);
      }
      windows_paused = pause_windows;
      p.engine.set_alert_windows_paused(pause_windows);
      const auto started = Clock::now();
      p.engine.start_batch(unix_now, std::launch::async);
      const double took = seconds_between(started, Clock::now());
      pipeline_seconds_.batch += took;
      pipeline_seconds_.batch_start += took;
    };
    // What an alert's log line says, kept while the alert itself goes to
    // the writer.
    struct LoggedAlert {
      std::string pattern;
      std::uint32_t wearer;
      std::uint16_t device;
      double t_end, distance;
      int matched_dims, pattern_dims;
    };
    std::vector<LoggedAlert> logged_alerts;
    std::vector<pipeline::Event> episode_events;
    // The search in flight (if any) ends; its batch then waits for its
    // phase 2 (detect_and_send).
    auto end_search = [&] {
      const auto started = Clock::now();
      p.engine.end_search(unix_now);
      pipeline_seconds_.batch += seconds_between(started, Clock::now());
    };
    // The wearer-seconds completed by the frames taken so far go to the
    // slot index after each batch. With many wearers the seconds of all
    // wearers complete in the same tick (one to classify and insert each), so
    // they go in steps (TickScheduler::slot_step_due says when): they are on
    // neither an alert's way nor the next batch's, and a step is short enough
    // not to hold a search's end for long (docs/design.md, "Pipelined
    // batches").
    auto record_slots = [&](bool final) {
      const auto started = Clock::now();
      // While frames wait in the queue, the slot recorder's clock is the
      // arrival of the newest frame it was given: a stream whose next frames
      // are queued is late here, not silent.
      const std::size_t seconds_recorded =
          p.jobs.record_slots(p.queue.size() > 0 ? newest_arrival : unix_now(), final,
                              TickScheduler::kSlotSecondsPerStep, p.engine.spare_host_pool());
      const auto ended = Clock::now();
      const double step_ms = ms_between(started, ended);
      pipeline_seconds_.after_batch += seconds_between(started, ended);
      schedule.on_slot_step(seconds_recorded, step_ms, final);
      if (tick_log)
        tick_log.write(fmt::format("R {:.3f} {:.2f} {} {}\n", unix_now(), step_ms, seconds_recorded,
                                   p.engine.batch_in_flight() ? 1 : 0));
    };
    // Phase 2 of the searched batch (if any), and its alerts out.
    auto detect_and_send = [&](bool final) {
      schedule.on_phase2_started();
      const auto batch_start = Clock::now();
      auto batch = p.engine.detect_searched(unix_now);
      const auto batch_end = Clock::now();
      pipeline_seconds_.batch += seconds_between(batch_start, batch_end);
      auto alerts = p.jobs.admit(p.engine, std::move(batch));
      const auto admitted = Clock::now();
      // The alerts go to the writer first: the rest of the tick's bookkeeping
      // (their log lines, one per alert; the counters' snapshot for
      // /metrics) is not on their way to the subscribers.
      logged_alerts.clear();
      const bool log_alerts = spdlog::should_log(spdlog::level::info);
      for (const auto& alert : alerts) {
        alert_latency_.observe(alert.latency_ms);
        if (lifecycle_ && alert.severity == "critical") lifecycle_->critical_alert_submitted();
        if (log_alerts)
          logged_alerts.push_back({alert.pattern, alert.wearer, alert.device, alert.t_end,
                                   alert.distance, alert.matched_dims, alert.pattern_dims});
      }
      if (wearers_) wearers_->name_alerts(alerts);
      p.sink.submit_all(alerts);
      // After the alerts, so that the store finds an episode's first alert.
      // An alert storm ends thousands of episodes a second: their events are
      // made on the engine's pool when it is spare.
      const std::vector<pipeline::EpisodeEnd> ends = p.engine.take_episode_ends();
      episode_events.resize(ends.size());
      const double ended_at = unix_now();
      const auto make_events = [&](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i)
          episode_events[i] = pipeline::episode_ended_event(ends[i], ended_at);
      };
      constexpr std::size_t kEventsPerChunk = 64;
      if (WorkerPool* pool = p.engine.spare_host_pool(); pool && ends.size() > kEventsPerChunk)
        pool->for_ranges(ends.size(), kEventsPerChunk, make_events);
      else
        make_events(0, ends.size());
      for (pipeline::Event& event : episode_events) p.sink.submit_event(std::move(event));
      episode_events.clear();
      if (gait_) submit_gait(p.sink, final);
      const auto submitted = Clock::now();
      pipeline_seconds_.alerts_out += seconds_between(batch_end, submitted);
      for (const LoggedAlert& alert : logged_alerts)
        spdlog::info("alert: {} wearer {} device {} t={:.2f}s distance {:.3f} dims {}/{}",
                     alert.pattern, alert.wearer, alert.device, alert.t_end, alert.distance,
                     alert.matched_dims, alert.pattern_dims);
      if (const std::string note = p.engine.take_backend_note(); !note.empty()) {
        spdlog::error("{}", note);
        notify_status(note);
      }
      const std::uint64_t batches_before = batches_seen_;
      batches_seen_ = p.engine.counters().batches;
      if (batches_seen_ != batches_before) batch_time_.observe(p.engine.counters().last_batch_ms);
      const auto published = Clock::now();
      metrics_board_.publish({p.counters(), alert_latency_, batch_time_});
      const auto metrics_done = Clock::now();
      schedule.on_phase2_done();
      const auto after_end = Clock::now();
      pipeline_seconds_.after_batch += seconds_between(batch_end, after_end);
      if (final) record_slots(/*final=*/true);  // counts its own time
      if (tick_log)
        tick_log.write(fmt::format("D {:.3f} {:.2f} {:.2f} {:.2f} {:.2f} {:.2f}\n", unix_now(),
                                   ms_between(batch_start, batch_end),
                                   ms_between(batch_end, admitted), ms_between(admitted, submitted),
                                   ms_between(published, metrics_done),
                                   ms_between(metrics_done, after_end)));
    };
    auto end_tick = [&](bool final) {
      end_search();
      detect_and_send(final);
    };
    auto run_tick = [&](bool final) {
      begin_tick();
      end_tick(final);
    };
    // Frames are taken off the queue in bunches (up to kFramesPerTurn, so
    // that ticks and the search in flight are still looked at every few ms)
    // and appended on the engine's pool.
    constexpr std::size_t kFramesPerTurn = 1024;
    // At a tick, up to this many (a bound, so that a flooded queue cannot
    // hold the tick for long).
    constexpr std::size_t kFramesAtTick = 16 * kFramesPerTurn;
    std::vector<ReceivedFrame> arrived;
    std::vector<pipeline::Engine::ArrivedFrame> arrived_refs;
    std::vector<char> accepted;
    std::vector<GaitWorker::FrameLoads> gait_frames;
    auto take_all = [&](std::vector<ReceivedFrame>& frames) {
      const auto engine_start = Clock::now();
      arrived_refs.clear();
      for (const ReceivedFrame& f : frames) {
        newest_arrival = std::max(newest_arrival, f.arrival_s);
        arrived_refs.push_back({&f.frame, f.arrival_s});
      }
      p.engine.on_frames(arrived_refs, accepted);
      p.jobs.on_frames(frames, accepted, p.engine.spare_host_pool());
      for (std::size_t i = 0; i < frames.size(); ++i) {
        if (!accepted[i]) continue;
        if (wearers_) wearers_->on_frame(frames[i].frame, frames[i].arrival_s);
        // The hotspots read the loads before the gait thread takes them over.
        if (hotspots_ && !frames[i].region_pressures.empty()) {
          const sensors::Frame& f = frames[i].frame;
          hotspots_->on_frame(f.wearer_id, f.device_id, static_cast<double>(f.device_time_us) / 1e6,
                              f.sample_rate_hz, f.samples, frames[i].foot_loads.data(),
                              frames[i].region_pressures.data(), frames[i].arrival_s);
        }
        if (gait_ && !frames[i].foot_loads.empty()) {
          const sensors::Frame& f = frames[i].frame;
          gait_frames.push_back({f.wearer_id, f.device_id, static_cast<double>(f.device_time_us) / 1e6,
                                 f.sample_rate_hz, f.samples, std::move(frames[i].foot_loads),
                                 frames[i].arrival_s});
        }
      }
      if (!gait_frames.empty()) gait_->offer(gait_frames);
      pipeline_seconds_.frames_engine += seconds_between(engine_start, Clock::now());
    };
    // A tick's batch takes every frame queued by then: they arrived before
    // it, while this thread was busy (a phase 2 and the alerts out take a
    // good part of a tick at full load), and without this their samples would wait
    // for the next batch.
    auto start_tick = [&](Clock::time_point now) {
      const auto tick_start = Clock::now();
      arrived.clear();
      const std::size_t drained = p.queue.drain(arrived, kFramesAtTick);
      if (drained > 0) take_all(arrived);
      const auto taken = Clock::now();
      pipeline_seconds_.frames += seconds_between(tick_start, taken);
      begin_tick();
      if (tick_log)
        tick_log.write(fmt::format("S {:.3f} {} {:.2f} {:.2f} {:.2f}\n", unix_now(), drained,
                                   ms_between(tick_start, taken), ms_between(taken, Clock::now()),
                                   ms_between(schedule.next_tick(), tick_start)));
      if (schedule.finish_at_start(p.engine.batch_in_flight())) end_tick(/*final=*/false);
      schedule.on_batch_started(now, p.engine.tick_ms());
    };
    // About once a second: the streams' states, and idle streams removed
    // (Engine::sweep_streams); refusals and removals logged, paced.
    auto next_sweep = Clock::now();
    LogThrottle refused_streams_log, evicted_streams_log;
    auto sweep_streams = [&] {
      p.engine.sweep_streams(unix_now());
      const auto& e = p.engine.counters();
      const auto& limits = p.engine.config().ingest;
      if (const auto since = refused_streams_log.due(e.streams_refused))
        spdlog::warn("engine: dropped {} frame(s) that would have opened a stream past "
                     "ingest.max_streams {} ({} in all)",
                     *since, limits.max_streams, e.streams_refused);
      if (const auto since = evicted_streams_log.due(e.streams_evicted))
        spdlog::info("engine: removed {} stream(s) without a frame for {} s ({} in all, {} live)",
                     *since, limits.stream_idle_s, e.streams_evicted, e.streams);
    };
    // Sensor liveness on the daemon's clock, a few times a second: a device
    // goes offline (and alerts) within kLivenessPeriod of its limit. While
    // frames wait in the queue, the clock is the newest frame taken, so that
    // a backlog does not look like silence.
    constexpr auto kLivenessPeriod = std::chrono::milliseconds(200);
    auto next_liveness = Clock::now();
    auto turn_start = Clock::now();
    // At the stop signal the loop goes on while the TCP connections finish
    // reading (Ingest::stop() bounds that, and so does the searches' share
    // of daemon.stop_timeout_s): a full queue holds their frames back
    // rather than refusing them.
    while (!stopping_ || (p.ingest.reading() && Clock::now() < stop_limits().searches_end)) {
      auto frame = p.queue.pop_for(schedule.frame_wait(turn_start, p.engine.batch_in_flight()));
      const auto popped = Clock::now();
      auto frame_done = popped;
      if (frame) {
        arrived.clear();
        arrived.push_back(std::move(*frame));
        p.queue.drain(arrived, kFramesPerTurn - 1);
        take_all(arrived);
        frame_done = Clock::now();
        if (tick_log && frame_done - popped > std::chrono::milliseconds(2))
          tick_log.write(fmt::format("F {:.3f} {} {:.2f}\n", unix_now(), arrived.size(),
                                     ms_between(popped, frame_done)));
      }
      // Ticks' time (the frames a tick takes included; the turn's own
      // frames are added below).
      const double tick_before =
          pipeline_seconds_.batch + pipeline_seconds_.after_batch + pipeline_seconds_.frames;
      p.tasks.run_pending();  // control requests, between frames and ticks
      const auto now = Clock::now();
      if (tick_log && now - frame_done > std::chrono::milliseconds(1))
        tick_log.write(fmt::format("P {:.3f} {:.2f}\n", unix_now(), ms_between(frame_done, now)));
      // A search still running at the tick is not waited for: the next batch
      // starts as soon as it ends (so with a short tick_ms the batches run
      // back to back, each taking what arrived during the one before).
      if (schedule.search_end(now, batch_state(), p.engine.tick_ms()) != SearchEnd::kKeepRunning) {
        end_search();
        const auto ended = Clock::now();
        if (schedule.after_search(ended, p.engine.counters().last_phase2_ms,
                                 reload_pending() || (marks_ && marks_->changed())) ==
            AfterSearch::kNextBatchFirst)
          start_tick(ended);
        detect_and_send(/*final=*/false);
      }
      if (schedule.batch_due(now, p.engine.batch_in_flight())) start_tick(now);
      if (schedule.slot_step_due(p.engine.batch_in_flight())) record_slots(/*final=*/false);
      if (wearers_ && now >= next_liveness) {
        wearers_->tick(p.queue.size() > 0 ? newest_arrival : unix_now());
        next_liveness = now + kLivenessPeriod;
      }
      if (now >= next_sweep) {
        sweep_streams();
        if (lifecycle_) lifecycle_->step(p.sink.counters().pending);
        next_sweep = now + std::chrono::seconds(1);
      }
      if (stats_interval().count() > 0 && now >= next_stats) {
        publish_stats("interval");
        next_stats = now + stats_interval();
      }
      if (watchdog.count() > 0 && now >= next_ping) {
        notify_watchdog();
        next_ping = now + watchdog;
      }
      const auto turn_end = Clock::now();
      const double tick_s = pipeline_seconds_.batch + pipeline_seconds_.after_batch +
                            pipeline_seconds_.frames - tick_before;
      pipeline_seconds_.waiting += seconds_between(turn_start, popped);
      pipeline_seconds_.frames += seconds_between(popped, frame_done);
      pipeline_seconds_.other += seconds_between(frame_done, turn_end) - tick_s;
      turn_start = turn_end;
    }
    // Drain, within daemon.stop_timeout_s of the stop signal: every frame
    // that was accepted into the queue is searched, every gathered
    // wearer-second recorded, every alert committed. The searches get
    // kSearchShareOfStop of the limit, the final commits the rest; what is
    // not done by then is counted and logged.
    const StopLimits limits = stop_limits();
    StopDrain drain([] { return Clock::now(); }, limits);
    std::vector<ReceivedFrame> rest;
    for (DrainStep step = drain.next(); step != DrainStep::kDone; step = drain.next()) {
      switch (step) {
        case DrainStep::kEndBatchInFlight:
          end_tick(/*final=*/false);
          p.queue.close();
          break;
        case DrainStep::kTakeQueuedFrames:
          rest.clear();
          drain.on_frames_taken(p.queue.drain(rest, kFramesAtTick));
          if (!rest.empty()) take_all(rest);
          break;
        case DrainStep::kAbandonQueuedFrames:
          rest.clear();
          stop_abandoned_frames_ = p.queue.drain(rest);
          break;
        case DrainStep::kFinalBatch:
          run_tick(/*final=*/true);
          drain.on_final_batch(p.engine.counters().pending_windows);
          break;
        case DrainStep::kDone:
          break;
      }
    }
    stop_abandoned_windows_ = p.engine.counters().pending_windows;
    if (stop_abandoned_frames_ > 0 || stop_abandoned_windows_ > 0)
      spdlog::warn("stop: daemon.stop_timeout_s ({} s) left no time to search {} queued frames "
                   "and {} due windows; they are not searched",
                   config_.daemon.stop_timeout_s, stop_abandoned_frames_,
                   stop_abandoned_windows_);
    // Control requests already queued are answered; later ones get
    // "shutting_down".
    p.tasks.close();
    p.tasks.run_pending();
    // Every accepted sample is committed to the history, and every alert to
    // the store (or given up at the limit), before the final counters go out.
    if (history_) history_->stop();
    if (wearers_) wearers_->flush();
    if (!p.sink.drain(limits.commits_end)) {
      const auto c = p.sink.counters();
      spdlog::warn("stop: the hit store still failed at the stop limit: {} alerts given up "
                   "(neither stored nor published); {} committed, {} dropped before",
                   c.stop_abandoned, c.committed, c.store_dropped);
    }
    const auto stats = publish_stats("shutdown");
    spdlog::info("final counters: {}", stats.dump());
  }

  // When the stop's searches and its final commits must end, counted from
  // the stop signal (or from now, when the loop ended otherwise).
  StopLimits stop_limits() const {
    const Clock::rep requested = stop_requested_at_.load();
    std::optional<Clock::time_point> stop_requested;
    if (requested != 0) stop_requested = Clock::time_point(Clock::duration(requested));
    return StopLimits::from(stop_requested, config_.daemon.stop_timeout_s, Clock::now());
  }

  bool reload_pending() {
    std::lock_guard<std::mutex> lock(reload_mu_);
    return pending_.has_value();
  }

  // The gait monitor's abnormal bouts and the hotspot monitor's hotspots, as
  // alerts the detections' way out, and the completed minutes of walking, as
  // gait_minute events. At the final drain it first waits (briefly) for the
  // gait thread to go through what was queued.
  void submit_gait(pipeline::AlertSink& sink, bool final) {
    if (final && !gait_->wait_idle(std::chrono::seconds(2)))
      spdlog::warn("gait: the monitor did not go through its queue before the stop");
    GaitWorker::Output output = gait_->take();
    const double now = unix_now();
    std::vector<pipeline::Alert> alerts;
    for (const gait::AbnormalBout& bout : output.bouts) {
      alerts.push_back(abnormal_gait_alert(bout, config_.gait, now));
      alert_latency_.observe(alerts.back().latency_ms);
      if (lifecycle_ && alerts.back().severity == "critical") lifecycle_->critical_alert_submitted();
      spdlog::info("alert: {} wearer {} device {} t={:.2f}s score {:.3f} over {} strides", config_.gait.name,
                   bout.wearer, bout.device, bout.t_end, bout.score, bout.strides);
    }
    if (hotspots_) {
      for (const gait::HotspotAlarm& alarm : hotspots_->take_alarms()) {
        const config::DeviceProfile* device = config_.device_by_id(alarm.device);
        if (!device) continue;
        alerts.push_back(pressure_hotspot_alert(alarm, device->hotspots, now));
        alert_latency_.observe(alerts.back().latency_ms);
        if (lifecycle_ && alerts.back().severity == "critical") lifecycle_->critical_alert_submitted();
        spdlog::info("alert: pressure_hotspot wearer {} device {} {} {} t={:.2f}s peak {:.1f} for {:.1f}s",
                     alarm.wearer, alarm.device, alerts.back().foot, alarm.event.region, alarm.event.t_s,
                     alarm.event.peak, alarm.event.duration_s);
      }
    }
    if (!alerts.empty()) {
      if (wearers_) wearers_->name_alerts(alerts);
      sink.submit_all(alerts);
    }
    for (const gait::GaitMinute& minute : output.minutes) sink.submit_event(gait_minute_event(minute, now));
  }

  // The marks' examples changed (alert.mark, alert.unmark): the engine runs
  // the config with them from the next batch on. A config that does not
  // compile keeps the running one (logged).
  void apply_marks(pipeline::Engine& engine) {
    if (!marks_ || !marks_->take_changed()) return;
    try {
      engine.reconfigure(marks_->effective_config());
      spdlog::info("marks applied: {} active marks' examples", marks_->active_examples());
    } catch (const std::exception& e) {
      spdlog::error("marks not applied, still running the previous patterns: {}", e.what());
    }
  }

  void apply_pending_reload(pipeline::Engine& engine) {
    std::optional<config::Config> fresh;
    {
      std::lock_guard<std::mutex> lock(reload_mu_);
      fresh.swap(pending_);
    }
    if (!fresh) {
      apply_marks(engine);
      return;
    }
    // The marks are evaluated against the reloaded patterns, and go back to
    // the running ones if the reload is rejected.
    std::optional<config::Config> running_base;
    try {
      // The reloaded patterns keep the marks' examples.
      if (marks_) {
        running_base = marks_->base_config();
        marks_->set_base(*fresh);
        marks_->take_changed();
      }
      engine.reconfigure(marks_ ? marks_->effective_config() : *fresh);
      if (wearers_) wearers_->set_config(*fresh);
      set_log_level(fresh->daemon.log_level);
      if (lifecycle_) lifecycle_->set_policy(escalation_policy(fresh->alerts));
      stats_interval_ms_ = static_cast<long>(fresh->publish.stats_interval_s * 1000);
      spdlog::info("reload applied: {} patterns, tick {} ms, deadline {} ms",
                   fresh->patterns.size(), fresh->search.tick_ms, fresh->search.deadline_ms);
      if (fresh->patterns.empty())
        spdlog::warn("reload applied `patterns: []`: running without detection");
    } catch (const std::exception& e) {
      spdlog::error("reload rejected, still running the previous config: {}", e.what());
      if (running_base) {
        marks_->set_base(*running_base);
        marks_->take_changed();
      }
    }
  }

  std::chrono::milliseconds stats_interval() const {
    return std::chrono::milliseconds(stats_interval_ms_.load());
  }

  std::string config_path_;
  config::Config config_;
  std::atomic<bool> stopping_{false};
  // When the stop signal came (steady_clock ticks; 0 = none yet).
  std::atomic<Clock::rep> stop_requested_at_{0};
  // What the drain at stop left unsearched (pipeline thread only).
  std::uint64_t stop_abandoned_frames_ = 0;
  std::uint64_t stop_abandoned_windows_ = 0;
  std::mutex reload_mu_;
  std::optional<config::Config> pending_;
  MetricsBoard metrics_board_;
  LatencyHistogram alert_latency_;  // pipeline thread only; copies go to the board
  LatencyHistogram batch_time_;
  std::uint64_t batches_seen_ = 0;
  // Where the pipeline thread's time goes, cumulative seconds (pipeline
  // thread only): waiting for frames (pop_for, lock included), taking them
  // (the queue, then the engine and slot recorder: frames_engine), the
  // engine's batches (of which start_batch: batch_start), what follows a
  // batch (de-duplication, sink, metrics, slots; the part until the alerts
  // are with the sink: alerts_out), and the rest (control
  // tasks, stats). Its "stats." and /metrics show whether the thread is the
  // limit.
  struct PipelineSeconds {
    double waiting = 0, frames = 0, frames_engine = 0, batch = 0, batch_start = 0,
           after_batch = 0, alerts_out = 0, other = 0;
    nlohmann::json to_json() const {
      return {{"waiting_s", waiting},        {"frames_s", frames},
              {"frames_engine_s", frames_engine}, {"batch_s", batch},
              {"batch_start_s", batch_start}, {"after_batch_s", after_batch},
              {"alerts_out_s", alerts_out},
              {"other_s", other}};
    }
  } pipeline_seconds_;
  std::unique_ptr<pipeline::HistoryRecorder> history_;  // null unless history.enabled
  MarkBook* marks_ = nullptr;  // run()'s; pipeline thread only while it runs
  WearerBook* wearers_ = nullptr;  // run()'s; pipeline thread only while it runs
  GaitWorker* gait_ = nullptr;  // run()'s when gait is on; offered to and taken from by the pipeline thread
  gait::HotspotMonitor* hotspots_ = nullptr;  // run()'s when a device's hotspots are watched; pipeline thread only
  AlertLifecycle* lifecycle_ = nullptr;  // run()'s; pipeline thread only while it runs
  std::atomic<long> stats_interval_ms_{static_cast<long>(config_.publish.stats_interval_s * 1000)};
};

}  // namespace

int run_daemon(const std::string& config_path) {
  // Health data: the database, its journal and any file the daemon creates
  // are private to its user, also when started outside systemd (UMask=0077).
  ::umask(0077);
  Daemon daemon(config_path);
  return daemon.run();
}

}  // namespace gw::daemon
