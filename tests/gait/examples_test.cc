#include "gait/examples.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "common/error.h"

namespace gw::gait {
namespace {

std::string temp_file(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("gw_gait_" + std::to_string(::getpid()) + "_" + name)).string();
}

TEST_CASE("stride examples survive a write and a read to four decimals", "[gait]") {
  const std::string path = temp_file("examples.csv");
  std::vector<StrideExample> examples{{{0.12345f, 1.0f, 0.5f, 0.0f}, true, "GaPt03"},
                                      {{0.0f, 0.25f, 0.75f, 1.0f}, false, "GaCo01"}};
  write_stride_examples(path, examples, "two strides\nfor the test");
  const auto read = read_stride_examples(path, 2);
  REQUIRE(read.size() == 2);
  CHECK(read[0].abnormal);
  CHECK(read[0].subject == "GaPt03");
  CHECK(read[0].curve[0] == Approx(0.1235f).margin(1e-6));
  CHECK_FALSE(read[1].abnormal);
  CHECK(read[1].curve == std::vector<float>{0.0f, 0.25f, 0.75f, 1.0f});
  CHECK_THROWS_WITH(read_stride_examples(path, 3), Catch::Contains(":4: expected label, subject and 6"));
  std::remove(path.c_str());
}

TEST_CASE("a malformed example file names its line", "[gait]") {
  const std::string path = temp_file("bad.csv");
  {
    std::ofstream out(path);
    out << "# comment\nlabel,subject,c0,c1\nnormal,A,0.1,0.2\nmaybe,B,0.1,0.2\n";
  }
  CHECK_THROWS_WITH(read_stride_examples(path, 1), Catch::Contains(path + ":4: label 'maybe'"));
  {
    std::ofstream out(path);
    out << "label,subject,c0,c1\nnormal,A,0.1,x\n";
  }
  CHECK_THROWS_WITH(read_stride_examples(path, 1), Catch::Contains(":2: value 2 'x' is not a number"));
  {
    std::ofstream out(path);
    out << "label,subject,c0,c1\n";
  }
  CHECK_THROWS_WITH(read_stride_examples(path, 1), Catch::Contains("no stride examples"));
  std::remove(path.c_str());
  CHECK_THROWS_AS(read_stride_examples(path, 1), Error);
}

}  // namespace
}  // namespace gw::gait
