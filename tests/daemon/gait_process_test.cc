// Gait in the real daemon: a gaitpdb walk replayed into gaitwatchd (device
// gaitpdb_insoles) gives the minutes of walking that `gaitwatch gait
// --minutes` finds offline in the same samples, and an abnormal-gait alert
// for a patient the pack's examples never saw (none for an unseen control).
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <thread>

#include "tests/daemon/daemon_fixture.h"

namespace {

using gw::test::DaemonFixture;
using gw::test::json;
using gw::test::json_lines;
using gw::test::kTool;
namespace fs = std::filesystem;

const std::string kWalks = std::string(GW_DATA_DIR) + "/gaitpdb";
const std::string kPatient = kWalks + "/GaPt07_01.txt";   // unseen by the test's pack
const std::string kControl = kWalks + "/JuCo01_01.txt";   // unseen as well

// A gait pack whose examples are the other 16 subjects' strides.
void write_pack_without_test_subjects(const DaemonFixture& fx) {
  std::vector<std::string> argv = {kTool, "gait", "--export-examples", (fx.dir / "strides.csv").string()};
  for (const auto& entry : fs::directory_iterator(kWalks)) {
    const std::string name = entry.path().filename().string();
    if (name.find("_01.txt") == std::string::npos || name.rfind("GaPt07", 0) == 0 || name.rfind("JuCo01", 0) == 0)
      continue;
    argv.push_back("--file");
    argv.push_back(entry.path().string());
  }
  const auto r = gw::test::run_process(argv, fx.dir, "export", std::chrono::seconds(120));
  INFO(r.err);
  REQUIRE(r.code == 0);
  std::ofstream(fx.dir / "gait.yaml") << "abnormal_gait:\n"
                                         "  examples: strides.csv\n"
                                         "  k: 15\n"
                                         "  band: 0.1\n"
                                         "  threshold: 0.5\n"
                                         "  bout_strides: 20\n"
                                         "  cooldown_s: 600\n";
}

void replay_walk(const DaemonFixture& fx, const std::string& file, int wearer) {
  const auto r = gw::test::run_process({kTool, "replay", "--config", fx.config_path.string(), "--device",
                                        "gaitpdb_insoles", "--file", file, "--wearer", std::to_string(wearer),
                                        "--speed", "20", "--to", fx.udp()},
                                       fx.dir, "replay", std::chrono::seconds(120));
  INFO(r.err);
  REQUIRE(r.code == 0);
}

std::vector<json> online_minutes(const DaemonFixture& fx, int wearer) {
  const auto r = gw::test::run_process({kTool, "gait", "--wearer", std::to_string(wearer), "--json",
                                        "--endpoint", fx.control_endpoint()},
                                       fx.dir, "online", std::chrono::seconds(30));
  INFO(r.err);
  REQUIRE(r.code == 0);
  return json_lines(r.out);
}

// The test's pack in the fixture's config, minutes of 30 s of walking.
void use_test_pack(DaemonFixture& fx) {
  fx.config["gait"]["pack"] = (fx.dir / "gait.yaml").string();
  fx.config["gait"]["minute_s"] = 30;
  fx.write_config(fx.config);
}

// How many alerts of `pattern` the subscriber got for `wearer`.
int alerts_of(const gw::test::Subscriber& sub, const std::string& pattern, int wearer) {
  int n = 0;
  for (const json& a : sub.alerts)
    if (a["pattern"] == pattern && a["wearer"] == wearer) ++n;
  return n;
}

}  // namespace

TEST_CASE("a replayed walk: the daemon's minutes of walking equal the offline ones, an unseen patient "
          "raises an abnormal-gait alert, an unseen control none",
          "[integration][gait]") {
  DaemonFixture fx;
  write_pack_without_test_subjects(fx);
  use_test_pack(fx);

  gw::Process daemon = gw::test::start_daemon(fx);
  gw::test::Subscriber sub(fx.endpoint());
  INFO(daemon.err());
  REQUIRE(sub.until([&] { return !sub.stats.empty(); }, std::chrono::seconds(20)));
  replay_walk(fx, kPatient, 1);
  replay_walk(fx, kControl, 2);
  const auto abnormal = [&](int wearer) { return alerts_of(sub, "abnormal_gait", wearer); };
  REQUIRE(sub.until([&] { return abnormal(1) >= 1; }, std::chrono::seconds(30)));

  // The offline minutes of the same samples (the config's pack, minute_s 30).
  const auto offline = gw::test::run_process({kTool, "gait", "--config", fx.config_path.string(), "--file",
                                              kPatient, "--minutes", "--json"},
                                             fx.dir, "offline", std::chrono::seconds(60));
  INFO(offline.err);
  REQUIRE(offline.code == 0);
  const std::vector<json> expected = json_lines(offline.out);
  REQUIRE(expected.size() >= 3);  // about 110 s of the left foot's walking
  std::vector<json> online;
  for (int i = 0; i < 100 && online.size() < expected.size(); ++i) {
    online = online_minutes(fx, 1);
    if (online.size() < expected.size()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  REQUIRE(online.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    json got = online[i];
    got.erase("at");
    INFO("minute " << i);
    CHECK(got == expected[i]);
    CHECK(got["strides"].get<int>() >= 30);
    CHECK(got["abnormal_score"].get<double>() >= 0.5);
  }

  // The control walked, its minutes stored, no abnormal gait.
  std::vector<json> control;
  for (int i = 0; i < 100 && control.empty(); ++i) {
    control = online_minutes(fx, 2);
    if (control.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  REQUIRE_FALSE(control.empty());
  for (const json& minute : control) CHECK(minute["abnormal_score"].get<double>() < 0.5);

  gw::test::stop_and_collect(daemon, sub);
  CHECK(abnormal(1) == 1);  // one bout, then the cooldown
  CHECK(abnormal(2) == 0);
  const json& stats = sub.stats.back();
  CHECK(stats["gait"]["wearers"] == 2);
  CHECK(stats["gait"]["unpaired_samples"] == 0);
  CHECK(stats["gait"]["abnormal_bouts"] == 1);
  CHECK(stats["gait"]["minutes"].get<int>() == static_cast<int>(expected.size() + control.size()));
  for (const json& a : sub.alerts) {
    if (a["pattern"] != "abnormal_gait") continue;
    CHECK(a["kind"] == "abnormal_gait");
    CHECK(a["severity"] == "info");
    CHECK(a["distance"].get<double>() >= 0.5);
  }
}

TEST_CASE("a wearer whose gait changes after the daemon learned it raises one gait_change alert, an unchanged "
          "wearer none",
          "[integration][gait]") {
  DaemonFixture fx;
  write_pack_without_test_subjects(fx);
  std::ofstream(fx.dir / "gait.yaml", std::ios::app) << "gait_change:\n"
                                                         "  learn_walking_s: 45\n"
                                                         "  strides: 24\n"
                                                         "  k: 5\n"
                                                         "  threshold: 1.75\n";
  use_test_pack(fx);

  gw::Process daemon = gw::test::start_daemon(fx);
  gw::test::Subscriber sub(fx.endpoint());
  INFO(daemon.err());
  REQUIRE(sub.until([&] { return !sub.stats.empty(); }, std::chrono::seconds(20)));
  // Wearer 3 walks as a control, then as a patient; wearer 4 walks the
  // control's walk twice.
  const std::string usual = kWalks + "/GaCo01_01.txt";
  replay_walk(fx, usual, 3);
  replay_walk(fx, usual, 4);
  replay_walk(fx, kWalks + "/SiPt04_01.txt.gz", 3);
  replay_walk(fx, usual, 4);
  const auto changes = [&](int wearer) { return alerts_of(sub, "gait_change", wearer); };
  REQUIRE(sub.until([&] { return changes(3) >= 1; }, std::chrono::seconds(30)));

  // Both baselines learned; the unchanged wearer's later minutes stay near
  // its baseline, and carry the figure.
  std::vector<json> minutes;
  for (int i = 0; i < 100; ++i) {
    minutes = online_minutes(fx, 4);
    if (minutes.size() >= 6) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  int with_change = 0;
  for (const json& minute : minutes) {
    if (minute["baseline_change"].is_null()) continue;
    ++with_change;
    CHECK(minute["baseline_change"].get<double>() < 1.75);
  }
  CHECK(with_change >= 2);

  gw::test::stop_and_collect(daemon, sub);
  CHECK(changes(3) == 1);
  CHECK(changes(4) == 0);
  const json& stats = sub.stats.back();
  CHECK(stats["gait"]["baselines_learned"] == 2);
  CHECK(stats["gait"]["change_scored_strides"].get<int>() > 100);
  for (const json& a : sub.alerts) {
    if (a["pattern"] != "gait_change") continue;
    CHECK(a["kind"] == "gait_change");
    CHECK(a["severity"] == "info");
    CHECK(a["distance"].get<double>() >= 1.75);
  }
}
