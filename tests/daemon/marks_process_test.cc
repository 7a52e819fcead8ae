// Carers' marks through the real processes: gaitwatchd on loopback with its
// SQLite store, `gaitwatch replay` of a Daphnet slice that raises one alert,
// and `gaitwatch mark` / `gaitwatch hits` as a carer would run them.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "sinks/store.h"
#include "tests/daemon/daemon_fixture.h"
#include "tests/daemon/sqlite_check.h"

using gw::test::DaemonFixture;
using gw::test::json_lines;
using gw::test::kTool;
using gw::test::Process;
using gw::test::run_process;
using gw::test::start_daemon;
using gw::test::stop_and_collect;
using gw::test::Subscriber;
using nlohmann::json;

namespace {

using gw::test::replay_one_alert_slice;

gw::test::RunResult tool(const DaemonFixture& fx, std::vector<std::string> args) {
  std::vector<std::string> argv = {kTool};
  argv.insert(argv.end(), args.begin(), args.end());
  if (args[0] == "mark") {
    argv.push_back("--config");
    argv.push_back(fx.config_path.string());
  }
  return run_process(argv, fx.dir, args[0], std::chrono::seconds(30));
}

// The stored alerts, as `gaitwatch hits --json` prints them (with `mark`).
std::vector<json> hits(const DaemonFixture& fx) {
  auto r = tool(fx, {"hits", "--db", fx.db(), "--json", "--limit", "1000"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  return json_lines(r.out);
}

std::vector<json> hits_of(const DaemonFixture& fx, std::uint32_t wearer) {
  std::vector<json> out;
  for (json& h : hits(fx))
    if (h["wearer"] == wearer) out.push_back(h);
  return out;
}

// Replays the slice for `wearer`, then for `witness` (a wearer without
// marks, whose alert shows that everything sent before it was searched),
// and returns the alerts stored for `wearer` meanwhile.
std::vector<json> replay_and_settle(const DaemonFixture& fx, std::uint32_t wearer,
                                    std::uint32_t witness) {
  const std::size_t before = hits_of(fx, wearer).size();
  // The wearer's last stream is removed (ingest.stream_idle_s, swept about
  // once a second) before its samples come again from sequence 0; were it
  // not, they would be dropped as out of order (checked at the stop).
  std::this_thread::sleep_for(std::chrono::milliseconds(1600));
  replay_one_alert_slice(fx, wearer);
  replay_one_alert_slice(fx, witness);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (hits_of(fx, witness).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(hits_of(fx, witness).size() == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto all = hits_of(fx, wearer);
  return std::vector<json>(all.begin() + static_cast<std::ptrdiff_t>(before), all.end());
}

Process start_and_wait(const DaemonFixture& fx, Subscriber& sub, const std::string& tag) {
  Process daemon = start_daemon(fx, tag);
  REQUIRE(sub.until([&] { return !sub.stats.empty(); }, std::chrono::seconds(20)));
  return daemon;
}

// Stops the daemon; every frame of every replay was taken into its stream.
void stop_checked(Process& daemon, Subscriber& sub) {
  stop_and_collect(daemon, sub);
  const json& final_stats = sub.stats.back();
  CHECK(final_stats["engine"]["frames_out_of_order"] == 0);
  CHECK(final_stats["engine"]["frames_accepted"].get<int>() > 0);
  CHECK(final_stats["engine"]["alert_windows_unavailable"] == 0);
}

}  // namespace

TEST_CASE("a false mark stops the same window alerting for that wearer only, across restarts",
          "[integration][marks]") {
  DaemonFixture fx;
  // The same samples are replayed again and again: no de-duplication by
  // time, and a finished replay's stream goes soon, so that the next replay
  // of the same wearer starts a new stream.
  fx.config["dedup"]["enabled"] = false;
  fx.config["ingest"]["stream_idle_s"] = 0.5;
  fx.config["ingest"]["stream_stale_s"] = 0.2;
  fx.config["ingest"]["stream_offline_s"] = 0.4;
  fx.write_config(fx.config);
  std::uint32_t witness = 100;  // a fresh wearer per replay round

  json mark;
  {
    Subscriber sub(fx.endpoint());
    Process daemon = start_and_wait(fx, sub, "daemon1");
    // The slice alerts once for wearer 1; the alert is stored with its window.
    const auto first = replay_and_settle(fx, 1, witness++);
    REQUIRE(first.size() == 1);
    const auto seq = first[0]["seq"].get<std::uint64_t>();
    CHECK(first[0]["mark"].is_null());
    {
      gw::pipeline::HitStore store(fx.db(), /*read_only=*/true);
      const auto window = store.window(seq);
      REQUIRE(window);
      CHECK(window->wearer == 1);
      CHECK(window->pattern == "fog_freeze_index");
      CHECK(window->length == 128);
      CHECK(window->lead_in > 0);  // the freeze index's lead-in
      CHECK(window->values.size() == 9 * static_cast<std::size_t>(window->lead_in + 128));
    }

    // Usage errors exit 2; requests the daemon refuses exit 1 with its reason.
    CHECK(tool(fx, {"mark", "--seq", std::to_string(seq)}).code == 2);
    CHECK(tool(fx, {"mark", "--seq", std::to_string(seq), "--false", "--true"}).code == 2);
    CHECK(tool(fx, {"mark", "--list", "--withdraw", "1"}).code == 2);
    const auto unknown = tool(fx, {"mark", "--seq", "999999", "--false"});
    CHECK(unknown.code == 1);
    CHECK_THAT(unknown.err, Catch::Contains("no stored alert has seq 999999"));

    // The carer marks it false.
    const auto marked =
        tool(fx, {"mark", "--seq", std::to_string(seq), "--false", "--note", "sitting down", "--json"});
    INFO(marked.err);
    REQUIRE(marked.code == 0);
    mark = json::parse(marked.out)["mark"];
    CHECK(mark["verdict"] == "false");
    CHECK(mark["active"] == true);
    CHECK(mark["wearer"] == 1);

    // The same window no longer alerts for wearer 1 (no reload); wearer 2,
    // replaying the same samples, still gets the alert.
    CHECK(replay_and_settle(fx, 1, witness++).empty());
    const auto other = replay_and_settle(fx, 2, witness++);
    REQUIRE(other.size() == 1);
    CHECK(other[0]["t_end"] == first[0]["t_end"]);

    // A reload keeps the marks' examples.
    daemon.signal(SIGHUP);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    CHECK(replay_and_settle(fx, 1, witness++).empty());

    // `hits` shows the mark.
    for (const json& h : hits(fx)) CHECK(h["mark"] == (h["seq"] == seq ? json("false") : json()));
    const auto table = tool(fx, {"hits", "--db", fx.db()});
    CHECK_THAT(table.out, Catch::Contains("mark"));
    stop_checked(daemon, sub);
  }
  {
    // After a restart the mark is loaded from the store and still applies.
    Subscriber sub(fx.endpoint());
    Process daemon = start_and_wait(fx, sub, "daemon2");
    CHECK(replay_and_settle(fx, 1, witness++).empty());

    const auto listed = tool(fx, {"mark", "--list", "--wearer", "1"});
    INFO(listed.err);
    REQUIRE(listed.code == 0);
    CHECK_THAT(listed.out, Catch::Contains("sitting down") && Catch::Contains("active"));
    CHECK_THAT(tool(fx, {"mark", "--list", "--wearer", "2"}).out, Catch::Contains("0 marks"));

    // A reload that changes the pattern's transforms keeps the mark but
    // leaves its example out (the window no longer fits); the old shape back,
    // it applies again.
    YAML::Node changed = YAML::Clone(fx.config);
    changed["patterns"][0]["transforms"][1]["power_floor"] = 2999;
    fx.write_config(changed);
    daemon.signal(SIGHUP);
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    CHECK_THAT(tool(fx, {"mark", "--list"}).out, Catch::Contains("inactive: shape_changed"));
    const auto status = tool(fx, {"status", "--config", fx.config_path.string()});
    REQUIRE(status.code == 0);
    CHECK(json::parse(status.out)["marks"]["inactive_shape_changed"] == 1);
    fx.write_config(fx.config);
    daemon.signal(SIGHUP);
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    CHECK_THAT(tool(fx, {"mark", "--list"}).out,
               Catch::Contains("active") && !Catch::Contains("inactive"));

    // Withdrawn, the window alerts again.
    const auto withdrawn = tool(fx, {"mark", "--withdraw", std::to_string(mark["id"].get<int>())});
    INFO(withdrawn.err);
    REQUIRE(withdrawn.code == 0);
    CHECK(replay_and_settle(fx, 1, witness++).size() == 1);
    const auto again = tool(fx, {"mark", "--withdraw", std::to_string(mark["id"].get<int>())});
    CHECK(again.code == 1);
    CHECK_THAT(again.err, Catch::Contains("withdrawn before"));
    for (const json& h : hits(fx)) CHECK(h["mark"].is_null());
    stop_checked(daemon, sub);
  }
  CHECK(gw::test::integrity_check(fx.db()) == "ok");
}
