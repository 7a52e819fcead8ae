// Integration: the raw-stream history from the command line, as processes:
// `gaitwatch history fill` records two bundled Daphnet recordings as two
// wearers, `history info` and `history export` read them back, and `search
// --history --pattern` ranks the shipped freezing-of-gait pattern's windows.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/daemon/process.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kTool = std::string(GW_BINARY_DIR) + "/daemon/gaitwatch";
const std::string kConfig = std::string(GW_CONFIG_DIR) + "/gaitwatch.yaml";
const std::string kData = std::string(GW_DATA_DIR) + "/daphnet/";

struct Dir {
  fs::path path = fs::temp_directory_path() / ("gw_history_cli_" + std::to_string(::getpid()));
  Dir() { fs::create_directories(path); }
  ~Dir() { fs::remove_all(path); }
};

gw::test::RunResult run(const Dir& dir, const std::string& tag, std::vector<std::string> args) {
  args.insert(args.begin(), kTool);
  return gw::test::run_process(args, dir.path, tag, std::chrono::seconds(120));
}

std::vector<json> json_lines(const std::string& text) {
  std::vector<json> out;
  std::stringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

}  // namespace

TEST_CASE("gaitwatch history fill, info, export and search --history", "[integration]") {
  Dir dir;
  const std::string history = (dir.path / "history.db").string();
  // S02R01 around its first freezes as wearer 3, S03R03 (no freeze there) as wearer 4.
  auto filled = run(
      dir, "fill3",
      {"history", "fill", "--history", history, "--config", kConfig, "--file", kData + "S02R01.txt",
       "--format", "daphnet", "--wearer", "3", "--start", "53000", "--end", "56000"});
  INFO(filled.err);
  REQUIRE(filled.code == 0);
  CHECK_THAT(filled.out, Catch::Contains("3000 samples of wearer 3 device 1"));
  filled = run(
      dir, "fill4",
      {"history", "fill", "--history", history, "--config", kConfig, "--file", kData + "S03R03.txt",
       "--format", "daphnet", "--wearer", "4", "--start", "45000", "--end", "48000"});
  REQUIRE(filled.code == 0);

  const auto info = run(dir, "info", {"history", "info", "--history", history, "--json"});
  REQUIRE(info.code == 0);
  const auto streams = json_lines(info.out);
  REQUIRE(streams.size() == 2);
  for (const auto& s : streams) {
    CHECK(s["samples"] == 3000);
    CHECK(s["channels"] == 9);
    CHECK(s["sample_rate_hz"] == 64);
    CHECK(s["stored_bytes"].get<double>() < s["raw_bytes"].get<double>());
  }

  // Export 10 s of one channel: a header and one row per sample in range
  // (cut between samples: the stored times follow the recording's ms clock).
  const double t0 = streams[0]["t_first"].get<double>() - 0.005;
  const auto exported = run(
      dir, "export",
      {"history", "export", "--history", history, "--wearer", "3", "--device", "1", "--channels",
       "ankle_vert", "--from", std::to_string(t0 + 5), "--to", std::to_string(t0 + 15)});
  INFO(exported.err);
  REQUIRE(exported.code == 0);
  std::stringstream rows(exported.out);
  std::string header;
  std::getline(rows, header);
  CHECK(header == "t_s,ankle_vert");
  int count = 0;
  for (std::string line; std::getline(rows, line);) ++count;
  CHECK(count == 640);  // 10 s at 64 Hz
  CHECK_THAT(exported.err, Catch::Contains("1 segments, 0 gaps"));

  // S02R01 from its start as wearer 5. The shipped pattern normalises per
  // wearer, and each example carries the baseline of its recording's start:
  // searched from the start of wearer 5's history, the stream learns that
  // same baseline, so the best window is one of the examples cut from
  // samples 54552 on, at distance ~0. (Wearer 3's history starts at 53000:
  // its baseline is another, and its copy of those windows is not at 0.)
  filled = run(
      dir, "fill5",
      {"history", "fill", "--history", history, "--config", kConfig, "--file", kData + "S02R01.txt",
       "--format", "daphnet", "--wearer", "5", "--start", "0", "--end", "56000"});
  REQUIRE(filled.code == 0);
  const auto found =
      run(dir, "search",
          {"search", "--history", history, "--config", kConfig, "--pattern", "fog_freeze_index",
           "--wearers", "3,4,5", "-k", "3", "--json", "--slice-samples", "4000"});
  INFO(found.err);
  REQUIRE(found.code == 0);
  const auto matches = json_lines(found.out);
  REQUIRE(matches.size() == 3);
  CHECK(matches[0]["wearer"] == 5);
  CHECK(matches[0]["distance"].get<double>() < 1e-3);
  CHECK(matches[0]["t_start"].get<double>() >= 54552 / 64.0 - 1);
  for (std::size_t i = 0; i < matches.size(); ++i) {
    CHECK(matches[i]["rank"] == i + 1);
    CHECK(matches[i]["dims"].size() == 3);
    if (i > 0) CHECK(matches[i]["distance"] >= matches[i - 1]["distance"]);
  }
  // Progress on stderr: one line per slice, never decreasing, ending at 1.
  std::stringstream err(found.err);
  double last = 0;
  int reports = 0;
  for (std::string line; std::getline(err, line);) {
    if (line.rfind("progress ", 0) != 0) continue;
    const double fraction = std::stod(line.substr(9));
    CHECK(fraction >= last);
    last = fraction;
    ++reports;
  }
  CHECK(reports >= 3);
  CHECK(last == 1.0);

  // Only the wearers asked for.
  const auto restricted = run(dir, "search_wearer4",
                              {"search", "--history", history, "--config", kConfig, "--pattern",
                               "fog_freeze_index", "--wearers", "4", "-k", "2", "--json"});
  REQUIRE(restricted.code == 0);
  for (const auto& m : json_lines(restricted.out)) CHECK(m["wearer"] == 4);

  const auto unknown =
      run(dir, "unknown",
          {"search", "--history", history, "--config", kConfig, "--pattern", "no_such_pattern"});
  CHECK(unknown.code == 1);
  CHECK_THAT(unknown.err, Catch::Contains("no pattern 'no_such_pattern'"));
}
