// Integration: the real gaitwatchd's /metrics after a replay with malformed
// frames interleaved. Every numeric leaf of its counters (`gaitwatch status`)
// is mapped to a metric family or deliberately ignored
// (daemon/metrics_families.h), and `promtool check metrics` finds nothing to
// say about the page. Without promtool on PATH that case prints
// "promtool not found, skipped" and CTest reports it skipped. A daemon held
// still with SIGSTOP counts the pause, exports it and logs it.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "daemon/metrics_families.h"
#include "tests/daemon/daemon_fixture.h"
#include "tests/daemon/metrics_client.h"

namespace fs = std::filesystem;
using gw::test::DaemonFixture;
using gw::test::http_get;
using gw::test::kTool;
using gw::test::metric;
using gw::test::Process;
using gw::test::start_daemon;
using gw::test::Subscriber;
using nlohmann::json;

namespace {

// The executable `name` on PATH, or empty.
std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    const fs::path candidate = fs::path(dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

// A daemon that has taken a whole replay over UDP (every 7th datagram
// garbage): its /metrics page and its `status` counters, read once every
// frame sent is accepted.
struct ReplayedDaemon {
  DaemonFixture fx;
  Process daemon = start_daemon(fx);
  json sent;
  std::string page;
  json status;

  ReplayedDaemon() {
    Subscriber sub(fx.endpoint());
    INFO(daemon.err());
    REQUIRE(sub.until([&] { return !sub.stats.empty(); }, std::chrono::seconds(20)));
    const auto r = gw::test::replay(fx, fx.udp(), {"--inject-garbage", "7"});
    sent = json::parse(r.out);
    const double frames = sent["frames"].get<double>();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    do {
      page = http_get(fx.metrics_port, "/metrics").second;
      if (metric(page, "gaitwatch_engine_frames_accepted_total") == frames) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } while (std::chrono::steady_clock::now() < until);
    REQUIRE(metric(page, "gaitwatch_engine_frames_accepted_total") == frames);
    const auto s = gw::test::run_process({kTool, "status", "--endpoint", fx.control_endpoint()},
                                         fx.dir, "status", std::chrono::seconds(20));
    INFO(s.err);
    REQUIRE(s.code == 0);
    status = json::parse(s.out);
  }
  ~ReplayedDaemon() {
    daemon.signal(SIGTERM);
    daemon.wait(std::chrono::seconds(20));
  }
};

}  // namespace

TEST_CASE("every counter of the real daemon is a metric family or deliberately ignored",
          "[integration]") {
  ReplayedDaemon d;
  json counters = d.status;
  counters.erase("time");  // status's own, not a counter
  CHECK(gw::daemon::unmapped_counter_leaves(counters) == std::vector<std::string>{});
  CHECK(gw::daemon::missing_counter_leaves(counters) == std::vector<std::string>{});

  // Every non-optional family is on the page, with its HELP and TYPE; one
  // whose samples are objects' keys (control errors by code, alerts by
  // severity and kind) only once a key is there.
  const std::string& page = d.page;
  for (const auto& f : gw::daemon::metric_families()) {
    const bool keyed = std::all_of(f.samples.begin(), f.samples.end(),
                                   [](const auto& sample) { return sample.path.back() == '*'; });
    if (f.optional || keyed) continue;
    INFO(f.name);
    CHECK(page.find("# HELP " + f.name + " ") != std::string::npos);
    CHECK(page.find("# TYPE " + f.name + " ") != std::string::npos);
  }
  // Values: as in the counters, in base units, reasons as labels.
  const json& engine = counters["engine"];
  CHECK(metric(page, "gaitwatch_engine_samples_total") == engine["samples"].get<double>());
  CHECK(metric(page, "gaitwatch_engine_max_batch_seconds") ==
        Approx(engine["max_batch_ms"].get<double>() / 1000));
  double decode_errors = 0;
  for (const auto& [status, count] : counters["ingest"]["decode_errors"].items()) {
    const double value =
        metric(page, "gaitwatch_ingest_decode_errors_total{status=\"" + status + "\"}");
    CHECK(value == count.get<double>());
    decode_errors += value;
  }
  CHECK(decode_errors == d.sent["garbage"].get<double>());
  CHECK(metric(page, "gaitwatch_ingest_frames_received_total{transport=\"udp\"}") ==
        d.sent["frames"].get<double>() + d.sent["garbage"].get<double>());
  CHECK(metric(page, "gaitwatch_ingest_frames_refused_total{reason=\"bad_mac\"}") == 0);
  CHECK(metric(page, "gaitwatch_table_enabled{table=\"dedup\"}") == 1);
  CHECK(page.find("quantile") == std::string::npos);
  // Build info and process metrics.
  CHECK(page.find("gaitwatch_build_info{version=\"") != std::string::npos);
  CHECK(page.find("cuda=\"") != std::string::npos);
  // The allocator label is the build's: "jemalloc" when gaitwatchd links it
  // (GAITWATCH_JEMALLOC), else "glibc".
  std::string allocator;
  for (const auto& [label, value] : gw::daemon::build_info_labels("cpu"))
    if (label == "allocator") allocator = value;
  CHECK((allocator == "jemalloc" || allocator == "glibc"));
  CHECK(page.find(",allocator=\"" + allocator + "\",") != std::string::npos);
  // ... and the one the running daemon has loaded.
  {
    std::ifstream maps("/proc/" + std::to_string(d.daemon.pid()) + "/maps");
    const std::string mapped((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
    REQUIRE_FALSE(mapped.empty());
    CHECK((mapped.find("libjemalloc") != std::string::npos) == (allocator == "jemalloc"));
  }
  CHECK(page.find(",backend=\"" + engine["backend"].get<std::string>() + "\"} 1\n") !=
        std::string::npos);
  CHECK(metric(page, "process_resident_memory_bytes") > 1e6);
  CHECK(metric(page, "process_open_fds") > 3);
  CHECK(metric(page, "process_cpu_seconds_total") > 0);
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  CHECK(metric(page, "process_start_time_seconds") <= now + 1);
  CHECK(metric(page, "process_start_time_seconds") > now - 120);
}

TEST_CASE("promtool check metrics finds nothing on the real daemon's page", "[integration]") {
  const std::string promtool = find_on_path("promtool");
  if (promtool.empty()) {
    WARN("promtool not found, skipped");
    return;
  }
  ReplayedDaemon d;
  const fs::path page_file = d.fx.dir / "metrics.txt";
  std::ofstream(page_file) << d.page;
  const auto r = gw::test::run_process(
      {"/bin/sh", "-c", "exec '" + promtool + "' check metrics < '" + page_file.string() + "'"},
      d.fx.dir, "promtool", std::chrono::seconds(30));
  INFO(r.out << r.err);
  CHECK(r.out.empty());
  CHECK(r.err.empty());
  CHECK(r.code == 0);
}

TEST_CASE("a daemon held still counts the pause, exports it and logs it", "[integration]") {
  DaemonFixture fx;
  Process daemon = start_daemon(fx);
  Subscriber sub(fx.endpoint());
  INFO(daemon.err());
  REQUIRE(sub.until([&] { return !sub.stats.empty(); }, std::chrono::seconds(20)));
  const auto pause_seconds = [&] {
    return metric(http_get(fx.metrics_port, "/metrics").second, "gaitwatch_process_pause_seconds_total");
  };
  const double before = pause_seconds();
  CHECK(before >= 0);

  daemon.signal(SIGSTOP);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  daemon.signal(SIGCONT);

  // The monitor's 10-ms sleep ends at least 350 ms late once the process runs again.
  double after = before;
  CHECK(gw::test::eventually(
      [&] {
        after = pause_seconds();
        return after - before >= 0.35;
      },
      std::chrono::seconds(20)));
  INFO("pause seconds before " << before << ", after " << after);
  const std::string page = http_get(fx.metrics_port, "/metrics").second;
  CHECK(metric(page, "gaitwatch_process_pauses_total") >= 1);
  CHECK(metric(page, "gaitwatch_process_pause_max_seconds") >= 0.35);
  CHECK(gw::test::eventually([&] { return daemon.err().find("process paused: a 10-ms sleep woke") != std::string::npos; },
                             std::chrono::seconds(5)));
  daemon.signal(SIGTERM);
  CHECK(daemon.wait(std::chrono::seconds(20)) == 0);
}
