// The MQTT bridge against a real mosquitto broker on loopback: every offered
// alert arrives once and in order, the retained topics hold the present
// state, a broker that comes late or goes away loses nothing within the
// queue's bound, and a full queue drops the oldest and counts it.
#include "bridges/mqtt_bridge.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "common/error.h"
#include "tests/common/mqtt_broker.h"
#include "tests/common/temp_dir.h"

namespace {

using gw::bridges::MqttBridge;
using gw::bridges::MqttBridgeOptions;
using gw::bridges::mqtt_topic;
using gw::test::MqttBroker;
using gw::test::MqttMessage;
using gw::test::MqttRecorder;
using namespace std::chrono_literals;

class TempDir : public gw::test::TempDir {
 public:
  TempDir() : gw::test::TempDir("gw_bridge_test") {}
};

MqttBridgeOptions options_for(int port) {
  MqttBridgeOptions options;
  options.port = port;
  options.client_id = "gw-test-bridge";
  options.topic_prefix = "ward3";
  return options;
}

std::string alert_body(int seq, int wearer) {
  return "{\"seq\":" + std::to_string(seq) + ",\"wearer\":" + std::to_string(wearer) + "}";
}

// The non-retained alert bodies under ward3/alert/, in arrival order.
std::vector<std::string> alert_bodies(const std::vector<MqttMessage>& messages) {
  std::vector<std::string> bodies;
  for (const MqttMessage& m : messages)
    if (m.topic.rfind("ward3/alert/", 0) == 0) bodies.push_back(m.payload);
  return bodies;
}

#define REQUIRE_BROKER()                                              \
  if (!MqttBroker::available()) {                                     \
    WARN("mosquitto not installed (Debian package mosquitto)");       \
    return;                                                           \
  }

}  // namespace

TEST_CASE("mqtt_topic: publisher topics become levels under the prefix", "[bridges]") {
  CHECK(mqtt_topic("gaitwatch", "alert.critical.17.") == "gaitwatch/alert/critical/17");
  CHECK(mqtt_topic("site/ward3", "event.alert_acknowledged.4.") ==
        "site/ward3/event/alert_acknowledged/4");
}

TEST_CASE("MqttBridge: invalid options are refused with the option named", "[bridges]") {
  MqttBridgeOptions options = options_for(1883);
  options.qos = 3;
  CHECK_THROWS_WITH(MqttBridge(options), Catch::Contains("qos"));
  options = options_for(0);
  CHECK_THROWS_WITH(MqttBridge(options), Catch::Contains("port"));
  options = options_for(1883);
  options.topic_prefix = "a/#";
  CHECK_THROWS_WITH(MqttBridge(options), Catch::Contains("topic_prefix"));
  options = options_for(1883);
  options.tls_ca_file = "/nonexistent/ca.pem";
  CHECK_THROWS_WITH(MqttBridge(options), Catch::Contains("ca_file"));
}

TEST_CASE("MqttBridge: every alert once and in order, events, retained state and status",
          "[bridges]") {
  REQUIRE_BROKER();
  TempDir dir;
  MqttBroker broker(dir.path());
  broker.start();
  MqttRecorder live(broker.port(), "ward3/#");
  REQUIRE(live.wait_subscribed(5s));

  MqttBridge bridge(options_for(broker.port()));
  constexpr int kAlerts = 500;
  for (int i = 1; i <= kAlerts; ++i)
    bridge.offer("alert.critical." + std::to_string(i % 3) + ".", alert_body(i, i % 3));
  bridge.offer("event.alert_acknowledged.2.", "{\"id\":1}");
  bridge.offer("stats.", "{}");  // not an alert or event: not bridged
  bridge.set_retained(2, "state", "{\"state\":\"offline\"}");

  REQUIRE(live.wait_until(
      [](const std::vector<MqttMessage>& m) { return alert_bodies(m).size() >= kAlerts; }, 20s));
  const std::vector<std::string> bodies = alert_bodies(live.messages());
  REQUIRE(bodies.size() == kAlerts);
  for (int i = 1; i <= kAlerts; ++i) CHECK(bodies[i - 1] == alert_body(i, i % 3));
  // Retained topics are also published at each connection, ahead of what
  // the queue still holds: wait for the state and the event, in either order.
  REQUIRE(live.wait_until(
      [](const std::vector<MqttMessage>& m) {
        bool state = false, event = false;
        for (const MqttMessage& x : m) {
          state = state || x.topic == "ward3/wearer/2/state";
          event = event || x.topic == "ward3/event/alert_acknowledged/2";
        }
        return state && event;
      },
      5s));
  bool saw_event = false, saw_stats = false;
  for (const MqttMessage& m : live.messages()) {
    saw_event = saw_event || (m.topic == "ward3/event/alert_acknowledged/2" && m.payload == "{\"id\":1}");
    saw_stats = saw_stats || m.topic.find("stats") != std::string::npos;
  }
  CHECK(saw_event);
  CHECK_FALSE(saw_stats);

  // A dashboard that subscribes now gets the retained state at once.
  MqttRecorder late(broker.port(), "ward3/#");
  REQUIRE(late.wait_until(
      [](const std::vector<MqttMessage>& m) {
        int retained = 0;
        for (const MqttMessage& x : m) retained += x.retained ? 1 : 0;
        return retained >= 5;  // status, three wearers' last alerts, one state
      },
      5s));
  std::map<std::string, std::string> retained;
  for (const MqttMessage& m : late.messages())
    if (m.retained) retained[m.topic] = m.payload;
  CHECK(retained["ward3/status"] == "online");
  CHECK(retained["ward3/wearer/1/last_alert"] == alert_body(499, 1));
  CHECK(retained["ward3/wearer/2/last_alert"] == alert_body(500, 2));
  CHECK(retained["ward3/wearer/0/last_alert"] == alert_body(498, 0));
  CHECK(retained["ward3/wearer/2/state"] == "{\"state\":\"offline\"}");
  CHECK(alert_bodies(late.messages()).empty());  // alerts themselves are not retained

  bridge.stop();
  const auto counters = bridge.counters();
  CHECK(counters.offered == kAlerts + 1);
  CHECK(counters.dropped == 0);
  CHECK(counters.connects == 1);
  CHECK(counters.queued == 0);
  REQUIRE(late.wait_until(
      [](const std::vector<MqttMessage>& m) {
        return !m.empty() && m.back().topic == "ward3/status" && m.back().payload == "offline";
      },
      5s));
}

TEST_CASE("MqttBridge: a broker that starts late gets what was offered before, in order",
          "[bridges]") {
  REQUIRE_BROKER();
  TempDir dir;
  MqttBroker broker(dir.path());
  MqttBridge bridge(options_for(broker.port()));
  for (int i = 1; i <= 20; ++i) bridge.offer("alert.warning.5.", alert_body(i, 5));
  std::this_thread::sleep_for(300ms);
  CHECK_FALSE(bridge.counters().connected);
  CHECK(bridge.counters().queued > 0);

  broker.start();
  // Retained last_alert shows the newest; the live subscription races the
  // bridge's reconnect, so the order check reads the delivered count.
  MqttRecorder live(broker.port(), "ward3/#");
  REQUIRE(live.wait_subscribed(5s));
  REQUIRE(live.wait_until(
      [](const std::vector<MqttMessage>& m) {
        for (const MqttMessage& x : m)
          if (x.topic == "ward3/wearer/5/last_alert" && x.payload == alert_body(20, 5)) return true;
        return false;
      },
      20s));
  bridge.stop();
  const auto counters = bridge.counters();
  CHECK(counters.connects >= 1);
  CHECK(counters.dropped == 0);
  CHECK(counters.sent == 40);  // 20 alerts and 20 retained last_alert updates
  // Whatever of the alerts the live client saw came in order.
  const std::vector<std::string> bodies = alert_bodies(live.messages());
  for (std::size_t i = 1; i < bodies.size(); ++i)
    CHECK(std::stoi(bodies[i].substr(7)) > std::stoi(bodies[i - 1].substr(7)));
}

TEST_CASE("MqttBridge: with no broker a full queue drops the oldest and counts it", "[bridges]") {
  MqttBridgeOptions options = options_for(gw::free_port(false));  // nothing listens there
  options.max_queued = 5;
  MqttBridge bridge(options);
  for (int i = 1; i <= 12; ++i) bridge.offer("event.alert_resolved.1.", "{\"id\":" + std::to_string(i) + "}");
  const auto before_stop = bridge.counters();
  CHECK(before_stop.offered == 12);
  // The sender may hold one message out of the queue while it waits.
  CHECK(before_stop.queued + before_stop.dropped >= 11);
  CHECK(before_stop.dropped >= 6);
  const auto start = std::chrono::steady_clock::now();
  bridge.stop(200ms);
  CHECK(std::chrono::steady_clock::now() - start < 3s);
  const auto after = bridge.counters();
  CHECK(after.dropped == 12);  // none could be delivered
  CHECK(after.sent == 0);
}
