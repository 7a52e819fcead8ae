// Integration: a subscriber that stops reading (SIGSTOP on a real
// `gaitwatch subscribe --catch-up`) while the real gaitwatchd publishes
// thousands of alerts. The daemon's memory stays bounded (ZeroMQ's send
// high-water mark drops for that subscriber only), storage is unaffected,
// another subscriber that keeps reading misses nothing, and the stalled one,
// resumed, counts what it was not sent and fetches it by seq from the store
// through the control interface (docs/interfaces.md "Alerts").
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "sinks/alert.h"
#include "sinks/store.h"
#include "tests/daemon/daemon_fixture.h"

namespace fs = std::filesystem;
using gw::test::DaemonFixture;
using gw::test::json_lines;
using gw::test::kTool;
using gw::test::Process;
using gw::test::start_daemon;
using gw::test::Subscriber;
using nlohmann::json;

namespace {

// Samples replayed (one alert each, nearly) and the replay speed, sized for a
// loaded 2-core machine; kRssGrowthMib bounds the daemon's growth meanwhile.
constexpr int kSamples = 48000;
constexpr int kSpeed = 80;
constexpr long kRssGrowthMib = 6;

// VmRSS of a process in KiB, from /proc.
long rss_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

std::uint64_t stored_rows(const DaemonFixture& fx) {
  gw::pipeline::HitStore store(fx.db(), /*read_only=*/true);
  return store.last_seq();
}

}  // namespace

TEST_CASE("a stalled subscriber: bounded memory, storage unaffected, drops counted, catch-up by seq",
          "[integration]") {
  DaemonFixture fx;
  // An alert at nearly every sample. A small high-water mark (3,000 of
  // ~48,000 alerts), so that drops begin early.
  gw::test::alert_at_every_sample(fx.config);
  fx.config["history"]["enabled"] = false;
  // Not what this test measures: an alert storm's windows in flight to the
  // store (about 11.5 KB each) would dwarf the subscriber's share.
  fx.config["marks"]["alert_windows"] = false;
  fx.config["publish"]["send_hwm"] = 3000;
  // A transaction's alerts are published at once (their JSON is made
  // during the commit): bursts well below the high-water mark, so that on a
  // loaded machine only the stalled subscriber loses any (with 1,000 and
  // bursts of up to 500 the reader lost 8 of 47,682 in CI).
  fx.config["storage"]["max_batch"] = 500;
  fx.write_config(fx.config);
  Process daemon = start_daemon(fx);
  INFO(daemon.err());

  // Keeps reading throughout; no receive high-water mark, so that its own
  // I/O thread queues whatever this (possibly descheduled) test thread has
  // not taken yet: losses may only be the stalled subscriber's.
  Subscriber reader(fx.endpoint(), [](zmq::socket_t& s) { s.set(zmq::sockopt::rcvhwm, 0); });
  REQUIRE(reader.until([&] { return !reader.stats.empty(); }, std::chrono::seconds(30)));
  Process stalled({kTool, "subscribe", "--endpoint", fx.endpoint(), "--catch-up",
                   "--since-seq", "0", "--control-endpoint", fx.control_endpoint()},
                  fx.dir / "stalled.out", fx.dir / "stalled.err");
  std::this_thread::sleep_for(std::chrono::seconds(1));  // its subscription reaches the daemon
  stalled.signal(SIGSTOP);

  Process sender({kTool, "replay", "--file", gw::test::kRecording, "--format", "daphnet",
                  "--start", "20000", "--end", std::to_string(20000 + kSamples), "--speed",
                  std::to_string(kSpeed), "--to", fx.udp()},
                 fx.dir / "replay.out", fx.dir / "replay.err");
  long rss_first = -1, rss_max = 0;
  std::uint64_t rows_first = 0;
  std::vector<std::uint64_t> rows_seen;
  auto next_rss = std::chrono::steady_clock::now();
  while (sender.running()) {
    reader.poll_once();
    if (std::chrono::steady_clock::now() < next_rss) continue;
    next_rss = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
    const long rss = rss_kib(daemon.pid());
    if (rss_first < 0 && reader.alerts.size() > 2000) {
      rss_first = rss;
      rows_first = stored_rows(fx);
    }
    rss_max = std::max(rss_max, rss);
  }
  REQUIRE(sender.wait(std::chrono::seconds(1)) == 0);
  // Everything detected is stored, and the reader got all of it. Drained:
  // the engine took every replayed sample (an empty ingest queue alone is not
  // enough on a loaded machine: datagrams may still wait in the socket), has
  // no window left to search nor a batch whose alerts are still to come, and
  // two stats messages in a row show the same alert count, all of it
  // committed.
  const auto drained = [&] {
    if (reader.stats.size() < 2) return false;
    const json& last = reader.stats.back();
    const json& before = reader.stats[reader.stats.size() - 2];
    return last["ingest"]["queue_depth"] == 0 && last["engine"]["samples"] == kSamples &&
           last["engine"]["pending_windows"] == 0 && last["engine"]["unfinished_windows"] == 0 &&
           last["engine"]["alerts"] == before["engine"]["alerts"] &&
           last["sink"]["committed"] == last["engine"]["alerts"];
  };
  REQUIRE(reader.until(drained, std::chrono::seconds(60)));
  const std::uint64_t total = stored_rows(fx);
  reader.until([&] { return reader.alerts.size() >= total; }, std::chrono::seconds(10));
  INFO("stored " << total << ", the reader got " << reader.alerts.size());
  REQUIRE(reader.alerts.size() == total);
  INFO("alerts " << total << ", daemon RSS after 2000 alerts " << rss_first << " KiB, max "
                 << rss_max << " KiB");
  WARN("stalled subscriber: " << total << " alerts, daemon RSS " << rss_first << " -> max "
                              << rss_max << " KiB");
  REQUIRE(rss_first > 0);
  CHECK(total > rows_first + 10000);  // storage kept going while the subscriber was stalled
  for (std::size_t i = 0; i < reader.alerts.size(); ++i)
    CHECK(reader.alerts[i]["seq"].get<std::uint64_t>() == i + 1);  // the reader lost nothing
  // What the stalled subscriber was owed is far more than the daemon grew.
  const double owed_mib = (total - 2000) * 1.0 * reader.alerts.back().dump().size() / 1048576;
  CHECK(owed_mib > 3 * kRssGrowthMib);
  CHECK(rss_max - rss_first < kRssGrowthMib * 1024);

  // Resumed, the stalled subscriber prints every alert once, in seq order:
  // what ZeroMQ dropped for it comes from the store.
  stalled.signal(SIGCONT);
  const auto printed = [&] {
    const std::string out = stalled.out();
    return static_cast<std::uint64_t>(std::count(out.begin(), out.end(), '\n')) >= total;
  };
  // Catch-up pages through the control interface; generous for a loaded machine.
  const auto catch_up_end = std::chrono::steady_clock::now() + std::chrono::seconds(180);
  while (!printed() && std::chrono::steady_clock::now() < catch_up_end)
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stalled.signal(SIGTERM);
  const auto stalled_code = stalled.wait(std::chrono::seconds(20));
  INFO("stalled subscriber: " << json_lines(stalled.out()).size() << " lines; " << stalled.err());
  REQUIRE(stalled_code == 0);
  const auto lines = json_lines(stalled.out());
  REQUIRE(lines.size() == total);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    CHECK(lines[i]["seq"].get<std::uint64_t>() == i + 1);
    if (lines[i] != reader.alerts[i]) FAIL_CHECK("alert " << i + 1 << " differs");
  }
  const std::string summary = stalled.err();
  INFO(summary);
  std::uint64_t missed = 0, fetched = 0;
  REQUIRE(std::sscanf(summary.c_str(),
                      "gaitwatch subscribe: %lu alerts were not delivered (dropped at the "
                      "publisher's high-water mark); %lu fetched",
                      &missed, &fetched) == 2);
  CHECK(missed > total / 2);
  CHECK(fetched == missed);

  daemon.signal(SIGTERM);
  REQUIRE(daemon.wait(std::chrono::seconds(30)) == 0);
}
