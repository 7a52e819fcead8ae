// The multi-device backend (kernels/multi_device_backend.h) with CPU members,
// some of them test stand-ins that fail like a lost GPU: its results equal one
// backend's on the whole batch, each stream stays on one member, a lost
// member's streams move to the others, and a caller's bad batch retires none.
// The same backend over real GPUs is checked in cuda_backend_test.cc.
#include <catch2/catch.hpp>

#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kernels/multi_device_backend.h"
#include "kernels/search.h"
#include "tests/kernels/flaky_backend.h"
#include "tests/kernels/kernels_test_support.h"

using gw::kernels::Match;
using gw::kernels::PatternLibrary;
using gw::kernels::SearchBackend;
using gw::kernels::SearchBatch;
using gw::kernels::SearchDeviceLost;
using gw::kernels::SearchMember;
using gw::kernels::SearchResult;
using gw::kernels::SearchMode;
using gw::kernels::StreamSlice;
using gw::testing::FlakyBackend;

namespace {

constexpr float kInfinity = std::numeric_limits<float>::infinity();
constexpr int kStreams = 14;  // keys 1..13, and key 0 (no identity)

// Two profiles (3 and 2 dims); window patterns with and without
// z-normalisation and, with `streaming`, a streaming one, so that per-key
// state matters (a moved stream's streaming state restarts, as after a gap,
// so the tests that lose a member leave it out).
std::shared_ptr<PatternLibrary> library(bool streaming = true) {
  using gw::kernels::testing::make_pattern;
  using gw::kernels::testing::neighbour_pairs;
  using gw::kernels::testing::random_walk;
  auto lib = std::make_shared<PatternLibrary>();
  auto query = [](int dims, int m, std::uint64_t seed) {
    std::vector<std::vector<float>> out;
    for (int d = 0; d < dims; ++d) out.push_back(random_walk(m, seed + d, 1.0, 0.3));
    return out;
  };
  lib->patterns.push_back(make_pattern(1, query(3, 24, 10), 2, true, kInfinity, 1 << 20,
                                       neighbour_pairs(3, 3, 1)));
  lib->patterns.push_back(make_pattern(1, query(2, 40, 20), 4, false, 60.0f, 1 << 20,
                                       neighbour_pairs(2, 3, 0)));
  lib->patterns.push_back(make_pattern(2, query(2, 16, 30), 1, true, kInfinity, 1 << 20,
                                       neighbour_pairs(2, 2, 1)));
  if (streaming)
    lib->patterns.push_back(make_pattern(2, query(2, 20, 40), 0, false, kInfinity, 1 << 20,
                                         neighbour_pairs(2, 2, 0), SearchMode::kStreaming));
  return lib;
}

// Tick t of every stream: its last 39 samples again and 12 new ones, in an
// order that changes from tick to tick.
SearchBatch tick(int t) {
  using gw::kernels::testing::random_walk;
  SearchBatch batch;
  const int history = 39, fresh = 12;
  for (int i = 0; i < kStreams; ++i) {
    const int k = (i * 5 + t * 3) % kStreams;
    const std::uint32_t profile = k % 3 == 0 ? 2 : 1;
    const int dims = profile == 2 ? 2 : 3;
    const std::int64_t first_new = history + static_cast<std::int64_t>(t) * fresh;
    const std::int64_t first = first_new - history;
    const int length = history + fresh;
    std::vector<float> rows(static_cast<std::size_t>(length) * dims);
    for (int d = 0; d < dims; ++d) {
      const std::vector<float> walk = random_walk(static_cast<int>(first) + length, 1000 + 10 * k + d, 1.0, 0.2);
      for (int s = 0; s < length; ++s) rows[static_cast<std::size_t>(s) * dims + d] = walk[first + s];
    }
    batch.add_slice(profile, dims, rows.data(), length, first, first_new,
                    /*stream_key=*/static_cast<std::uint64_t>(k));
  }
  return batch;
}

void require_equal(const SearchResult& expected, const SearchResult& got) {
  REQUIRE(expected.matches.size() == got.matches.size());
  for (std::size_t i = 0; i < got.matches.size(); ++i) {
    const Match& a = expected.matches[i];
    const Match& b = got.matches[i];
    INFO("match " << i);
    REQUIRE(a.slice == b.slice);
    REQUIRE(a.pattern == b.pattern);
    REQUIRE(a.pattern_dim == b.pattern_dim);
    REQUIRE(a.stream_dim == b.stream_dim);
    REQUIRE(a.end == b.end);
    REQUIRE(a.start == b.start);
    REQUIRE(a.distance == b.distance);
  }
}

struct Members {
  std::vector<std::shared_ptr<FlakyBackend::Record>> records;
  std::unique_ptr<SearchBackend> backend;
  explicit Members(int count, bool streaming = true) {
    std::vector<SearchMember> members;
    for (int m = 0; m < count; ++m) {
      records.push_back(std::make_shared<FlakyBackend::Record>());
      members.push_back({std::make_unique<FlakyBackend>(records.back()), "GPU " + std::to_string(m)});
    }
    backend = gw::kernels::make_multi_device_backend(std::move(members));
    backend->set_library(library(streaming));
  }
};

}  // namespace

TEST_CASE("multi-device search equals one backend's, tick after tick", "[kernels][multi]") {
  const int count = GENERATE(2, 3);
  INFO(count << " members");
  Members multi(count);
  const auto single = gw::kernels::make_cpu_backend(2);
  single->set_library(library());
  for (int t = 0; t < 6; ++t) {
    INFO("tick " << t);
    const SearchBatch batch = tick(t);
    const SearchResult expected = single->search(batch);
    REQUIRE_FALSE(expected.matches.empty());
    SearchResult got;
    multi.backend->search_into(batch, got);
    require_equal(expected, got);
    CHECK(got.stats.windows == expected.stats.windows);
  }
  // Every member searched, each stream on one member only.
  std::set<std::uint64_t> seen;
  for (const auto& record : multi.records) {
    CHECK(record->keys.size() + 1 >= static_cast<std::size_t>(kStreams / count));
    for (const std::uint64_t key : record->keys) CHECK(seen.insert(key).second);
  }
  CHECK(seen.size() == static_cast<std::size_t>(kStreams));
  CHECK(multi.backend->name().find("x" + std::to_string(count) + " [GPU 0, GPU 1") !=
        std::string::npos);
}

TEST_CASE("multi-device forget_streams reaches the member that owns the stream",
          "[kernels][multi]") {
  Members multi(2);
  multi.backend->search(tick(0));
  multi.backend->forget_streams({3, 4, 99});
  for (const auto& record : multi.records)
    for (const std::uint64_t key : record->forgotten) CHECK(record->keys.count(key) == 1);
  CHECK(multi.records[0]->forgotten.size() + multi.records[1]->forgotten.size() == 2);
}

TEST_CASE("multi-device search moves a lost member's streams and searches the batch again",
          "[kernels][multi]") {
  Members multi(3, /*streaming=*/false);
  const auto single = gw::kernels::make_cpu_backend(2);
  single->set_library(library(false));
  for (int t = 0; t < 2; ++t) require_equal(single->search(tick(t)), multi.backend->search(tick(t)));
  const std::set<std::uint64_t> lost_keys = multi.records[1]->keys;
  REQUIRE_FALSE(lost_keys.empty());

  multi.records[1]->fail = true;
  const SearchBatch batch = tick(2);
  const SearchResult expected = single->search(batch);
  try {
    multi.backend->search(batch);
    FAIL("a member's failure must be reported");
  } catch (const SearchDeviceLost& lost) {
    const std::string what = lost.what();
    CHECK(what.find("GPU 1") != std::string::npos);
    CHECK(what.find("illegal memory access") != std::string::npos);
    CHECK(what.find(std::to_string(lost_keys.size()) + " streams moved") != std::string::npos);
  }
  CHECK(multi.backend->name().find("x2 [GPU 0, GPU 2]") != std::string::npos);
  const int failed_searches = multi.records[1]->searches;
  // The same batch again, then later ones: equal, on the two left.
  require_equal(expected, multi.backend->search(batch));
  for (int t = 3; t < 5; ++t) require_equal(single->search(tick(t)), multi.backend->search(tick(t)));
  CHECK(multi.records[1]->searches == failed_searches);
  for (const std::uint64_t key : lost_keys)
    CHECK(multi.records[0]->keys.count(key) + multi.records[2]->keys.count(key) == 1);
}

TEST_CASE("multi-device search rethrows the last member's own error", "[kernels][multi]") {
  Members multi(2);
  multi.backend->search(tick(0));
  multi.records[0]->fail = true;
  CHECK_THROWS_AS(multi.backend->search(tick(1)), SearchDeviceLost);
  multi.records[1]->fail = true;
  try {
    multi.backend->search(tick(1));
    FAIL("the last member's failure must be reported");
  } catch (const SearchDeviceLost&) {
    FAIL("no member is left to move streams to");
  } catch (const gw::Error& e) {
    CHECK(std::string(e.what()).find("illegal memory access") != std::string::npos);
  }
}

TEST_CASE("a batch omitting samples no member holds is refused without retiring a member",
          "[kernels][multi]") {
  Members multi(2);
  multi.backend->search(tick(0));
  SearchBatch wrong = tick(1);
  // CPU members hold nothing: one omitted sample breaks the contract.
  wrong.streams[2].omitted = 1;
  try {
    multi.backend->search(wrong);
    FAIL("the batch must be refused");
  } catch (const SearchDeviceLost&) {
    FAIL("a bad batch is not a lost device");
  } catch (const gw::Error& e) {
    CHECK(std::string(e.what()).find("does not hold") != std::string::npos);
  }
  CHECK(multi.backend->name().find("x2") != std::string::npos);
  CHECK_NOTHROW(multi.backend->search(tick(1)));
}

TEST_CASE("a multi-device backend needs two members", "[kernels][multi]") {
  std::vector<SearchMember> one;
  one.push_back({gw::kernels::make_cpu_backend(1), "GPU 0"});
  CHECK_THROWS_AS(gw::kernels::make_multi_device_backend(std::move(one)), gw::Error);
}
