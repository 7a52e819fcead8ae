// The wearer registry and sensor liveness through the real processes:
// `gaitwatch wearer add/list`, a replay that stops -> the wearer's device
// goes offline and one named sensor_offline alert arrives on ZeroMQ and is
// stored; a reload keeps the registry; frames again -> sensor_recovered.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "sinks/store.h"
#include "tests/daemon/daemon_fixture.h"

using namespace gw::test;  // the fixture's helpers
using nlohmann::json;

namespace {

const std::string kS03R02 = std::string(GW_DATA_DIR) + "/daphnet/S03R02.txt";
constexpr int kSliceStart = 18000;
constexpr int kSliceSamples = 640;  // 10 s of recording

void replay_slice(const DaemonFixture& fx, std::uint32_t wearer) {
  gw::test::replay_daphnet(fx, kS03R02, kSliceStart, kSliceStart + kSliceSamples, wearer);
}

gw::test::RunResult wearer_tool(const DaemonFixture& fx, std::vector<std::string> args) {
  std::vector<std::string> argv = {kTool, "wearer"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--config");
  argv.push_back(fx.config_path.string());
  return run_process(argv, fx.dir, "wearer", std::chrono::seconds(30));
}

std::vector<json> wearer_list(const DaemonFixture& fx) {
  auto r = wearer_tool(fx, {"list", "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  return json_lines(r.out);
}

std::vector<json> offline_alerts(const Subscriber& sub) {
  std::vector<json> out;
  for (const json& a : sub.alerts)
    if (a["pattern"] == "sensor_offline") out.push_back(a);
  return out;
}

// Events land with the stats in the fixture's subscriber (every topic but
// alert.).
std::vector<json> events_of(const Subscriber& sub, const std::string& type) {
  std::vector<json> out;
  for (const json& m : sub.stats)
    if (m.value("type", "") == type) out.push_back(m);
  return out;
}

}  // namespace

TEST_CASE("a registered wearer's silent sensor raises one named offline alert and recovers",
          "[integration][wearers]") {
  DaemonFixture fx;
  fx.config["wearers"]["stale_after_s"] = 0.3;
  fx.config["wearers"]["offline_after_s"] = 1;
  fx.config["wearers"]["offline_alerts"] = true;
  fx.config["wearers"]["offline_severity"] = "critical";
  // A finished replay's stream goes soon, so that the next replay of the
  // same wearer (sequence numbers from 0 again) starts a new stream.
  fx.config["ingest"]["stream_idle_s"] = 0.5;
  fx.write_config(fx.config);

  Subscriber sub(fx.endpoint());
  sub.socket.set(zmq::sockopt::subscribe, "event.");
  Process daemon = start_daemon(fx);
  REQUIRE(sub.until([&] { return !sub.stats.empty(); }, std::chrono::seconds(20)));

  auto added = wearer_tool(fx, {"add", "--id", "7", "--name", "Ada Lovelace", "--room", "12",
                                "--bed", "A"});
  INFO(added.err);
  REQUIRE(added.code == 0);
  CHECK(added.out.find("Ada Lovelace") != std::string::npos);
  // Refused requests exit 1 with the daemon's message.
  auto duplicate = wearer_tool(fx, {"add", "--id", "7", "--name", "Again"});
  CHECK(duplicate.code == 1);
  CHECK(duplicate.err.find("already registered") != std::string::npos);
  auto empty_name = wearer_tool(fx, {"set", "--id", "7", "--name", ""});
  CHECK(empty_name.code == 1);
  CHECK(empty_name.err.find("display_name") != std::string::npos);

  auto before = wearer_list(fx);
  REQUIRE(before.size() == 1);
  CHECK(before[0]["id"] == 7);
  CHECK(before[0]["registered"] == true);
  CHECK(before[0]["display_name"] == "Ada Lovelace");
  CHECK(before[0]["room"] == "12");
  CHECK(before[0]["devices"].empty());

  replay_slice(fx, 7);
  REQUIRE(sub.until([&] { return !offline_alerts(sub).empty(); }, std::chrono::seconds(15)));
  const json alert = offline_alerts(sub).front();
  CHECK(alert["wearer"] == 7);
  CHECK(alert["wearer_name"] == "Ada Lovelace");
  CHECK(alert["kind"] == "sensor_offline");
  CHECK(alert["severity"] == "critical");
  CHECK(alert["device"] == 1);
  CHECK(alert["t_start"] == alert["t_end"]);
  CHECK(alert["end_index"] == kSliceSamples - 1);
  CHECK(alert["dims"].empty());
  CHECK(alert["matched_dims"] == 0);
  CHECK(alert["pattern_dims"] == 0);
  const auto seq = alert["seq"].get<std::uint64_t>();

  auto offline = wearer_list(fx);
  REQUIRE(offline.size() == 1);
  REQUIRE(offline[0]["devices"].size() == 1);
  CHECK(offline[0]["devices"][0]["state"] == "offline");
  CHECK(offline[0]["devices"][0]["silent_s"].get<double>() >= 1);

  // One alert per silence.
  sub.until([] { return false; }, std::chrono::milliseconds(1500));
  CHECK(offline_alerts(sub).size() == 1);
  {
    gw::pipeline::HitStore store(fx.db(), /*read_only=*/true);
    gw::pipeline::HitQuery query;
    query.pattern = "sensor_offline";
    const auto stored = store.query(query);
    REQUIRE(stored.size() == 1);
    CHECK(stored[0].seq == seq);
    CHECK(stored[0].wearer == 7);
    CHECK(stored[0].kind == "sensor_offline");
  }

  // A reload keeps the registry (it lives in the store, not the config).
  daemon.signal(SIGHUP);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto reloaded = wearer_list(fx);
  REQUIRE(reloaded.size() == 1);
  CHECK(reloaded[0]["display_name"] == "Ada Lovelace");

  // The sensor sends again: one sensor_recovered event naming the alert.
  replay_slice(fx, 7);
  REQUIRE(sub.until([&] { return !events_of(sub, "sensor_recovered").empty(); },
                    std::chrono::seconds(15)));
  const json recovered = events_of(sub, "sensor_recovered").front();
  CHECK(recovered["wearer"] == 7);
  CHECK(recovered["alert_seq"] == seq);
  CHECK(recovered["actor"] == "gaitwatchd");
  CHECK(recovered["details"]["device"] == 1);
  CHECK(recovered["details"]["alert_seq"] == seq);
  CHECK(recovered["details"]["silent_s"].get<double>() >= 1);
  CHECK(events_of(sub, "wearer_changed").size() == 1);  // the add; the refused ones changed nothing

  auto status = run_process({kTool, "status", "--config", fx.config_path.string()}, fx.dir,
                            "status", std::chrono::seconds(30));
  REQUIRE(status.code == 0);
  const json counters = json::parse(status.out);
  CHECK(counters["wearers"]["registered"] == 1);
  CHECK(counters["wearers"]["offline_alerts"].get<int>() >= 1);
  CHECK(counters["wearers"]["recoveries"] == 1);
  stop_and_collect(daemon, sub);
}
