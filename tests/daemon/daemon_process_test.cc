// Integration: the real gaitwatchd process on loopback ports with a temporary
// database, fed by `gaitwatch replay` with the bundled Daphnet recording,
// observed through a real ZeroMQ subscriber and the SQLite file.
#include <catch2/catch.hpp>

#include <set>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>
#include <zmq.hpp>

#include "pipeline/alert.h"
#include "pipeline/store.h"
#include "tests/daemon/process.h"

namespace fs = std::filesystem;
using gw::test::Process;
using nlohmann::json;

namespace {

const std::string kDaemon = std::string(GW_BINARY_DIR) + "/daemon/gaitwatchd";
const std::string kTool = std::string(GW_BINARY_DIR) + "/daemon/gaitwatch";
const std::string kRecording = std::string(GW_DATA_DIR) + "/daphnet/S02R01.txt";
// Around the first freeze episodes of S02R01 (FOG_EPISODES.tsv): 2 minutes.
constexpr int kStart = 53000;
constexpr int kEnd = 61200;
constexpr double kSpeed = 40;

// A temp dir holding a copy of the shipped config with loopback ports chosen
// now, an absolute example path and a temp database.
struct DaemonFixture {
  fs::path dir;
  fs::path config_path;
  int udp_port = gw::test::free_port(true);
  int tcp_port = gw::test::free_port(false);
  int pub_port = gw::test::free_port(false);
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
    config["storage"]["path"] = (dir / "hits.db").string();
    config["history"]["path"] = (dir / "history.db").string();
    config["search"]["threads"] = 2;
    // The copy lives elsewhere: make the patterns' example files absolute.
    auto absolute = [](YAML::Node example) {
      example["file"] = (fs::path(GW_CONFIG_DIR) / example["file"].as<std::string>()).string();
    };
    for (auto pattern : config["patterns"]) {
      if (pattern["example"]) absolute(pattern["example"]);
      for (const char* list : {"examples", "negatives"})
        if (pattern[list])
          for (auto example : pattern[list]) absolute(example);
    }
    config_path = dir / "gaitwatch.yaml";
    write_config(config);
  }
  ~DaemonFixture() { fs::remove_all(dir); }

  void write_config(const YAML::Node& node) const {
    std::ofstream out(config_path);
    out << YAML::Dump(node) << "\n";
  }
  std::string endpoint() const { return "tcp://127.0.0.1:" + std::to_string(pub_port); }
  std::string db() const { return (dir / "hits.db").string(); }
  std::string history_db() const { return (dir / "history.db").string(); }
};

// A SUB socket that collects alerts and stats until told to stop.
struct Subscriber {
  zmq::context_t context;
  zmq::socket_t socket{context, zmq::socket_type::sub};
  std::vector<json> alerts;
  std::vector<json> stats;

  explicit Subscriber(const std::string& endpoint) {
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

Process start_daemon(const DaemonFixture& fx, const std::string& tag = "daemon") {
  return Process({kDaemon, "--config", fx.config_path.string()}, fx.dir / (tag + ".out"),
                 fx.dir / (tag + ".err"));
}

gw::test::RunResult replay(const DaemonFixture& fx, const std::string& to,
                           std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {kTool, "replay", "--file", kRecording, "--format", "daphnet",
                                   "--start", std::to_string(kStart), "--end",
                                   std::to_string(kEnd), "--speed", std::to_string(kSpeed),
                                   "--to", to};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto r = gw::test::run_process(argv, fx.dir, "replay", std::chrono::seconds(60));
  INFO(r.err);
  REQUIRE(r.code == 0);
  return r;
}

// What the same detector finds offline in the same samples.
std::vector<json> detect_offline(const DaemonFixture& fx) {
  auto r = gw::test::run_process({kTool, "detect", "--config", fx.config_path.string(), "--file",
                                  kRecording, "--format", "daphnet", "--start",
                                  std::to_string(kStart), "--end", std::to_string(kEnd)},
                                 fx.dir, "detect", std::chrono::seconds(120));
  INFO(r.err);
  REQUIRE(r.code == 0);
  std::vector<json> out;
  std::stringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

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
    CHECK(gw::pipeline::alert_to_json(rows[i]) == published[i]);
  }
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

void stop_and_collect(Process& daemon, Subscriber& sub) {
  daemon.signal(SIGTERM);
  REQUIRE(sub.until([&] { return sub.saw_shutdown(); }, std::chrono::seconds(20)));
  const auto code = daemon.wait(std::chrono::seconds(20));
  INFO(daemon.err());
  REQUIRE(code.has_value());
  CHECK(*code == 0);
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
  stop_and_collect(daemon, sub);

  const json& final_stats = sub.stats.back();
  CHECK(final_stats["engine"]["frames_accepted"].get<int>() > 0);
  CHECK(final_stats["engine"]["gaps"] == 0);
  CHECK(decode_errors(final_stats) == 0);
  check_alerts_match(fx, sub.alerts);
  check_history(fx, final_stats);
  CHECK(daemon.err().find("<6>gaitwatchd ready") != std::string::npos);
}

TEST_CASE("replay over TCP with malformed frames interleaved: counted, nothing else changes",
          "[integration]") {
  DaemonFixture fx;
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

  // int16 quantisation changes the samples slightly: compare with the offline
  // detector on the same quantised samples.
  auto expected = gw::test::run_process(
      {kTool, "detect", "--config", fx.config_path.string(), "--file", kRecording, "--format",
       "daphnet", "--start", std::to_string(kStart), "--end", std::to_string(kEnd), "--int16"},
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

  // Still detecting with the old config: every alert of the replay arrives.
  replay(fx, "udp://127.0.0.1:" + std::to_string(fx.udp_port));
  REQUIRE(sub.until([&] { return sub.alerts.size() == expected; }, std::chrono::seconds(10)));

  // A valid reload that makes the pattern impossible to match applies: one
  // example from outside the replayed range (so never distance 0) and a tiny
  // threshold.
  YAML::Node strict = YAML::Clone(fx.config);
  strict["patterns"][0]["threshold"] = 0.001;
  YAML::Node only = YAML::Clone(strict["patterns"][0]["examples"][0]);
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
