// Integration: how the real gaitwatchd stops and how it lives with a failing
// hit store (docs/reliability.md, "Stopping" and "Store trouble").
//  - SIGTERM while a Prometheus-like client keeps one HTTP connection to
//    /metrics alive: the connection is closed and the daemon exits at once.
//  - SIGTERM under overload with a small daemon.stop_timeout_s: the drain
//    stops at the limit, what it leaves is counted, the exit code is 0.
//  - SIGTERM just after TCP senders have sent their last frames into a
//    small, full queue: their connections finish reading, and every frame
//    sent is queued and taken by the engine; none is refused at the close.
//  - A database at its size limit (storage.max_size_mb: SQLITE_FULL, as on
//    a full disk): detection and the control interface keep going, and the
//    final counters match the rows in the file.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "common/error.h"
#include "daemon/control_client.h"
#include "sinks/store.h"
#include "tests/daemon/daemon_fixture.h"

namespace {

using gw::daemon::ControlClient;
using gw::test::DaemonFixture;
using gw::test::kTool;
using gw::test::Process;
using gw::test::start_daemon;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

json result_of(const json& reply) {
  INFO(reply.dump());
  REQUIRE(reply["type"] == "result");
  return reply["result"];
}

// The daemon's "final counters: {...}" log line, parsed.
json final_counters(const std::string& log) {
  const std::string marker = "final counters: ";
  const auto at = log.rfind(marker);
  REQUIRE(at != std::string::npos);
  const auto end = log.find('\n', at);
  return json::parse(log.substr(at + marker.size(), end - at - marker.size()));
}

// Waits until the daemon answers `status` (it has compiled its patterns).
json wait_ready(ControlClient& client, Process& daemon) {
  json status;
  const bool ready = gw::test::eventually(
      [&] {
        try {
          status = result_of(client.call("status", json::object()));
          return true;
        } catch (const gw::Error&) {
          return false;
        }
      },
      60s);
  INFO("daemon log: " << daemon.err());
  REQUIRE(ready);
  return status;
}

// SIGTERM, then the exit code and how long the exit took.
std::pair<std::optional<int>, Clock::duration> terminate(Process& daemon,
                                                         std::chrono::seconds patience) {
  const auto start = Clock::now();
  daemon.signal(SIGTERM);
  const auto code = daemon.wait(patience);
  return {code, Clock::now() - start};
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

TEST_CASE("SIGTERM closes a keep-alive /metrics connection and the daemon exits at once",
          "[integration]") {
  DaemonFixture fx;
  fx.config["history"]["enabled"] = false;
  fx.write_config(fx.config);
  Process daemon = start_daemon(fx);
  INFO(daemon.err());
  ControlClient client(fx.control_endpoint(), 2s);
  wait_ready(client, daemon);

  // A scraper on one keep-alive connection, a request every 100 ms, until
  // the daemon closes it (or the test gives up).
  std::atomic<int> answers{0};
  std::atomic<bool> closed_by_daemon{false};
  std::atomic<bool> give_up{false};
  std::thread scraper([&] {
    namespace beast = boost::beast;
    namespace http = beast::http;
    boost::asio::io_context io;
    beast::tcp_stream stream(io);
    beast::error_code ec;
    stream.socket().connect(
        {boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(fx.metrics_port)},
        ec);
    if (ec) return;
    beast::flat_buffer buffer;
    while (!give_up.load()) {
      http::request<http::empty_body> request{http::verb::get, "/metrics", 11};
      request.set(http::field::host, "127.0.0.1");
      request.keep_alive(true);
      http::write(stream, request, ec);
      http::response<http::string_body> response;
      if (!ec) http::read(stream, buffer, response, ec);
      if (ec) {
        closed_by_daemon = true;
        return;
      }
      if (response.result() == http::status::ok && response.keep_alive()) ++answers;
      std::this_thread::sleep_for(100ms);
    }
  });
  const bool scraping = gw::test::eventually([&] { return answers.load() >= 3; }, 20s);

  const auto [code, took] = terminate(daemon, 15s);
  // The scraper's next request finds the connection closed.
  const bool closed = gw::test::eventually([&] { return closed_by_daemon.load(); }, 5s);
  give_up = true;
  scraper.join();
  REQUIRE(scraping);
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  CHECK(seconds(took) < 5);
  CHECK(closed);
}

TEST_CASE("SIGTERM under overload: the drain ends at daemon.stop_timeout_s, what it leaves is "
          "counted, exit 0", "[integration]") {
  DaemonFixture fx;
  constexpr double kStopTimeoutS = 2;
  fx.config["daemon"]["stop_timeout_s"] = kStopTimeoutS;
  // One search thread against several wearers replayed as fast as they can
  // be sent; short ticks and deadlines, so that the engine defers streams
  // and a backlog of windows waits at the stop.
  // The CPU backend on one thread: a GPU would keep up, and nothing would be
  // left for the deadline to cut.
  fx.config["search"]["backend"] = "cpu";
  fx.config["search"]["threads"] = 1;
  fx.config["search"]["tick_ms"] = 10;
  fx.config["search"]["deadline_ms"] = 20;
  fx.config["search"]["overload_policy"] = "defer";
  fx.config["history"]["enabled"] = false;
  fx.config["ingest"]["queue_capacity"] = 1 << 20;
  // Each short replay is searched from its first samples.
  gw::test::without_normalisation(fx.config["patterns"][0]);
  fx.write_config(fx.config);
  Process daemon = start_daemon(fx);
  INFO(daemon.err());
  ControlClient client(fx.control_endpoint(), 5s);
  wait_ready(client, daemon);

  // First one wearer at 8x real time, so that the engine's cost model has
  // batches to fit; then many wearers with a short stretch each, as fast as
  // they can be sent: a backlog of many streams, none of them long (a
  // deferred stream is searched whole by one batch, so it bounds how long
  // the batch in flight at the stop takes).
  auto replay = [&](int wearer, int samples, const std::string& speed) {
    return std::make_unique<Process>(
        std::vector<std::string>{kTool, "replay", "--file", gw::test::kRecording, "--format",
                                 "daphnet", "--start", std::to_string(gw::test::kStart), "--end",
                                 std::to_string(gw::test::kStart + samples), "--speed", speed,
                                 "--wearer", std::to_string(wearer), "--to", fx.udp()},
        fx.dir / ("replay" + std::to_string(wearer) + ".out"),
        fx.dir / ("replay" + std::to_string(wearer) + ".err"));
  };
  REQUIRE(replay(1, 640, "8")->wait(60s) == 0);
  constexpr int kWearers = 24;
  std::vector<std::unique_ptr<Process>> senders;
  for (int w = 0; w < kWearers; ++w) senders.push_back(replay(100 + w, 600, "0"));
  for (auto& sender : senders) REQUIRE(sender->wait(60s) == 0);
  // A backlog: windows deferred, or frames still queued.
  json status;
  REQUIRE(gw::test::eventually(
      [&] {
        status = result_of(client.call("status", json::object()));
        return status["engine"]["pending_windows"].get<double>() > 0 ||
               status["ingest"]["queue_depth"].get<double>() > 0;
      },
      20s));
  INFO("status before the stop: " << status.dump());

  const auto [code, took] = terminate(daemon, 30s);
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  CHECK(seconds(took) < kStopTimeoutS + 3);
  const json stats = final_counters(daemon.err());
  INFO(stats.dump());
  const json& engine = stats["engine"];
  const auto abandoned_windows = engine["stop_abandoned_windows"].get<std::uint64_t>();
  const auto abandoned_frames = engine["stop_abandoned_frames"].get<std::uint64_t>();
  CHECK(abandoned_windows + abandoned_frames > 0);
  // The windows left are the engine's pending ones, and its accounting holds.
  CHECK(engine["pending_windows"] == abandoned_windows);
  CHECK(engine["due_windows"].get<std::uint64_t>() ==
        engine["searched_windows"].get<std::uint64_t>() +
            engine["shed_windows"].get<std::uint64_t>() +
            engine["dropped_windows"].get<std::uint64_t>() +
            engine["lost_windows"].get<std::uint64_t>() + abandoned_windows);
  CHECK(daemon.err().find("left no time to search") != std::string::npos);
}

TEST_CASE("SIGTERM just after TCP senders finish: every frame they sent is read, queued and taken",
          "[integration]") {
  // The connections on the I/O thread, and on three ingest threads of
  // their own.
  const int ingest_threads = GENERATE(1, 3);
  INFO("ingest.threads " << ingest_threads);
  DaemonFixture fx;
  fx.config["ingest"]["threads"] = ingest_threads;
  // A small queue that blocks: the connections wait for room while the
  // senders' last frames still sit in the socket buffers at the stop.
  fx.config["ingest"]["queue_capacity"] = 8;
  fx.config["ingest"]["queue_overflow"] = "block";
  fx.config["daemon"]["stop_timeout_s"] = 20;
  fx.config["search"]["backend"] = "cpu";
  fx.config["history"]["enabled"] = false;
  fx.write_config(fx.config);
  Process daemon = start_daemon(fx);
  INFO(daemon.err());
  ControlClient client(fx.control_endpoint(), 5s);
  wait_ready(client, daemon);

  const std::uint64_t sent = gw::test::replay_at_once(fx, {200, 201, 202, 203, 204, 205}, fx.tcp());
  REQUIRE(sent > 100);

  const auto [code, took] = terminate(daemon, 30s);
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  const json stats = final_counters(daemon.err());
  INFO(stats.dump());
  const json& ingest = stats["ingest"];
  CHECK(ingest["tcp_frames"] == sent);
  CHECK(ingest["queued"] == sent);
  CHECK(ingest["queue_refused_closed"] == 0);
  CHECK(ingest["queue_dropped"] == 0);
  CHECK(stats["engine"]["frames_accepted"] == sent);
  CHECK(stats["engine"]["stop_abandoned_frames"] == 0);
}

TEST_CASE("a database at its size limit: detection and status go on, final counts match the rows",
          "[integration]") {
  DaemonFixture fx;
  gw::test::alert_at_every_sample(fx.config);
  fx.config["history"]["enabled"] = false;
  // Room for some hundred rows beyond the schema, then SQLITE_FULL; small
  // transactions, so that several commit before the limit.
  fx.config["storage"]["max_size_mb"] = 0.25;
  fx.config["storage"]["max_batch"] = 100;
  // Rows without windows (about 11.5 KB each, they would leave room for a
  // dozen alerts, less than one transaction).
  fx.config["marks"]["alert_windows"] = false;
  fx.config["storage"]["max_pending_alerts"] = 1000;
  fx.config["daemon"]["stop_timeout_s"] = 2;
  fx.write_config(fx.config);
  Process daemon = start_daemon(fx);
  INFO(daemon.err());
  ControlClient client(fx.control_endpoint(), 5s);
  wait_ready(client, daemon);

  Process sender({kTool, "replay", "--file", gw::test::kRecording, "--format", "daphnet",
                  "--start", "20000", "--end", "32000", "--speed", "80", "--to", fx.udp()},
                 fx.dir / "replay.out", fx.dir / "replay.err");
  // While the replay runs: every status answers within a second, and the
  // engine's batches go on after the store has failed.
  double slowest_status_s = 0;
  std::optional<std::uint64_t> batches_at_failure;
  json status;
  while (sender.running()) {
    const auto asked = Clock::now();
    status = result_of(client.call("status", json::object()));
    slowest_status_s = std::max(slowest_status_s, seconds(Clock::now() - asked));
    if (!batches_at_failure && status["sink"]["store_errors"].get<std::uint64_t>() > 0)
      batches_at_failure = status["engine"]["batches"].get<std::uint64_t>();
    std::this_thread::sleep_for(50ms);
  }
  INFO(status.dump());
  REQUIRE(sender.wait(1s) == 0);
  REQUIRE(batches_at_failure.has_value());
  CHECK(status["engine"]["batches"].get<std::uint64_t>() > *batches_at_failure);
  CHECK(slowest_status_s < 1);

  const auto [code, took] = terminate(daemon, 30s);
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  CHECK(seconds(took) < 2 + 3);
  const json stats = final_counters(daemon.err());
  INFO(stats.dump());
  const json& sink = stats["sink"];
  const auto rows = gw::pipeline::HitStore(fx.db(), /*read_only=*/true).count();
  CHECK(rows > 0);
  CHECK(sink["committed"] == rows);
  CHECK(sink["pending"] == 0);
  CHECK(sink["store_dropped"].get<std::uint64_t>() > 0);
  // Without de-duplication every alert the engine raised went to the sink.
  CHECK(sink["submitted"] == stats["engine"]["alerts"]);
  CHECK(sink["submitted"].get<std::uint64_t>() ==
        sink["committed"].get<std::uint64_t>() + sink["store_dropped"].get<std::uint64_t>() +
            sink["stop_abandoned"].get<std::uint64_t>());
}
