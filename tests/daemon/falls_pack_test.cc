// Integration: the shipped falls pack (config/patterns/falls.yaml), through
// `gaitwatch eval`, on real SisFall trials as another wearer's belt might hold
// the sensor: every trial rotated before it is read. Each trial is scored
// leave-one-recording-out, so a fall is found by the other falls' examples,
// not by its own.
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/daemon/json_lines.h"
#include "tests/daemon/process.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kTool = std::string(GW_BINARY_DIR) + "/daemon/gaitwatch";

std::string read_gzip(const std::string& path) {
  gzFile in = gzopen(path.c_str(), "rb");
  REQUIRE(in != nullptr);
  std::string text;
  char buffer[1 << 16];
  int n = 0;
  while ((n = gzread(in, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(n));
  REQUIRE(n == 0);
  gzclose(in);
  return text;
}

// A SisFall trial (ADXL345 counts in columns 1-3, `;` line ends) with the
// ADXL345's vector rotated by `degrees` about its axis `axis` (0 x, 1 y, 2 z;
// y is vertical while standing), saturating at the sensor's 13-bit range.
// The other columns are kept as they are: the pack reads the ADXL345 only.
std::string rotated_trial(const std::string& text, int axis, double degrees) {
  const double c = std::cos(degrees * M_PI / 180), s = std::sin(degrees * M_PI / 180);
  const int i = (axis + 1) % 3, j = (axis + 2) % 3;  // the plane the rotation turns
  std::istringstream lines(text);
  std::ostringstream out;
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    const auto end = line.find(';');
    if (end == std::string::npos) continue;
    std::vector<std::string> fields;
    std::stringstream row(line.substr(0, end));
    for (std::string field; std::getline(row, field, ',');) fields.push_back(field);
    REQUIRE(fields.size() == 9);
    std::array<double, 3> v{};
    for (std::size_t k = 0; k < 3; ++k) v[k] = std::stod(fields[k]);
    const double vi = v[static_cast<std::size_t>(i)], vj = v[static_cast<std::size_t>(j)];
    v[static_cast<std::size_t>(i)] = c * vi - s * vj;
    v[static_cast<std::size_t>(j)] = s * vi + c * vj;
    for (std::size_t k = 0; k < 3; ++k)
      fields[k] = std::to_string(static_cast<long>(std::clamp(std::lround(v[k]), -4096L, 4095L)));
    for (std::size_t k = 0; k < fields.size(); ++k) out << (k ? "," : "") << fields[k];
    out << ";\n";
    ++rows;
  }
  REQUIRE(rows > 1000);
  return out.str();
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "gw-falls-pack-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    if (!std::getenv("GW_KEEP")) fs::remove_all(path);
  }
};

}  // namespace

TEST_CASE("the falls pack finds a fall and passes lying down however the sensor is worn",
          "[integration]") {
  const TempDir tmp;
  // A fall, and the everyday trials that turn the body as a fall does but
  // without its impact: lying down on a bed (D12) and turning while lying (D14).
  const std::vector<std::string> trials = {"F11_SA01_R01", "D12_SA01_R01", "D14_SA01_R01"};
  std::vector<std::string> texts;
  for (const auto& name : trials)
    texts.push_back(read_gzip(std::string(GW_DATA_DIR) + "/sisfall/" + name + ".txt.gz"));
  struct Wearing {
    const char* tag;
    int axis;
    double degrees;
  };
  for (const Wearing wearing : {Wearing{"as_recorded", 0, 0}, Wearing{"tilted_forward_45", 0, 45},
                                Wearing{"tilted_sideways_minus_45", 2, -45},
                                Wearing{"turned_90_about_the_vertical", 1, 90}}) {
    DYNAMIC_SECTION(wearing.tag) {
      const fs::path dir = tmp.path / wearing.tag;
      fs::create_directories(dir);
      std::vector<std::string> argv = {kTool,     "eval",        "--config",
                                       std::string(GW_CONFIG_DIR) + "/gaitwatch.yaml",
                                       "--device", "accelerometer", "--leave-out",
                                       "recording", "--backend",     "cpu",
                                       "--format",  "sisfall",       "--json"};
      for (std::size_t t = 0; t < trials.size(); ++t) {
        // The trial's own name: leave-one-recording-out leaves out its examples.
        const fs::path file = dir / (trials[t] + ".txt");
        std::ofstream(file) << rotated_trial(texts[t], wearing.axis, wearing.degrees);
        argv.insert(argv.end(), {"--file", file.string()});
      }
      const auto r = gw::test::run_process(argv, dir, "eval", std::chrono::seconds(120));
      INFO(r.err << r.out);
      REQUIRE(r.code == 0);
      const std::vector<json> rows = gw::test::json_lines(r.out);
      REQUIRE(rows.size() == 1);  // the one publishing fall pattern
      const json& row = rows[0];
      CHECK(row["pattern"] == "fall_turn_impact");
      CHECK(row["trials"]["fall_trials"] == 1);
      CHECK(row["trials"]["fall_trials_detected"] == 1);
      CHECK(row["trials"]["everyday_trials"] == 2);
      CHECK(row["trials"]["everyday_alerts"] == 0);
    }
  }
}
