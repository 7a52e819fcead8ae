#include "bridges/mqtt_bridge.h"

#include <mosquitto.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>

#include "bridges/outbox.h"
#include "common/error.h"

namespace gw::bridges {
namespace {

using Clock = std::chrono::steady_clock;

OutboxOptions outbox_options(const MqttBridgeOptions& options) {
  OutboxOptions o;
  o.log_name = "MQTT bridge";
  o.thread_name = "gw-mqtt";
  o.max_queued = options.max_queued;
  o.drop_hint = "is the broker at " + options.host + ":" + std::to_string(options.port) +
                " reachable?";
  return o;
}

void init_library_once() {
  static std::once_flag once;
  std::call_once(once, [] { mosquitto_lib_init(); });
}

void require_readable(const std::string& path, const char* what) {
  if (path.empty()) return;
  std::ifstream in(path);
  if (!in) throw Error(std::string("MQTT bridge: ") + what + " '" + path + "' cannot be read");
}

}  // namespace

std::string mqtt_topic(const std::string& prefix, const std::string& publisher_topic) {
  std::string topic = prefix;
  std::string level;
  for (const char c : publisher_topic) {
    if (c == '.') {
      if (!level.empty()) topic += "/" + level;
      level.clear();
    } else {
      level += c;
    }
  }
  if (!level.empty()) topic += "/" + level;
  return topic;
}

struct MqttBridge::Impl {
  explicit Impl(MqttBridgeOptions opts)
      : options(std::move(opts)),
        outbox(outbox_options(options), [this](const OutboxMessage& m) { return deliver(m); }) {}

  ~Impl() {
    outbox.stop(std::chrono::milliseconds(0));  // its delivery publishes through the client
    if (client) mosquitto_destroy(client);
  }

  void start() {
    init_library_once();
    client = mosquitto_new(options.client_id.c_str(), /*clean_session=*/true, this);
    if (!client) throw Error("MQTT bridge: cannot create a client");
    mosquitto_int_option(client, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311);
    mosquitto_connect_callback_set(client, [](mosquitto*, void* self, int rc) {
      static_cast<Impl*>(self)->on_connect(rc);
    });
    mosquitto_disconnect_callback_set(client, [](mosquitto*, void* self, int rc) {
      static_cast<Impl*>(self)->on_disconnect(rc);
    });
    mosquitto_publish_callback_set(client, [](mosquitto*, void* self, int) {
      ++static_cast<Impl*>(self)->delivered;
    });
    const std::string status = status_topic();
    expect_ok(mosquitto_will_set(client, status.c_str(), 7, "offline", options.qos, true),
              "will");
    if (!options.username.empty())
      expect_ok(mosquitto_username_pw_set(client, options.username.c_str(),
                                          options.password.empty() ? nullptr
                                                                   : options.password.c_str()),
                "username");
    if (!options.tls_ca_file.empty())
      expect_ok(mosquitto_tls_set(client, options.tls_ca_file.c_str(), nullptr,
                                  options.tls_cert_file.empty() ? nullptr
                                                                : options.tls_cert_file.c_str(),
                                  options.tls_key_file.empty() ? nullptr
                                                               : options.tls_key_file.c_str(),
                                  nullptr),
                "TLS");
    mosquitto_reconnect_delay_set(client, 1, 30, true);
    expect_ok(mosquitto_loop_start(client), "network thread");
    // A broker that is not there yet is retried by the network thread.
    const int rc = mosquitto_connect_async(client, options.host.c_str(), options.port,
                                           options.keepalive_s);
    if (rc != MOSQ_ERR_SUCCESS)
      spdlog::warn("MQTT bridge: connecting to {}:{}: {}; retrying", options.host, options.port,
                   mosquitto_strerror(rc));
    outbox.start();
  }

  void expect_ok(int rc, const char* what) const {
    if (rc != MOSQ_ERR_SUCCESS)
      throw Error(std::string("MQTT bridge: ") + what + ": " + mosquitto_strerror(rc));
  }

  std::string status_topic() const { return options.topic_prefix + "/status"; }

  // On the network thread. The retained topics go first, so a dashboard that
  // subscribes after a reconnect sees the present state before new alerts.
  void on_connect(int rc) {
    if (rc != 0) {
      spdlog::warn("MQTT bridge: {}:{} refused the connection: {}", options.host, options.port,
                   mosquitto_connack_string(rc));
      return;
    }
    publish_now(status_topic(), "online", true);
    std::map<std::string, std::string> state;
    {
      std::lock_guard<std::mutex> lock(mu);
      state = retained;
    }
    for (const auto& [topic, body] : state) publish_now(topic, body, true);
    ++connects;
    spdlog::info("MQTT bridge: connected to {}:{}", options.host, options.port);
    {
      std::lock_guard<std::mutex> lock(mu);
      connected = true;
    }
    outbox.wake();
  }

  // Every publish goes through here, so that `handed` - `delivered` is what
  // the client library still holds.
  int publish_now(const std::string& topic, const std::string& body, bool retain) {
    const int rc = mosquitto_publish(client, nullptr, topic.c_str(), static_cast<int>(body.size()),
                                     body.data(), options.qos, retain);
    if (rc == MOSQ_ERR_SUCCESS) ++handed;
    return rc;
  }

  bool is_connected() {
    std::lock_guard<std::mutex> lock(mu);
    return connected;
  }

  void on_disconnect(int rc) {
    {
      std::lock_guard<std::mutex> lock(mu);
      connected = false;
    }
    if (rc != 0 && !stopping.load())
      spdlog::warn("MQTT bridge: lost {}:{}; reconnecting", options.host, options.port);
  }

  // On the outbox's sender: a message waits (kHold) while the broker is
  // away, so that order is kept across a disconnect.
  DeliveryOutcome deliver(const OutboxMessage& message) {
    if (!is_connected()) return DeliveryOutcome::kHold;
    const int rc = publish_now(message.topic, message.body, message.retain);
    if (rc == MOSQ_ERR_SUCCESS) return DeliveryOutcome::kDelivered;
    if (rc == MOSQ_ERR_NO_CONN) {
      std::lock_guard<std::mutex> lock(mu);
      connected = false;
      return DeliveryOutcome::kHold;
    }
    spdlog::error("MQTT bridge: cannot publish on {}: {}; dropped", message.topic,
                  mosquitto_strerror(rc));
    return DeliveryOutcome::kFailed;
  }

  const MqttBridgeOptions options;
  mosquitto* client = nullptr;
  std::mutex mu;
  bool connected = false;                      // guarded by mu
  std::map<std::string, std::string> retained;  // topic -> body; guarded by mu
  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> offered{0};
  std::atomic<std::uint64_t> delivered{0};  // acknowledged (the publish callback), of handed
  std::atomic<std::uint64_t> handed{0};     // accepted by mosquitto_publish, ours and the status
  std::atomic<std::uint64_t> connects{0};
  std::mutex stop_mu;
  bool stopped = false;  // guarded by stop_mu
  // Last: destroyed (its sender joined) before what the delivery uses.
  Outbox outbox;
};

MqttBridge::MqttBridge(MqttBridgeOptions options) {
  if (options.port < 1 || options.port > 65535)
    throw Error("MQTT bridge: port must be 1..65535, got " + std::to_string(options.port));
  if (options.qos < 0 || options.qos > 2)
    throw Error("MQTT bridge: qos must be 0, 1 or 2, got " + std::to_string(options.qos));
  if (options.max_queued < 1) throw Error("MQTT bridge: max_queued must be >= 1");
  if (options.topic_prefix.empty() || options.topic_prefix.find_first_of("#+") != std::string::npos)
    throw Error("MQTT bridge: topic_prefix must be non-empty, without '#' or '+'");
  if (options.tls_cert_file.empty() != options.tls_key_file.empty())
    throw Error("MQTT bridge: a client certificate needs both cert_file and key_file");
  if (options.tls_ca_file.empty() && !options.tls_cert_file.empty())
    throw Error("MQTT bridge: a client certificate needs TLS (ca_file)");
  require_readable(options.tls_ca_file, "ca_file");
  require_readable(options.tls_cert_file, "cert_file");
  require_readable(options.tls_key_file, "key_file");
  impl_ = std::make_unique<Impl>(std::move(options));
  impl_->start();
}

MqttBridge::~MqttBridge() { stop(); }

void MqttBridge::offer(const std::string& publisher_topic, const std::string& body) {
  const bool alert = publisher_topic.rfind("alert.", 0) == 0;
  const bool event = publisher_topic.rfind("event.", 0) == 0;
  if (!alert && !event) return;
  ++impl_->offered;
  const std::string topic = mqtt_topic(impl_->options.topic_prefix, publisher_topic);
  impl_->outbox.push({topic, body, false});
  if (!alert) return;
  // alert.<severity>.<wearer>.: the wearer is the last level.
  const std::size_t end = publisher_topic.size() - 1;
  const std::size_t start = publisher_topic.rfind('.', end - 1);
  if (start == std::string::npos || end <= start + 1) return;
  const std::string wearer = publisher_topic.substr(start + 1, end - start - 1);
  const std::string last =
      impl_->options.topic_prefix + "/wearer/" + wearer + "/last_alert";
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->retained[last] = body;
  }
  impl_->outbox.push({last, body, true});
}

void MqttBridge::set_retained(std::uint32_t wearer, const std::string& name,
                              const std::string& body) {
  const std::string topic =
      impl_->options.topic_prefix + "/wearer/" + std::to_string(wearer) + "/" + name;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->retained[topic] = body;
  }
  impl_->outbox.push({topic, body, true});
}

MqttBridgeCounters MqttBridge::counters() const {
  MqttBridgeCounters c;
  c.offered = impl_->offered.load();
  const OutboxCounters outbox = impl_->outbox.counters();
  c.sent = outbox.delivered;
  c.delivered = impl_->delivered.load();
  c.dropped = outbox.dropped + outbox.failed;
  c.connects = impl_->connects.load();
  c.queued = outbox.queued;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    c.connected = impl_->connected;
  }
  return c;
}

void MqttBridge::stop(std::chrono::milliseconds flush) {
  if (!impl_) return;
  Impl& impl = *impl_;
  std::lock_guard<std::mutex> stop_lock(impl.stop_mu);
  if (impl.stopped) return;
  impl.stopped = true;
  const auto deadline = Clock::now() + flush;
  impl.stopping = true;
  impl.outbox.stop(flush);
  // What the library holds goes out before the goodbye, within the deadline.
  while (impl.delivered.load() < impl.handed.load() && Clock::now() < deadline &&
         impl.is_connected())
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  impl.publish_now(impl.status_topic(), "offline", true);
  // The goodbye too, briefly: the will says the same when it does not arrive.
  const auto goodbye = Clock::now() + std::chrono::milliseconds(200);
  while (impl.delivered.load() < impl.handed.load() && Clock::now() < goodbye &&
         impl.is_connected())
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  mosquitto_disconnect(impl.client);
  mosquitto_loop_stop(impl.client, /*force=*/false);
}

}  // namespace gw::bridges
