// Integration: the real gaitwatchd process on loopback ports with a temporary
// database, fed by `gaitwatch replay` with the bundled Daphnet recording,
// observed through a real ZeroMQ subscriber and the SQLite file.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>
#include <zmq.hpp>

#include "sinks/alert.h"
#include "sinks/curve.h"
#include "sinks/store.h"
#include "tests/daemon/daemon_fixture.h"
#include "tests/daemon/metrics_client.h"

namespace fs = std::filesystem;
using gw::test::DaemonFixture;
using gw::test::detect_offline;
using gw::test::http_get;
using gw::test::kDaemon;
using gw::test::kEnd;
using gw::test::kRecording;
using gw::test::kStart;
using gw::test::kTool;
using gw::test::metric;
using gw::test::Process;
using gw::test::replay;
using gw::test::start_daemon;
using gw::test::stop_and_collect;
using gw::test::Subscriber;
using nlohmann::json;

namespace {

std::uint64_t decode_errors(const json& stats) {
  std::uint64_t n = 0;
  for (const auto& [reason, count] : stats["ingest"]["decode_errors"].items())
    n += count.get<std::uint64_t>();
  return n;
}

// The daemon's alerts equal the offline detector's (same windows, distances),
// and every published alert has its committed row and vice versa.
void check_alerts_match(const DaemonFixture& fx, const std::vector<json>& published) {
  const auto expected = detect_offline(fx);
  REQUIRE_FALSE(expected.empty());  // the demo pattern finds freezes in this segment
  REQUIRE(published.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CHECK(published[i]["pattern"] == expected[i]["pattern"]);
    CHECK(published[i]["end_index"] == expected[i]["end_index"]);
    CHECK(published[i]["distance"].get<double>() ==
          Approx(expected[i]["distance"].get<double>()).epsilon(1e-9));
    CHECK(published[i]["matched_dims"] == expected[i]["matched_dims"]);
  }
  gw::pipeline::HitStore store(fx.db(), /*read_only=*/true);
  const auto rows = store.query({});
  REQUIRE(rows.size() == published.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CHECK(rows[i].seq == i + 1);  // gapless from 1
    CHECK(gw::test::as_published(rows[i]) == published[i]);
  }
}

// Every detection episode that alerted and ended before the stop is one
// episode_ended event in the audit log, naming its first stored alert (the
// same wearer and pattern; no alert named twice), after it in time.
void check_episode_events(const DaemonFixture& fx) {
  gw::pipeline::HitStore store(fx.db(), /*read_only=*/true);
  std::map<std::uint64_t, gw::pipeline::Alert> by_seq;
  for (gw::pipeline::Alert& alert : store.query({})) by_seq[alert.seq] = alert;
  std::set<std::uint64_t> named;
  std::int64_t episode_alerts = 0;
  for (const gw::pipeline::Event& event : store.events(gw::pipeline::EventQuery{})) {
    if (event.type != gw::pipeline::EventType::kEpisodeEnded) continue;
    INFO(gw::pipeline::event_to_json(event).dump());
    CHECK(event.actor == "gaitwatchd");
    REQUIRE(by_seq.count(event.alert_seq) == 1);
    CHECK(named.insert(event.alert_seq).second);
    const gw::pipeline::Alert& first = by_seq.at(event.alert_seq);
    CHECK(event.wearer == first.wearer);
    CHECK(event.details["pattern"] == first.pattern);
    CHECK(event.details["t_start"].get<double>() == first.t_start);
    CHECK(event.details["t_end"].get<double>() >= first.t_end);
    CHECK(event.at >= first.detected_at);
    episode_alerts += event.details["alerts"].get<std::int64_t>();
  }
  CHECK_FALSE(named.empty());  // the freezes of the replayed range end inside it
  CHECK(episode_alerts <= static_cast<std::int64_t>(by_seq.size()));
}

// The daemon kept every accepted sample in its raw-stream history, and the
// history search finds a window of the replayed range where the recording
// search finds it.
void check_history(const DaemonFixture& fx, const json& final_stats) {
  // The shutdown counters come after the history has committed everything.
  REQUIRE(final_stats.contains("history"));
  const json& history = final_stats["history"];
  CHECK(history["samples_written"] == final_stats["engine"]["samples"]);
  CHECK(history["samples_written"] == kEnd - kStart);
  CHECK(history["chunks_written"] == history["chunks_queued"]);
  CHECK(history["chunks_dropped"] == 0);
  CHECK(history["store_errors"] == 0);

  // The example window lies in the replayed range: the history search (with
  // the config the daemon recorded in the file) finds it first, where the
  // recording search finds it.
  const std::string example = kRecording + ":54488:54616";
  const std::vector<std::string> query = {"--example", example, "--format", "daphnet",
                                          "--columns", "ankle_fwd,ankle_vert,ankle_lat",
                                          "--znorm", "--band", "0.1", "--json"};
  std::vector<std::string> in_history = {kTool, "search", "--history", fx.history_db(), "-k", "3"};
  in_history.insert(in_history.end(), query.begin(), query.end());
  const auto found = gw::test::run_process(in_history, fx.dir, "search_history",
                                           std::chrono::seconds(60));
  INFO(found.err);
  REQUIRE(found.code == 0);
  std::vector<json> matches;
  std::stringstream lines(found.out);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) matches.push_back(json::parse(line));
  REQUIRE(matches.size() == 3);
  CHECK(found.err.find("progress 1.000") != std::string::npos);

  std::vector<std::string> in_file = {kTool, "search", "--file", kRecording, "--top", "1"};
  in_file.insert(in_file.end(), query.begin(), query.end());
  const auto reference =
      gw::test::run_process(in_file, fx.dir, "search_file", std::chrono::seconds(60));
  INFO(reference.err);
  REQUIRE(reference.code == 0);
  const json expected = json::parse(reference.out.substr(0, reference.out.find('\n')));
  CHECK(matches[0]["rank"] == 1);
  CHECK(matches[0]["distance"].get<double>() < 1e-3);
  CHECK(matches[0]["t_start"].get<double>() ==
        Approx(expected["t_start"].get<double>()).margin(2e-3));
  CHECK(matches[0]["t_end"].get<double>() == Approx(expected["t_end"].get<double>()).margin(2e-3));
  CHECK(matches[1]["distance"].get<double>() >= matches[0]["distance"].get<double>());
}

}  // namespace

TEST_CASE("replay over UDP: alerts published, stored, equal to the offline detector, samples kept",
          "[integration]") {
  DaemonFixture fx;
  Process daemon = start_daemon(fx);
  Subscriber sub(fx.endpoint());
  INFO(daemon.err());
  REQUIRE(sub.until([&] { return !sub.stats.empty(); }, std::chrono::seconds(20)));

  replay(fx, "udp://127.0.0.1:" + std::to_string(fx.udp_port));
  // Metrics over HTTP while it runs: self-consistent and matching what was
  // published. Scraped once the first alert is out (under load the search
  // lags the replay), and a moment later so that more is in flight.
  REQUIRE(sub.until([&] { return !sub.alerts.empty(); }, std::chrono::seconds(60)));
  sub.until([] { return false; }, std::chrono::milliseconds(500));
  const auto [status, metrics] = http_get(fx.metrics_port, "/metrics");
  CHECK(status == 200);
  const double published_alerts = metric(metrics, "gaitwatch_sink_published_alerts_total");
  CHECK(metric(metrics, "gaitwatch_engine_alerts_total") >= 1);
  CHECK(metric(metrics, "gaitwatch_alert_latency_seconds_count") >= published_alerts);
  CHECK(metric(metrics, "gaitwatch_engine_frames_accepted_total") > 0);
  CHECK(metric(metrics, "gaitwatch_batch_seconds_count") > 0);
  CHECK(metric(metrics, "gaitwatch_alert_latency_seconds_bucket{le=\"+Inf\"}") ==
        metric(metrics, "gaitwatch_alert_latency_seconds_count"));
  CHECK(http_get(fx.metrics_port, "/nothing").first == 404);
  stop_and_collect(daemon, sub);
  CHECK(static_cast<double>(sub.alerts.size()) >= published_alerts);

  const json& final_stats = sub.stats.back();
  CHECK(final_stats["engine"]["frames_accepted"].get<int>() > 0);
  CHECK(final_stats["engine"]["gaps"] == 0);
  CHECK(decode_errors(final_stats) == 0);
  check_alerts_match(fx, sub.alerts);
  check_episode_events(fx);
  check_history(fx, final_stats);
  CHECK(daemon.err().find(" INFO gaitwatchd ready") != std::string::npos);
}

TEST_CASE("replay over TCP with malformed frames interleaved: counted, nothing else changes",
          "[integration]") {
  DaemonFixture fx;
  // With the search warmed up for 20 streams before ingest opens: the
  // alerts below are still the offline detector's.
  fx.config["search"]["warm_up_streams"] = 20;
  fx.write_config(fx.config);
  Process daemon = start_daemon(fx);
  Subscriber sub(fx.endpoint());
  REQUIRE(sub.until([&] { return !sub.stats.empty(); }, std::chrono::seconds(20)));

  const auto r = replay(fx, "tcp://127.0.0.1:" + std::to_string(fx.tcp_port),
                        {"--inject-garbage", "7", "--int16"});
  const json sent = json::parse(r.out);
  REQUIRE(sent["garbage"].get<int>() > 10);
  stop_and_collect(daemon, sub);

  const json& final_stats = sub.stats.back();
  CHECK(decode_errors(final_stats) == sent["garbage"].get<std::uint64_t>());
  CHECK(final_stats["engine"]["frames_accepted"] == sent["frames"]);
  CHECK(final_stats["engine"]["gaps"] == 0);
  CHECK(final_stats["ingest"]["tcp_bad_length"] == 0);
  const json& warm_up = final_stats["engine"]["warm_up"];
  CHECK(warm_up["batches"] == 4);
  CHECK(warm_up["slices"].get<int>() % 20 == 0);
  CHECK(warm_up["slices"].get<int>() >= 20);
  CHECK(final_stats["engine"]["streams"] == 1);  // the synthetic ones are gone
  CHECK(daemon.err().find("search warmed up for 20 streams") != std::string::npos);

  // int16 quantisation changes the samples slightly: compare with the offline
  // detector on the same quantised samples.
  auto expected = gw::test::run_process(
      {kTool, "detect", "--config", fx.config_path.string(), "--file", kRecording, "--format",
       "daphnet", "--start", std::to_string(kStart), "--end", std::to_string(kEnd), "--int16",
       "--json"},
      fx.dir, "detect16", std::chrono::seconds(120));
  REQUIRE(expected.code == 0);
  std::vector<json> offline;
  std::stringstream lines(expected.out);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) offline.push_back(json::parse(line));
  REQUIRE_FALSE(offline.empty());
  REQUIRE(offline.size() == sub.alerts.size());
  for (std::size_t i = 0; i < offline.size(); ++i)
    CHECK(offline[i]["end_index"] == sub.alerts[i]["end_index"]);
  gw::pipeline::HitStore store(fx.db(), true);
  CHECK(store.count() == sub.alerts.size());
}

TEST_CASE("SIGHUP with a broken config keeps the old one running, a valid one applies",
          "[integration]") {
  DaemonFixture fx;
  Process daemon = start_daemon(fx);
  Subscriber sub(fx.endpoint());
  REQUIRE(sub.until([&] { return !sub.stats.empty(); }, std::chrono::seconds(20)));
  const std::size_t expected = detect_offline(fx).size();
  REQUIRE(expected > 0);

  YAML::Node broken = YAML::Clone(fx.config);
  broken["search"]["tick_msec"] = 100;  // unknown key
  fx.write_config(broken);
  daemon.signal(SIGHUP);
  REQUIRE(gw::test::eventually(
      [&] { return daemon.err().find("reload rejected") != std::string::npos; },
      std::chrono::seconds(10)));
  CHECK(daemon.err().find("search.tick_msec") != std::string::npos);
  REQUIRE(daemon.running());

  // An empty file (a config being rewritten, a full disk) is rejected too:
  // it would otherwise reload as "all defaults" with no pattern.
  {
    std::ofstream(fx.config_path, std::ios::trunc).flush();
  }
  daemon.signal(SIGHUP);
  REQUIRE(gw::test::eventually(
      [&] { return daemon.err().find("the file is empty") != std::string::npos; },
      std::chrono::seconds(10)));
  CHECK(daemon.err().find("reload applied") == std::string::npos);
  REQUIRE(daemon.running());

  // Still detecting with the old config: every alert of the replay arrives.
  replay(fx, "udp://127.0.0.1:" + std::to_string(fx.udp_port));
  // A generous bound: on a loaded 2-core machine the 40x replay's batches queue up.
  REQUIRE(sub.until([&] { return sub.alerts.size() == expected; }, std::chrono::seconds(30)));

  // A valid reload that makes the pattern impossible to match applies: one
  // example from outside the replayed range (so never distance 0) and a tiny
  // threshold.
  YAML::Node strict = YAML::Clone(fx.config);
  strict["patterns"][0]["threshold"] = 0.001;
  YAML::Node only;
  only["file"] = gw::test::kRecording;
  only["format"] = "daphnet";
  only["start"] = 20000;
  only["end"] = 20128;
  strict["patterns"][0]["examples"] = YAML::Node(YAML::NodeType::Sequence);
  strict["patterns"][0]["examples"].push_back(only);
  strict["patterns"][0].remove("negatives");
  fx.write_config(strict);
  daemon.signal(SIGHUP);
  REQUIRE(gw::test::eventually(
      [&] { return daemon.err().find("reload applied") != std::string::npos; },
      std::chrono::seconds(10)));
  const std::size_t before = sub.alerts.size();
  replay(fx, "udp://127.0.0.1:" + std::to_string(fx.udp_port), {"--wearer", "2"});
  stop_and_collect(daemon, sub);
  CHECK(sub.alerts.size() == before);
}

TEST_CASE("SIGHUP re-reads the pattern packs, and a broken pack keeps the old config",
          "[integration]") {
  DaemonFixture fx;
  // The freeze pattern in a pack next to the config, included from it.
  const fs::path pack_path = fx.dir / "packs/fog.yaml";
  fs::create_directories(pack_path.parent_path());
  const auto write_pack = [&](const YAML::Node& pattern) {
    YAML::Node pack;
    pack["description"] = "the freeze pattern, for the reload test";
    pack["patterns"].push_back(pattern);
    std::ofstream(pack_path) << YAML::Dump(pack) << "\n";
  };
  const YAML::Node fog = YAML::Clone(fx.config["patterns"][0]);
  write_pack(fog);
  YAML::Node with_pack = YAML::Clone(fx.config);
  with_pack["patterns"] = YAML::Node(YAML::NodeType::Sequence);
  YAML::Node include;
  include["include"] = "packs/fog.yaml";
  with_pack["patterns"].push_back(include);
  fx.write_config(with_pack);

  Process daemon = start_daemon(fx);
  Subscriber sub(fx.endpoint());
  REQUIRE(sub.until([&] { return !sub.stats.empty(); }, std::chrono::seconds(20)));

  YAML::Node broken = YAML::Clone(fog);
  broken["threshold"] = -1;
  write_pack(broken);
  daemon.signal(SIGHUP);
  REQUIRE(gw::test::eventually(
      [&] { return daemon.err().find("reload rejected") != std::string::npos; },
      std::chrono::seconds(10)));
  CHECK(daemon.err().find("packs/fog.yaml") != std::string::npos);
  CHECK(daemon.err().find("patterns[0].threshold") != std::string::npos);
  REQUIRE(daemon.running());

  // The pack's file gone: rejected at the include.
  fs::remove(pack_path);
  daemon.signal(SIGHUP);
  REQUIRE(gw::test::eventually(
      [&] { return daemon.err().find("cannot read pattern pack") != std::string::npos; },
      std::chrono::seconds(10)));
  CHECK(daemon.err().find("reload applied") == std::string::npos);
  REQUIRE(daemon.running());

  // A valid pack again: the reload applies.
  write_pack(fog);
  daemon.signal(SIGHUP);
  REQUIRE(gw::test::eventually(
      [&] { return daemon.err().find("reload applied") != std::string::npos; },
      std::chrono::seconds(10)));
  stop_and_collect(daemon, sub);
}

namespace {

// The shipped config with the Daphnet device's groups ankle | thigh and trunk
// (instead of ankle | thigh | trunk): the freeze pattern's magnitude dims,
// one per group, become two, so that its alerts change. Its examples'
// baselines hold one value per dim of three: the pattern's per-wearer
// normalisation goes with them.
YAML::Node regrouped(const YAML::Node& config) {
  YAML::Node changed = YAML::Clone(config);
  REQUIRE(changed["patterns"][0]["name"].as<std::string>() == "fog_freeze_index");
  gw::test::without_normalisation(changed["patterns"][0]);
  YAML::Node groups(YAML::NodeType::Sequence);
  for (const auto& [name, first, last] :
       {std::tuple{"ankle", 0, 2}, std::tuple{"thigh_trunk", 3, 8}}) {
    YAML::Node group;
    group["name"] = name;
    group["first"] = first;
    group["last"] = last;
    groups.push_back(group);
  }
  REQUIRE(changed["devices"][0]["name"].as<std::string>() == "daphnet_body");
  changed["devices"][0]["groups"] = groups;
  return changed;
}

// What detection decided, per alert: where and how close.
std::vector<json> decisions(const std::vector<json>& alerts) {
  std::vector<json> out;
  for (const json& alert : alerts)
    out.push_back({alert["end_index"], alert["distance"], alert["matched_dims"]});
  return out;
}

}  // namespace

TEST_CASE("SIGHUP applies changed device groups and names the changes it keeps",
          "[integration]") {
  DaemonFixture fx;
  const std::vector<json> with_shipped_groups = detect_offline(fx);
  Process daemon = start_daemon(fx);
  Subscriber sub(fx.endpoint());
  // Without a first stats message the daemon did not come up (a port taken
  // meanwhile, say): its log says why.
  if (!sub.until([&] { return !sub.stats.empty(); }, std::chrono::seconds(20)))
    FAIL("no stats from the daemon within 20 s; its log:\n" << daemon.err());

  // New groups (applied at the next tick) and a restart-only key (kept).
  YAML::Node changed = regrouped(fx.config);
  changed["storage"]["retention_days"] = 7;
  fx.write_config(changed);
  // The test means something only if the groups change the alerts.
  const std::vector<json> with_new_groups = detect_offline(fx);
  REQUIRE_FALSE(with_new_groups.empty());
  REQUIRE(decisions(with_new_groups) != decisions(with_shipped_groups));

  daemon.signal(SIGHUP);
  REQUIRE(gw::test::eventually(
      [&] { return daemon.err().find("reload applied") != std::string::npos; },
      std::chrono::seconds(10)));
  INFO(daemon.err());
  CHECK(daemon.err().find("reload: storage.retention_days need a restart") != std::string::npos);
  CHECK(daemon.err().find("devices[0].groups") == std::string::npos);

  // The daemon now raises the alerts of the new groups, as `detect` does.
  replay(fx, fx.udp());
  REQUIRE(sub.until([&] { return sub.alerts.size() >= with_new_groups.size(); },
                    std::chrono::seconds(30)));
  stop_and_collect(daemon, sub);
  check_alerts_match(fx, sub.alerts);
}

TEST_CASE("check-config --against warns about the changes a reload keeps", "[integration]") {
  DaemonFixture fx;
  const fs::path running = fx.dir / "running.yaml";
  fs::copy_file(fx.config_path, running);
  YAML::Node changed = regrouped(fx.config);
  changed["storage"]["retention_days"] = 7;
  changed["slots"]["clock"] = "device";
  changed["search"]["tick_ms"] = 50;
  fx.write_config(changed);
  auto checked = gw::test::run_process(
      {kDaemon, "--check-config", fx.config_path.string(), "--against", running.string()},
      fx.dir, "check_against", std::chrono::seconds(60));
  INFO(checked.err);
  CHECK(checked.code == 0);
  for (const char* key : {"storage.retention_days", "slots.clock"})
    CHECK(checked.err.find(fx.config_path.string() + ": warning: " + key + ": differs from " +
                           running.string() + " and needs a restart") != std::string::npos);
  CHECK(checked.err.find("tick_ms") == std::string::npos);
  CHECK(checked.err.find("devices[0].groups") == std::string::npos);

  // The same file against itself: nothing to warn about.
  auto same = gw::test::run_process(
      {kDaemon, "--check-config", fx.config_path.string(), "--against", fx.config_path.string()},
      fx.dir, "check_against_self", std::chrono::seconds(60));
  CHECK(same.code == 0);
  CHECK(same.err.find("warning") == std::string::npos);
  // --against belongs to --check-config.
  auto usage = gw::test::run_process({kDaemon, "--config", fx.config_path.string(), "--against",
                                      running.string()},
                                     fx.dir, "against_usage", std::chrono::seconds(60));
  CHECK(usage.code == 2);
}

TEST_CASE("check-config accepts the shipped config and rejects errors with the key path",
          "[integration]") {
  DaemonFixture fx;
  auto ok = gw::test::run_process({kDaemon, "--check-config", std::string(GW_CONFIG_DIR) + "/gaitwatch.yaml"},
                                  fx.dir, "check_ok", std::chrono::seconds(60));
  INFO(ok.err);
  CHECK(ok.code == 0);

  YAML::Node bad = YAML::Clone(fx.config);
  bad["patterns"][0]["threshold"] = "low";
  fx.write_config(bad);
  auto rejected = gw::test::run_process({kDaemon, "--check-config", fx.config_path.string()},
                                        fx.dir, "check_bad", std::chrono::seconds(60));
  CHECK(rejected.code != 0);
  CHECK(rejected.err.find("patterns[0].threshold") != std::string::npos);

  // The daemon refuses to start on it, too.
  auto refused = gw::test::run_process({kDaemon, "--config", fx.config_path.string()}, fx.dir,
                                       "refused", std::chrono::seconds(60));
  CHECK(refused.code != 0);
  CHECK(refused.err.find("patterns[0].threshold") != std::string::npos);
}

TEST_CASE("check-config rejects empty and pattern-less files and what this machine cannot run, "
          "naming the key, and the daemon refuses the same",
          "[integration]") {
  DaemonFixture fx;
  const auto check = [&](const std::string& text, const char* label) {
    const fs::path path = fx.dir / (std::string(label) + ".yaml");
    std::ofstream(path) << text;
    return gw::test::run_process({kDaemon, "--check-config", path.string()}, fx.dir, label,
                                 std::chrono::seconds(60));
  };
  auto empty = check("", "empty");
  CHECK(empty.code == 1);
  CHECK(empty.err.find("the file is empty") != std::string::npos);
  // A file cut short before its patterns.
  auto cut = check("daemon:\n  log_level: info\nsearch:\n  tick_ms: 100\n", "cut");
  CHECK(cut.code == 1);
  CHECK(cut.err.find("patterns: missing") != std::string::npos);
  auto null_patterns = check("patterns:\n", "null_patterns");
  CHECK(null_patterns.code == 1);
  CHECK(null_patterns.err.find("patterns: empty") != std::string::npos);
  // Saying so explicitly is a choice: accepted, with a warning.
  YAML::Node none = YAML::Clone(fx.config);
  none["patterns"] = YAML::Node(YAML::NodeType::Sequence);
  std::ostringstream none_text;
  none_text << none;
  auto explicit_none = check(none_text.str(), "explicit_none");
  INFO(explicit_none.err);
  CHECK(explicit_none.code == 0);
  CHECK(explicit_none.err.find("detects nothing") != std::string::npos);

  // Valid files that this machine cannot run: every problem named by its key.
  YAML::Node unrunnable = YAML::Clone(fx.config);
  unrunnable["ingest"]["udp"]["bind"] = "999.1.1.1";
  unrunnable["metrics"]["bind"] = "::2";  // well-formed, not an address of this machine
  unrunnable["publish"]["endpoint"] = "tcp://999.1.1.1:7710";
  unrunnable["control"]["endpoint"] = "udp://127.0.0.1:7711";
  unrunnable["storage"]["path"] = (fx.dir / "no_such_dir" / "hits.db").string();
  fx.write_config(unrunnable);
  auto rejected = gw::test::run_process({kDaemon, "--check-config", fx.config_path.string()},
                                        fx.dir, "unrunnable", std::chrono::seconds(60));
  INFO(rejected.err);
  CHECK(rejected.code == 1);
  for (const char* key : {"ingest.udp.bind: '999.1.1.1' is not an IP address", "metrics.bind: cannot bind",
                          "publish.endpoint: cannot bind 999.1.1.1",
                          "control.endpoint: transport 'udp'", "storage.path: directory"})
    CHECK(rejected.err.find(key) != std::string::npos);
  auto refused = gw::test::run_process({kDaemon, "--config", fx.config_path.string()}, fx.dir,
                                       "unrunnable_start", std::chrono::seconds(60));
  CHECK(refused.code != 0);
  CHECK(refused.err.find("ingest.udp.bind") != std::string::npos);
  CHECK_FALSE(fs::exists(fx.dir / "no_such_dir"));
}

TEST_CASE("CURVE: only subscribers with an authorized key receive alerts, and files are private",
          "[integration]") {
  DaemonFixture fx;
  const fs::path keys = fx.dir / "keys";
  fs::create_directories(keys / "authorized");
  for (const char* name : {"server", "client", "rogue"}) {
    const auto r = gw::test::run_process({kTool, "keygen", (keys / name).string()}, fx.dir,
                                         std::string("keygen-") + name, std::chrono::seconds(20));
    REQUIRE(r.code == 0);
  }
  fs::copy_file(keys / "client.pub", keys / "authorized" / "client.pub");
  struct stat secret_stat {};
  REQUIRE(::stat((keys / "client.key").c_str(), &secret_stat) == 0);
  CHECK((secret_stat.st_mode & 0777) == 0600);
  fx.config["publish"]["curve_secret_key"] = (keys / "server.key").string();
  fx.config["publish"]["curve_authorized_keys"] = (keys / "authorized").string();
  fx.write_config(fx.config);

  using gw::pipeline::read_curve_key_file;
  const std::string server_public =
      read_curve_key_file((keys / "server.pub").string(), false).public_key;
  auto client_of = [&](const char* name) {
    const auto pair = read_curve_key_file((keys / (std::string(name) + ".key")).string(), true);
    return [pair, server_public](zmq::socket_t& s) {
      gw::pipeline::make_curve_client(s, pair, server_public);
    };
  };
  Process daemon = start_daemon(fx);
  Subscriber authorized(fx.endpoint(), client_of("client"));
  Subscriber rogue(fx.endpoint(), client_of("rogue"));
  Subscriber plain(fx.endpoint());
  INFO(daemon.err());
  REQUIRE(authorized.until([&] { return !authorized.stats.empty(); }, std::chrono::seconds(20)));

  replay(fx, "udp://127.0.0.1:" + std::to_string(fx.udp_port));
  stop_and_collect(daemon, authorized);
  rogue.until([] { return false; }, std::chrono::milliseconds(500));
  plain.until([] { return false; }, std::chrono::milliseconds(500));
  CHECK(!authorized.alerts.empty());
  CHECK(rogue.alerts.empty());
  CHECK(rogue.stats.empty());
  CHECK(plain.alerts.empty());
  CHECK(plain.stats.empty());
  // Every published alert was stored; the database is readable by its owner only.
  check_alerts_match(fx, authorized.alerts);
  struct stat db_stat {};
  REQUIRE(::stat(fx.db().c_str(), &db_stat) == 0);
  CHECK((db_stat.st_mode & 0777) == 0600);
}
