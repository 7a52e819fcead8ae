// The plain types of kernels/search.h and backend selection.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/search.h"

namespace gw::kernels {
namespace {

TEST_CASE("SearchBatch::add_slice stores slices dim-major one after another", "[search]") {
  SearchBatch batch;
  // 3 samples x 2 dims, sample-major: (s0: 1 2) (s1: 3 4) (s2: 5 6).
  const std::vector<float> first = {1, 2, 3, 4, 5, 6};
  batch.add_slice(7, 2, first.data(), 3, 100, 101);
  // 2 samples x 3 dims.
  const std::vector<float> second = {10, 11, 12, 13, 14, 15};
  batch.add_slice(8, 3, second.data(), 2, 50, 40);

  REQUIRE(batch.streams.size() == 2);
  const StreamSlice& a = batch.streams[0];
  CHECK(a.profile == 7);
  CHECK(a.dims == 2);
  CHECK(a.length == 3);
  CHECK(a.first_index == 100);
  CHECK(a.first_new == 101);
  CHECK(a.offset == 0);
  const StreamSlice& b = batch.streams[1];
  CHECK(b.offset == 6);
  CHECK(b.first_new == 40);
  CHECK(batch.data == std::vector<float>{1, 3, 5, 2, 4, 6, 10, 13, 11, 14, 12, 15});
  // The layout the header promises: data[offset + d * length + s].
  CHECK(batch.data[b.offset + 2 * b.length + 1] == 15);

  batch.add_slice(9, 4, nullptr, 0, 0, 0);  // an empty slice is allowed
  CHECK(batch.streams.size() == 3);
  CHECK(batch.data.size() == 12);
  CHECK_THROWS_AS(batch.add_slice(9, -1, first.data(), 3, 0, 0), gw::Error);
}

TEST_CASE("PatternLibrary::max_length", "[search]") {
  PatternLibrary library;
  CHECK(library.max_length() == 0);
  library.patterns.resize(3);
  library.patterns[0].length = 64;
  library.patterns[1].length = 128;
  library.patterns[2].length = 16;
  CHECK(library.max_length() == 128);
}

TEST_CASE("SearchStats::add sums every counter", "[search]") {
  SearchStats a{1, 2, 3, 4, 5, 6, 7};
  const SearchStats b{10, 20, 30, 40, 50, 60, 70};
  a.add(b);
  CHECK(a.windows == 11);
  CHECK(a.pruned_kim == 22);
  CHECK(a.pruned_keogh_eq == 33);
  CHECK(a.pruned_keogh_ec == 44);
  CHECK(a.dtw_full == 55);
  CHECK(a.dtw_abandoned == 66);
  CHECK(a.cells == 77);
}

TEST_CASE("make_backend picks a backend and explains the choice", "[search][factory]") {
  std::string note;
  std::unique_ptr<SearchBackend> cpu = make_backend("cpu", 3, &note);
  REQUIRE(cpu != nullptr);
  CHECK(cpu->name().find("cpu") != std::string::npos);
  CHECK(note.find("3 threads") != std::string::npos);

  // "auto" explains its choice: CUDA when built and a GPU is usable, else the
  // CPU backend with the reason.
  std::unique_ptr<SearchBackend> automatic = make_backend("auto", 2, &note);
  REQUIRE(automatic != nullptr);
  if (automatic->name().find("cuda") != std::string::npos) {
    CHECK(note.find("using CUDA backend") != std::string::npos);
  } else {
    CHECK(note.find("using CPU backend with 2 threads") != std::string::npos);
    const bool not_built = note == "CUDA backend not built; using CPU backend with 2 threads";
    const bool no_device = note.find("CUDA device") != std::string::npos;
    CHECK((not_built || no_device));
    // Without a usable CUDA backend, asking for it is an error that says why.
    CHECK_THROWS_AS(make_backend("cuda", 1, &note), gw::Error);
  }

  // threads <= 0: one per hardware thread, and the note says how many.
  automatic = make_backend("auto", 0, nullptr);
  REQUIRE(automatic != nullptr);

  CHECK_THROWS_AS(make_backend("tpu", 1, &note), gw::Error);
  CHECK_THROWS_WITH(make_backend("tpu", 1, &note), Catch::Contains("tpu"));
}

}  // namespace
}  // namespace gw::kernels
