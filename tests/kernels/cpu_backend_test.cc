// The CPU backend through the public SearchBackend interface, held to the
// brute-force reference (kernels/dtw.h) and to its own determinism.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "kernels/dtw.h"
#include "kernels/search.h"
#include "kernels_test_support.h"
#include "tests/common/sanitized.h"

namespace gw::kernels {
namespace {

using testing::ExpectedSearch;
using testing::FoundWindow;

constexpr float kInfinity = std::numeric_limits<float>::infinity();
// Distances come back as float: the reference rounded to float, plus 1e-9.
constexpr double kFloatDistanceTolerance = 1e-9 + 6e-8;

using Series = std::vector<float>;
using testing::make_pattern;
using testing::neighbour_pairs;

// Adds dim-major series as one slice (through the sample-major add_slice).
void add_slice(SearchBatch* batch, std::uint32_t profile, const std::vector<Series>& dims,
               std::int64_t first_index, std::int64_t first_new) {
  const int length = static_cast<int>(dims.at(0).size());
  const int count = static_cast<int>(dims.size());
  std::vector<float> sample_major(static_cast<std::size_t>(length) * count);
  for (int s = 0; s < length; ++s) {
    for (int d = 0; d < count; ++d) sample_major[s * count + d] = dims[d][s];
  }
  batch->add_slice(profile, count, sample_major.data(), length, first_index, first_new);
}

Series cut(const Series& source, int begin, int count) {
  return Series(source.begin() + begin, source.begin() + begin + count);
}

using GroupKey = std::tuple<std::uint32_t, std::uint32_t, std::uint16_t, std::uint16_t>;

std::map<GroupKey, std::vector<FoundWindow>> group(const SearchResult& result) {
  std::map<GroupKey, std::vector<FoundWindow>> groups;
  for (const Match& match : result.matches) {
    groups[{match.slice, match.pattern, match.pattern_dim, match.stream_dim}].push_back(
        {match.end, match.distance});
  }
  return groups;
}

bool same_matches(const SearchResult& a, const SearchResult& b) {
  if (a.matches.size() != b.matches.size()) return false;
  for (std::size_t k = 0; k < a.matches.size(); ++k) {
    const Match& x = a.matches[k];
    const Match& y = b.matches[k];
    if (x.slice != y.slice || x.pattern != y.pattern || x.pattern_dim != y.pattern_dim ||
        x.stream_dim != y.stream_dim || x.end != y.end || x.distance != y.distance) {
      return false;
    }
  }
  return true;
}

bool key_less(const Match& a, const Match& b) {
  return std::tie(a.slice, a.pattern, a.pattern_dim, a.stream_dim, a.distance, a.end) <
         std::tie(b.slice, b.pattern, b.pattern_dim, b.stream_dim, b.distance, b.end);
}

// Checks every (slice, pattern, pair) of `result` against the brute force.
// Returns how many groups were not exactly the reference's end sets (real
// data may contain exact ties that two implementations round apart).
int check_all_pairs(const SearchResult& result, const SearchBatch& batch,
                    const PatternLibrary& library, const std::vector<std::vector<Series>>& slices) {
  int inexact = 0;
  const auto groups = group(result);
  for (std::size_t s = 0; s < batch.streams.size(); ++s) {
    const StreamSlice& slice = batch.streams[s];
    for (std::size_t p = 0; p < library.patterns.size(); ++p) {
      const Pattern& pattern = library.patterns[p];
      const bool applies = pattern.profile == slice.profile;
      for (const DimPair& pair : pattern.pairs) {
        const GroupKey key{static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(p),
                           pair.pattern_dim, pair.stream_dim};
        const auto it = groups.find(key);
        const std::vector<FoundWindow> found =
            it == groups.end() ? std::vector<FoundWindow>{} : it->second;
        INFO("slice " << s << " pattern " << p << " pair (" << pair.pattern_dim << ", "
                      << pair.stream_dim << ") m " << pattern.length << " band " << pattern.band
                      << " znorm " << pattern.znorm << " threshold " << pattern.threshold << " p "
                      << pattern.max_matches_per_pair);
        if (!applies || pair.stream_dim >= slice.dims) {
          CHECK(found.empty());
          continue;
        }
        const std::int64_t local_first =
            std::max<std::int64_t>(0, slice.first_new - slice.first_index);
        const Series& series = slices[s][pair.stream_dim];
        const float* query =
            pattern.dims.data() + static_cast<std::size_t>(pair.pattern_dim) * pattern.length;
        const std::vector<double> reference = sliding_dtw_reference(
            query, pattern.length, series.data(), slice.length,
            static_cast<int>(std::min<std::int64_t>(local_first, slice.length)), pattern.band,
            pattern.znorm);
        const std::int64_t first_end =
            slice.first_index + std::max<std::int64_t>(local_first, pattern.length - 1);
        ExpectedSearch expected{reference, first_end, pattern.threshold,
                                pattern.max_matches_per_pair};
        if (!testing::check_against_reference(found, expected, kFloatDistanceTolerance)) ++inexact;
      }
    }
  }
  for (std::size_t k = 1; k < result.matches.size(); ++k) {
    CHECK_FALSE(key_less(result.matches[k], result.matches[k - 1]));
  }
  return inexact;
}

// Four stream dims: two random walks and two real Daphnet channels.
std::vector<Series> mixed_stream(int length) {
  return {testing::random_walk(length, 501, 1.0, 0.3), testing::random_walk(length, 502, 1.0, 0.3),
          testing::daphnet_channel(1, 20000, length), testing::daphnet_channel(8, 20000, length)};
}

// Two pattern dims: a random walk and a Daphnet ankle stretch from elsewhere.
std::vector<Series> mixed_query(int m) {
  return {cut(testing::random_walk(300, 601, 1.0, 0.3), 40, m),
          cut(testing::daphnet_channel(1, 31000, 300), 17, m)};
}

TEST_CASE("CPU backend equals brute force across m, band, znorm, p and threshold",
          "[cpu_backend]") {
  const int length = gw::test::unless_sanitized(900, 400);
  const std::vector<Series> stream = mixed_stream(length);
  SearchBatch batch;
  add_slice(&batch, 1, stream, 0, 0);
  const std::vector<DimPair> pairs = {{0, 0}, {0, 1}, {1, 2}, {1, 3}, {0, 2}, {1, 0}};
  auto backend = make_cpu_backend(2);
  int inexact = 0;
  for (int m : {16, 64, 128}) {
    const std::vector<Series> query = mixed_query(m);
    for (double band_fraction : {0.0, 0.05, 0.1, 0.5}) {
      const int band = static_cast<int>(std::floor(band_fraction * m));
      for (bool znorm : {true, false}) {
        // A tight threshold: about 3 % of the windows of pair (0, 0).
        const std::vector<double> pair00 =
            sliding_dtw_reference(query[0].data(), m, stream[0].data(), length, 0, band, znorm);
        const float tight = static_cast<float>(testing::quantile(pair00, 0.03));
        auto library = std::make_shared<PatternLibrary>();
        for (int max_matches : {3, 100000}) {
          for (float threshold : {tight, kInfinity}) {
            library->patterns.push_back(
                make_pattern(1, query, band, znorm, threshold, max_matches, pairs));
          }
        }
        backend->set_library(library);
        const SearchResult result = backend->search(batch);
        inexact += check_all_pairs(result, batch, *library, {stream});
        CHECK(result.stats.windows ==
              4ull * pairs.size() * static_cast<std::uint64_t>(length - m + 1));
      }
    }
  }
  // Exact distance ties are rare even on integer-valued real data.
  CHECK(inexact <= 4);
}

TEST_CASE("Every subset of pruning steps gives identical matches", "[cpu_backend][pruning]") {
  const int length = 700;
  const std::vector<Series> stream = mixed_stream(length);
  SearchBatch batch;
  add_slice(&batch, 1, stream, 0, 0);
  add_slice(&batch, 1,
            {cut(stream[2], 100, 300), cut(stream[0], 100, 300), cut(stream[3], 100, 300),
             cut(stream[1], 100, 300)},
            5000, 5100);

  auto library = std::make_shared<PatternLibrary>();
  const std::vector<DimPair> pairs = neighbour_pairs(2, 4, 2);
  {
    // Tight threshold, small p, znorm.
    const std::vector<Series> q = mixed_query(64);
    const std::vector<double> ref =
        sliding_dtw_reference(q[0].data(), 64, stream[0].data(), length, 0, 6, true);
    library->patterns.push_back(
        make_pattern(1, q, 6, true, static_cast<float>(testing::quantile(ref, 0.05)), 5, pairs));
  }
  // No threshold: the cutoff comes from the p-th best alone.
  library->patterns.push_back(make_pattern(1, mixed_query(128), 12, false, kInfinity, 3, pairs));
  library->patterns.push_back(make_pattern(1, mixed_query(128), 12, true, kInfinity, 2, pairs));
  // Short query with band 0 (LB_Keogh equals the distance) and a wide band.
  {
    const std::vector<Series> q = mixed_query(16);
    const std::vector<double> ref =
        sliding_dtw_reference(q[0].data(), 16, stream[0].data(), length, 0, 0, true);
    const float threshold = static_cast<float>(testing::quantile(ref, 0.2));
    library->patterns.push_back(make_pattern(1, q, 0, true, threshold, 1000, pairs));
    library->patterns.push_back(make_pattern(1, q, 8, true, threshold, 7, pairs));
  }

  auto reference_backend = make_cpu_backend(1);
  reference_backend->set_library(library);
  const SearchResult all_on = reference_backend->search(batch);
  REQUIRE(!all_on.matches.empty());
  CHECK(all_on.stats.pruned_kim > 0);
  CHECK(all_on.stats.pruned_keogh_eq > 0);
  CHECK(all_on.stats.pruned_keogh_ec > 0);
  CHECK(all_on.stats.dtw_abandoned > 0);
  check_all_pairs(all_on, batch, *library,
                  {stream,
                   {cut(stream[2], 100, 300), cut(stream[0], 100, 300), cut(stream[3], 100, 300),
                    cut(stream[1], 100, 300)}});

  for (int mask = 0; mask < 16; ++mask) {
    PruningOptions pruning;
    pruning.lb_kim = (mask & 1) != 0;
    pruning.lb_keogh_eq = (mask & 2) != 0;
    pruning.lb_keogh_ec = (mask & 4) != 0;
    pruning.early_abandon = (mask & 8) != 0;
    auto backend = make_cpu_backend(2, pruning);
    backend->set_library(library);
    const SearchResult result = backend->search(batch);
    INFO("pruning mask " << mask);
    CHECK(same_matches(result, all_on));
    CHECK(result.stats.windows == all_on.stats.windows);
    if (!pruning.lb_kim) CHECK(result.stats.pruned_kim == 0);
    if (!pruning.lb_keogh_eq) CHECK(result.stats.pruned_keogh_eq == 0);
    if (!pruning.lb_keogh_ec) CHECK(result.stats.pruned_keogh_ec == 0);
    if (!pruning.early_abandon) CHECK(result.stats.dtw_abandoned == 0);
    if (mask == 0) {
      CHECK(result.stats.dtw_full == result.stats.windows);
      CHECK(result.stats.cells > all_on.stats.cells);
    }
  }
}

TEST_CASE("Windows exactly at the threshold and exact ties follow (distance, end)",
          "[cpu_backend][pruning]") {
  // Integer data without z-normalisation: every distance is exact. Two
  // windows (ending at 27 and 57) hold a single 2 among zeros, at squared
  // distance exactly 4 from the all-zero query whatever the band; every other
  // window contains 10s and is far away.
  Series stream(100, 10.0f);
  for (int base : {20, 50}) {
    for (int k = 0; k < 8; ++k) stream[base + k] = 0.0f;
    stream[base + 3] = 2.0f;
  }
  const Series query(8, 0.0f);
  auto library = std::make_shared<PatternLibrary>();
  for (int band : {0, 2}) {
    // Threshold exactly 2: both windows sit on it and must be kept.
    library->patterns.push_back(make_pattern(1, {query}, band, false, 2.0f, 5, {{0, 0}}));
    // One match per pair: the tie goes to the earlier end.
    library->patterns.push_back(make_pattern(1, {query}, band, false, kInfinity, 1, {{0, 0}}));
    library->patterns.push_back(make_pattern(1, {query}, band, false, 2.0f, 1, {{0, 0}}));
  }
  SearchBatch batch;
  add_slice(&batch, 1, {stream}, 0, 0);
  for (int mask = 0; mask < 16; ++mask) {
    PruningOptions pruning;
    pruning.lb_kim = (mask & 1) != 0;
    pruning.lb_keogh_eq = (mask & 2) != 0;
    pruning.lb_keogh_ec = (mask & 4) != 0;
    pruning.early_abandon = (mask & 8) != 0;
    auto backend = make_cpu_backend(1, pruning);
    backend->set_library(library);
    const SearchResult result = backend->search(batch);
    INFO("pruning mask " << mask);
    const auto groups = group(result);
    for (std::uint32_t p = 0; p < 6; ++p) {
      const auto it = groups.find({0u, p, 0, 0});
      REQUIRE(it != groups.end());
      const std::vector<FoundWindow>& found = it->second;
      if (p % 3 == 0) {
        REQUIRE(found.size() == 2);
        CHECK(found[1].end == 57);
        CHECK(found[1].distance == 2.0);
      } else {
        REQUIRE(found.size() == 1);
      }
      CHECK(found[0].end == 27);
      CHECK(found[0].distance == 2.0);
    }
  }
}

// A multi-slice, multi-profile batch with neighbour pairs.
struct MultiBatch {
  std::vector<std::vector<Series>> slices;
  SearchBatch batch;
  std::shared_ptr<PatternLibrary> library = std::make_shared<PatternLibrary>();
};

MultiBatch make_multi_batch() {
  MultiBatch out;
  auto walks = [](int dims, int length, std::uint64_t seed) {
    std::vector<Series> series;
    for (int d = 0; d < dims; ++d)
      series.push_back(testing::random_walk(length, seed + d, 1.0, 0.2));
    return series;
  };
  out.slices.push_back(walks(6, 400, 1000));
  out.slices.push_back(walks(3, 300, 2000));
  out.slices.push_back(walks(6, 250, 3000));
  add_slice(&out.batch, 1, out.slices[0], 1000, 1000);
  add_slice(&out.batch, 2, out.slices[1], 0, 0);
  add_slice(&out.batch, 1, out.slices[2], 5000, 5100);  // only ends >= 5100 are new

  auto query_dims = [](int dims, int m, std::uint64_t seed) {
    std::vector<Series> q;
    for (int d = 0; d < dims; ++d)
      q.push_back(cut(testing::random_walk(m + 50, seed + d, 1.0, 0.2), 25, m));
    return q;
  };
  PatternLibrary& library = *out.library;
  library.patterns.push_back(
      make_pattern(1, query_dims(6, 32, 7000), 3, true, 4.0f, 6, neighbour_pairs(6, 6, 2)));
  library.patterns.push_back(
      make_pattern(2, query_dims(3, 16, 8000), 1, true, kInfinity, 4, neighbour_pairs(3, 3, 2)));
  library.patterns.push_back(
      make_pattern(1, query_dims(6, 48, 9000), 4, false, 60.0f, 1000, neighbour_pairs(6, 6, 1)));
  // A pattern of a profile no slice has.
  library.patterns.push_back(
      make_pattern(3, query_dims(2, 16, 9500), 1, true, kInfinity, 4, neighbour_pairs(2, 2, 1)));
  return out;
}

TEST_CASE("Multi-slice, multi-pattern batches search each applicable pair", "[cpu_backend]") {
  MultiBatch multi = make_multi_batch();
  auto backend = make_cpu_backend(3);
  backend->set_library(multi.library);
  const SearchResult result = backend->search(multi.batch);
  REQUIRE(!result.matches.empty());
  CHECK(check_all_pairs(result, multi.batch, *multi.library, multi.slices) == 0);
  for (const Match& match : result.matches) {
    CHECK(multi.library->patterns[match.pattern].profile ==
          multi.batch.streams[match.slice].profile);
    CHECK(std::abs(match.pattern_dim - match.stream_dim) <= 2);
    CHECK_FALSE(std::isnan(match.distance));
  }
  // Windows: slice 0 ends 1031..1399 for m 32 and 1047..1399 for m 48;
  // slice 1 all 285 ends for m 16; slice 2 ends 5100..5249 for both.
  const std::uint64_t pairs0 = multi.library->patterns[0].pairs.size();
  const std::uint64_t pairs1 = multi.library->patterns[1].pairs.size();
  const std::uint64_t pairs2 = multi.library->patterns[2].pairs.size();
  CHECK(result.stats.windows == pairs0 * (369 + 150) + pairs1 * 285 + pairs2 * (353 + 150));
}

TEST_CASE("1 thread and 4 threads give identical results", "[cpu_backend][threads]") {
  MultiBatch multi = make_multi_batch();
  auto one = make_cpu_backend(1);
  auto four = make_cpu_backend(4);
  one->set_library(multi.library);
  four->set_library(multi.library);
  const SearchResult a = one->search(multi.batch);
  for (int repeat = 0; repeat < 3; ++repeat) {
    const SearchResult b = four->search(multi.batch);
    CHECK(same_matches(a, b));
    CHECK(a.stats.windows == b.stats.windows);
    CHECK(a.stats.cells == b.stats.cells);
    CHECK(a.stats.dtw_full == b.stats.dtw_full);
    CHECK(a.stats.pruned_kim == b.stats.pruned_kim);
  }
  CHECK(four->name().find("4 threads") != std::string::npos);
}

TEST_CASE("Constant windows and constant queries follow the zero rule", "[cpu_backend][znorm]") {
  // A random walk with a flat stretch (samples 100..219) in the middle.
  Series stream = testing::random_walk(400, 77);
  for (int s = 100; s < 220; ++s) stream[s] = 42.0f;
  const int m = 32;
  const Series flat_query(m, -3.0f);
  const Series walk_query = cut(testing::random_walk(100, 78), 10, m);
  auto library = std::make_shared<PatternLibrary>();
  library->patterns.push_back(make_pattern(1, {flat_query}, 3, true, kInfinity, 100000, {{0, 0}}));
  library->patterns.push_back(make_pattern(1, {walk_query}, 3, true, kInfinity, 100000, {{0, 0}}));
  SearchBatch batch;
  add_slice(&batch, 1, {stream}, 0, 0);
  auto backend = make_cpu_backend(2);
  backend->set_library(library);
  const SearchResult result = backend->search(batch);
  REQUIRE(result.matches.size() == 2u * (400 - m + 1));
  const float sqrt_m = std::sqrt(static_cast<float>(m));
  for (const Match& match : result.matches) {
    REQUIRE_FALSE(std::isnan(match.distance));
    const bool flat_window = match.end - (m - 1) >= 100 && match.end <= 219;
    INFO("pattern " << match.pattern << " end " << match.end);
    if (match.pattern == 0) {
      // Zeros against zeros, or zeros against a normalised window (whose
      // squares sum to m: the diagonal is the cheapest path).
      CHECK(match.distance == Approx(flat_window ? 0.0f : sqrt_m).margin(1e-5));
    } else if (flat_window) {
      CHECK(match.distance == Approx(sqrt_m).margin(1e-5));
    }
  }
  check_all_pairs(result, batch, *library, {{stream}});
}

TEST_CASE("first_new limits the searched window ends", "[cpu_backend]") {
  const Series stream = testing::random_walk(200, 91);
  const Series query = cut(testing::random_walk(60, 92), 5, 32);
  auto library = std::make_shared<PatternLibrary>();
  library->patterns.push_back(make_pattern(1, {query}, 3, true, kInfinity, 100000, {{0, 0}}));
  auto backend = make_cpu_backend(2);
  backend->set_library(library);

  struct Case {
    std::int64_t first_new;
    std::int64_t expected_first_end;
  };
  // first_index 1000, length 200: ends 1000..1199; a window needs 32 samples,
  // so nothing before 1031 can be searched whatever first_new says.
  for (const Case& c :
       {Case{1100, 1100}, Case{1000, 1031}, Case{0, 1031}, Case{1031, 1031}, Case{1199, 1199}}) {
    SearchBatch batch;
    add_slice(&batch, 1, {stream}, 1000, c.first_new);
    const SearchResult result = backend->search(batch);
    INFO("first_new " << c.first_new);
    REQUIRE(result.matches.size() == static_cast<std::size_t>(1200 - c.expected_first_end));
    CHECK(result.stats.windows == static_cast<std::uint64_t>(1200 - c.expected_first_end));
    std::int64_t lowest = result.matches.front().end;
    for (const Match& match : result.matches) lowest = std::min(lowest, match.end);
    CHECK(lowest == c.expected_first_end);
    CHECK(check_all_pairs(result, batch, *library, {{stream}}) == 0);
  }
  for (std::int64_t first_new : {1200, 5000}) {
    SearchBatch batch;
    add_slice(&batch, 1, {stream}, 1000, first_new);
    const SearchResult result = backend->search(batch);
    CHECK(result.matches.empty());
    CHECK(result.stats.windows == 0);
  }
  // A slice shorter than the pattern has no window at all.
  SearchBatch short_batch;
  add_slice(&short_batch, 1, {cut(stream, 0, 31)}, 0, 0);
  CHECK(backend->search(short_batch).stats.windows == 0);
}

TEST_CASE("Pairs on stream dims a slice does not have are skipped", "[cpu_backend]") {
  const Series stream = testing::random_walk(100, 93);
  const Series query = cut(stream, 10, 16);
  auto library = std::make_shared<PatternLibrary>();
  library->patterns.push_back(
      make_pattern(1, {query}, 1, true, kInfinity, 5, {{0, 0}, {0, 1}, {0, 7}}));
  SearchBatch batch;
  add_slice(&batch, 1, {stream, stream}, 0, 0);
  auto backend = make_cpu_backend(1);
  backend->set_library(library);
  const SearchResult result = backend->search(batch);
  CHECK(result.matches.size() == 10);  // 5 for each existing stream dim
  for (const Match& match : result.matches) CHECK(match.stream_dim < 2);
}

TEST_CASE("set_library validates and replaces the library", "[cpu_backend]") {
  auto backend = make_cpu_backend(1);
  const Series stream = testing::random_walk(100, 94);
  SearchBatch batch;
  add_slice(&batch, 1, {stream}, 0, 0);
  CHECK(backend->search(batch).matches.empty());  // no library yet

  const Series query = cut(stream, 20, 16);
  auto good = std::make_shared<PatternLibrary>();
  good->patterns.push_back(make_pattern(1, {query}, 1, true, kInfinity, 1, {{0, 0}}));
  backend->set_library(good);
  const SearchResult found = backend->search(batch);
  REQUIRE(found.matches.size() == 1);
  CHECK(found.matches[0].end == 35);  // the query's own window
  CHECK(found.matches[0].distance < 1e-3f);

  auto bad = [&](auto change) {
    auto library = std::make_shared<PatternLibrary>(*good);
    change(library->patterns[0]);
    return library;
  };
  CHECK_THROWS_AS(backend->set_library(bad([](Pattern& p) { p.band = 16; })), gw::Error);
  CHECK_THROWS_AS(backend->set_library(bad([](Pattern& p) { p.band = -1; })), gw::Error);
  CHECK_THROWS_AS(backend->set_library(bad([](Pattern& p) { p.max_matches_per_pair = 0; })),
                  gw::Error);
  CHECK_THROWS_AS(backend->set_library(bad([](Pattern& p) { p.dims.pop_back(); })), gw::Error);
  CHECK_THROWS_AS(backend->set_library(bad([](Pattern& p) { p.pairs[0].pattern_dim = 1; })),
                  gw::Error);
  CHECK_THROWS_AS(backend->set_library(bad([](Pattern& p) { p.threshold = std::nanf(""); })),
                  gw::Error);
  CHECK_THROWS_WITH(backend->set_library(bad([](Pattern& p) {
    p.length = 1;
    p.band = 0;
    p.dims.resize(1);
  })),
                    Catch::Contains("pattern 0"));
  // A rejected library leaves the previous one in place.
  CHECK(same_matches(backend->search(batch), found));

  backend->set_library(nullptr);
  CHECK(backend->search(batch).matches.empty());
}

}  // namespace
}  // namespace gw::kernels
