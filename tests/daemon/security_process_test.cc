// Integration: the security of the real gaitwatchd. CURVE on the control
// interface (an authorized client gets answers, anyone else gets nothing and
// the daemon keeps serving), and ingest admitting only configured devices,
// with per-device frame MACs (docs/protocol.md "Authenticated frames").
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "tests/daemon/daemon_fixture.h"

namespace fs = std::filesystem;
using gw::test::DaemonFixture;
using gw::test::kTool;
using gw::test::Process;
using gw::test::run_process;
using gw::test::start_daemon;
using nlohmann::json;

namespace {

void keygen(const DaemonFixture& fx, const fs::path& prefix, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {kTool, "keygen"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back(prefix.string());
  const auto r = run_process(argv, fx.dir, "keygen-" + prefix.filename().string(),
                             std::chrono::seconds(20));
  INFO(r.err);
  REQUIRE(r.code == 0);
}

// `gaitwatch status` against the fixture's control endpoint with `extra` flags.
gw::test::RunResult status(const DaemonFixture& fx, std::vector<std::string> extra,
                           const std::string& tag) {
  std::vector<std::string> argv = {kTool, "status", "--endpoint", fx.control_endpoint()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return run_process(argv, fx.dir, tag, std::chrono::seconds(30));
}

// Waits until the daemon answers `status` with these flags; its JSON.
json wait_status(const DaemonFixture& fx, const std::vector<std::string>& flags) {
  for (int attempt = 0; attempt < 40; ++attempt) {
    std::vector<std::string> f = flags;
    f.insert(f.end(), {"--timeout", "1"});
    const auto r = status(fx, f, "status-wait");
    if (r.code == 0) return json::parse(r.out);
  }
  FAIL("the daemon never answered status");
  return {};
}

}  // namespace

TEST_CASE("control CURVE: an authorized client gets answers, others get nothing, the daemon serves on",
          "[integration]") {
  DaemonFixture fx;
  const fs::path keys = fx.dir / "keys";
  fs::create_directories(keys / "operators");
  for (const char* name : {"server", "operator", "rogue"}) keygen(fx, keys / name);
  fs::copy_file(keys / "operator.pub", keys / "operators" / "operator.pub");
  fx.config["control"]["curve_secret_key"] = (keys / "server.key").string();
  fx.config["control"]["curve_authorized_keys"] = (keys / "operators").string();
  fx.write_config(fx.config);
  Process daemon = start_daemon(fx);
  const std::vector<std::string> authorized = {"--server-key", (keys / "server.pub").string(),
                                               "--key", (keys / "operator.key").string()};
  INFO(daemon.err());
  const json first = wait_status(fx, authorized);
  CHECK(first.contains("engine"));
  CHECK(first["control"]["curve_admitted"].get<int>() >= 1);

  // An unauthorized key and a plain client: no answer within the timeout.
  const auto rogue = status(fx, {"--server-key", (keys / "server.pub").string(), "--key",
                                 (keys / "rogue.key").string(), "--timeout", "2"},
                            "status-rogue");
  CHECK(rogue.code != 0);
  CHECK(rogue.out.empty());
  CHECK(rogue.err.find("no reply") != std::string::npos);
  const auto plain = status(fx, {"--timeout", "2"}, "status-plain");
  CHECK(plain.code != 0);
  CHECK(plain.out.empty());
  // Half a key pair is a usage error, not a timeout.
  const auto half = status(fx, {"--key", (keys / "operator.key").string()}, "status-half");
  CHECK(half.code != 0);
  CHECK(half.err.find("--server-key") != std::string::npos);

  // Through the config: the endpoint and the server's public key (the .pub
  // next to control.curve_secret_key) come from it; only --key is the client's.
  const auto via_config =
      run_process({kTool, "status", "--config", fx.config_path.string(), "--key",
                   (keys / "operator.key").string()},
                  fx.dir, "status-config", std::chrono::seconds(30));
  INFO(via_config.err);
  CHECK(via_config.code == 0);
  CHECK(json::parse(via_config.out).contains("engine"));
  const auto config_no_key = run_process(
      {kTool, "status", "--config", fx.config_path.string()}, fx.dir, "status-config-nokey",
      std::chrono::seconds(30));
  CHECK(config_no_key.code == 1);
  CHECK(config_no_key.err.find("give this client's key file with --key") != std::string::npos);

  // The daemon kept serving: the authorized client still gets answers from
  // every command, and the refusals were counted.
  const auto again = status(fx, authorized, "status-again");
  INFO(again.err);
  REQUIRE(again.code == 0);
  CHECK(json::parse(again.out)["control"]["curve_refused"].get<int>() >= 1);
  std::vector<std::string> alerts = {kTool, "alerts", "--endpoint", fx.control_endpoint(),
                                     "--since-seq", "0", "--json"};
  alerts.insert(alerts.end(), authorized.begin(), authorized.end());
  const auto listed = run_process(alerts, fx.dir, "alerts", std::chrono::seconds(30));
  INFO(listed.err);
  CHECK(listed.code == 0);
  std::vector<std::string> control = {kTool, "control", "--endpoint", fx.control_endpoint(),
                                      "commands"};
  control.insert(control.end(), authorized.begin(), authorized.end());
  const auto commands = run_process(control, fx.dir, "control", std::chrono::seconds(30));
  CHECK(commands.code == 0);
  CHECK(commands.out.find("alerts.since") != std::string::npos);
  daemon.signal(SIGTERM);
  const auto code = daemon.wait(std::chrono::seconds(30));
  REQUIRE(code.has_value());
  CHECK(*code == 0);
}

namespace {

// `gaitwatch replay` of a short segment (as fast as possible) with `extra`
// flags; the number of frames it sent.
int replay_frames(const DaemonFixture& fx, std::vector<std::string> extra, const std::string& tag) {
  std::vector<std::string> argv = {kTool,      "replay",  "--file",  gw::test::kRecording,
                                   "--format", "daphnet", "--start", "53000",
                                   "--end",    "53640",   "--speed", "0",
                                   "--to",     fx.udp()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  const auto r = run_process(argv, fx.dir, tag, std::chrono::seconds(60));
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto line = r.out.substr(r.out.rfind('{'));
  return json::parse(line)["frames"].get<int>();
}

}  // namespace

TEST_CASE("ingest admits only allowed devices from their sources with valid MACs, counting the rest",
          "[integration]") {
  DaemonFixture fx;
  const fs::path keys = fx.dir / "keys";
  fs::create_directories(keys);
  keygen(fx, keys / "w1", {"--mac"});
  keygen(fx, keys / "forged", {"--mac"});
  struct stat st {};
  REQUIRE(::stat((keys / "w1.mackey").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  // Wearer 1's device 1 must sign; wearer 2 (any device) must send from
  // 127.0.0.2 without a MAC; nobody else may send.
  YAML::Node signed_entry;
  signed_entry["wearer"] = 1;
  signed_entry["device"] = 1;
  signed_entry["mac_key"] = (keys / "w1.mackey").string();
  YAML::Node sourced_entry;
  sourced_entry["wearer"] = 2;
  sourced_entry["sources"].push_back("127.0.0.2");
  fx.config["ingest"]["allowed_devices"].push_back(signed_entry);
  fx.config["ingest"]["allowed_devices"].push_back(sourced_entry);
  fx.write_config(fx.config);
  Process daemon = start_daemon(fx);
  INFO(daemon.err());
  wait_status(fx, {});

  const std::string good_key = (keys / "w1.mackey").string();
  const std::string bad_key = (keys / "forged.mackey").string();
  const int accepted_signed =
      replay_frames(fx, {"--wearer", "1", "--mac-key", good_key}, "replay-signed");
  const int missing = replay_frames(fx, {"--wearer", "1"}, "replay-unsigned");
  const int forged = replay_frames(fx, {"--wearer", "1", "--mac-key", bad_key}, "replay-forged");
  const int stranger = replay_frames(fx, {"--wearer", "3"}, "replay-stranger");
  const int wrong_source =
      replay_frames(fx, {"--wearer", "2", "--from", "127.0.0.1"}, "replay-wrong-source");
  const int unexpected = replay_frames(
      fx, {"--wearer", "2", "--from", "127.0.0.2", "--mac-key", good_key}, "replay-unexpected");
  const int accepted_sourced =
      replay_frames(fx, {"--wearer", "2", "--from", "127.0.0.2"}, "replay-sourced");
  const int sent = accepted_signed + missing + forged + stranger + wrong_source + unexpected +
                   accepted_sourced;

  // Every datagram is accounted for: queued or refused by reason.
  json ingest;
  for (int attempt = 0; attempt < 100; ++attempt) {
    ingest = wait_status(fx, {})["ingest"];
    if (ingest["datagrams"].get<int>() == sent) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  INFO(ingest.dump());
  REQUIRE(ingest["datagrams"].get<int>() == sent);
  const json& admission = ingest["admission"];
  CHECK(admission["mac_verified"].get<int>() == accepted_signed);
  CHECK(admission["missing_mac"].get<int>() == missing);
  CHECK(admission["bad_mac"].get<int>() == forged);
  CHECK(admission["not_allowed"].get<int>() == stranger);
  CHECK(admission["wrong_source"].get<int>() == wrong_source);
  CHECK(admission["unexpected_mac"].get<int>() == unexpected);
  CHECK(ingest["queued"].get<int>() == accepted_signed + accepted_sourced);
  CHECK(ingest["unknown_device"].get<int>() == 0);
  CHECK(ingest["profile_mismatch"].get<int>() == 0);

  daemon.signal(SIGTERM);
  const auto code = daemon.wait(std::chrono::seconds(30));
  REQUIRE(code.has_value());
  CHECK(*code == 0);
}
