// bench/e2e_bench --overload as a process (docs/reliability.md, "Overload"): the real
// daemon gets 3x the load it sustains for 30 s, then the normal load. It
// must degrade as its search.overload_policy says, recover (the last part of
// the normal load clean), account for every frame and every window-end item
// after its drain, exit 0 and leave a sound SQLite file.
//
// The load is chosen for a 2-core CI machine: one search thread, 1 W1
// wearer normally, and 3x the sustainable count during the overload, as the
// bench estimates it from the warm-up's batch times (--overload-of
// sustainable): a quiet host sustains about 3-4 on one thread, one loaded by
// other builds about 1, so a fixed count would not overload a quiet host
// (docs/reliability.md, "Overload").
#include <catch2/catch.hpp>
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/daemon/process.h"
#include "tests/daemon/sqlite_check.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr int kNormalWearers = 1;
constexpr double kDeadlineMs = 250;  // the bench's W1 config

// Runs the overload mode with `policy` and returns its e2e_overload line;
// checks the store it kept before removing it.
json run_overload(const std::string& policy) {
  const fs::path dir = fs::temp_directory_path() /
                       ("gw-e2e-overload-" + policy + "-" + std::to_string(getpid()));
  fs::create_directories(dir);
  gw::test::Process bench(
      {std::string(GW_BINARY_DIR) + "/bench/e2e_bench", "--overload", "--wearers",
       std::to_string(kNormalWearers), "--threads", "1", "--policy", policy, "--warmup", "5",
       "--overload-of", "sustainable", "--overload-max", "24", "--overload-s", "30",
       "--recover-s", "45", "--recovered-s", "15", "--workdir",
       (dir / "work").string(), "--keep"},
      dir / "out", dir / "err");
  const auto code = bench.wait(std::chrono::seconds(300));
  INFO(bench.err());
  REQUIRE(code == 0);
  std::istringstream out(bench.out());
  std::string text;
  json line;
  while (std::getline(out, text))
    if (!text.empty() && text[0] == '{') line = json::parse(text);
  REQUIRE(line.is_object());
  REQUIRE(line["bench"] == "e2e_overload");
  REQUIRE_FALSE(line.contains("error"));
  line["integrity_check"] =
      gw::test::integrity_check((fs::path(line["run_dir"].get<std::string>()) / "hits.db").string());
  fs::remove_all(dir);
  return line;
}

const json& phase(const json& line, const std::string& name) {
  for (const auto& p : line["phases"])
    if (p["phase"] == name) return p;
  FAIL("no phase " << name);
  throw;
}

double total(const json& line, const std::string& counter) {
  double sum = 0;
  for (const auto& p : line["phases"]) sum += p[counter].get<double>();
  return sum;
}

// What every policy must show: a clean recovery, exact accounting after the
// drain, a clean exit and a sound store.
void check_recovery_and_accounting(const json& line) {
  INFO(line.dump());
  // 3x the sustainable estimate (at least the normal load), within the cap.
  const int sustainable = line["sustainable_estimate"].get<int>();
  CHECK(sustainable >= kNormalWearers);
  const int expected = std::min(24, std::max(kNormalWearers + 1, 3 * sustainable));
  CHECK(line["overload_wearers"] == expected);
  const json& overload = phase(line, "overload");
  CHECK(overload["wearers"] == expected);
  // The last 15 s of the normal load after it: no deadline missed, nothing
  // deferred, shed or lost, alerts within the deadline, the queue not
  // backlogged (at most a tick's frames waiting for the pipeline thread).
  const json& recovered = phase(line, "recovered");
  CHECK(recovered["deadline_misses"] == 0);
  CHECK(recovered["deferred_streams"] == 0);
  CHECK(recovered["shed_streams"] == 0);
  CHECK(recovered["lost_windows"] == 0);
  CHECK(recovered["queue_depth_end"].get<double>() <= kNormalWearers);
  CHECK(recovered["batches"].get<double>() > 0);
  CHECK(recovered["latency_ms"]["p99"].get<double>() <= kDeadlineMs);
  CHECK(line["recovered"] == true);
  // After the drain (from the counters published at shutdown): every frame
  // sent was received; received = accepted + dropped by reason, none queued;
  // due = searched + shed + dropped + lost, none pending.
  const json& acc = line["accounting"];
  CHECK(acc["source"] == "stats at shutdown");
  const json& frames = acc["frames"];
  CHECK(frames["sent"].get<double>() > 0);
  CHECK(frames["received"].get<double>() == frames["sent"].get<double>());
  double dropped = 0;
  for (const auto& [reason, count] : frames["dropped_by_reason"].items()) dropped += count.get<double>();
  CHECK(frames["dropped"].get<double>() == dropped);
  CHECK(frames["queued_at_end"] == 0);
  CHECK(frames["received"].get<double>() == frames["accepted"].get<double>() + dropped);
  const json& windows = acc["windows"];
  CHECK(windows["pending"] == 0);
  CHECK(windows["due"].get<double>() > 0);
  CHECK(windows["due"].get<double>() ==
        windows["searched"].get<double>() + windows["shed"].get<double>() +
            windows["dropped"].get<double>() + windows["lost"].get<double>());
  CHECK(line["accounted"] == true);
  // Every alert the daemon stored was published and received.
  CHECK(line["alerts"]["stored"].get<double>() > 0);
  CHECK(line["alerts"]["received"] == line["alerts"]["stored"]);
  CHECK(line["alerts"]["published"] == line["alerts"]["stored"]);
  CHECK(line["daemon_exit_code"] == 0);
  CHECK(line["integrity_check"] == "ok");
}

}  // namespace

TEST_CASE("e2e_bench --overload, defer: streams wait, nothing is shed, the daemon recovers",
          "[bench][overload]") {
  const json line = run_overload("defer");
  INFO(line.dump());
  CHECK(phase(line, "overload")["deferred_streams"].get<double>() > 0);
  // defer never sheds or drops; what it loses is counted as lost (ring overrun).
  CHECK(total(line, "shed_streams") == 0);
  CHECK(line["accounting"]["windows"]["shed"] == 0);
  CHECK(line["accounting"]["windows"]["dropped"] == 0);
  check_recovery_and_accounting(line);
}

TEST_CASE("e2e_bench --overload, shed: new samples are skipped, nothing waits, it recovers",
          "[bench][overload]") {
  const json line = run_overload("shed");
  INFO(line.dump());
  const json& overload = phase(line, "overload");
  CHECK(overload["shed_streams"].get<double>() > 0);
  CHECK(overload["shed_windows"].get<double>() > 0);
  // shed never defers, so nothing can be lost to a ring overrun.
  CHECK(total(line, "deferred_streams") == 0);
  CHECK(line["accounting"]["windows"]["lost"] == 0);
  CHECK(line["accounting"]["windows"]["overrun_samples"] == 0);
  check_recovery_and_accounting(line);
}
