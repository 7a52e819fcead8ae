#include "sensors/recording.h"

#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"

using Catch::Contains;
using gw::sensors::DelimitedOptions;
using gw::sensors::read_daphnet;
using gw::sensors::read_delimited;
using gw::sensors::read_gaitpdb;
using gw::sensors::read_recording;
using gw::sensors::read_values;
using gw::sensors::Recording;

namespace {

const std::string kData = GW_DATA_DIR;

// A file with the given bytes in the temp folder, removed at scope exit. The
// name carries the process id: CTest may run test cases in parallel.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& bytes)
      : path_((std::filesystem::temp_directory_path() /
               ("gw_sensors_" + std::to_string(::getpid()) + "_" + name))
                  .string()) {
    std::ofstream(path_, std::ios::binary) << bytes;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

TEST_CASE("Daphnet S02R01 reads every line with times, channels and labels", "[recording]") {
  const Recording r = read_daphnet(kData + "/daphnet/S02R01.txt");
  CHECK(r.source == kData + "/daphnet/S02R01.txt");
  CHECK(r.sample_rate_hz == 64.0);
  REQUIRE(r.channels() == 9);
  CHECK(r.channel_names == std::vector<std::string>{"ankle_fwd", "ankle_vert", "ankle_lat",
                                                    "thigh_fwd", "thigh_vert", "thigh_lat",
                                                    "trunk_fwd", "trunk_vert", "trunk_lat"});
  REQUIRE(r.samples() == 72561);
  REQUIRE(r.time_s.size() == 72561);
  REQUIRE(r.labels.size() == 72561);
  // Line 1: "15 50 39 -970 0 0 0 0 0 0 0".
  CHECK(r.time_s[0] == Approx(0.015));
  CHECK(r.at(0, 0) == 50.0f);
  CHECK(r.at(0, 1) == 39.0f);
  CHECK(r.at(0, 2) == -970.0f);
  CHECK(r.at(0, 8) == 0.0f);
  CHECK(r.labels[0] == 0);
  // Last line: "1133765 40 29 -970 754 490 292 106 0 0 0".
  CHECK(r.time_s.back() == Approx(1133.765));
  CHECK(r.at(72560, 3) == 754.0f);
}

TEST_CASE("Daphnet freeze labels match the episodes listed in FOG_EPISODES.tsv", "[recording]") {
  // file, episode, start_ms, end_ms, duration_s, start_row, end_row (rows 1-based); the
  // list covers recordings not bundled here, checked for those that are.
  std::ifstream tsv(kData + "/daphnet/FOG_EPISODES.tsv");
  REQUIRE(tsv);
  std::string line;
  std::getline(tsv, line);
  CHECK(line == "file\tepisode\tstart_ms\tend_ms\tduration_s\tstart_row\tend_row");
  std::map<std::string, std::vector<std::pair<std::size_t, std::size_t>>> rows;
  while (std::getline(tsv, line)) {
    std::istringstream fields(line);
    std::string file, episode, start_ms, end_ms, duration;
    std::size_t start_row = 0, end_row = 0;
    REQUIRE(fields >> file >> episode >> start_ms >> end_ms >> duration >> start_row >> end_row);
    rows[file].emplace_back(start_row, end_row);
  }
  CHECK(rows["S02R01.txt"].size() == 9);
  CHECK(rows["S03R02.txt"].size() == 6);
  for (const char* file : {"S02R01.txt", "S03R02.txt"}) {
    const Recording r = read_daphnet(kData + "/daphnet/" + file);
    std::size_t freeze_samples = 0;
    for (std::size_t e = 0; e < rows[file].size(); ++e) {
      const std::size_t first = rows[file][e].first - 1;  // rows are 1-based
      const std::size_t last = rows[file][e].second - 1;
      INFO(file << " episode " << e + 1);
      CHECK(r.labels[first - 1] != 2);
      for (std::size_t s = first; s <= last; ++s) REQUIRE(r.labels[s] == 2);
      CHECK(r.labels[last + 1] != 2);
      freeze_samples += last - first + 1;
    }
    std::size_t labelled = 0;
    for (int label : r.labels) labelled += label == 2;
    CHECK(labelled == freeze_samples);
  }
}

TEST_CASE("Daphnet S03R03 reads every line and has no freeze", "[recording]") {
  const Recording r = read_recording(kData + "/daphnet/S03R03.txt", "daphnet");
  REQUIRE(r.samples() == 70269);
  // Line 1: "15 0 0 0 63 18 -979 0 0 0 0".
  CHECK(r.at(0, 3) == 63.0f);
  CHECK(r.at(0, 5) == -979.0f);
  // Line 3: "46 232 196 -930 63 37 -969 0 0 0 0".
  CHECK(r.time_s[2] == Approx(0.046));
  CHECK(r.at(2, 0) == 232.0f);
  for (int label : r.labels) REQUIRE(label != 2);
}

TEST_CASE("gaitpdb files read as 18 channels at 100 Hz", "[recording]") {
  const Recording r = read_gaitpdb(kData + "/gaitpdb/GaCo01_01.txt");
  CHECK(r.sample_rate_hz == 100.0);
  REQUIRE(r.channels() == 18);
  CHECK(r.channel_names.front() == "L1");
  CHECK(r.channel_names[8] == "R1");
  CHECK(r.channel_names[16] == "L_total");
  CHECK(r.channel_names[17] == "R_total");
  REQUIRE(r.samples() == 12119);
  CHECK(r.labels.empty());
  // Line 1: 0.0000 199.1 87.34 91.08 24.09 21.12 87.67 87.23 64.57 163.9 ... 662.2 748
  CHECK(r.time_s[0] == 0.0);
  CHECK(r.time_s[1] == Approx(0.01));
  CHECK(r.at(0, 0) == 199.1f);
  CHECK(r.at(0, 7) == 64.57f);
  CHECK(r.at(0, 8) == 163.9f);
  CHECK(r.at(0, 16) == 662.2f);
  CHECK(r.at(0, 17) == 748.0f);
  // The total column is the sum of the left sensors.
  float left = 0;
  for (int c = 0; c < 8; ++c) left += r.at(100, c);
  CHECK(left == Approx(r.at(100, 16)).epsilon(1e-3));

  const Recording shorter = read_recording(kData + "/gaitpdb/JuPt02_01.txt", "gaitpdb");
  CHECK(shorter.samples() == 5505);
  CHECK(shorter.at(0, 16) == 665.61f);
}

TEST_CASE("delimited reader: header names, trailing separators, CRLF, blank lines", "[recording]") {
  const TempFile file("header.csv",
                      "time_ms, a ,b,c,\r\n"
                      "10,1,2,3,\r\n"
                      "\r\n"
                      "20, 4 ,5,6,,\r\n"
                      "   \r\n"
                      "30,7,8,9\r\n");
  DelimitedOptions o;
  o.header_lines = 1;
  o.time_column = 0;
  o.time_scale = 0.001;
  o.sample_rate_hz = 50;
  const Recording r = read_delimited(file.path(), o);
  CHECK(r.channel_names == std::vector<std::string>{"a", "b", "c"});
  CHECK(r.sample_rate_hz == 50);
  REQUIRE(r.samples() == 3);
  CHECK(r.values == std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(r.time_s[0] == Approx(0.010));
  CHECK(r.time_s[2] == Approx(0.030));
}

TEST_CASE("delimited reader: column map, names, scale and a blank delimiter", "[recording]") {
  const TempFile file("columns.txt",
                      "one ten hundred thousand\n"
                      "1 \t 10  100\t1000\n"
                      "\t2 20 200 2000 \t\n"
                      "3\t\t30 300 3000\n");
  DelimitedOptions o;
  o.delimiter = ' ';
  o.header_lines = 1;
  o.columns = {3, 1};
  o.names = {"thousands", "tens"};
  o.scale = 0.5;
  const Recording r = read_delimited(file.path(), o);
  CHECK(r.channel_names == std::vector<std::string>{"thousands", "tens"});
  REQUIRE(r.samples() == 3);
  CHECK(r.values == std::vector<float>{500, 5, 1000, 10, 1500, 15});
  // Without a time column the time is index / rate.
  CHECK(r.time_s == std::vector<double>{0.0, 0.01, 0.02});

  // Without names or a header the columns are called after their index.
  o.header_lines = 0;
  o.names.clear();
  o.columns.clear();
  const TempFile plain("plain.txt", "1 2\n3 4\n");
  CHECK(read_delimited(plain.path(), o).channel_names == std::vector<std::string>{"c0", "c1"});
}

TEST_CASE("csv format: comma, one header line, no time column, 100 Hz", "[recording]") {
  const TempFile file("format.csv", "\xEF\xBB\xBFx,y\n1.5,-2e3\n+3,4\n");  // with a UTF-8 BOM
  const Recording r = read_recording(file.path(), "csv");
  CHECK(r.channel_names == std::vector<std::string>{"x", "y"});
  CHECK(r.sample_rate_hz == 100.0);
  CHECK(r.values == std::vector<float>{1.5f, -2000.0f, 3.0f, 4.0f});
  CHECK(r.time_s == std::vector<double>{0.0, 0.01});
}

TEST_CASE("values reader takes numbers in any whitespace layout", "[recording]") {
  const TempFile file("values.txt", "1 2\t3\r\n\n  4\n5 6  \n");
  const Recording r = read_values(file.path(), 4.0);
  CHECK(r.channel_names == std::vector<std::string>{"value"});
  CHECK(r.values == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(r.time_s == std::vector<double>{0, 0.25, 0.5, 0.75, 1.0, 1.25});
  CHECK(read_recording(file.path(), "values").sample_rate_hz == 100.0);

  const TempFile bad("bad_values.txt", "1 2\n3\n4 x5\n");
  CHECK_THROWS_WITH(read_values(bad.path()), Contains(bad.path() + ":3:") && Contains("x5"));
  const TempFile empty("empty_values.txt", " \n\n");
  CHECK_THROWS_AS(read_values(empty.path()), gw::Error);
}

TEST_CASE("malformed lines throw errors naming the file and line", "[recording]") {
  DelimitedOptions o;
  o.header_lines = 1;
  SECTION("a word instead of a number") {
    const TempFile file("word.csv", "a,b\n1,2\n\n3,abc\n");
    CHECK_THROWS_WITH(read_delimited(file.path(), o),
                      Contains(file.path() + ":4:") && Contains("column 2") && Contains("abc"));
  }
  SECTION("a number with trailing junk") {
    const TempFile file("junk.csv", "a,b\n1,2\n3,4.5.6\n");
    CHECK_THROWS_WITH(read_delimited(file.path(), o), Contains(file.path() + ":3:"));
  }
  SECTION("a missing field") {
    const TempFile file("short.csv", "a,b,c\n1,2,3\n4,5\n");
    CHECK_THROWS_WITH(read_delimited(file.path(), o),
                      Contains(file.path() + ":3:") && Contains("2 fields, expected 3"));
  }
  SECTION("an empty field in the middle") {
    const TempFile file("hole.csv", "a,b,c\n1,,3\n");
    CHECK_THROWS_WITH(read_delimited(file.path(), o), Contains(file.path() + ":2:"));
  }
  SECTION("a non-finite value") {
    const TempFile file("nan.csv", "a\n1\nnan\n");
    CHECK_THROWS_WITH(read_delimited(file.path(), o), Contains(file.path() + ":3:"));
  }
  SECTION("a Daphnet line with 10 columns") {
    const TempFile file("daphnet.txt", "15 50 39 -970 0 0 0 0 0 0 0\n31 50 39 -960 0 0 0 0 0 0\n");
    CHECK_THROWS_WITH(read_daphnet(file.path()),
                      Contains(file.path() + ":2:") && Contains("10 fields, expected 11"));
  }
  SECTION("a Daphnet label that is not an integer") {
    const TempFile file("label.txt", "15 50 39 -970 0 0 0 0 0 0 1.5\n");
    CHECK_THROWS_WITH(read_daphnet(file.path()),
                      Contains(file.path() + ":1:") && Contains("label"));
  }
  SECTION("a column that does not exist") {
    o.columns = {0, 5};
    const TempFile file("narrow.csv", "a,b\n1,2\n");
    CHECK_THROWS_WITH(read_delimited(file.path(), o),
                      Contains(file.path() + ":2:") && Contains("column index 5 (0-based)"));
  }
}

TEST_CASE("unreadable files and unknown formats throw gw::Error", "[recording]") {
  const std::string missing = kData + "/no_such_file.txt";
  CHECK_THROWS_WITH(read_daphnet(missing), Contains(missing));
  CHECK_THROWS_WITH(read_recording(missing, "matlab"), Contains("matlab"));
  const TempFile header_only("header_only.csv", "a,b\n");
  CHECK_THROWS_WITH(read_recording(header_only.path(), "csv"), Contains("no data"));
  DelimitedOptions o;
  o.sample_rate_hz = 0;
  CHECK_THROWS_AS(read_delimited(header_only.path(), o), gw::Error);
}

TEST_CASE("channel lookup, select and slice", "[recording]") {
  Recording r;
  r.source = "memory";
  r.sample_rate_hz = 10;
  r.channel_names = {"x", "y", "2"};
  r.values = {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32};
  r.time_s = {0, 0.1, 0.2, 0.3};
  r.labels = {0, 1, 1, 2};
  REQUIRE(r.samples() == 4);

  CHECK(r.channel(1) == std::vector<float>{1, 11, 21, 31});
  CHECK_THROWS_AS(r.channel(3), gw::Error);
  CHECK(r.channel_index("y") == 1);
  CHECK(r.channel_index("0") == 0);
  CHECK(r.channel_index("2") == 2);  // by name, which is also its index
  CHECK_THROWS_WITH(r.channel_index("z"), Contains("'z'") && Contains("memory"));
  CHECK_THROWS_AS(r.channel_index("3"), gw::Error);
  CHECK_THROWS_AS(r.channel_index("-1"), gw::Error);
  CHECK_THROWS_AS(r.channel_index(""), gw::Error);

  const Recording picked = r.select({"2", "x"});
  CHECK(picked.channel_names == std::vector<std::string>{"2", "x"});
  CHECK(picked.values == std::vector<float>{2, 0, 12, 10, 22, 20, 32, 30});
  CHECK(picked.time_s == r.time_s);
  CHECK(picked.labels == r.labels);
  CHECK_THROWS_AS(r.select({}), gw::Error);

  const Recording middle = r.slice(1, 3);
  CHECK(middle.channel_names == r.channel_names);
  CHECK(middle.values == std::vector<float>{10, 11, 12, 20, 21, 22});
  CHECK(middle.time_s == std::vector<double>{0.1, 0.2});
  CHECK(middle.labels == std::vector<int>{1, 1});
  CHECK(r.slice(4, 4).samples() == 0);
  CHECK_THROWS_AS(r.slice(3, 5), gw::Error);
  CHECK_THROWS_AS(r.slice(3, 2), gw::Error);
}
