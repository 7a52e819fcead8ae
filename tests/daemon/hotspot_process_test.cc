// Pressure hotspots in the real daemon: a gaitpdb walk with extra load
// planted under one sensor of the right foot for 40 s, replayed into
// gaitwatchd (device gaitpdb_insoles, hotspots at the defaults), raises
// exactly one pressure_hotspot alert naming that region and foot, stored and
// published; the walk as recorded raises none.
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sinks/store.h"
#include "tests/daemon/daemon_fixture.h"

namespace {

using gw::test::DaemonFixture;
using gw::test::json;
using gw::test::kTool;
namespace fs = std::filesystem;

const std::string kWalk = std::string(GW_DATA_DIR) + "/gaitpdb/JuCo01_01.txt";

// gaitpdb columns: time, L1..L8, R1..R8, L total, R total.
constexpr int kR6Column = 1 + 8 + 5;
constexpr int kRightTotalColumn = 18;
constexpr double kPlantFrom_s = 5;
constexpr double kPlantTo_s = 45;
// Above the default threshold on its own, in every stance of the right foot.
constexpr double kPlantedLoad = 600;
constexpr double kStanceLoad = 50;

std::vector<std::vector<std::string>> read_rows(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<std::string> fields;
    std::stringstream split(line);
    std::string field;
    while (std::getline(split, field, '\t')) fields.push_back(field);
    rows.push_back(std::move(fields));
  }
  return rows;
}

// A copy of the walk (named as the walk, so that its format is implied)
// with kPlantedLoad added to R6 and the right total during every stance of
// the right foot between kPlantFrom_s and kPlantTo_s. Returns its path and
// the walk's sample count.
std::pair<std::string, std::size_t> write_planted_walk(const DaemonFixture& fx) {
  auto rows = read_rows(kWalk);
  REQUIRE(rows.size() > 100 * kPlantTo_s);
  std::size_t planted = 0, malformed = 0;
  for (auto& row : rows) {
    if (row.size() != 19) {
      ++malformed;
      continue;
    }
    const double t = std::stod(row[0]);
    if (t < kPlantFrom_s || t >= kPlantTo_s || std::stod(row[kRightTotalColumn]) <= kStanceLoad)
      continue;
    row[kR6Column] = std::to_string(std::stod(row[kR6Column]) + kPlantedLoad);
    row[kRightTotalColumn] = std::to_string(std::stod(row[kRightTotalColumn]) + kPlantedLoad);
    ++planted;
  }
  REQUIRE(malformed == 0);
  REQUIRE(planted > 1000);  // stances over the 40 s
  fs::create_directories(fx.dir / "planted");
  const fs::path path = fx.dir / "planted" / fs::path(kWalk).filename();
  std::ofstream out(path);
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) out << (i ? "\t" : "") << row[i];
    out << "\n";
  }
  return {path.string(), rows.size()};
}

void replay_walk(const DaemonFixture& fx, const std::string& file, int wearer) {
  const auto r = gw::test::run_process(
      {kTool, "replay", "--config", fx.config_path.string(), "--device", "gaitpdb_insoles",
       "--file", file, "--wearer", std::to_string(wearer), "--speed", "20", "--to", fx.udp()},
      fx.dir, "replay", std::chrono::seconds(120));
  INFO(r.err);
  REQUIRE(r.code == 0);
}

std::uint64_t hotspot_samples(const json& stats) {
  if (!stats.contains("gait") || !stats["gait"].contains("hotspots")) return 0;
  return stats["gait"]["hotspots"]["samples"].get<std::uint64_t>();
}

}  // namespace

TEST_CASE(
    "a replayed walk with a planted hotspot raises one pressure_hotspot alert with its region and "
    "foot, the walk as recorded none",
    "[integration][gait]") {
  DaemonFixture fx;
  const auto [planted, samples] = write_planted_walk(fx);

  gw::Process daemon = gw::test::start_daemon(fx);
  gw::test::Subscriber sub(fx.endpoint());
  INFO(daemon.err());
  REQUIRE(sub.until([&] { return !sub.stats.empty(); }, std::chrono::seconds(20)));
  replay_walk(fx, planted, 1);
  replay_walk(fx, kWalk, 2);
  // Both walks' samples of both feet through the trackers.
  const std::uint64_t fed = 2 * 2 * samples;
  REQUIRE(sub.until([&] { return !sub.stats.empty() && hotspot_samples(sub.stats.back()) >= fed; },
                    std::chrono::seconds(60)));
  gw::test::stop_and_collect(daemon, sub);

  std::vector<json> published;
  for (const json& a : sub.alerts)
    if (a["pattern"] == "pressure_hotspot") published.push_back(a);
  REQUIRE(published.size() == 1);
  const json& a = published[0];
  CHECK(a["kind"] == "pressure_hotspot");
  CHECK(a["severity"] == "warning");
  CHECK(a["wearer"] == 1);
  CHECK(a["device"] == fx.config["devices"][5]["id"].as<int>());
  CHECK(a["region"] == "forefoot_lateral");
  CHECK(a["foot"] == "right");
  CHECK(a["dims"].empty());
  const double t_start = a["t_start"].get<double>(), t_end = a["t_end"].get<double>();
  CHECK(t_start >= kPlantFrom_s);
  CHECK(t_start < kPlantFrom_s + 2);
  CHECK(t_end - t_start >= 30 - 0.01);
  CHECK(t_end < kPlantTo_s);
  CHECK(a["distance"].get<double>() > kPlantedLoad);

  const json& stats = sub.stats.back();
  CHECK(stats["gait"]["hotspots"]["events"] == 1);
  CHECK(stats["gait"]["hotspots"]["resets"] == 0);

  // The stored row says the same; `gaitwatch hits` shows where.
  gw::pipeline::HitStore store(fx.db(), /*read_only=*/true);
  gw::pipeline::HitQuery q;
  q.pattern = "pressure_hotspot";
  const auto rows = store.query(q);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].seq == a["seq"].get<std::uint64_t>());
  CHECK(rows[0].wearer == 1);
  CHECK(rows[0].region == "forefoot_lateral");
  CHECK(rows[0].foot == "right");
  CHECK(rows[0].t_start == t_start);
  CHECK(rows[0].distance == a["distance"].get<double>());
  const auto hits =
      gw::test::run_process({kTool, "hits", "--db", fx.db(), "--pattern", "pressure_hotspot"},
                            fx.dir, "hits", std::chrono::seconds(30));
  INFO(hits.err);
  REQUIRE(hits.code == 0);
  CHECK_THAT(hits.out, Catch::Contains("right foot, forefoot_lateral"));
}

TEST_CASE("with gait off the daemon says which devices' hotspots it does not watch", "[integration][gait]") {
  DaemonFixture fx;
  fx.config["gait"]["enabled"] = false;
  fx.write_config(fx.config);
  gw::Process daemon = gw::test::start_daemon(fx);
  gw::test::Subscriber sub(fx.endpoint());
  REQUIRE(sub.until([&] { return !sub.stats.empty(); }, std::chrono::seconds(20)));
  gw::test::stop_and_collect(daemon, sub);
  const std::string log = daemon.err();
  INFO(log);
  CHECK_THAT(log, Catch::Contains("gait is off"));
  CHECK_THAT(log, Catch::Contains("pressure hotspots of device(s)"));
  CHECK_THAT(log, Catch::Contains("gaitpdb_insoles"));
  CHECK(sub.stats.back().count("gait") == 0);
}
