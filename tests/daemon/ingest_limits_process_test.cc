// Resource limits of the real gaitwatchd against one unauthenticated sender:
// a spray of invented wearer ids keeps its memory bounded (ingest.max_streams,
// idle streams removed), and at the open-file limit the daemon refuses TCP
// connections instead of spinning, while the control interface answers.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>

#include "daemon/control_client.h"
#include "sensors/frame.h"
#include "tests/daemon/daemon_fixture.h"

namespace {

namespace asio = boost::asio;
using gw::daemon::ControlClient;
using gw::test::DaemonFixture;
using gw::test::eventually;
using gw::test::Process;
using nlohmann::json;
using namespace std::chrono_literals;

// Every counter of the daemon, from a control client that stays connected.
struct Status {
  ControlClient client;
  explicit Status(const DaemonFixture& fx) : client(fx.control_endpoint(), 10s) {}
  json operator()() {
    const json reply = client.call("status", json::object());
    INFO(reply.dump());
    REQUIRE(reply["type"] == "result");
    return reply["result"];
  }
};

// VmRSS of a process in KiB.
long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

// utime + stime of a process in seconds.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));  // after "pid (comm) "
  std::string field;
  double ticks = 0;
  for (int k = 3; k <= 15 && fields >> field; ++k)
    if (k == 14 || k == 15) ticks += std::stod(field);  // utime, stime
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// An accelerometer frame (device 4 of the shipped config) of a new wearer:
// 3 samples of 3 channels, 80 bytes on the wire.
std::vector<std::uint8_t> fresh_wearer_frame(std::uint32_t wearer) {
  gw::sensors::Frame f;
  f.kind = gw::sensors::DeviceKind::kAccelerometer3;
  f.wearer_id = wearer;
  f.device_id = 4;
  f.channels = 3;
  f.samples = 3;
  f.sample_rate_hz = 100;
  f.sequence = 0;
  f.device_time_us = 1000;
  f.values.assign(9, 1.0f);
  return gw::sensors::encode_frame(f);
}

void wait_ready(const DaemonFixture& fx, Process& daemon) {
  REQUIRE(eventually(
      [&] {
        REQUIRE(daemon.running());
        try {
          ControlClient client(fx.control_endpoint(), 500ms);
          return client.call("status", json::object())["type"] == "result";
        } catch (const std::exception&) {
          return false;
        }
      },
      20s));
}

}  // namespace

TEST_CASE("a spray of invented wearer ids keeps the daemon's memory bounded and is counted",
          "[daemon][limits]") {
  DaemonFixture fx;
  fx.config["ingest"]["max_streams"] = 500;
  fx.config["ingest"]["stream_idle_s"] = 1;
  fx.config["ingest"]["stream_stale_s"] = 0.5;
  fx.config["ingest"]["stream_offline_s"] = 0.9;
  fx.config["ingest"]["queue_overflow"] = "block";
  fx.write_config(fx.config);
  Process daemon = gw::test::start_daemon(fx);
  wait_ready(fx, daemon);
  Status status(fx);
  const long rss_before = rss_kib(daemon.pid());

  asio::io_context io;
  asio::ip::udp::socket socket(io, asio::ip::udp::v4());
  const asio::ip::udp::endpoint to(asio::ip::make_address("127.0.0.1"),
                                   static_cast<unsigned short>(fx.udp_port));
  constexpr std::uint32_t kDatagrams = 20000;
  for (std::uint32_t k = 0; k < kDatagrams; ++k) {
    const auto bytes = fresh_wearer_frame(1000000 + k);
    REQUIRE(bytes.size() == 80);
    socket.send_to(asio::buffer(bytes), to);
    if (k % 500 == 499) std::this_thread::sleep_for(2ms);  // the kernel's buffer, not the daemon
  }
  // Every queued frame reached the engine: it opened a stream or was refused.
  json s;
  REQUIRE(eventually(
      [&] {
        s = status();
        const json& e = s["engine"];
        return e["frames_accepted"].get<std::uint64_t>() + e["streams_refused"].get<std::uint64_t>() ==
               s["ingest"]["queued"].get<std::uint64_t>();
      },
      20s));
  INFO(s.dump());
  const json& engine = s["engine"];
  const auto queued = s["ingest"]["queued"].get<std::uint64_t>();
  CHECK(queued > kDatagrams / 2);  // loopback may lose some, not most
  CHECK(engine["streams"].get<std::uint64_t>() <= 500);
  // Every accepted frame opened a stream, live or removed since.
  CHECK(engine["frames_accepted"] ==
        engine["streams"].get<std::uint64_t>() + engine["streams_evicted"].get<std::uint64_t>());
  CHECK(engine["streams_refused"].get<std::uint64_t>() > 0);
  const long rss_after = rss_kib(daemon.pid());
  INFO("VmRSS before " << rss_before << " KiB, after " << rss_after << " KiB");
  // 20,000 streams of ~137 KB each would be 2.7 GB; 500 small ones are a few MB.
  CHECK(rss_after - rss_before < 64 * 1024);
  // Idle streams go: none left after the idle time, and their states were
  // reported on the way.
  REQUIRE(eventually([&] { return status()["engine"]["streams"] == 0; }, 10s));
  s = status();
  CHECK(s["engine"]["streams_evicted"] == s["engine"]["frames_accepted"]);
  CHECK(s["engine"]["streams_by_state"] == json({{"online", 0}, {"stale", 0}, {"offline", 0}}));
  CHECK(s["engine"]["oldest_frame_age_s"] == 0);
  daemon.signal(SIGTERM);
  REQUIRE(daemon.wait(30s) == 0);
  CHECK_THAT(daemon.err(), Catch::Contains("past ingest.max_streams 500"));
}

TEST_CASE("at the open-file limit TCP connections are refused, the control interface answers and "
          "the daemon does not spin",
          "[daemon][limits]") {
  DaemonFixture fx;
  Process daemon({"/usr/bin/prlimit", "--nofile=128:128", gw::test::kDaemon, "--config",
                  fx.config_path.string()},
                 fx.dir / "daemon.out", fx.dir / "daemon.err");
  wait_ready(fx, daemon);
  Status status(fx);  // connected before the descriptors run short
  asio::io_context io;
  const asio::ip::tcp::endpoint to(asio::ip::make_address("127.0.0.1"),
                                   static_cast<unsigned short>(fx.tcp_port));
  // More connections than the daemon has descriptors; the client keeps them.
  std::vector<asio::ip::tcp::socket> clients;
  for (int k = 0; k < 200; ++k) {
    clients.emplace_back(io);
    clients.back().connect(to);
  }
  json s;
  REQUIRE(eventually(
      [&] {
        s = status();
        return s["ingest"]["tcp_connections"] == 200;
      },
      10s));
  INFO(s.dump());
  CHECK(s["ingest"]["tcp_refused"].get<int>() > 0);
  CHECK(s["ingest"]["tcp_open"].get<int>() + s["ingest"]["tcp_refused"].get<int>() == 200);
  CHECK(s["ingest"]["tcp_open"].get<int>() < 128);
  // `gaitwatch status` (a new control connection) answers at once.
  const auto asked = std::chrono::steady_clock::now();
  const auto r = gw::test::run_process(
      {gw::test::kTool, "status", "--endpoint", fx.control_endpoint()}, fx.dir, "status", 10s);
  const double took_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(took_s < 2.0);
  CHECK(json::parse(r.out)["ingest"].contains("accept_errors"));
  // Idle under the held connections: well under a core.
  const double cpu_before = cpu_seconds(daemon.pid());
  std::this_thread::sleep_for(1s);
  CHECK(cpu_seconds(daemon.pid()) - cpu_before < 0.3);
  CHECK_THAT(daemon.err(), Catch::Contains("near the open-file limit"));
  daemon.signal(SIGTERM);
  REQUIRE(daemon.wait(30s) == 0);
}
