// The alert lifecycle through the real processes: gaitwatchd on loopback
// with its SQLite store, a Daphnet slice whose one alert is made critical,
// `gaitwatch alert ...` as a carer runs it, and a subscriber of `event.`.
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "sinks/store.h"
#include "tests/daemon/daemon_fixture.h"

using gw::test::DaemonFixture;
using gw::test::kTool;
using gw::test::Process;
using gw::test::run_process;
using gw::test::start_daemon;
using gw::test::stop_and_collect;
using gw::test::Subscriber;
using nlohmann::json;

namespace {

// The fixture's config with the freeze pattern's alerts critical, the
// site's zone fixed, and escalation as given.
void lifecycle_config(DaemonFixture& fx, double escalation_s, int max_escalations) {
  fx.config["patterns"][0]["severity"] = "critical";
  fx.config["alerts"]["escalation_s"] = escalation_s;
  fx.config["alerts"]["max_escalations"] = max_escalations;
  fx.config["site"]["time_zone"] = "Europe/Berlin";
  fx.write_config(fx.config);
}

// The slice's one alert, for wearer 17.
void replay_slice(const DaemonFixture& fx) { gw::test::replay_one_alert_slice(fx, 17); }

gw::test::RunResult tool(const DaemonFixture& fx, std::vector<std::string> args) {
  std::vector<std::string> argv = {kTool};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--config");
  argv.push_back(fx.config_path.string());
  return run_process(argv, fx.dir, args[0], std::chrono::seconds(30));
}

// A subscriber of every event.
struct EventSubscriber {
  zmq::context_t context;
  zmq::socket_t socket{context, zmq::socket_type::sub};
  std::vector<std::pair<std::string, json>> events;  // topic, body

  explicit EventSubscriber(const std::string& endpoint) {
    socket.set(zmq::sockopt::subscribe, "event.");
    socket.set(zmq::sockopt::rcvtimeo, 100);
    socket.connect(endpoint);
  }
  template <typename P>
  bool until(P pred, std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (!pred() && std::chrono::steady_clock::now() < end) {
      zmq::message_t topic, body;
      if (!socket.recv(topic)) continue;
      REQUIRE(topic.more());
      REQUIRE(socket.recv(body));
      events.emplace_back(topic.to_string(), json::parse(body.to_string()));
    }
    return pred();
  }
  std::vector<json> of_type(const std::string& type) const {
    std::vector<json> out;
    for (const auto& [topic, body] : events)
      if (body["type"] == type) out.push_back(body);
    return out;
  }
};

// Starts the daemon and replays the slice; returns its one alert as published.
json raise_critical_alert(const DaemonFixture& fx, Subscriber& sub) {
  REQUIRE(sub.until([&] { return !sub.stats.empty(); }, std::chrono::seconds(20)));
  replay_slice(fx);
  REQUIRE(sub.until([&] { return !sub.alerts.empty(); }, std::chrono::seconds(30)));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  sub.until([] { return false; }, std::chrono::milliseconds(200));
  REQUIRE(sub.alerts.size() == 1);
  return sub.alerts[0];
}

gw::pipeline::AlertStateRecord stored_state(const DaemonFixture& fx, std::uint64_t seq) {
  gw::pipeline::HitStore store(fx.db(), /*read_only=*/true);
  const auto row = store.alert_with_state(seq);
  REQUIRE(row.has_value());
  return row->state;
}

}  // namespace

TEST_CASE("a carer acknowledges and resolves a critical alert, every step a published event",
          "[integration][lifecycle]") {
  DaemonFixture fx;
  lifecycle_config(fx, 3600, 3);  // no escalation within the test
  Subscriber sub(fx.endpoint());
  EventSubscriber events(fx.endpoint());
  Process daemon = start_daemon(fx);
  const json alert = raise_critical_alert(fx, sub);
  const auto seq = alert["seq"].get<std::uint64_t>();
  CHECK(alert["severity"] == "critical");
  // Readable times beside the device-clock ones.
  CHECK(alert["schema"] == 2);
  CHECK(alert["zone"] == "Europe/Berlin");
  CHECK(alert["detected_at_iso"] ==
        gw::TimeZone::named("Europe/Berlin").iso_text(alert["detected_at"].get<double>()));
  CHECK(stored_state(fx, seq).state == gw::pipeline::AlertState::kNew);
  // The replayed freeze ends inside the slice: its episode's end names the alert.
  REQUIRE(events.until([&] { return !events.of_type("episode_ended").empty(); },
                       std::chrono::seconds(10)));
  const json ended = events.of_type("episode_ended")[0];
  CHECK(ended["alert_seq"] == seq);
  CHECK(ended["wearer"] == 17);
  CHECK(ended["actor"] == "gaitwatchd");
  CHECK(ended["details"]["pattern"] == alert["pattern"]);
  CHECK(ended["details"]["t_start"] == alert["t_start"]);
  CHECK(ended["details"]["t_end"].get<double>() >= alert["t_end"].get<double>());
  CHECK(events.events[0].first == "event.episode_ended.17.");

  const auto acked = tool(
      fx, {"alert", "ack", "--seq", std::to_string(seq), "--by", "ana", "--note", "on my way"});
  INFO(acked.err);
  REQUIRE(acked.code == 0);
  CHECK_THAT(acked.out, Catch::Contains("acknowledged"));
  REQUIRE(events.until([&] { return !events.of_type("alert_acknowledged").empty(); },
                       std::chrono::seconds(10)));
  const json ack_event = events.of_type("alert_acknowledged")[0];
  CHECK(ack_event["alert_seq"] == seq);
  CHECK(ack_event["actor"] == "ana");
  CHECK(ack_event["wearer"] == 17);
  CHECK(ack_event["details"]["note"] == "on my way");
  CHECK(ack_event["zone"] == "Europe/Berlin");
  CHECK(ack_event["at_iso"].is_string());
  CHECK(events.events[1].first == "event.alert_acknowledged.17.");

  const auto state = stored_state(fx, seq);
  CHECK(state.state == gw::pipeline::AlertState::kAcknowledged);
  CHECK(state.acknowledged_by == "ana");

  // A second acknowledgement, and one of an alert that does not exist, are refused.
  const auto again = tool(fx, {"alert", "ack", "--seq", std::to_string(seq), "--by", "ben"});
  CHECK(again.code == 1);
  CHECK_THAT(again.err, Catch::Contains("already_acknowledged") && Catch::Contains("ana"));
  const auto unknown = tool(fx, {"alert", "ack", "--seq", "999999"});
  CHECK(unknown.code == 1);
  CHECK_THAT(unknown.err, Catch::Contains("unknown_alert"));
  CHECK(tool(fx, {"alert", "ack"}).code == 2);  // --seq is required

  // Open alerts, then resolved.
  const auto open = tool(fx, {"alert", "list", "--open", "--json"});
  REQUIRE(open.code == 0);
  REQUIRE(gw::test::json_lines(open.out).size() == 1);
  CHECK(gw::test::json_lines(open.out)[0]["state"]["state"] == "acknowledged");
  REQUIRE(tool(fx, {"alert", "resolve", "--seq", std::to_string(seq), "--by", "ben"}).code == 0);
  CHECK(gw::test::json_lines(tool(fx, {"alert", "list", "--open", "--json"}).out).empty());
  CHECK(stored_state(fx, seq).state == gw::pipeline::AlertState::kResolved);
  CHECK(tool(fx, {"alert", "resolve", "--seq", std::to_string(seq), "--by", "ben"}).code == 1);

  // The alert with its history, and the audit log.
  const auto shown = tool(fx, {"alert", "show", "--seq", std::to_string(seq), "--json"});
  REQUIRE(shown.code == 0);
  const json got = json::parse(shown.out);
  CHECK(got["alert"]["seq"] == seq);
  CHECK(got["state"]["resolved_by"] == "ben");
  REQUIRE(got["events"].size() == 3);
  CHECK(got["events"][0]["type"] == "episode_ended");
  CHECK(got["events"][1]["type"] == "alert_acknowledged");
  CHECK(got["events"][2]["type"] == "alert_resolved");
  const auto log = tool(fx, {"events", "--wearer", "17"});
  REQUIRE(log.code == 0);
  CHECK_THAT(log.out, Catch::Contains("acknowledged by ana  seq " + std::to_string(seq)) &&
                          Catch::Contains("resolved by ben"));

  stop_and_collect(daemon, sub);
}

TEST_CASE(
    "an unacknowledged critical alert escalates every escalation_s and stops at the "
    "maximum, also across a restart",
    "[integration][lifecycle]") {
  DaemonFixture fx;
  lifecycle_config(fx, 1, 2);
  std::uint64_t seq = 0;
  {
    Subscriber sub(fx.endpoint());
    EventSubscriber events(fx.endpoint());
    Process daemon = start_daemon(fx, "daemon1");
    seq = raise_critical_alert(fx, sub)["seq"].get<std::uint64_t>();
    REQUIRE(events.until([&] { return events.of_type("alert_escalated").size() >= 2; },
                         std::chrono::seconds(15)));
    // Nothing beyond the maximum.
    events.until([] { return false; }, std::chrono::milliseconds(2500));
    const auto escalated = events.of_type("alert_escalated");
    REQUIRE(escalated.size() == 2);
    for (int level = 1; level <= 2; ++level) {
      const json& e = escalated[static_cast<std::size_t>(level - 1)];
      CHECK(e["alert_seq"] == seq);
      CHECK(e["actor"] == "gaitwatchd");
      CHECK(e["details"]["level"] == level);
      CHECK(e["details"]["severity"] == "critical");
      CHECK(e["details"]["pattern"] == "fog_freeze_index");
    }
    // The alert itself went out once.
    CHECK(sub.alerts.size() == 1);
    CHECK(stored_state(fx, seq).escalation_level == 2);
    stop_and_collect(daemon, sub);
  }
  {
    // A higher maximum after a restart: the stored level 2 goes on to 3 (at
    // the daemon's first look, before a subscriber could connect: the store
    // and the audit log tell).
    lifecycle_config(fx, 1, 3);
    Subscriber sub(fx.endpoint());
    Process daemon = start_daemon(fx, "daemon2");
    REQUIRE(sub.until([&] { return !sub.stats.empty(); }, std::chrono::seconds(20)));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (stored_state(fx, seq).escalation_level < 3 &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(stored_state(fx, seq).escalation_level == 3);
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    const auto log = tool(fx, {"events", "--alert-seq", std::to_string(seq), "--json"});
    INFO(log.err);
    REQUIRE(log.code == 0);
    std::vector<int> levels;
    for (const json& e : gw::test::json_lines(log.out))
      if (e["type"] == "alert_escalated") levels.push_back(e["details"]["level"].get<int>());
    CHECK(levels == std::vector<int>{1, 2, 3});
    stop_and_collect(daemon, sub);
  }
}

TEST_CASE("subscribe --format text prints alerts and events as readable lines",
          "[integration][lifecycle]") {
  DaemonFixture fx;
  lifecycle_config(fx, 3600, 3);
  Subscriber sub(fx.endpoint());
  Process daemon = start_daemon(fx);
  REQUIRE(sub.until([&] { return !sub.stats.empty(); }, std::chrono::seconds(20)));
  // The alert, its episode's end and the acknowledgement.
  Process text({kTool, "subscribe", "--endpoint", fx.endpoint(), "--format", "text", "--count", "3",
                "--timeout", "40"},
               fx.dir / "subscribe.out", fx.dir / "subscribe.err");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the SUB connects
  replay_slice(fx);
  REQUIRE(sub.until([&] { return !sub.alerts.empty(); }, std::chrono::seconds(30)));
  const json alert = sub.alerts[0];
  const auto seq = alert["seq"].get<std::uint64_t>();
  REQUIRE(tool(fx, {"alert", "ack", "--seq", std::to_string(seq), "--by", "ana"}).code == 0);
  const auto code = text.wait(std::chrono::seconds(20));
  INFO(text.out() << text.err());
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  const std::string out = text.out();
  const std::string when =
      gw::TimeZone::named("Europe/Berlin").readable_text(alert["detected_at"].get<double>());
  CHECK_THAT(out, Catch::Contains(when + "  CRITICAL  freezing_of_gait  wearer 17  seq " +
                                  std::to_string(seq) + "  fog_freeze_index"));
  CHECK_THAT(out,
             Catch::Contains("acknowledged by ana  seq " + std::to_string(seq) + "  wearer 17"));
  CHECK_THAT(out, Catch::Contains("episode ended  seq " + std::to_string(seq) + "  wearer 17"));
  stop_and_collect(daemon, sub);
}
