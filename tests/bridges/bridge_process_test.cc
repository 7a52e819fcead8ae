// The bridges through the real daemon fed by `gaitwatch replay` of the
// bundled recording: bridges.mqtt pointing at a real mosquitto on loopback
// (with a pattern that alerts at nearly every sample: the broker's
// subscriber must see every alert the store holds, once, in seq order, with
// the same body, and the retained per-wearer last alert), and
// bridges.webhook pointing at an HTTP server that fails at first.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "sinks/alert.h"
#include "sinks/store.h"
#include "tests/common/http_server.h"
#include "tests/common/mqtt_broker.h"
#include "tests/common/temp_dir.h"
#include "tests/daemon/daemon_fixture.h"
#include "tests/daemon/metrics_client.h"

namespace {

using gw::test::DaemonFixture;
using gw::test::MqttBroker;
using gw::test::MqttMessage;
using gw::test::MqttRecorder;
using nlohmann::json;
using namespace std::chrono_literals;

std::vector<json> alert_messages(const std::vector<MqttMessage>& messages) {
  std::vector<json> alerts;
  for (const MqttMessage& m : messages)
    if (m.topic.rfind("gaitwatch/alert/", 0) == 0) alerts.push_back(json::parse(m.payload));
  return alerts;
}

}  // namespace

TEST_CASE("bridges.mqtt: the broker gets every stored alert once, in order, and the wearer's "
          "last alert retained",
          "[integration]") {
  if (!MqttBroker::available()) {
    WARN("mosquitto not installed (Debian package mosquitto)");
    return;
  }
  // Listening before the fixture picks its free ports, so that none of them
  // can be the broker's.
  gw::test::TempDir broker_dir("gw_bridge_broker");
  MqttBroker broker(broker_dir.path());
  broker.start();
  DaemonFixture fx;
  gw::test::alert_at_every_sample(fx.config);
  fx.config["bridges"]["mqtt"]["enabled"] = true;
  fx.config["bridges"]["mqtt"]["port"] = broker.port();
  fx.write_config(fx.config);
  MqttRecorder live(broker.port(), "gaitwatch/#");
  REQUIRE(live.wait_subscribed(5s));

  gw::test::Process daemon = gw::test::start_daemon(fx);
  gw::test::Subscriber sub(fx.endpoint());
  INFO(daemon.err());
  REQUIRE(sub.until([&] { return !sub.stats.empty(); }, std::chrono::seconds(20)));
  REQUIRE(live.wait_until(
      [](const std::vector<MqttMessage>& m) {
        for (const MqttMessage& x : m)
          if (x.topic == "gaitwatch/status" && x.payload == "online") return true;
        return false;
      },
      10s));
  gw::test::replay(fx, fx.udp());
  REQUIRE(sub.until([&] { return !sub.alerts.empty(); }, std::chrono::seconds(60)));
  // Until the bridge has caught up with the store (a loaded machine may
  // lag): at stop it only has a short flush.
  const auto committed_now = [&] {
    const auto [status, metrics] = gw::test::http_get(fx.metrics_port, "/metrics");
    REQUIRE(status == 200);
    CHECK(gw::test::metric(metrics, "gaitwatch_bridge_mqtt_connected") == 1);
    return static_cast<std::size_t>(
        gw::test::metric(metrics, "gaitwatch_sink_committed_alerts_total"));
  };
  std::size_t committed = 0;
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < give_up) {
    const std::size_t before = committed_now();
    sub.until([] { return false; }, 500ms);
    committed = committed_now();
    if (committed == before && alert_messages(live.messages()).size() >= committed) break;
  }
  gw::test::stop_and_collect(daemon, sub);

  gw::pipeline::HitStore store(fx.db(), /*read_only=*/true);
  gw::pipeline::HitQuery all;
  all.limit = -1;
  const auto rows = store.query(all);
  REQUIRE(rows.size() > 100);  // the pattern alerts at nearly every sample
  // The daemon stops only after the bridge handed the broker what it had.
  REQUIRE(live.wait_until(
      [&](const std::vector<MqttMessage>& m) { return alert_messages(m).size() >= rows.size(); },
      10s));
  const std::vector<json> bridged = alert_messages(live.messages());
  REQUIRE(bridged.size() == rows.size());
  std::map<std::uint32_t, json> last_per_wearer;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CHECK(bridged[i] == gw::test::as_published(rows[i]));
    last_per_wearer[rows[i].wearer] = bridged[i];
  }
  // The retained topics, as a dashboard that connects now sees them.
  MqttRecorder late(broker.port(), "gaitwatch/#");
  REQUIRE(late.wait_until(
      [&](const std::vector<MqttMessage>& m) {
        return m.size() >= 2 * last_per_wearer.size() + 1;  // status, last alerts, states
      },
      5s));
  std::map<std::string, std::string> retained;
  for (const MqttMessage& m : late.messages())
    if (m.retained) retained[m.topic] = m.payload;
  CHECK(retained["gaitwatch/status"] == "offline");
  for (const auto& [wearer, alert] : last_per_wearer) {
    const std::string base = "gaitwatch/wearer/" + std::to_string(wearer);
    CHECK(json::parse(retained[base + "/last_alert"]) == alert);
    // The wearer's sensors as the board shows them.
    REQUIRE(retained.count(base + "/state") == 1);
    const json state = json::parse(retained[base + "/state"]);
    CHECK(state["id"] == wearer);
    REQUIRE_FALSE(state["devices"].empty());
    CHECK(state["devices"][0]["state"] == "online");
  }
}

TEST_CASE("bridges.webhook: every stored alert POSTed once, in order, through failures",
          "[integration]") {
  // The endpoint fails its first two requests (503): the daemon retries.
  gw::test::HttpServer server({503, 503});
  DaemonFixture fx;
  fx.config["bridges"]["webhook"]["enabled"] = true;
  fx.config["bridges"]["webhook"]["url"] =
      "http://127.0.0.1:" + std::to_string(server.port()) + "/nurse-call";
  fx.config["bridges"]["webhook"]["retry_initial_s"] = 0.05;
  fx.write_config(fx.config);
  gw::test::Process daemon = gw::test::start_daemon(fx);
  gw::test::Subscriber sub(fx.endpoint());
  INFO(daemon.err());
  REQUIRE(sub.until([&] { return !sub.stats.empty(); }, std::chrono::seconds(20)));
  gw::test::replay(fx, fx.udp());
  REQUIRE(sub.until([&] { return !sub.alerts.empty(); }, std::chrono::seconds(60)));
  gw::test::stop_and_collect(daemon, sub);

  gw::pipeline::HitStore store(fx.db(), /*read_only=*/true);
  const auto rows = store.query({});
  REQUIRE_FALSE(rows.empty());
  const auto received = server.received();
  // The failed tries repeat the first alert; then each alert once, in order.
  REQUIRE(received.size() == rows.size() + 2);
  for (std::size_t i = 0; i < received.size(); ++i) {
    const std::size_t row = i < 2 ? 0 : i - 2;
    CHECK(json::parse(received[i].body) == gw::test::as_published(rows[row]));
    CHECK(received[i].target == "/nurse-call");
    CHECK(received[i].topic == gw::pipeline::alert_topic(rows[row]));
  }
  const json& final_stats = sub.stats.back();
  CHECK(final_stats["bridges"]["webhook"]["retries"] == 2);
  // The bridge's own count, logged after its flush at stop.
  CHECK(daemon.err().find("webhook: " + std::to_string(rows.size()) + " messages offered, " +
                          std::to_string(rows.size()) + " delivered, 0 failed, 0 dropped") !=
        std::string::npos);
}
