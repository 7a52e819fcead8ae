// Streaming mode (SPRING) of the CPU backend through the public
// SearchBackend interface, held to an independent brute force: for every end
// t the best of full DTW(query, x[s..t]) over every start s since the stream
// (re)started, computed in double from one DTW matrix per start. The GPU
// backend is held to this CPU path bit for bit (cuda_backend_test.cc), so
// these cases pin down what both must compute.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "kernels/search.h"
#include "kernels_test_support.h"

namespace gw::kernels {
namespace {

using testing::ExpectedSearch;
using testing::FoundWindow;
using Series = std::vector<float>;

constexpr float kInfinity = std::numeric_limits<float>::infinity();
// The CPU computes the path sums in float; the reference in double. Every
// cost is a square of a correctly rounded difference, so the float sum stays
// within a few hundred ulps (relative) of the double one.
constexpr double kTolerance = 1e-4;
constexpr int kUncapped = 1 << 30;

Series cut(const Series& source, int begin, int count) {
  return Series(source.begin() + begin, source.begin() + begin + count);
}

// All subsequence DTW distances of one query against one stream, from a
// fixed start: table[s - origin][t - s] = sqrt of the full unconstrained DTW
// path sum of query vs x[s..t] (squared differences, path from (0, s) to
// (m-1, t)). One m x (n - s) matrix per start s gives every end at once,
// because the matrix of x[s..t] is the first columns of that of x[s..n-1].
class BruteForce {
 public:
  // `x` holds the stream's samples from its first one (absolute index origin).
  BruteForce(const Series& query, const Series& x, std::int64_t origin)
      : origin_(origin), n_(static_cast<int>(x.size())) {
    const int m = static_cast<int>(query.size());
    table_.resize(n_);
    std::vector<double> column(m), next(m);
    for (int s = 0; s < n_; ++s) {
      std::vector<double>& row = table_[s];
      row.resize(n_ - s);
      for (int t = s; t < n_; ++t) {
        for (int k = 0; k < m; ++k) {
          const double diff = static_cast<double>(x[t]) - static_cast<double>(query[k]);
          const double cost = diff * diff;
          double best;
          if (t == s && k == 0) {
            best = 0;
          } else if (t == s) {
            best = next[k - 1];
          } else if (k == 0) {
            best = column[0];
          } else {
            best = std::min({column[k - 1], column[k], next[k - 1]});
          }
          next[k] = cost + best;
        }
        row[t - s] = std::sqrt(next[m - 1]);
        std::swap(column, next);
      }
    }
  }

  // DTW(query, x[start..end]) for absolute indices.
  double distance(std::int64_t start, std::int64_t end) const {
    REQUIRE(start >= origin_);
    REQUIRE(end >= start);
    REQUIRE(end < origin_ + n_);
    return table_[start - origin_][end - start];
  }

  // min over start <= end of distance(start, end), for every end from origin.
  std::vector<double> best() const {
    std::vector<double> out(n_, std::numeric_limits<double>::infinity());
    for (int s = 0; s < n_; ++s) {
      for (int t = s; t < n_; ++t) out[t] = std::min(out[t], table_[s][t - s]);
    }
    return out;
  }

  std::int64_t origin() const { return origin_; }

 private:
  std::int64_t origin_;
  int n_;
  std::vector<std::vector<double>> table_;
};

Pattern streaming_pattern(std::uint32_t profile, const std::vector<Series>& dims,
                          std::vector<DimPair> pairs, float threshold = kInfinity,
                          int max_matches = kUncapped) {
  Pattern pattern;
  pattern.profile = profile;
  pattern.length = static_cast<int>(dims.at(0).size());
  pattern.mode = SearchMode::kStreaming;
  // Ignored in streaming mode; set to values that would change a window
  // search so that a leak into the streaming path shows.
  pattern.band = pattern.length / 4;
  pattern.znorm = true;
  pattern.threshold = threshold;
  pattern.max_matches_per_pair = max_matches;
  pattern.dim_count = static_cast<int>(dims.size());
  for (const Series& dim : dims) pattern.dims.insert(pattern.dims.end(), dim.begin(), dim.end());
  pattern.pairs = std::move(pairs);
  return pattern;
}

// Adds samples [begin, end) of dim-major series as one slice whose first
// sample has absolute index `first_index + begin`.
void add_range(SearchBatch* batch, std::uint32_t profile, const std::vector<Series>& dims,
               std::int64_t first_index, int begin, int end, std::int64_t first_new,
               std::uint64_t key) {
  const int count = static_cast<int>(dims.size());
  const int length = end - begin;
  std::vector<float> sample_major(static_cast<std::size_t>(length) * count);
  for (int s = 0; s < length; ++s) {
    for (int d = 0; d < count; ++d) sample_major[s * count + d] = dims[d][begin + s];
  }
  batch->add_slice(profile, count, sample_major.data(), length, first_index + begin, first_new,
                   key);
}

// A match without its slice index, so results of different batchings compare.
using Row = std::tuple<std::uint32_t, std::uint16_t, std::uint16_t, std::int64_t, std::int64_t,
                       float>;  // pattern, j, i, end, start, distance

std::vector<Row> rows(const SearchResult& result, std::uint32_t slice) {
  std::vector<Row> out;
  for (const Match& m : result.matches) {
    if (m.slice == slice)
      out.emplace_back(m.pattern, m.pattern_dim, m.stream_dim, m.end, m.start, m.distance);
  }
  return out;
}

void append_rows(std::vector<Row>* all, const SearchResult& result, std::uint32_t slice) {
  const std::vector<Row> more = rows(result, slice);
  all->insert(all->end(), more.begin(), more.end());
}

// Matches of one (pattern, pair) of one slice, as the support helpers take them.
std::vector<FoundWindow> found_for(const SearchResult& result, std::uint32_t slice,
                                   std::uint32_t pattern, DimPair pair,
                                   std::vector<Match>* matches = nullptr) {
  std::vector<FoundWindow> found;
  for (const Match& m : result.matches) {
    if (m.slice == slice && m.pattern == pattern && m.pattern_dim == pair.pattern_dim &&
        m.stream_dim == pair.stream_dim) {
      found.push_back({m.end, m.distance});
      if (matches) matches->push_back(m);
    }
  }
  return found;
}

// Checks the uncapped, unthresholded matches of every pair of `pattern` on
// one slice against the brute force of a stream that started at `origin`
// (stream dims given from the stream's first sample), including the start.
void check_every_end(const SearchResult& result, std::uint32_t slice, std::uint32_t pattern_index,
                     const Pattern& pattern, const std::vector<Series>& stream,
                     std::int64_t origin) {
  for (const DimPair& pair : pattern.pairs) {
    INFO("pattern " << pattern_index << " pair (" << pair.pattern_dim << ", " << pair.stream_dim
                    << ") m " << pattern.length);
    if (pair.stream_dim >= stream.size()) {
      // A stream dim the slice lacks: skipped, no match and no error.
      CHECK(found_for(result, slice, pattern_index, pair).empty());
      continue;
    }
    const Series query(pattern.dims.begin() + pair.pattern_dim * pattern.length,
                       pattern.dims.begin() + (pair.pattern_dim + 1) * pattern.length);
    const BruteForce brute(query, stream[pair.stream_dim], origin);
    const std::vector<double> best = brute.best();
    std::vector<Match> matches;
    found_for(result, slice, pattern_index, pair, &matches);
    REQUIRE(matches.size() == best.size());
    std::vector<bool> seen(best.size(), false);
    for (const Match& m : matches) {
      INFO("end " << m.end << " start " << m.start << " distance " << m.distance);
      REQUIRE(m.end >= origin);
      REQUIRE(m.end < origin + static_cast<std::int64_t>(best.size()));
      REQUIRE_FALSE(seen[m.end - origin]);
      seen[m.end - origin] = true;
      const double want = best[m.end - origin];
      CHECK(std::fabs(m.distance - want) <= kTolerance * std::max(want, 1e-3));
      // The reported start names a subsequence that really has this distance.
      REQUIRE(m.start >= origin);
      REQUIRE(m.start <= m.end);
      const double at_start = brute.distance(m.start, m.end);
      CHECK(std::fabs(m.distance - at_start) <= kTolerance * std::max(at_start, 1e-3));
    }
  }
}

std::vector<Series> random_dims(int dims, int length, std::uint64_t seed) {
  std::vector<Series> out;
  for (int d = 0; d < dims; ++d) out.push_back(testing::random_walk(length, seed + d, 1.0, 0.3));
  return out;
}

// Pattern dims cut from a walk of other seeds.
std::vector<Series> random_query(int dims, int m, std::uint64_t seed) {
  std::vector<Series> out;
  for (int d = 0; d < dims; ++d)
    out.push_back(cut(testing::random_walk(m + 40, seed + d, 1.0, 0.3), 20, m));
  return out;
}

TEST_CASE("Streaming mode equals brute-force subsequence DTW on random walks", "[streaming]") {
  struct Case {
    int n;
    int m;
    std::int64_t first_index;
    int first_new_offset;  // samples of the slice before the stream's first one
    std::uint64_t seed;
  };
  for (const Case& c : {Case{150, 8, 0, 0, 11}, Case{220, 13, 5000, 37, 12},
                        Case{300, 24, 123456789, 0, 13}, Case{260, 17, 40, 100, 14}}) {
    INFO("n " << c.n << " m " << c.m << " first_index " << c.first_index << " seed " << c.seed);
    const std::vector<Series> stream = random_dims(3, c.n, c.seed * 100);
    auto library = std::make_shared<PatternLibrary>();
    library->patterns.push_back(streaming_pattern(1, random_query(2, c.m, c.seed * 100 + 50),
                                                  {{0, 0}, {0, 1}, {1, 1}, {1, 2}, {0, 2}}));
    // A query planted in the stream: its own subsequence has distance 0.
    library->patterns.push_back(
        streaming_pattern(1, {cut(stream[1], c.n - c.m - 20, c.m)}, {{0, 1}, {0, 0}}));
    auto backend = make_cpu_backend(2);
    backend->set_library(library);
    SearchBatch batch;
    const std::int64_t origin = c.first_index + c.first_new_offset;
    add_range(&batch, 1, stream, c.first_index, 0, c.n, origin, 7);
    const SearchResult result = backend->search(batch);

    // The stream starts at first_new: the samples before it are not part of it.
    std::vector<Series> from_origin;
    for (const Series& dim : stream)
      from_origin.push_back(cut(dim, c.first_new_offset, c.n - c.first_new_offset));
    for (std::uint32_t p = 0; p < library->patterns.size(); ++p)
      check_every_end(result, 0, p, library->patterns[p], from_origin, origin);

    const std::uint64_t samples = c.n - c.first_new_offset;
    CHECK(result.stats.windows == samples * 7);
    CHECK(result.stats.cells == samples * (5 * c.m + 2 * c.m));
    // The planted copy ends at its last sample with distance exactly 0 from its first.
    bool planted = false;
    for (const Match& m : result.matches) {
      if (m.pattern == 1 && m.stream_dim == 1 && m.end == c.first_index + c.n - 21) {
        planted = true;
        CHECK(m.distance == 0.0f);
        CHECK(m.start == c.first_index + c.n - c.m - 20);
      }
    }
    CHECK(planted);
  }
}

TEST_CASE("Streaming mode equals brute force on a real Daphnet slice", "[streaming][daphnet]") {
  // Ankle, thigh and trunk forward acceleration [mg] during walking; the
  // queries are stretches of the same channels from elsewhere in the recording.
  const int n = 250;
  const std::vector<Series> stream = {testing::daphnet_channel(1, 20000, n),
                                      testing::daphnet_channel(4, 20000, n),
                                      testing::daphnet_channel(7, 20000, n)};
  auto library = std::make_shared<PatternLibrary>();
  for (int m : {12, 24}) {
    library->patterns.push_back(streaming_pattern(
        2, {testing::daphnet_channel(1, 31000, m), testing::daphnet_channel(4, 31000, m)},
        {{0, 0}, {1, 1}, {0, 2}}));
  }
  auto backend = make_cpu_backend(2);
  backend->set_library(library);
  SearchBatch batch;
  add_range(&batch, 2, stream, 20000, 0, n, 20000, 1);
  const SearchResult result = backend->search(batch);
  for (std::uint32_t p = 0; p < library->patterns.size(); ++p)
    check_every_end(result, 0, p, library->patterns[p], stream, 20000);
}

TEST_CASE("Streaming thresholds and the top-p cap keep the best ends", "[streaming]") {
  const int n = 280, m = 16;
  const std::vector<Series> stream = random_dims(2, n, 900);
  const std::vector<Series> query = random_query(1, m, 950);
  const Series planted_query = cut(stream[0], 200, m);
  const BruteForce brute(query[0], stream[0], 0);
  const std::vector<double> best = brute.best();
  const double threshold = testing::quantile(best, 0.1);

  auto library = std::make_shared<PatternLibrary>();
  // 0: threshold only; 1: threshold and a binding cap; 2: cap only.
  library->patterns.push_back(
      streaming_pattern(1, query, {{0, 0}}, static_cast<float>(threshold), kUncapped));
  library->patterns.push_back(
      streaming_pattern(1, query, {{0, 0}}, static_cast<float>(threshold), 5));
  library->patterns.push_back(streaming_pattern(1, query, {{0, 0}}, kInfinity, 9));
  // 3: the planted copy with threshold 0: only its own end (distance 0 exactly).
  library->patterns.push_back(streaming_pattern(1, {planted_query}, {{0, 0}}, 0.0f, kUncapped));
  auto backend = make_cpu_backend(2);
  backend->set_library(library);
  SearchBatch batch;
  add_range(&batch, 1, stream, 0, 0, n, 0, 3);
  const SearchResult result = backend->search(batch);

  struct Expect {
    std::uint32_t pattern;
    double threshold;
    int max_matches;
  };
  for (const Expect& e : {Expect{0, threshold, kUncapped}, Expect{1, threshold, 5},
                          Expect{2, std::numeric_limits<double>::infinity(), 9}}) {
    INFO("pattern " << e.pattern);
    const std::vector<FoundWindow> found = found_for(result, 0, e.pattern, {0, 0});
    const ExpectedSearch expected{best, 0, e.threshold, e.max_matches};
    // Exact equality of the end sets: float vs double only matters for ends
    // within 1e-4 of the threshold or the cap boundary, and the helper allows
    // swaps exactly there.
    CHECK(testing::check_against_reference(found, expected, kTolerance, kTolerance));
    if (e.max_matches != kUncapped) CHECK(found.size() == static_cast<std::size_t>(e.max_matches));
  }
  const std::vector<FoundWindow> planted = found_for(result, 0, 3, {0, 0});
  REQUIRE(planted.size() == 1);
  CHECK(planted[0].end == 200 + m - 1);
  CHECK(planted[0].distance == 0.0f);
}

// The stream of the batch-split cases: 3 dims, two patterns (one planted).
struct SplitFixture {
  static constexpr int kN = 300;
  std::vector<Series> stream = random_dims(3, kN, 4000);
  std::shared_ptr<PatternLibrary> library = std::make_shared<PatternLibrary>();
  SplitFixture() {
    library->patterns.push_back(
        streaming_pattern(1, random_query(2, 20, 4100), {{0, 0}, {0, 1}, {1, 2}, {1, 1}}));
    // A finite threshold: cutting the stream must not change which ends pass.
    library->patterns.push_back(
        streaming_pattern(1, {cut(stream[2], 150, 11)}, {{0, 2}, {0, 0}}, 12.0f));
  }
};

TEST_CASE("Splitting a stream into batches gives bit-identical matches", "[streaming][batches]") {
  SplitFixture f;
  const std::int64_t base = 1000;
  auto whole_backend = make_cpu_backend(2);
  whole_backend->set_library(f.library);
  SearchBatch whole;
  add_range(&whole, 1, f.stream, base, 0, SplitFixture::kN, base, 42);
  const std::vector<Row> expected = rows(whole_backend->search(whole), 0);
  REQUIRE(expected.size() > 4 * SplitFixture::kN);

  // Batch sizes include 1 sample, sizes around the pattern lengths, and
  // slices that carry already-searched history before first_new (the
  // daemon's shape: m - 1 old samples plus the new ones).
  const std::vector<std::vector<int>> splits = {
      {1, 1, 1, 10, 19, 20, 21, 50, 177}, {100, 100, 100}, {10, 10, 10, 10, 10, 250}};
  for (int history : {0, 5, 30}) {
    for (const std::vector<int>& sizes : splits) {
      INFO("history " << history << " first batch " << sizes[0]);
      auto backend = make_cpu_backend(3);
      backend->set_library(f.library);
      std::vector<Row> got;
      int at = 0;
      for (const int size : sizes) {
        SearchBatch batch;
        const int begin = std::max(0, at - history);
        add_range(&batch, 1, f.stream, base, begin, at + size, base + at, 42);
        append_rows(&got, backend->search(batch), 0);
        at += size;
      }
      REQUIRE(at == SplitFixture::kN);
      std::sort(got.begin(), got.end());
      std::vector<Row> want = expected;
      std::sort(want.begin(), want.end());
      CHECK(got == want);
    }
  }
}

TEST_CASE("A gap, a step back or a new stream key restarts the state", "[streaming][batches]") {
  SplitFixture f;
  const int n = SplitFixture::kN;
  // What a fresh backend finds on samples [begin, n) fed as a stream starting at begin.
  auto fresh_rows = [&](int begin, std::uint64_t key) {
    auto backend = make_cpu_backend(2);
    backend->set_library(f.library);
    SearchBatch batch;
    add_range(&batch, 1, f.stream, 0, begin, n, begin, key);
    std::vector<Row> out = rows(backend->search(batch), 0);
    std::sort(out.begin(), out.end());
    return out;
  };
  auto sorted_rows = [](const SearchResult& result) {
    std::vector<Row> out = rows(result, 0);
    std::sort(out.begin(), out.end());
    return out;
  };
  auto backend = make_cpu_backend(2);
  backend->set_library(f.library);

  SECTION("gap") {
    SearchBatch first;
    add_range(&first, 1, f.stream, 0, 0, 100, 0, 5);
    backend->search(first);
    // Samples 100..139 never arrive: the stream restarts at 140.
    SearchBatch second;
    add_range(&second, 1, f.stream, 0, 120, n, 140, 5);
    const std::vector<Row> got = sorted_rows(backend->search(second));
    CHECK(got == fresh_rows(140, 5));
    for (const Row& row : got) CHECK(std::get<4>(row) >= 140);
  }
  SECTION("step back") {
    SearchBatch first;
    add_range(&first, 1, f.stream, 0, 0, 200, 0, 5);
    backend->search(first);
    SearchBatch again;
    add_range(&again, 1, f.stream, 0, 150, n, 150, 5);
    CHECK(sorted_rows(backend->search(again)) == fresh_rows(150, 5));
  }
  SECTION("new stream key") {
    SearchBatch first;
    add_range(&first, 1, f.stream, 0, 0, 100, 0, 5);
    backend->search(first);
    // Consecutive samples under another key are another stream.
    SearchBatch other;
    add_range(&other, 1, f.stream, 0, 100, n, 100, 6);
    CHECK(sorted_rows(backend->search(other)) == fresh_rows(100, 6));
    // ... and key 5 still continues where it stopped.
    SearchBatch resumed;
    add_range(&resumed, 1, f.stream, 0, 100, n, 100, 5);
    const std::vector<Row> continued = sorted_rows(backend->search(resumed));
    CHECK(continued != fresh_rows(100, 5));
    bool reaches_back = false;
    for (const Row& row : continued) reaches_back |= std::get<4>(row) < 100;
    CHECK(reaches_back);
  }
}

TEST_CASE("Streams with different keys in one batch do not interfere", "[streaming][batches]") {
  SplitFixture f;
  const int n = SplitFixture::kN;
  const std::vector<Series> other = random_dims(3, n, 4500);
  // Alone: each stream on its own backend, in batches of 60.
  auto alone = [&](const std::vector<Series>& stream, std::uint64_t key) {
    auto backend = make_cpu_backend(1);
    backend->set_library(f.library);
    std::vector<Row> out;
    for (int at = 0; at < n; at += 60) {
      SearchBatch batch;
      add_range(&batch, 1, stream, 0, at, at + 60, at, key);
      append_rows(&out, backend->search(batch), 0);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  // Together: both in every batch (in alternating order), plus a slice of a
  // profile no pattern has.
  auto backend = make_cpu_backend(2);
  backend->set_library(f.library);
  std::vector<Row> got_a, got_b;
  for (int at = 0; at < n; at += 60) {
    SearchBatch batch;
    const bool swap = (at / 60) % 2 == 1;
    add_range(&batch, 9, other, 0, at, at + 60, at, 77);
    add_range(&batch, 1, swap ? other : f.stream, 0, at, at + 60, at, swap ? 2 : 1);
    add_range(&batch, 1, swap ? f.stream : other, 0, at, at + 60, at, swap ? 1 : 2);
    const SearchResult result = backend->search(batch);
    for (const Match& m : result.matches) CHECK(m.slice != 0);
    append_rows(&got_a, result, swap ? 2 : 1);
    append_rows(&got_b, result, swap ? 1 : 2);
  }
  std::sort(got_a.begin(), got_a.end());
  std::sort(got_b.begin(), got_b.end());
  CHECK(got_a == alone(f.stream, 1));
  CHECK(got_b == alone(other, 2));
}

TEST_CASE("set_library resets the streaming state", "[streaming]") {
  SplitFixture f;
  auto backend = make_cpu_backend(2);
  backend->set_library(f.library);
  SearchBatch first;
  add_range(&first, 1, f.stream, 0, 0, 150, 0, 3);
  backend->search(first);
  SearchBatch second;
  add_range(&second, 1, f.stream, 0, 150, SplitFixture::kN, 150, 3);

  auto continued_backend = make_cpu_backend(2);
  continued_backend->set_library(f.library);
  continued_backend->search(first);
  const std::vector<Row> continued = rows(continued_backend->search(second), 0);

  auto fresh = make_cpu_backend(2);
  fresh->set_library(f.library);
  const std::vector<Row> restarted = rows(fresh->search(second), 0);
  REQUIRE(continued != restarted);

  // The same library again still resets: the state belongs to a library load.
  backend->set_library(f.library);
  CHECK(rows(backend->search(second), 0) == restarted);
}

TEST_CASE("Streaming and window patterns share one library", "[streaming]") {
  const int n = 200;
  const std::vector<Series> stream = random_dims(2, n, 5000);
  const std::vector<Series> query = random_query(2, 16, 5100);
  Pattern window = streaming_pattern(1, query, {{0, 0}, {1, 1}}, kInfinity, kUncapped);
  window.mode = SearchMode::kWindow;
  window.band = 2;
  // Pair (0, 5) reads a stream dim the slice lacks: skipped in both modes.
  const Pattern streaming =
      streaming_pattern(1, query, {{0, 0}, {1, 1}, {0, 5}}, kInfinity, kUncapped);
  auto mixed = std::make_shared<PatternLibrary>();
  mixed->patterns = {window, streaming};
  auto only_streaming = std::make_shared<PatternLibrary>();
  only_streaming->patterns = {streaming};
  auto only_window = std::make_shared<PatternLibrary>();
  only_window->patterns = {window};

  SearchBatch batch;
  add_range(&batch, 1, stream, 0, 0, n, 0, 1);
  auto run = [&](std::shared_ptr<PatternLibrary> library) {
    auto backend = make_cpu_backend(2);
    backend->set_library(library);
    return backend->search(batch);
  };
  const SearchResult both = run(mixed);
  const SearchResult s = run(only_streaming);
  const SearchResult w = run(only_window);
  std::vector<Row> window_part, streaming_part;
  for (const Row& row : rows(both, 0)) {
    Row renumbered = row;
    std::get<0>(renumbered) = 0;
    (std::get<0>(row) == 0 ? window_part : streaming_part).push_back(renumbered);
  }
  CHECK(window_part == rows(w, 0));
  CHECK(streaming_part == rows(s, 0));
  CHECK(streaming_part.size() == 2u * n);
  for (const Match& m : w.matches) CHECK(m.start == m.end - 15);
  for (const Match& m : s.matches) CHECK(m.stream_dim < 2);
  check_every_end(s, 0, 0, only_streaming->patterns[0], stream, 0);
}

}  // namespace
}  // namespace gw::kernels
