// Integration: the real gaitwatchd's hash-table jobs and control interface,
// on loopback, fed by `gaitwatch replay` with the bundled Daphnet recording:
// the time-slot index against an offline classification of the same samples
// (through the control socket and `gaitwatch slots`), alert de-duplication
// against the same detector without it, alerts.since against the SQLite
// rows, and the error replies of the control interface.
#include <catch2/catch.hpp>

#include <cmath>
#include <ctime>
#include <map>
#include <set>
#include <tuple>

#include "config/config.h"
#include "daemon/control_client.h"
#include "jobs/daemon_jobs.h"
#include "jobs/slot_index.h"
#include "sinks/store.h"
#include "sensors/recording.h"
#include "tests/daemon/daemon_fixture.h"

namespace {

using gw::daemon::ControlClient;
using gw::test::DaemonFixture;
using gw::test::kEnd;
using gw::test::kRecording;
using gw::test::kStart;
using gw::test::kTool;
using gw::test::Process;
using gw::test::Subscriber;
using nlohmann::json;
using namespace std::chrono_literals;

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Starts the daemon and waits until it publishes (it is ready then).
Process start_ready(const DaemonFixture& fx, Subscriber& sub, const std::string& tag = "daemon") {
  Process daemon = gw::test::start_daemon(fx, tag);
  INFO(daemon.err());
  REQUIRE(sub.until([&] { return !sub.stats.empty(); }, std::chrono::seconds(20)));
  return daemon;
}

json result_of(const json& reply) {
  INFO(reply.dump());
  REQUIRE(reply["type"] == "result");
  return reply["result"];
}

// One wearer-second as the offline computation sees it.
struct OfflineSecond {
  gw::pipeline::SlotStatus status;
  gw::pipeline::SlotSummary summary;
};

// The wearer-seconds of the replayed samples, computed here from the
// recording: frames cut as `gaitwatch replay` cuts them (rate / 10 samples,
// device time of a frame's first sample from the time column, in whole
// microseconds), sample i of a frame at device_time_us / 1e6 + i / rate
// (docs/protocol.md), grouped by floor(device time); the device's status
// channels classified and summarised with the daemon's functions and
// thresholds. Keyed by device second.
std::map<std::int64_t, OfflineSecond> offline_seconds(const gw::config::Config& config) {
  const gw::sensors::Recording rec = gw::sensors::read_daphnet(kRecording);
  const gw::config::DeviceProfile& device = config.devices.at(0);
  REQUIRE(device.name == "daphnet_body");
  REQUIRE(device.status.accel.size() == 3);
  const auto sources = gw::pipeline::slot_sources(config);
  const gw::pipeline::ClassifyOptions classify = gw::pipeline::classify_options(
      gw::pipeline::slot_recorder_options(config), sources.at(device.id));
  const int frame_samples = static_cast<int>(std::lround(rec.sample_rate_hz / 10.0));
  const double rate = static_cast<float>(rec.sample_rate_hz);

  std::map<std::int64_t, std::vector<float>> xyz_by_second;
  for (int s = kStart; s < kEnd; s += frame_samples) {
    const double first =
        static_cast<double>(std::llround(rec.time_s[static_cast<std::size_t>(s)] * 1e6)) / 1e6;
    for (int i = 0; i < frame_samples && s + i < kEnd; ++i) {
      const auto second = static_cast<std::int64_t>(std::floor(first + i / rate));
      for (int c : device.status.accel)
        xyz_by_second[second].push_back(rec.at(static_cast<std::size_t>(s + i), static_cast<std::size_t>(c)));
    }
  }
  std::map<std::int64_t, OfflineSecond> out;
  for (const auto& [second, xyz] : xyz_by_second) {
    gw::pipeline::SecondSignals signals;
    signals.accel = xyz.data();
    signals.accel_samples = xyz.size() / 3;
    out[second] = {gw::pipeline::classify_second(signals, classify),
                   gw::pipeline::summarize_second(signals)};
  }
  return out;
}

void check_slot(const json& slot, const OfflineSecond& want, const std::string& zone) {
  INFO(slot.dump());
  CHECK(slot["activity"] == gw::pipeline::kActivityNames[want.status.activity]);
  CHECK(slot["posture"] == gw::pipeline::kPostureNames[want.status.posture]);
  CHECK(slot["loading"] == gw::pipeline::kLoadingNames[want.status.loading]);
  CHECK(slot["zone"] == zone);
  CHECK(slot["mean_magnitude"] == want.summary.mean_magnitude);
  CHECK(slot["magnitude_std"] == want.summary.magnitude_std);
  CHECK(slot["samples"] == want.summary.samples);
  CHECK(slot["mean_load"] == want.summary.mean_load);
}

}  // namespace

TEST_CASE("the slot index answers what an offline classification of the same samples gives",
          "[integration]") {
  DaemonFixture fx;
  Subscriber sub(fx.endpoint());
  Process daemon = start_ready(fx, sub);
  const gw::config::Config config = gw::config::load_config(fx.config_path.string());
  const auto expected = offline_seconds(config);
  REQUIRE(expected.size() > 100);

  // Wearer 17 sends from 127.0.0.2: zone B of the shipped config.
  const double replay_started = unix_now();
  gw::test::replay(fx, fx.udp(), {"--wearer", "17", "--from", "127.0.0.2"});
  ControlClient client(fx.control_endpoint(), 10s);
  REQUIRE(gw::test::eventually(
      [&] {
        const json status = result_of(client.call("status", json::object()));
        return status["slots"]["seconds"] == expected.size() &&
               status["slots"]["pending_seconds"] == 0;
      },
      60s));

  // Every second of wearer 17, through the control socket.
  std::vector<json> progress;
  const json all = result_of(client.call("slots", {{"wearer", 17}, {"since", 0}},
                                         [&](const json& m) { progress.push_back(m); }));
  REQUIRE(all["count"] == expected.size());
  CHECK(all["truncated"] == false);
  REQUIRE_FALSE(progress.empty());
  CHECK(progress.front()["type"] == "accepted");
  CHECK(progress.back()["progress"]["seconds_done"] == progress.back()["progress"]["seconds_total"]);
  // The anchored clock labels device second d as d + one whole-second offset,
  // close to when the replay started sending.
  const std::int64_t offset = all["slots"][0]["second"].get<std::int64_t>() - expected.begin()->first;
  const double device0 = gw::sensors::read_daphnet(kRecording).time_s[kStart];
  CHECK(std::abs(static_cast<double>(offset) - (replay_started - device0)) < 5);
  std::size_t i = 0;
  std::size_t walking = 0;
  for (const auto& [second, want] : expected) {
    const json& slot = all["slots"][i++];
    CHECK(slot["second"] == second + offset);
    check_slot(slot, want, "B");
    walking += want.status.activity == gw::pipeline::kActivityWalking ? 1 : 0;
  }
  REQUIRE(walking > 0);  // the filtered question below has answers

  // "When was wearer 17 walking in zone B since <when the replay started>?"
  // through the CLI, as printed with --json.
  char since[32];
  std::snprintf(since, sizeof since, "%.0f", std::floor(replay_started) - 1);
  auto cli = gw::test::run_process(
      {kTool, "slots", "--endpoint", fx.control_endpoint(), "--wearer", "17", "--status",
       "walking", "--zone", "B", "--since", since, "--json"},
      fx.dir, "slots_walking", std::chrono::seconds(30));
  INFO(cli.err);
  REQUIRE(cli.code == 0);
  const json walking_result = json::parse(cli.out);
  REQUIRE(walking_result["count"] == walking);
  i = 0;
  for (const auto& [second, want] : expected) {
    if (want.status.activity != gw::pipeline::kActivityWalking) continue;
    const json& slot = walking_result["slots"][i++];
    CHECK(slot["second"] == second + offset);
    check_slot(slot, want, "B");
  }

  // The same question as people type it: --since HH:MM (local time; two
  // minutes ago, so today's) and the human table of periods.
  const std::time_t two_minutes_ago = static_cast<std::time_t>(unix_now()) - 120;
  std::tm tm{};
  localtime_r(&two_minutes_ago, &tm);
  char hhmm[8];
  std::strftime(hhmm, sizeof hhmm, "%H:%M", &tm);
  tm.tm_sec = 0;
  tm.tm_isdst = -1;
  const double hhmm_unix = static_cast<double>(std::mktime(&tm));
  cli = gw::test::run_process({kTool, "slots", "--endpoint", fx.control_endpoint(), "--wearer",
                               "17", "--status", "walking", "--zone", "B", "--since", hhmm,
                               "--json"},
                              fx.dir, "slots_hhmm", std::chrono::seconds(30));
  REQUIRE(cli.code == 0);
  const json by_clock = json::parse(cli.out);
  CHECK(by_clock["since"] == hhmm_unix);
  CHECK(by_clock["count"] == walking);
  cli = gw::test::run_process({kTool, "slots", "--endpoint", fx.control_endpoint(), "--wearer",
                               "17", "--status", "walking", "--zone", "B", "--since", hhmm},
                              fx.dir, "slots_table", std::chrono::seconds(30));
  REQUIRE(cli.code == 0);
  CHECK_THAT(cli.out, Catch::Contains(std::to_string(walking) + " seconds in"));
  CHECK_THAT(cli.out, Catch::Contains("walking   upright"));

  // Other zones, other wearers: nothing.
  CHECK(result_of(client.call("slots", {{"wearer", 17}, {"since", 0}, {"zone", "A"}}))["count"] == 0);
  CHECK(result_of(client.call("slots", {{"wearer", 18}, {"since", 0}}))["count"] == 0);

  gw::test::stop_and_collect(daemon, sub);
  CHECK(sub.stats.back()["slots"]["recorded"] == expected.size());
  CHECK(sub.stats.back()["slots"]["late_samples"] == 0);
}

TEST_CASE("dedup keeps one alert per wearer pattern and bucket and without it there are more",
          "[integration]") {
  // Without a cooldown the pattern alerts at every window end while a freeze
  // holds: overlapping windows finding the same event many times.
  auto overlapping = [](DaemonFixture& fx, bool dedup) {
    fx.config["patterns"][0]["cooldown_s"] = 0;
    fx.config["dedup"]["enabled"] = dedup;
    fx.write_config(fx.config);
  };
  DaemonFixture on;
  overlapping(on, true);
  Subscriber on_sub(on.endpoint());
  Process on_daemon = start_ready(on, on_sub);
  gw::test::replay(on, on.udp());

  // alerts.since, while the daemon runs, against the committed rows.
  // Every frame accepted is not every frame searched: under load the last
  // batches come later, and a batch's search and phase 2 can outlast half a
  // second. Settled = all frames in, nothing pending or in a batch whose
  // alerts are still to come, every admitted alert committed, and the count
  // unchanged for half a second (a tick after the last frames).
  ControlClient client(on.control_endpoint(), 10s);
  std::uint64_t seen = 0;
  auto seen_at = std::chrono::steady_clock::now();
  REQUIRE(gw::test::eventually(
      [&] {
        const json status = result_of(client.call("status", json::object()));
        const auto admitted = status["dedup"]["admitted"].get<std::uint64_t>();
        const auto now = std::chrono::steady_clock::now();
        if (admitted != seen) {
          seen = admitted;
          seen_at = now;
          return false;
        }
        return admitted >= 3 && now - seen_at >= 500ms &&
               status["sink"]["committed"] == admitted &&
               status["engine"]["frames_accepted"] == 1367 &&
               status["engine"]["pending_windows"] == 0 &&
               status["engine"]["unfinished_windows"] == 0;
      },
      60s));
  gw::pipeline::HitStore store(on.db(), /*read_only=*/true);
  const std::uint64_t last = store.last_seq();
  REQUIRE(last >= 3);
  for (std::uint64_t n : {std::uint64_t{0}, std::uint64_t{1}, last / 2, last - 1, last, last + 5}) {
    INFO("since_seq " << n);
    const json result = result_of(client.call("alerts.since", {{"since_seq", n}, {"limit", 10000}}));
    gw::pipeline::HitQuery query;
    query.after_seq = n;
    query.limit = 100000;
    const auto rows = store.query(query);
    REQUIRE(result["alerts"].size() == rows.size());
    for (std::size_t k = 0; k < rows.size(); ++k)
      CHECK(result["alerts"][k] == gw::test::as_published(rows[k]));
    CHECK(result["last_seq"] == last);
    CHECK(result["more"] == false);
  }
  const json page = result_of(client.call("alerts.since", {{"since_seq", 1}, {"limit", 2}}));
  CHECK(page["alerts"].size() == 2);
  CHECK(page["alerts"][0]["seq"] == 2);
  CHECK(page["more"] == true);
  // `gaitwatch alerts` pages through all of them.
  auto cli = gw::test::run_process(
      {kTool, "alerts", "--endpoint", on.control_endpoint(), "--since-seq", "1", "--json"},
      on.dir, "alerts", std::chrono::seconds(30));
  REQUIRE(cli.code == 0);
  std::stringstream lines(cli.out);
  std::uint64_t expect_seq = 2;
  for (std::string line; std::getline(lines, line);)
    CHECK(json::parse(line)["seq"] == expect_seq++);
  CHECK(expect_seq == last + 1);

  gw::test::stop_and_collect(on_daemon, on_sub);
  const auto& published = on_sub.alerts;
  std::set<std::tuple<int, std::string, std::int64_t>> keys;
  for (const json& alert : published)
    keys.emplace(alert["wearer"].get<int>(), alert["pattern"].get<std::string>(),
                 static_cast<std::int64_t>(std::floor(alert["t_end"].get<double>() / 5.0)));
  CHECK(keys.size() == published.size());
  CHECK(store.count() == published.size());
  // The offline detector de-duplicates alike.
  const auto offline = gw::test::detect_offline(on);
  REQUIRE(offline.size() == published.size());
  for (std::size_t k = 0; k < offline.size(); ++k)
    CHECK(offline[k]["end_index"] == published[k]["end_index"]);
  const json& on_stats = on_sub.stats.back();
  CHECK(on_stats["dedup"]["admitted"] == published.size());
  REQUIRE(on_stats["dedup"]["duplicates"].get<std::uint64_t>() > 0);

  DaemonFixture off;
  overlapping(off, false);
  Subscriber off_sub(off.endpoint());
  Process off_daemon = start_ready(off, off_sub, "daemon_off");
  gw::test::replay(off, off.udp());
  gw::test::stop_and_collect(off_daemon, off_sub);
  CHECK(off_sub.alerts.size() > published.size());
  CHECK(off_sub.alerts.size() ==
        published.size() + on_stats["dedup"]["duplicates"].get<std::uint64_t>());
  CHECK(off_sub.stats.back()["dedup"]["enabled"] == false);
}

TEST_CASE("the control interface answers bad requests with errors and keeps running",
          "[integration]") {
  DaemonFixture fx;
  Subscriber sub(fx.endpoint());
  Process daemon = start_ready(fx, sub);
  ControlClient client(fx.control_endpoint(), 10s);

  client.send_raw("{\"cmd\": \"status\"");  // cut short
  const auto reply = client.receive(10s);
  REQUIRE(reply.has_value());
  CHECK((*reply)["type"] == "error");
  CHECK((*reply)["error"]["code"] == "bad_json");

  auto cancel = gw::test::run_process(
      {kTool, "control", "--endpoint", fx.control_endpoint(), "cancel", R"({"job": 4242})"},
      fx.dir, "cancel", std::chrono::seconds(30));
  CHECK(cancel.code == 1);
  const json cancel_reply = json::parse(cancel.out);
  CHECK(cancel_reply["error"]["code"] == "unknown_job");
  CHECK_THAT(cancel_reply["error"]["message"].get<std::string>(),
             Catch::Contains("no running job 4242"));

  json bad = client.call("slots", {{"wearer", 1}, {"since", 0}, {"zone", "Q"}});
  CHECK(bad["error"]["code"] == "bad_request");
  CHECK_THAT(bad["error"]["message"].get<std::string>(), Catch::Contains("zones: any, none, A, B"));
  bad = client.call("slots", {{"wearer", 1}, {"since", 0}, {"activity", "running"}});
  CHECK(bad["error"]["code"] == "bad_request");
  auto cli = gw::test::run_process({kTool, "slots", "--endpoint", fx.control_endpoint(),
                                    "--wearer", "1", "--since", "yesterday-ish"},
                                   fx.dir, "bad_since", std::chrono::seconds(30));
  CHECK(cli.code == 1);
  CHECK_THAT(cli.err, Catch::Contains("gaitwatch slots: time 'yesterday-ish'"));

  // Still running and answering.
  REQUIRE(daemon.running());
  const json status = result_of(client.call("status", json::object()));
  CHECK(status["control"]["errors"]["bad_json"] == 1);
  CHECK(status["control"]["errors"]["unknown_job"] == 1);
  const json zones = result_of(client.call("zones", json::object()));
  CHECK(zones["zones"].size() == 3);
  CHECK(zones["zones"][2]["name"] == "B");
  gw::test::stop_and_collect(daemon, sub);
}
