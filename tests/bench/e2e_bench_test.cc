// bench/e2e_bench as a process: a short W1 run through the real daemon and
// the micro benchmarks, checking what they account for (not how fast: speed
// is the benchmark's own output). Guards the bench against daemon config or
// metric-name changes that would otherwise only show on the next GPU run.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench/w1_workload.h"
#include "tests/daemon/process.h"

namespace {

namespace fs = std::filesystem;

std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] == '{') lines.push_back(nlohmann::json::parse(line));
  return lines;
}

std::vector<nlohmann::json> run_bench(const std::vector<std::string>& args,
                                      const std::string& tag) {
  const fs::path dir =
      fs::temp_directory_path() / ("gw-e2e-test-" + tag + "-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::vector<std::string> argv = {std::string(GW_BINARY_DIR) + "/bench/e2e_bench"};
  argv.insert(argv.end(), args.begin(), args.end());
  gw::test::Process bench(argv, dir / "out", dir / "err");
  const auto code = bench.wait(std::chrono::seconds(180));
  INFO(bench.err());
  REQUIRE(code == 0);
  auto lines = json_lines(bench.out());
  fs::remove_all(dir);
  return lines;
}

}  // namespace

TEST_CASE("e2e_bench: one W1 wearer through the daemon is accounted for end to end", "[bench]") {
  const auto lines = run_bench({"--wearers", "1", "--duration", "4", "--warmup", "1"}, "run");
  REQUIRE(lines.size() == 2);
  const auto& run = lines[0];
  INFO(run.dump());
  REQUIRE(run["bench"] == "e2e_run");
  REQUIRE_FALSE(run.contains("error"));
  CHECK(run["wearers"] == 1);
  CHECK(run["daemon_exit_code"] == 0);
  // ~50 frames at 10/s, each accepted; nothing lost anywhere.
  CHECK(run["sender"]["frames_sent"].get<double>() >= 45);
  CHECK(run["frames_lost"].get<double>() == 0);
  for (const auto& [name, value] : run["drops_total"].items()) {
    INFO(name);
    CHECK(value.get<double>() == 0);
  }
  // Every alert the daemon stored reached the subscriber.
  const auto& alerts = run["alerts"];
  CHECK(alerts["received_total"] == alerts["stored_total"]);
  CHECK(alerts["stored_total"].get<double>() >= alerts["published_total"].get<double>());
  CHECK(alerts["bad_messages"] == 0);
  // The random-walk library matches this source ~1.5 times a second.
  CHECK(alerts["stored_total"].get<double>() > 0);
  CHECK(run["batch_ms"]["count"].get<double>() > 0);
  const auto& summary = lines[1];
  CHECK(summary["bench"] == "e2e_summary");
  CHECK(summary["mode"] == "list");
  CHECK(summary["tried"].size() == 1);
}

TEST_CASE("e2e_bench --micro: decodes and takes in W1 frames without error, commits every hit",
          "[bench]") {
  const auto lines =
      run_bench({"--micro", "--micro-seconds", "0.2", "--micro-hits", "3000"}, "micro");
  REQUIRE(lines.size() == 6);
  for (int i = 0; i < 2; ++i) {
    INFO(lines[i].dump());
    CHECK(lines[i]["bench"] == "ingest_decode");
    CHECK(lines[i]["frames"].get<double>() > 0);
    CHECK(lines[i]["bad_frames"] == 0);
  }
  CHECK(lines[0]["format"] == "int16");
  CHECK(lines[1]["format"] == "float32");
  // The real ingest thread: every frame sent arrives, passes the W1 profile
  // and is queued.
  const auto& ingest = lines[2];
  INFO(ingest.dump());
  CHECK(ingest["bench"] == "ingest_thread");
  CHECK(ingest["frames_sent"].get<double>() > 0);
  CHECK(ingest["frames_received"] == ingest["frames_sent"]);
  CHECK(ingest["frames_queued"] == ingest["frames_sent"]);
  CHECK(ingest["rejected"] == 0);
  for (int i = 3; i < 6; ++i) {
    INFO(lines[i].dump());
    CHECK(lines[i]["bench"] == "sqlite_writer");
    CHECK(lines[i]["committed"] == 3000);
  }
}

TEST_CASE("W1 workload: wearer count lists", "[bench]") {
  CHECK(gw::bench::parse_counts("4,1,,2", "--x") == std::vector<int>{4, 1, 2});
  CHECK_THROWS_WITH(gw::bench::parse_counts("1,0", "--wearers"),
                    Catch::Contains("--wearers: \"0\""));
  CHECK_THROWS_WITH(gw::bench::parse_counts("3x", "--wearers"), Catch::Contains("\"3x\""));
  CHECK_THROWS_WITH(gw::bench::parse_counts("abc", "--wearers"), Catch::Contains("\"abc\""));
  CHECK_THROWS_WITH(gw::bench::parse_counts(",", "--wearers"), Catch::Contains("no counts"));
}

TEST_CASE("W1 workload: the layout's pairs", "[bench]") {
  // W1: insoles of 99 with nr 3, accelerometer of 3 with nr 2 (all 9 pairs).
  const auto pairs = gw::bench::w1_pairs(gw::bench::kW1Dims);
  std::size_t insole = 0;
  for (int j = 0; j < 99; ++j) insole += std::min(98, j + 3) - std::max(0, j - 3) + 1;
  CHECK(pairs.size() == 2 * insole + 9);
  for (const auto& p : pairs) {
    const bool left = p.pattern_dim < 99, right = p.pattern_dim >= 99 && p.pattern_dim < 198;
    if (left) CHECK(p.stream_dim < 99);
    if (right) CHECK((p.stream_dim >= 99 && p.stream_dim < 198));
  }
}
