// The history search against a brute-force reference: real Daphnet samples
// recorded through the daemon's recorder into a real SQLite history file,
// searched with the CPU backend, and compared with a full scan that computes
// every window's distance with the reference DTW of kernels/dtw.h.
#include "history/history_search.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "config/config.h"
#include "kernels/dtw.h"
#include "kernels/search.h"
#include "pipeline/baseline.h"
#include "history/history_recorder.h"
#include "sensors/recording.h"
#include "tests/common/temp_dir.h"
#include "tests/history/history_test_support.h"

namespace {

using gw::pipeline::HistoryMatch;
using gw::pipeline::HistoryPattern;
using gw::pipeline::HistoryProgress;
using gw::pipeline::HistorySearchRequest;
using gw::pipeline::HistoryStore;
using gw::sensors::Recording;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kRate = 64;
const std::string kData = GW_DATA_DIR;

const Recording& s02r01() { return gw::test::daphnet("S02R01"); }
const Recording& s03r03() { return gw::test::daphnet("S03R03"); }

// The example windows (S02R01, 1 s into freeze episodes 1 and 2) and where
// the planted copy of the first goes.
constexpr std::size_t kExample0 = 54488, kExample1 = 55841, kLength = 64;
constexpr std::size_t kPlantAt = 47000;  // in wearer 2's stream (S03R03 samples)

std::string config_text() {
  const std::string file = kData + "/daphnet/S02R01.txt";
  auto window = [&](std::size_t start) {
    return "{file: " + file + ", format: daphnet, start: " + std::to_string(start) +
           ", end: " + std::to_string(start + kLength) + "}";
  };
  return R"(
devices:
  - id: 1
    name: body
    kind: generic
    sample_rate_hz: 64
    channels: [ankle_fwd, ankle_vert, ankle_lat, thigh_fwd, thigh_vert, thigh_lat,
               trunk_fwd, trunk_vert, trunk_lat]
    groups:
      - {name: ankle, first: 0, last: 2}
      - {name: thigh, first: 3, last: 5}
      - {name: trunk, first: 6, last: 8}
search: {backend: cpu, threads: 2}
patterns:
  - name: ankle
    device: body
    channels: [ankle_fwd, ankle_vert, ankle_lat]
    threshold: 8
    examples: [)" +
         window(kExample0) + ", " + window(kExample1) + R"(]
    negatives: [)" +
         window(50500) + R"(]
  - name: ankle_nr
    device: body
    channels: [ankle_fwd, ankle_vert, ankle_lat]
    threshold: 8
    nr: 1
    alpha: 1.5
    example: )" +
         window(kExample0) + R"(
  - name: magnitude_lowpass
    device: body
    channels: [ankle_fwd, ankle_vert, ankle_lat, thigh_fwd, thigh_vert, thigh_lat,
               trunk_fwd, trunk_vert, trunk_lat]
    transforms: [magnitude, {kind: lowpass, cutoff_hz: 8}]
    band: 0.2
    nr: 1
    alpha: 1.2
    threshold: 8
    example: )" +
         window(kExample0) + R"(
  - name: magnitude_normalised
    device: body
    channels: [ankle_fwd, ankle_vert, ankle_lat, thigh_fwd, thigh_vert, thigh_lat,
               trunk_fwd, trunk_vert, trunk_lat]
    transforms: [magnitude, {kind: lowpass, cutoff_hz: 8}]
    normalise: {learn_s: 4, statistic: median, scale: std}
    band: 0.2
    threshold: 8
    example: )" +
         window(kExample0) + R"(
  - name: streaming
    device: body
    channels: [ankle_vert]
    mode: streaming
    threshold: 8
    example: )" +
         window(kExample0) + "\n";
}

// A contiguous run of one wearer's stream: recording samples [begin, end),
// sample s at device time s / 64 (the frames' clock is exact).
struct Piece {
  std::uint32_t wearer;
  const Recording* rec;
  std::size_t begin, end;
  bool relearns;  // a normalised pattern learns the wearer's baseline again here
};

// A history of two wearers: S02R01 50000..52000 as wearer 1, S03R03
// 45000..47994 as wearer 2 with one 6-sample frame lost in the middle; with
// `restart`, wearer 2's device restarts where the frame was lost.
struct Fixture {
  gw::test::TempDir dir{"gw_history_search"};
  gw::config::Config config;
  std::string path = dir.file("history.db");
  Recording planted;  // S03R03, with the copy of example 0 when asked for
  std::vector<Piece> pieces;

  // `chunk_s`: the history's chunk length.
  explicit Fixture(bool plant = false, double chunk_s = 2.0, bool restart = false)
      : planted(s03r03()) {
    config = gw::config::parse_config(config_text(), "history_search_test.yaml", kData);
    if (plant) {
      const std::size_t c = planted.channels();
      for (std::size_t s = 0; s < kLength; ++s)
        for (std::size_t d = 0; d < c; ++d)
          planted.values[(kPlantAt + s) * c + d] = s02r01().at(kExample0 + s, d);
    }
    auto options = gw::test::test_history_options(path, chunk_s);  // 2 s: 128-sample chunks
    gw::pipeline::HistoryRecorder recorder(options);
    gw::test::record(recorder, gw::test::frames_of(s02r01(), 1, 1, 50000, 52000, 6, 0, 0, true));
    auto frames = gw::test::frames_of(planted, 2, 1, 45000, 47994, 6, 0, 0, true);
    frames.erase(frames.begin() + 250);  // samples 46500 .. 46505
    if (restart) {
      gw::test::record(recorder, {frames.begin(), frames.begin() + 250});
      recorder.append(frames[250], gw::pipeline::FrameVerdict::kRestarted, 1000);
      gw::test::record(recorder, {frames.begin() + 251, frames.end()});
    } else {
      gw::test::record(recorder, frames);
    }
    recorder.stop();
    REQUIRE(recorder.counters().samples_written == 2000 + 2994 - 6);
    // Each stream's first run relearns, as a daemon that starts learns afresh.
    pieces = {{1, &s02r01(), 50000, 52000, true},
              {2, &planted, 45000, 46500, true},
              {2, &planted, 46506, 47994, restart}};
  }
};

// ---------------------------------------------------------------- reference

struct RefWindow {
  double distance;
  std::uint32_t wearer;
  double t_end, t_start;
  std::size_t piece;
  std::int64_t end;  // raw index in the piece
  int example;
};

// Every window of every piece, its distance the definition of
// history_search.h computed from scratch: reference DTW per (example, pair),
// the best assignment of pattern dims to view channels by enumeration. A
// normalised pattern's wearer baseline is learned from the wearer's view
// samples from `from` on, across its pieces in order, afresh at a piece that
// relearns; windows ending before the last sample learned from are left out,
// the others normalised.
std::vector<RefWindow> brute_force(const HistoryPattern& hp, const std::vector<Piece>& pieces,
                                   double from, double to) {
  struct Learning {
    gw::pipeline::BaselineLearner learner;
    gw::config::ChannelBaseline baseline;
    std::size_t piece = 0;
    std::int64_t learned_at = -1;  // raw index in `piece` after the last learned sample
  };
  std::map<std::uint32_t, Learning> learning;
  const auto& view = hp.view();
  const auto& cp = hp.pattern();
  const int m = hp.length();
  const int dims = static_cast<int>(cp.home_channel.size());
  std::vector<const gw::kernels::Pattern*> examples;
  for (const auto& e : cp.examples)
    if (!e.negative) examples.push_back(&hp.library.kernel_library->patterns[e.kernel]);
  std::vector<RefWindow> out;
  for (std::size_t p = 0; p < pieces.size(); ++p) {
    const Piece& piece = pieces[p];
    const int n = static_cast<int>(piece.end - piece.begin);
    const int channels = static_cast<int>(piece.rec->channels());
    std::vector<float> view_values;
    gw::pipeline::view_samples(view, &piece.rec->values[piece.begin * piece.rec->channels()], n,
                               channels, view_values);
    const int rows = n - view.history;
    const int width = static_cast<int>(view.channel_names.size());
    std::int64_t first_raw_end = 0;
    if (view.normalise.enabled) {
      auto [it, added] = learning.try_emplace(piece.wearer);
      Learning& l = it->second;
      if (added || piece.relearns) {
        l = Learning{};
        l.learner = gw::pipeline::BaselineLearner(view.normalise, width, kRate);
      }
      if (l.learned_at < 0) {
        int t = 0;  // the first view sample at or after `from`
        while (t < rows && static_cast<double>(piece.begin + t + view.history) / kRate < from) ++t;
        if (t < rows) {
          const int read = l.learner.add(&view_values[static_cast<std::size_t>(t * width)], rows - t);
          if (l.learner.learned()) {
            l.baseline = l.learner.finish();
            l.piece = p;
            l.learned_at = t + read + view.history;
          }
        }
        if (l.learned_at < 0) continue;  // no window of this piece is searched
      }
      gw::pipeline::apply_baseline(l.baseline, view_values.data(), static_cast<std::size_t>(std::max(rows, 0)));
      if (l.piece == p) first_raw_end = l.learned_at;
    }
    if (rows < m) continue;
    std::vector<std::vector<float>> series(static_cast<std::size_t>(width));
    for (int c = 0; c < width; ++c)
      for (int s = 0; s < rows; ++s)
        series[static_cast<std::size_t>(c)].push_back(
            view_values[static_cast<std::size_t>(s * width + c)]);
    // d[example][j][i][end - (m - 1)]
    std::vector<std::vector<std::vector<std::vector<double>>>> d(examples.size());
    for (std::size_t e = 0; e < examples.size(); ++e) {
      const auto& kp = *examples[e];
      d[e].assign(static_cast<std::size_t>(dims),
                  std::vector<std::vector<double>>(static_cast<std::size_t>(width)));
      for (const auto& pair : kp.pairs)
        d[e][pair.pattern_dim][pair.stream_dim] = gw::kernels::sliding_dtw_reference(
            &kp.dims[static_cast<std::size_t>(pair.pattern_dim) * m], m,
            series[pair.stream_dim].data(), rows, m - 1, kp.band, kp.znorm);
    }
    for (int t = m - 1; t < rows; ++t) {
      const std::int64_t raw_end = t + view.history;
      if (raw_end < first_raw_end) continue;
      const double t_end = static_cast<double>(piece.begin + raw_end) / kRate;
      const double t_start = static_cast<double>(piece.begin + raw_end - m + 1) / kRate;
      if (t_start < from || t_end >= to) continue;
      double best = kInf;
      int best_example = -1;
      for (std::size_t e = 0; e < examples.size(); ++e) {
        double assignment = kInf;
        std::vector<bool> used(static_cast<std::size_t>(width), false);
        std::function<void(int, double)> assign = [&](int j, double sum) {
          if (j == dims) {
            assignment = std::min(assignment, sum);
            return;
          }
          for (int i = 0; i < width; ++i) {
            const auto& column = d[e][static_cast<std::size_t>(j)][static_cast<std::size_t>(i)];
            if (column.empty() || used[static_cast<std::size_t>(i)]) continue;
            const double f =
                i == cp.home_channel[static_cast<std::size_t>(j)] ? 1.0 : cp.config.alpha;
            used[static_cast<std::size_t>(i)] = true;
            assign(j + 1, sum + f * column[static_cast<std::size_t>(t - (m - 1))]);
            used[static_cast<std::size_t>(i)] = false;
          }
        };
        assign(0, 0.0);
        if (assignment < best) best = assignment, best_example = static_cast<int>(e);
      }
      out.push_back({best, piece.wearer, t_end, t_start, p, raw_end, best_example});
    }
  }
  return out;
}

// The greedy top k with the exclusion zone of history_search.h.
std::vector<RefWindow> top_k(std::vector<RefWindow> all, int k, int zone) {
  std::sort(all.begin(), all.end(), [](const RefWindow& a, const RefWindow& b) {
    return std::tie(a.distance, a.wearer, a.t_end, a.example) <
           std::tie(b.distance, b.wearer, b.t_end, b.example);
  });
  std::vector<RefWindow> taken;
  for (const auto& w : all) {
    if (static_cast<int>(taken.size()) == k) break;
    const bool excluded = std::any_of(taken.begin(), taken.end(), [&](const RefWindow& o) {
      if (o.wearer != w.wearer) return false;
      if (o.piece == w.piece) return std::llabs(o.end - w.end) <= zone;
      return std::abs(o.t_end - w.t_end) * kRate <= zone + 1e-6;
    });
    if (!excluded) taken.push_back(w);
  }
  return taken;
}

void require_same(const std::vector<HistoryMatch>& found, const std::vector<RefWindow>& expected) {
  REQUIRE(found.size() == expected.size());
  for (std::size_t r = 0; r < found.size(); ++r) {
    INFO("rank " << r + 1);
    CHECK(found[r].wearer == expected[r].wearer);
    CHECK(found[r].device == 1);
    CHECK(found[r].t_end == Approx(expected[r].t_end).margin(1e-9));
    CHECK(found[r].t_start == Approx(expected[r].t_start).margin(1e-9));
    CHECK(found[r].distance == Approx(expected[r].distance).epsilon(1e-4).margin(1e-5));
    CHECK(found[r].example == expected[r].example);
  }
}

gw::pipeline::HistorySearchResult search(const Fixture& fx, const HistoryPattern& pattern,
                                         HistorySearchRequest request,
                                         const gw::pipeline::HistoryProgressFn& progress = {},
                                         const gw::pipeline::HistoryCancelFn& cancel = {}) {
  const HistoryStore store(fx.path, /*read_only=*/true);
  auto backend = gw::kernels::make_cpu_backend(2);
  return gw::pipeline::search_history(store, pattern, *backend, request, progress, cancel);
}

}  // namespace

TEST_CASE("history search: top k equals the brute-force scan, for every slicing",
          "[pipeline][history]") {
  Fixture fx;
  const std::string name = GENERATE(as<std::string>{}, "ankle", "ankle_nr", "magnitude_lowpass");
  INFO("pattern " << name);
  const HistoryPattern pattern = gw::pipeline::history_pattern_from_config(fx.config, name);
  const int k = 8;
  const auto expected = top_k(brute_force(pattern, fx.pieces, -kInf, kInf), k, kLength / 2);
  REQUIRE(expected.size() == static_cast<std::size_t>(k));

  for (const std::size_t slice : {std::size_t{1} << 18, std::size_t{300}}) {
    INFO("slice_samples " << slice);
    HistorySearchRequest request;
    request.k = k;
    request.slice_samples = slice;
    const auto result = search(fx, pattern, request);
    CHECK_FALSE(result.cancelled);
    CHECK(result.exclusion_samples == 32);
    CHECK(result.warnings.empty());
    require_same(result.matches, expected);
    // Per-dim details: every pattern dim once, the sum of f * d is the distance.
    for (const auto& match : result.matches) {
      REQUIRE(match.dims.size() == pattern.pattern().home_channel.size());
      double sum = 0;
      for (const auto& dim : match.dims)
        sum += (dim.switched ? pattern.pattern().config.alpha : 1.0) * dim.distance;
      CHECK(sum == Approx(match.distance).epsilon(1e-9));
    }
  }
}

TEST_CASE("history search: wearers and a time range restrict the windows", "[pipeline][history]") {
  Fixture fx;
  const HistoryPattern pattern = gw::pipeline::history_pattern_from_config(fx.config, "ankle");
  HistorySearchRequest request;
  request.k = 5;
  request.wearers = {2};
  // Across the lost frame of wearer 2 (46500 .. 46505 at 64 Hz).
  request.from = 46400 / kRate;
  request.to = 46700 / kRate;
  const auto result = search(fx, pattern, request);
  std::vector<Piece> wearer2(fx.pieces.begin() + 1, fx.pieces.end());
  const auto expected = top_k(brute_force(pattern, wearer2, request.from, request.to), 5, 32);
  REQUIRE_FALSE(expected.empty());
  require_same(result.matches, expected);
  for (const auto& m : result.matches) {
    CHECK(m.wearer == 2);
    CHECK(m.t_start >= request.from);
    CHECK(m.t_end < request.to);
    // No window spans the lost frame.
    CHECK((m.t_end < 46500 / kRate || m.t_start >= 46506 / kRate));
  }
}

TEST_CASE("history search: results keep the exclusion zone and rank by distance",
          "[pipeline][history]") {
  Fixture fx;
  const HistoryPattern pattern = gw::pipeline::history_pattern_from_config(fx.config, "ankle");
  HistorySearchRequest request;
  request.k = 20;
  const auto result = search(fx, pattern, request);
  REQUIRE(result.matches.size() == 20);
  for (std::size_t a = 0; a < result.matches.size(); ++a) {
    if (a > 0) CHECK(result.matches[a - 1].distance <= result.matches[a].distance);
    for (std::size_t b = a + 1; b < result.matches.size(); ++b) {
      const auto& x = result.matches[a];
      const auto& y = result.matches[b];
      if (x.wearer == y.wearer) CHECK(std::abs(x.t_end - y.t_end) * kRate > 32);
    }
  }
}

TEST_CASE("history search: a planted copy of the example is found first, at distance ~0",
          "[pipeline][history]") {
  Fixture fx(/*plant=*/true);
  const HistoryPattern pattern = gw::pipeline::history_pattern_from_config(fx.config, "ankle");
  HistorySearchRequest request;
  request.k = 3;
  const auto result = search(fx, pattern, request);
  REQUIRE(result.matches.size() == 3);
  const auto& first = result.matches[0];
  CHECK(first.wearer == 2);
  CHECK(first.example == 0);
  CHECK(first.t_start == Approx(kPlantAt / kRate).margin(1e-9));
  CHECK(first.t_end == Approx((kPlantAt + kLength - 1) / kRate).margin(1e-9));
  CHECK(first.distance < 1e-3);
  CHECK(result.matches[1].distance > 1.0);  // nothing else is a copy

  // The same window given as (recording, range, channels) instead of by name.
  const Recording example = s02r01()
                                .slice(kExample0, kExample0 + kLength)
                                .select({"ankle_fwd", "ankle_vert", "ankle_lat"});
  const HistoryPattern by_example = gw::pipeline::history_pattern_from_example(
      fx.config, "body", example, {/*band=*/0.1, /*znorm=*/true, /*nr=*/0, /*alpha=*/1.0});
  const auto again = search(fx, by_example, request);
  require_same(again.matches, top_k(brute_force(by_example, fx.pieces, -kInf, kInf), 3, 32));
  REQUIRE_FALSE(again.matches.empty());
  CHECK(again.matches[0].t_start == Approx(first.t_start).margin(1e-9));
  CHECK(again.matches[0].distance < 1e-3);
}

TEST_CASE("history search: a normalised pattern learns each wearer's baseline from the range's start",
          "[pipeline][history]") {
  // Chunks of 2 s, and of 0.25 s: shorter than the transforms' history plus
  // a window, so that a run's first chunks hold no window but samples to
  // learn from.
  const double chunk_s = GENERATE(2.0, 0.25);
  INFO("chunks of " << chunk_s << " s");
  Fixture fx(/*plant=*/false, chunk_s);
  const HistoryPattern pattern = gw::pipeline::history_pattern_from_config(fx.config, "magnitude_normalised");
  REQUIRE(pattern.view().normalise.enabled);
  // The whole history, then a range from 100 samples before wearer 2's lost
  // frame: its learning starts there and goes on after the gap, in the
  // stream's next run (wearer 1's history lies after it all).
  for (const auto& [from, to] :
       std::vector<std::pair<double, double>>{{-kInf, kInf}, {46400 / kRate, kInf}}) {
    const auto expected = top_k(brute_force(pattern, fx.pieces, from, to), 6, 32);
    REQUIRE(expected.size() == 6);
    for (const std::size_t slice : {std::size_t{128}, std::size_t{1} << 18}) {
      INFO("from " << from << ", slices of " << slice);
      HistorySearchRequest request;
      request.k = 6;
      request.from = from;
      request.to = to;
      request.slice_samples = slice;
      require_same(search(fx, pattern, request).matches, expected);
    }
    // Each wearer has windows in the range, wearer 2's only after its
    // baseline was learned across the lost frame.
    const auto everything = brute_force(pattern, fx.pieces, from, to);
    CHECK(std::any_of(everything.begin(), everything.end(), [](const RefWindow& w) { return w.wearer == 1; }));
    CHECK(std::any_of(everything.begin(), everything.end(), [](const RefWindow& w) { return w.wearer == 2; }));
    if (from > 0)
      CHECK(std::none_of(everything.begin(), everything.end(),
                         [](const RefWindow& w) { return w.wearer == 2 && w.piece == 1; }));
  }
  // Learned from 4 s at each wearer's start, nothing ends in those 4 s: no
  // window of wearer 1 ends before sample 50000 + the lowpass's history +
  // 256.
  HistorySearchRequest all;
  all.k = 200;
  for (const auto& match : search(fx, pattern, all).matches)
    if (match.wearer == 1) CHECK(match.t_end * kRate >= 50000 + pattern.view().history + 256 - 1e-6);
}

// A device restart: the daemon's engine learns the stream's baseline again,
// and the history records that its run relearns, so the search does too.
TEST_CASE("history search: a device restart in the range learns the baseline again",
          "[pipeline][history]") {
  const double chunk_s = GENERATE(2.0, 0.25);
  INFO("chunks of " << chunk_s << " s");
  Fixture restarted(/*plant=*/false, chunk_s, /*restart=*/true);
  Fixture gap(/*plant=*/false, chunk_s, /*restart=*/false);
  {
    const gw::pipeline::HistoryStore store(restarted.path, /*read_only=*/true);
    const auto chunks = store.list_chunks(2, 1, -kInf, kInf);
    REQUIRE(chunks.size() >= 2);
    CHECK(chunks.front().run_relearns);
    CHECK(chunks.back().run_relearns);
    CHECK(chunks.front().run != chunks.back().run);
    const gw::pipeline::HistoryStore gap_store(gap.path, /*read_only=*/true);
    CHECK_FALSE(gap_store.list_chunks(2, 1, -kInf, kInf).back().run_relearns);
  }
  const HistoryPattern pattern =
      gw::pipeline::history_pattern_from_config(restarted.config, "magnitude_normalised");
  for (const double from : {-kInf, 46400 / kRate}) {
    INFO("from " << from);
    const auto expected = brute_force(pattern, restarted.pieces, from, kInf);
    HistorySearchRequest request;
    request.k = 200;  // every window apart, those after the restart among them
    request.from = from;
    request.slice_samples = 128;
    const auto found = search(restarted, pattern, request).matches;
    require_same(found, top_k(expected, 200, 32));
    // After the restart no window ends before 4 s of samples were learned
    // again; across a mere gap the learning goes on, and windows end sooner.
    const auto restart_end = [](const std::vector<RefWindow>& windows) {
      std::int64_t first = std::numeric_limits<std::int64_t>::max();
      for (const RefWindow& w : windows)
        if (w.wearer == 2 && w.piece == 2) first = std::min(first, w.end);
      return first;
    };
    const std::int64_t learned = static_cast<std::int64_t>(4 * kRate) + pattern.view().history;
    CHECK(restart_end(expected) >= learned);
    bool after_restart = false;
    for (const auto& match : found) {
      if (match.wearer != 2 || match.t_end * kRate < 46506) continue;
      after_restart = true;
      CHECK(match.t_end * kRate >= 46506 + learned - 1e-6);
    }
    CHECK(after_restart);
    if (from < 0) CHECK(restart_end(brute_force(pattern, gap.pieces, from, kInf)) < learned);
  }
}

TEST_CASE("history search: progress is monotone and reaches 1 with every window searched",
          "[pipeline][history]") {
  Fixture fx;
  const HistoryPattern pattern = gw::pipeline::history_pattern_from_config(fx.config, "ankle");
  HistorySearchRequest request;
  request.slice_samples = 256;
  std::vector<HistoryProgress> seen;
  const auto result =
      search(fx, pattern, request, [&](const HistoryProgress& p) { seen.push_back(p); });
  REQUIRE(seen.size() >= 10);
  for (std::size_t i = 1; i < seen.size(); ++i) {
    CHECK(seen[i].fraction >= seen[i - 1].fraction);
    CHECK(seen[i].windows >= seen[i - 1].windows);
    CHECK(seen[i].samples >= seen[i - 1].samples);
  }
  CHECK(seen.back().fraction == 1.0);
  CHECK(seen.back().samples == seen.back().samples_total);
  CHECK(seen.back().samples_total == 2000 + 2994 - 6);
  // A window ends at every sample from the m-th of each run on.
  std::uint64_t windows = 0;
  for (const auto& piece : fx.pieces) windows += piece.end - piece.begin - (kLength - 1);
  CHECK(seen.back().windows == windows);
  CHECK(result.progress.windows == windows);
  CHECK(result.slices == seen.size());

  // An empty range is done at once.
  request.from = 1e9;
  seen.clear();
  const auto empty =
      search(fx, pattern, request, [&](const HistoryProgress& p) { seen.push_back(p); });
  CHECK(empty.matches.empty());
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].fraction == 1.0);
  CHECK(seen[0].samples_total == 0);
}

TEST_CASE("history search: cancellation stops between slices and says so", "[pipeline][history]") {
  Fixture fx;
  const HistoryPattern pattern = gw::pipeline::history_pattern_from_config(fx.config, "ankle");
  HistorySearchRequest request;
  request.slice_samples = 256;
  int reports = 0;
  double last_fraction = 0;
  const auto result = search(
      fx, pattern, request,
      [&](const HistoryProgress& p) {
        ++reports;
        last_fraction = p.fraction;
      },
      [&] { return reports >= 2; });
  CHECK(result.cancelled);
  CHECK(reports == 2);
  CHECK(result.slices == 2);
  CHECK(last_fraction < 1.0);
  CHECK(result.progress.samples < result.progress.samples_total);
  CHECK(result.progress.fraction == last_fraction);
}

TEST_CASE("history search: chunks deleted during the search are skipped with a warning",
          "[pipeline][history]") {
  Fixture fx;
  const HistoryPattern pattern = gw::pipeline::history_pattern_from_config(fx.config, "ankle");
  HistorySearchRequest request;
  request.slice_samples = 256;
  HistoryProgress last;
  bool deleted = false;
  const auto result = search(fx, pattern, request, [&](const HistoryProgress& p) {
    last = p;
    if (deleted) return;
    // Retention, from another connection, between two slices: every chunk goes.
    HistoryStore writer(fx.path);
    CHECK(writer.delete_received_before(kInf) > 0);
    deleted = true;
  });
  CHECK_FALSE(result.cancelled);
  CHECK(last.fraction == 1.0);
  REQUIRE_FALSE(result.warnings.empty());
  CHECK_THAT(result.warnings.front(), Catch::Contains("is gone"));
  // What the first slice held is still ranked.
  CHECK_FALSE(result.matches.empty());
  CHECK(result.chunks < 40);
}

TEST_CASE("history search: streaming patterns and unknown names are refused",
          "[pipeline][history]") {
  const auto config = gw::config::parse_config(config_text(), "history_search_test.yaml", kData);
  CHECK_THROWS_WITH(gw::pipeline::history_pattern_from_config(config, "streaming"),
                    Catch::Contains("window-mode"));
  CHECK_THROWS_WITH(gw::pipeline::history_pattern_from_config(config, "nope"),
                    Catch::Contains("no pattern 'nope'") && Catch::Contains("ankle_nr"));
  const Recording wrong_rate = gw::sensors::read_gaitpdb(kData + "/gaitpdb/GaCo01_01.txt");
  CHECK_THROWS_WITH(gw::pipeline::history_pattern_from_example(
                        config, "body", wrong_rate.slice(0, 50).select({"L1"}), {}),
                    Catch::Contains("Hz"));
}
