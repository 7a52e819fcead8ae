// The MQTT bridge: every committed alert and event, as the alert publisher
// sends it, also goes to an MQTT broker, so that Home Assistant, Node-RED or
// a nurse-call gateway can take it without speaking ZeroMQ. Topics, under a
// configured prefix P (docs/integrations.md):
//   P/alert/<severity>/<wearer>    every alert (the alert message's JSON)
//   P/event/<type>/<wearer>        every event (sinks/event.h)
//   P/wearer/<wearer>/last_alert   retained: the wearer's latest alert
//   P/wearer/<wearer>/<name>       retained: per-wearer state set_retained() gives
//   P/status                       retained "online"; "offline" as the will and at stop
//
// Delivery: QoS 1 by default, in the order offered. While the broker is away
// messages wait in a bounded queue; when it is full the oldest is dropped,
// counted and logged (at most every 10 s). After a reconnect the retained
// per-wearer topics are sent again.
//
// Thread safety: offer(), set_retained() and counters() from any thread;
// they never block on the network. stop() from one thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace gw::bridges {

struct MqttBridgeOptions {
  std::string host = "127.0.0.1";
  int port = 1883;
  std::string client_id = "gaitwatchd";
  std::string topic_prefix = "gaitwatch";
  std::string username;  // empty = no authentication
  std::string password;
  // TLS when ca_file is set; cert_file + key_file give a client certificate.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  int qos = 1;  // 0, 1 or 2
  int keepalive_s = 30;
  std::size_t max_queued = 10000;  // messages waiting for the broker, >= 1
};

struct MqttBridgeCounters {
  std::uint64_t offered = 0;    // alerts and events handed to offer()
  std::uint64_t sent = 0;       // handed to the client library (in flight or delivered)
  // Acknowledged by the broker (QoS 1/2; QoS 0: written to the socket),
  // the status and retained per-wearer messages included.
  std::uint64_t delivered = 0;
  std::uint64_t dropped = 0;    // oldest dropped from a full queue, or left at stop
  std::uint64_t connects = 0;   // successful connections, the first included
  std::uint64_t queued = 0;     // waiting now
  bool connected = false;
};

// "alert.critical.17." -> "P/alert/critical/17" (a published topic's dots
// become levels; the trailing dot goes).
std::string mqtt_topic(const std::string& prefix, const std::string& publisher_topic);

class MqttBridge {
 public:
  // Checks the options (throws gw::Error naming the bad one: port, qos, TLS
  // files that cannot be read) and starts connecting in the background; an
  // unreachable broker is not an error, it is retried with back-off.
  explicit MqttBridge(MqttBridgeOptions options);
  ~MqttBridge();  // stop()
  MqttBridge(const MqttBridge&) = delete;
  MqttBridge& operator=(const MqttBridge&) = delete;

  // An alert ("alert.*") or event ("event.*") as the publisher sent it:
  // queued for the broker; an alert also becomes its wearer's retained
  // last_alert. Other topics are ignored.
  void offer(const std::string& publisher_topic, const std::string& body);
  // P/wearer/<wearer>/<name> retained, now and after every reconnect.
  void set_retained(std::uint32_t wearer, const std::string& name, const std::string& body);

  MqttBridgeCounters counters() const;

  // Sends what is queued while connected, for at most `flush`, publishes
  // status "offline", disconnects and joins. What is left counts as dropped.
  // Idempotent.
  void stop(std::chrono::milliseconds flush = std::chrono::milliseconds(1000));

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gw::bridges
