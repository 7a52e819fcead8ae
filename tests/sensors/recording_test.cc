#include "sensors/recording.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <zlib.h>

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
using gw::sensors::read_sisfall;
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

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// `text` as one gzip member, as gzip(1) writes it.
std::string gzip_bytes(const std::string& text) {
  z_stream stream{};
  REQUIRE(deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                       Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&stream, static_cast<uLong>(text.size())), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  stream.avail_in = static_cast<uInt>(text.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&stream, Z_FINISH) == Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

// The text of a gzip file, decompressed here (independently of the readers).
std::string gunzip_file(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  REQUIRE(file != nullptr);
  std::string text;
  char buffer[1 << 15];
  int n;
  while ((n = gzread(file, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(n));
  REQUIRE(n == 0);
  gzclose(file);
  return text;
}

// The first `lines` lines of a text, each with its "\n".
std::string first_lines(const std::string& text, std::size_t lines) {
  std::size_t end = 0;
  for (std::size_t i = 0; i < lines && end != std::string::npos; ++i) {
    end = text.find('\n', end);
    if (end != std::string::npos) ++end;
  }
  return text.substr(0, end);
}

void check_same_recording(const Recording& a, const Recording& b) {
  CHECK(a.sample_rate_hz == b.sample_rate_hz);
  CHECK(a.channel_names == b.channel_names);
  CHECK(a.samples() == b.samples());
  CHECK(a.values == b.values);
  CHECK(a.time_s == b.time_s);
  CHECK(a.labels == b.labels);
}

}  // namespace

TEST_CASE("SisFall reads as 9 scaled channels at 200 Hz, gzipped or plain alike", "[recording]") {
  const std::string gz_path = kData + "/sisfall/F01_SA01_R01.txt.gz";
  const Recording gz = read_sisfall(gz_path);
  CHECK(gz.source == gz_path);
  CHECK(gz.sample_rate_hz == 200.0);
  CHECK(gz.channel_names == std::vector<std::string>{"adxl_x", "adxl_y", "adxl_z", "gyro_x",
                                                     "gyro_y", "gyro_z", "mma_x", "mma_y",
                                                     "mma_z"});
  REQUIRE(gz.samples() == 3000);
  CHECK(gz.labels.empty());
  CHECK(gz.time_s[0] == 0.0);
  CHECK(gz.time_s[1] == Approx(0.005));
  CHECK(gz.time_s.back() == Approx(2999 / 200.0));

  // The readme's scales: ADXL345 g = raw * 32 / 8192, ITG3200 deg/s = raw *
  // 4000 / 65536, MMA8451Q g = raw * 16 / 16384. Lines 1 and 2 of the file:
  //   "  -9,-257, -25,  84, 247,  27,-120,-987,  63;"
  //   "  -3,-263, -23,  99, 258,  35,-110,-1016,  68;"
  const int raw[2][9] = {{-9, -257, -25, 84, 247, 27, -120, -987, 63},
                         {-3, -263, -23, 99, 258, 35, -110, -1016, 68}};
  for (int s = 0; s < 2; ++s) {
    for (int c = 0; c < 3; ++c) {
      CHECK(gz.at(s, c) == static_cast<float>(raw[s][c] * 32.0 / 8192.0));
      CHECK(gz.at(s, 3 + c) == static_cast<float>(raw[s][3 + c] * 4000.0 / 65536.0));
      CHECK(gz.at(s, 6 + c) == static_cast<float>(raw[s][6 + c] * 16.0 / 16384.0));
    }
  }
  // Standing at the start: the ADXL345 and the MMA8451Q both see about 1 g.
  CHECK(std::abs(gz.at(0, 1)) == Approx(1.0).margin(0.05));
  CHECK(std::abs(gz.at(0, 7)) == Approx(1.0).margin(0.05));

  const TempFile plain("F01_SA01_R01.txt", gunzip_file(gz_path));
  const Recording from_plain = read_sisfall(plain.path());
  check_same_recording(from_plain, gz);
  check_same_recording(read_recording(gz_path, "sisfall"), gz);
}

TEST_CASE("SisFall: blank lines and blanks tolerated, malformed lines named", "[recording]") {
  const TempFile loose("loose.txt", "\n  1, 2,3,4,5,6,7,8,9 ;\r\n\n10,20,30,40,50,60,70,80,90\n\n");
  const Recording r = read_sisfall(loose.path());
  REQUIRE(r.samples() == 2);
  CHECK(r.at(1, 0) == static_cast<float>(10 * 32.0 / 8192.0));
  CHECK(r.time_s[1] == Approx(0.005));

  SECTION("a word") {
    const TempFile file("word.txt", "1,2,3,4,5,6,7,8,9;\n\n1,2,3,4,5,x,7,8,9;\n");
    CHECK_THROWS_WITH(read_sisfall(file.path()),
                      Contains(file.path() + ":3:") && Contains("column 6") && Contains("'x'"));
  }
  SECTION("a fraction") {
    const TempFile file("fraction.txt", "1,2,3,4,5,6,7,8,9;\n1,2,3,4,5,6,7,8,9.5;\n");
    CHECK_THROWS_WITH(read_sisfall(file.path()),
                      Contains(file.path() + ":2:") && Contains("not an integer"));
  }
  SECTION("eight fields") {
    const TempFile file("eight.txt", "1,2,3,4,5,6,7,8,9;\n1,2,3,4,5,6,7,8;\n");
    CHECK_THROWS_WITH(read_sisfall(file.path()),
                      Contains(file.path() + ":2:") && Contains("8 fields, expected 9"));
  }
  SECTION("two terminators") {
    const TempFile file("twice.txt", "1,2,3,4,5,6,7,8,9;;\n");
    CHECK_THROWS_WITH(read_sisfall(file.path()), Contains(file.path() + ":1:"));
  }
  SECTION("a malformed line inside a gzip file is named by its line in the text") {
    const TempFile file("bad.txt.gz", gzip_bytes("1,2,3,4,5,6,7,8,9;\n1,2,3,4,5,6,7,8,9;\n1,2;\n"));
    CHECK_THROWS_WITH(read_sisfall(file.path()), Contains(file.path() + ":3:"));
  }
}

TEST_CASE("every reader takes gzip files, recognised by their bytes, not their name",
          "[recording]") {
  SECTION("daphnet") {
    const std::string slice = first_lines(file_bytes(kData + "/daphnet/S02R01.txt"), 2000);
    const TempFile plain("S02R01_slice.txt", slice);
    const TempFile gz("S02R01_slice.txt.gz", gzip_bytes(slice));
    const TempFile unnamed("S02R01_slice_no_suffix.txt", gzip_bytes(slice));
    const Recording expected = read_daphnet(plain.path());
    REQUIRE(expected.samples() == 2000);
    check_same_recording(read_daphnet(gz.path()), expected);
    check_same_recording(read_daphnet(unnamed.path()), expected);
  }
  SECTION("gaitpdb") {
    const std::string slice = first_lines(file_bytes(kData + "/gaitpdb/GaCo01_01.txt"), 1500);
    const TempFile plain("GaCo01_slice.txt", slice);
    const TempFile gz("GaCo01_slice.txt.gz", gzip_bytes(slice));
    const Recording expected = read_gaitpdb(plain.path());
    REQUIRE(expected.samples() == 1500);
    check_same_recording(read_recording(gz.path(), "gaitpdb"), expected);
  }
  SECTION("csv and values") {
    const std::string csv = "a,b\n1,2\n3,4\n";
    const TempFile gz_csv("gz.csv.gz", gzip_bytes(csv));
    const Recording r = read_recording(gz_csv.path(), "csv");
    CHECK(r.channel_names == std::vector<std::string>{"a", "b"});
    CHECK(r.values == std::vector<float>{1, 2, 3, 4});
    const TempFile gz_values("values.gz", gzip_bytes("1 2\n3\n"));
    CHECK(read_values(gz_values.path()).values == std::vector<float>{1, 2, 3});
  }
  SECTION("several gzip members in a row read as their concatenation") {
    const TempFile members("members.csv.gz", gzip_bytes("a\n1\n") + gzip_bytes("2\n3\n"));
    CHECK(read_recording(members.path(), "csv").values == std::vector<float>{1, 2, 3});
  }
  SECTION("corrupt or cut gzip data throws naming the file") {
    const std::string whole = gzip_bytes("a\n1\n2\n3\n");
    const TempFile cut("cut.csv.gz", whole.substr(0, whole.size() / 2));
    CHECK_THROWS_WITH(read_recording(cut.path(), "csv"), Contains(cut.path()) && Contains("gzip"));
    std::string flipped = whole;
    flipped[12] = static_cast<char>(flipped[12] ^ 0x55);
    flipped[13] = static_cast<char>(flipped[13] ^ 0x55);
    const TempFile corrupt("corrupt.csv.gz", flipped);
    CHECK_THROWS_WITH(read_recording(corrupt.path(), "csv"),
                      Contains(corrupt.path()) && Contains("gzip"));
  }
}

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
