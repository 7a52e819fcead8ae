// The real gaitwatchd for integration tests: a temp dir with a copy of the
// shipped config on loopback ports chosen now (ingest, publisher, control)
// and a temp database; a ZeroMQ subscriber; `gaitwatch replay` of the bundled
// Daphnet recording.
#pragma once

#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <cstdint>
#include <functional>
#include <memory>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>
#include <zmq.hpp>

#include "sinks/alert.h"
#include "tests/daemon/json_lines.h"
#include "tests/daemon/process.h"

namespace gw::test {

namespace fs = std::filesystem;
using nlohmann::json;

inline const std::string kDaemon = std::string(GW_BINARY_DIR) + "/daemon/gaitwatchd";
inline const std::string kTool = std::string(GW_BINARY_DIR) + "/daemon/gaitwatch";
inline const std::string kRecording = std::string(GW_DATA_DIR) + "/daphnet/S02R01.txt";
// Around the first freeze episodes of S02R01 (FOG_EPISODES.tsv): 2 minutes.
constexpr int kStart = 53000;
constexpr int kEnd = 61200;
constexpr double kSpeed = 40;

// A temp dir holding a copy of the shipped config with loopback ports chosen
// now, an absolute example path and a temp database.
// `patterns` (a config's list, relative paths against base_dir) with each
// `{include: PACK}` replaced by the pack's patterns, and every example's
// file and template made absolute (against the directory of the file the
// pattern stood in).
inline YAML::Node inline_packs(const YAML::Node& patterns, const fs::path& base_dir) {
  const auto absolute = [](YAML::Node example, const fs::path& dir) {
    for (const char* key : {"file", "template"})
      if (example[key]) example[key] = (dir / example[key].as<std::string>()).string();
  };
  const auto absolute_paths = [&](YAML::Node pattern, const fs::path& dir) {
    if (pattern["example"]) absolute(pattern["example"], dir);
    if (pattern["template"]) pattern["template"] = (dir / pattern["template"].as<std::string>()).string();
    for (const char* list : {"examples", "negatives"})
      if (pattern[list])
        for (auto example : pattern[list]) absolute(example, dir);
  };
  YAML::Node out(YAML::NodeType::Sequence);
  for (const auto& item : patterns) {
    if (item["include"]) {
      const fs::path pack_path = base_dir / item["include"].as<std::string>();
      const YAML::Node pack = YAML::LoadFile(pack_path.string());
      for (const auto& pattern : pack["patterns"]) {
        YAML::Node copy = YAML::Clone(pattern);
        absolute_paths(copy, pack_path.parent_path());
        out.push_back(copy);
      }
    } else {
      YAML::Node copy = YAML::Clone(item);
      absolute_paths(copy, base_dir);
      out.push_back(copy);
    }
  }
  return out;
}

struct DaemonFixture {
  fs::path dir;
  fs::path config_path;
  int udp_port = free_port(true);
  int tcp_port = free_port(false);
  int pub_port = free_port(false);
  int control_port = free_port(false);
  int metrics_port = free_port(false);
  int console_port = free_port(false);
  YAML::Node config;

  DaemonFixture() {
    static int counter = 0;
    dir = fs::temp_directory_path() /
          ("gw_daemon_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir);
    config = YAML::LoadFile(std::string(GW_CONFIG_DIR) + "/gaitwatch.yaml");
    config["ingest"]["udp"]["port"] = udp_port;
    config["ingest"]["tcp"]["port"] = tcp_port;
    config["publish"]["endpoint"] = "tcp://127.0.0.1:" + std::to_string(pub_port);
    config["publish"]["stats_interval_s"] = 0.2;
    config["control"]["endpoint"] = control_endpoint();
    config["metrics"]["port"] = metrics_port;
    config["console"]["port"] = console_port;
    config["console"]["static_dir"] = std::string(GW_CONFIG_DIR) + "/../console/web";
    config["storage"]["path"] = (dir / "hits.db").string();
    config["history"]["path"] = (dir / "history.db").string();
    config["search"]["threads"] = 2;
    // The process tests compare the daemon's alerts with the detector's
    // (`gaitwatch detect`), which has no sensor_offline alerts; a test that
    // outlasts wearers.offline_after_s after its replay turns them on itself.
    config["wearers"]["offline_alerts"] = false;
    // The copy lives elsewhere: the packs' patterns written out in place of
    // their includes (the tests edit config["patterns"][0], the freeze
    // pattern), and the patterns' recordings and templates made absolute.
    config["patterns"] = inline_packs(config["patterns"], GW_CONFIG_DIR);
    config["gait"]["pack"] = std::string(GW_CONFIG_DIR) + "/patterns/gait.yaml";
    config_path = dir / "gaitwatch.yaml";
    write_config(config);
  }
  ~DaemonFixture() { fs::remove_all(dir); }

  void write_config(const YAML::Node& node) const {
    std::ofstream out(config_path);
    out << YAML::Dump(node) << "\n";
  }
  std::string endpoint() const { return "tcp://127.0.0.1:" + std::to_string(pub_port); }
  std::string control_endpoint() const {
    return "tcp://127.0.0.1:" + std::to_string(control_port);
  }
  std::string udp() const { return "udp://127.0.0.1:" + std::to_string(udp_port); }
  std::string tcp() const { return "tcp://127.0.0.1:" + std::to_string(tcp_port); }
  std::string db() const { return (dir / "hits.db").string(); }
  std::string history_db() const { return (dir / "history.db").string(); }
};

// `pattern` without per-wearer normalisation (its examples' baselines go
// with it): searched from a stream's first samples, as short replays need.
inline void without_normalisation(YAML::Node pattern) {
  pattern.remove("normalise");
  for (const char* list : {"examples", "negatives"})
    if (pattern[list])
      for (YAML::Node example : pattern[list]) example.remove("baseline");
}

// Makes the first pattern of `config` raise an alert at nearly every sample:
// every window passes, no gating, no de-duplication, no per-wearer
// normalisation (which would search nothing while it learns); one example,
// so that the search stays cheap.
inline void alert_at_every_sample(YAML::Node config) {
  auto pattern = config["patterns"][0];
  without_normalisation(pattern);
  YAML::Node first_example = pattern["examples"][0];
  pattern["examples"] = YAML::Node(YAML::NodeType::Sequence);
  pattern["examples"].push_back(first_example);
  pattern.remove("negatives");
  pattern["transforms"][1]["power_floor"] = 1e-6;
  pattern["min_dims"] = 1;
  pattern["threshold"] = 1e9;
  pattern["min_duration_s"] = 0;
  pattern["cooldown_s"] = 0;
  pattern["hysteresis"] = 0;
  config["dedup"]["enabled"] = false;
}

// A SUB socket that collects alerts and stats until told to stop.
struct Subscriber {
  zmq::context_t context;
  zmq::socket_t socket{context, zmq::socket_type::sub};
  std::vector<json> alerts;
  std::vector<json> stats;

  // `secure`: CURVE client options set before connecting (none: plain TCP).
  explicit Subscriber(const std::string& endpoint,
                      const std::function<void(zmq::socket_t&)>& secure = {}) {
    if (secure) secure(socket);
    socket.set(zmq::sockopt::subscribe, "alert.");
    socket.set(zmq::sockopt::subscribe, "stats.");
    socket.set(zmq::sockopt::rcvtimeo, 100);
    socket.connect(endpoint);
  }
  void poll_once() {
    zmq::message_t topic, body;
    if (!socket.recv(topic)) return;
    REQUIRE(topic.more());
    REQUIRE(socket.recv(body));
    json j = json::parse(body.to_string());
    if (topic.to_string().rfind("alert.", 0) == 0) {
      CHECK(topic.to_string() == "alert." + j["severity"].get<std::string>() + "." +
                                     std::to_string(j["wearer"].get<int>()) + ".");
      alerts.push_back(j);
    } else {
      stats.push_back(j);
    }
  }
  // Polls until `pred` holds or the timeout passes.
  template <typename P>
  bool until(P pred, std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (!pred() && std::chrono::steady_clock::now() < end) poll_once();
    return pred();
  }
  bool saw_shutdown() const {
    return !stats.empty() && stats.back()["reason"] == "shutdown";
  }
};

inline Process start_daemon(const DaemonFixture& fx, const std::string& tag = "daemon") {
  return Process({kDaemon, "--config", fx.config_path.string()}, fx.dir / (tag + ".out"),
                 fx.dir / (tag + ".err"));
}

inline RunResult replay(const DaemonFixture& fx, const std::string& to,
                        std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {kTool, "replay", "--file", kRecording, "--format", "daphnet",
                                   "--start", std::to_string(kStart), "--end",
                                   std::to_string(kEnd), "--speed", std::to_string(kSpeed),
                                   "--to", to};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto r = run_process(argv, fx.dir, "replay", std::chrono::seconds(60));
  INFO(r.err);
  REQUIRE(r.code == 0);
  return r;
}

// `gaitwatch replay` of samples [start, end) of a Daphnet recording for one
// wearer at 40x, to the daemon's UDP port.
inline void replay_daphnet(const DaemonFixture& fx, const std::string& file, int start, int end,
                           std::uint32_t wearer) {
  auto r = run_process({kTool, "replay", "--file", file, "--format", "daphnet", "--start",
                        std::to_string(start), "--end", std::to_string(end), "--speed", "40",
                        "--wearer", std::to_string(wearer), "--to", fx.udp()},
                       fx.dir, "replay", std::chrono::seconds(60));
  INFO(r.err);
  REQUIRE(r.code == 0);
}

// The frame count `gaitwatch replay` reports on stderr ("replayed N frames ...").
inline std::uint64_t replayed_frames(const std::string& err) {
  std::smatch m;
  REQUIRE(std::regex_search(err, m, std::regex("replayed ([0-9]+) frames")));
  return std::stoull(m[1].str());
}

// `gaitwatch replay` of samples [kStart, kEnd) of the bundled recording for
// each of `wearers` at once, as fast as `to` takes them (speed 0); waits for
// every sender to exit with 0 and returns how many frames they sent.
inline std::uint64_t replay_at_once(const DaemonFixture& fx, const std::vector<std::uint32_t>& wearers,
                                    const std::string& to) {
  std::vector<std::unique_ptr<Process>> senders;
  for (const std::uint32_t w : wearers)
    senders.push_back(std::make_unique<Process>(
        std::vector<std::string>{kTool, "replay", "--file", kRecording, "--format", "daphnet", "--start",
                                 std::to_string(kStart), "--end", std::to_string(kEnd), "--speed", "0",
                                 "--wearer", std::to_string(w), "--to", to},
        fx.dir / ("replay" + std::to_string(w) + ".out"), fx.dir / ("replay" + std::to_string(w) + ".err")));
  std::uint64_t sent = 0;
  for (const auto& sender : senders) {
    const auto code = sender->wait(std::chrono::seconds(60));
    INFO(sender->err());
    REQUIRE(code.has_value());
    CHECK(*code == 0);
    sent += replayed_frames(sender->err());
  }
  return sent;
}

// Daphnet S03R02 samples whose replay raises exactly one alert of the
// shipped freeze pattern, once it has learned the wearer's baseline from
// the slice's first 30 s of activity (`gaitwatch detect` shows it).
inline const std::string kOneAlertRecording = std::string(GW_DATA_DIR) + "/daphnet/S03R02.txt";
constexpr int kOneAlertStart = 17000;
constexpr int kOneAlertEnd = 20400;

// Replays that slice as `wearer` at 40x real time.
inline void replay_one_alert_slice(const DaemonFixture& fx, std::uint32_t wearer) {
  replay_daphnet(fx, kOneAlertRecording, kOneAlertStart, kOneAlertEnd, wearer);
}

// A stored alert as the daemon publishes it (and alerts.since returns it):
// with its times in the daemon's zone, which is this process's (the
// fixture's config names no site.time_zone, and both share TZ).
inline json as_published(const gw::pipeline::Alert& row) {
  return gw::pipeline::alert_message_json(row, gw::TimeZone::system());
}

// What the same detector finds offline in the same samples.
inline std::vector<json> detect_offline(const DaemonFixture& fx,
                                        std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {kTool, "detect", "--config", fx.config_path.string(),
                                   "--file", kRecording, "--format", "daphnet", "--start",
                                   std::to_string(kStart), "--end", std::to_string(kEnd),
                                   "--json"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto r = run_process(argv, fx.dir, "detect", std::chrono::seconds(120));
  INFO(r.err);
  REQUIRE(r.code == 0);
  return json_lines(r.out);
}

inline void stop_and_collect(Process& daemon, Subscriber& sub) {
  daemon.signal(SIGTERM);
  REQUIRE(sub.until([&] { return sub.saw_shutdown(); }, std::chrono::seconds(20)));
  const auto code = daemon.wait(std::chrono::seconds(20));
  INFO(daemon.err());
  REQUIRE(code.has_value());
  CHECK(*code == 0);
}

}  // namespace gw::test
