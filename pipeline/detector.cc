#include "pipeline/detector.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "common/error.h"
#include "pipeline/baseline.h"

namespace gw::pipeline {

namespace {

// Kernel profile ids of transformed views start above every device id.
constexpr std::uint32_t kFirstViewProfile = 1u << 16;

bool same_steps(const std::vector<config::TransformStep>& a,
                const std::vector<config::TransformStep>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto& x = a[i];
    const auto& y = b[i];
    if (x.kind != y.kind || x.cutoff_hz != y.cutoff_hz || x.window_s != y.window_s ||
        x.power_floor != y.power_floor || x.locomotion_band_hz[0] != y.locomotion_band_hz[0] ||
        x.locomotion_band_hz[1] != y.locomotion_band_hz[1] ||
        x.freeze_band_hz[0] != y.freeze_band_hz[0] || x.freeze_band_hz[1] != y.freeze_band_hz[1])
      return false;
  }
  return true;
}

bool same_kernel_pattern(const kernels::Pattern& a, const kernels::Pattern& b) {
  auto pairs_equal = [](const std::vector<kernels::DimPair>& x,
                        const std::vector<kernels::DimPair>& y) {
    return x.size() == y.size() &&
           std::equal(x.begin(), x.end(), y.begin(), [](const auto& p, const auto& q) {
             return p.pattern_dim == q.pattern_dim && p.stream_dim == q.stream_dim;
           });
  };
  return a.profile == b.profile && a.length == b.length && a.band == b.band && a.znorm == b.znorm &&
         a.mode == b.mode && a.threshold == b.threshold &&
         a.max_matches_per_pair == b.max_matches_per_pair && a.dim_count == b.dim_count &&
         a.dims == b.dims && pairs_equal(a.pairs, b.pairs);
}

// The view a pattern searches: found among `views` or appended. Returns its
// index and the group of each view channel (nr never crosses groups).
std::size_t view_for(const config::PatternConfig& pc, const config::DeviceProfile& device,
                     const std::vector<int>& channels,
                     const std::vector<config::DerivedChannel>& dims,
                     std::vector<ChannelView>& views,
                     std::vector<std::vector<config::TransformStep>>& view_steps,
                     std::vector<std::vector<int>>& view_groups) {
  const bool raw = config::uses_raw_channels(pc.transforms);
  for (std::size_t v = 0; v < views.size(); ++v) {
    if (views[v].device != device.id || views[v].raw != raw) continue;
    if (raw) return v;
    if (views[v].inputs == channels && same_steps(view_steps[v], pc.transforms) &&
        views[v].normalise == pc.normalise)
      return v;
  }
  ChannelView view;
  view.device = device.id;
  view.raw = raw;
  std::vector<int> groups;
  if (raw) {
    view.profile = device.id;
    view.channel_names = device.channels;
    for (std::size_t c = 0; c < device.channels.size(); ++c) {
      int group = 0;
      for (std::size_t g = 0; g < device.groups.size(); ++g)
        if (static_cast<int>(c) >= device.groups[g].first &&
            static_cast<int>(c) <= device.groups[g].last)
          group = static_cast<int>(g);
      groups.push_back(group);
    }
  } else {
    view.profile = kFirstViewProfile + static_cast<std::uint32_t>(views.size());
    view.inputs = channels;
    view.chain =
        std::make_shared<TransformChain>(channels, dims, pc.transforms, device.sample_rate_hz);
    view.steps = pc.transforms;
    view.normalise = pc.normalise;
    view.history = view.chain->history();
    for (const auto& dim : dims) {
      view.channel_names.push_back(dim.name);
      groups.push_back(dim.group);
    }
  }
  views.push_back(std::move(view));
  view_steps.push_back(pc.transforms);
  view_groups.push_back(std::move(groups));
  return views.size() - 1;
}

// The example's pattern values, dim-major (dims x length): its raw values
// through the view's transform chain.
std::vector<float> example_shape(const config::PatternExample& example,
                                 const config::PatternConfig& pc, const ChannelView& view) {
  const auto length = static_cast<std::size_t>(pc.length);
  if (view.raw) {
    if (example.lead_in != 0 || example.raw.size() != pc.channels.size() * length)
      throw Error("pattern '" + pc.name + "': example " + example.describe() +
                  " has the wrong size");
    return example.raw;
  }
  const auto rows = static_cast<std::size_t>(example.lead_in) + length;
  const std::size_t inputs = pc.channels.size();
  if (example.lead_in != view.history || example.raw.size() != inputs * rows)
    throw Error("pattern '" + pc.name + "': example " + example.describe() +
                " does not carry the transforms' lead-in");
  std::vector<float> sample_major(inputs * rows);
  for (std::size_t d = 0; d < inputs; ++d)
    for (std::size_t s = 0; s < rows; ++s) sample_major[s * inputs + d] = example.raw[d * rows + s];
  std::vector<float> out;
  view.chain->apply(sample_major.data(), static_cast<int>(rows), out);
  const auto dims = static_cast<std::size_t>(view.chain->output_channels());
  std::vector<float> shape(dims * length);
  for (std::size_t d = 0; d < dims; ++d)
    for (std::size_t s = 0; s < length; ++s) shape[d * length + s] = out[s * dims + d];
  return shape;
}

// The baseline of a normalised pattern's example: its own, or learned from
// its recording's first rows (once per recording: `learned` keeps them by
// their rows and view).
const config::ChannelBaseline& example_baseline(
    const config::PatternExample& example, const config::PatternConfig& pc,
    const ChannelView& view, double rate_hz,
    std::size_t view_index,
    std::map<std::pair<const std::vector<float>*, std::size_t>, config::ChannelBaseline>& learned) {
  if (example.baseline) {
    if (example.baseline->center.size() != view.channel_names.size() ||
        example.baseline->spread.size() != view.channel_names.size())
      throw Error("pattern '" + pc.name + "': example " + example.describe() +
                  " has a baseline of the wrong size");
    return *example.baseline;
  }
  if (!example.baseline_rows)
    throw Error("pattern '" + pc.name + "' normalises per wearer, but example " +
                example.describe() + " has no baseline of its wearer");
  const std::vector<float>& rows = *example.baseline_rows;
  const auto key = std::make_pair(&rows, view_index);
  auto known = learned.find(key);
  if (known == learned.end()) {
    const auto count = static_cast<int>(rows.size() / view.inputs.size());
    known = learned.emplace(key, learn_view_baseline(view, rows.data(), count, rate_hz)).first;
  }
  return known->second;
}

}  // namespace

bool same_view_samples(const ChannelView& a, const ChannelView& b) {
  return a.device == b.device && a.raw == b.raw && a.inputs == b.inputs &&
         same_steps(a.steps, b.steps) && a.normalise == b.normalise;
}

void view_samples(const ChannelView& view, const float* raw, int rows, int device_channels,
                  std::vector<float>& out) {
  const auto width = static_cast<std::size_t>(device_channels);
  const auto n = static_cast<std::size_t>(std::max(rows, 0));
  if (view.raw) {
    out.insert(out.end(), raw, raw + n * width);
    return;
  }
  const std::size_t channels = view.inputs.size();
  std::vector<float> inputs(n * channels);
  for (std::size_t s = 0; s < n; ++s)
    for (std::size_t c = 0; c < channels; ++c)
      inputs[s * channels + c] = raw[s * width + static_cast<std::size_t>(view.inputs[c])];
  view.chain->apply(inputs.data(), rows, out);
}

CompiledLibrary compile_library(const config::Config& config) {
  CompiledLibrary out;
  auto library = std::make_shared<kernels::PatternLibrary>();
  std::vector<std::vector<config::TransformStep>> view_steps;
  std::vector<std::vector<int>> view_groups;
  std::map<std::pair<const std::vector<float>*, std::size_t>, config::ChannelBaseline>
      learned_baselines;
  for (const auto& pc : config.patterns) {
    const config::DeviceProfile* device = config.device_by_name(pc.device);
    if (!device) throw Error("pattern '" + pc.name + "': unknown device '" + pc.device + "'");
    std::vector<int> channels;
    for (const auto& name : pc.channels) {
      const auto it = std::find(device->channels.begin(), device->channels.end(), name);
      if (it == device->channels.end())
        throw Error("pattern '" + pc.name + "': no channel '" + name + "'");
      channels.push_back(static_cast<int>(it - device->channels.begin()));
    }
    const auto dims = config::derived_channels(*device, channels, pc.transforms);
    const std::size_t v = view_for(pc, *device, channels, dims, out.views, view_steps, view_groups);
    ChannelView& view = out.views[v];
    view.longest_pattern = std::max(view.longest_pattern, pc.length);
    const std::vector<int>& groups = view_groups[v];

    CompiledPattern cp;
    cp.view = v;
    kernels::Pattern kp;
    kp.profile = view.profile;
    kp.length = pc.length;
    kp.band = kernels::band_samples(pc.band, pc.length);
    kp.znorm = pc.znorm;
    kp.mode = pc.mode == config::PatternMode::kStreaming ? kernels::SearchMode::kStreaming
                                                         : kernels::SearchMode::kWindow;
    kp.threshold = static_cast<float>(pc.threshold);
    kp.max_matches_per_pair = config.search.max_matches_per_pair;
    kp.dim_count = static_cast<int>(dims.size());
    const int view_channels = static_cast<int>(view.channel_names.size());
    for (int j = 0; j < kp.dim_count; ++j) {
      const int home = view.raw ? dims[static_cast<std::size_t>(j)].inputs[0] : j;
      cp.home_channel.push_back(home);
      for (int i = std::max(0, home - pc.nr); i <= std::min(view_channels - 1, home + pc.nr); ++i)
        if (groups[static_cast<std::size_t>(i)] == groups[static_cast<std::size_t>(home)])
          kp.pairs.push_back({static_cast<std::uint16_t>(j), static_cast<std::uint16_t>(i)});
    }
    // The kernel pattern equal to `k`, added when there is none yet.
    auto intern = [&library](const kernels::Pattern& k) {
      for (std::size_t i = 0; i < library->patterns.size(); ++i)
        if (same_kernel_pattern(library->patterns[i], k)) return i;
      library->patterns.push_back(k);
      return library->patterns.size() - 1;
    };
    for (const auto& example : pc.examples) {
      kp.dims = example_shape(example, pc, view);
      CompiledExample ce;
      if (view.normalise.enabled) {
        // kp.dims is dim-major: normalise each dim's row as one channel.
        const config::ChannelBaseline& wearer =
            example_baseline(example, pc, view, device->sample_rate_hz, v, learned_baselines);
        for (int j = 0; j < kp.dim_count; ++j)
          apply_baseline({{wearer.center[static_cast<std::size_t>(j)]},
                          {wearer.spread[static_cast<std::size_t>(j)]}},
                         kp.dims.data() + static_cast<std::ptrdiff_t>(j) * pc.length,
                         static_cast<std::size_t>(pc.length));
        ce.baseline = wearer;
      }
      ce.kernel = intern(kp);
      ce.negative = example.negative;
      ce.wearer = example.wearer;
      for (int s = 0; pc.segments >= 2 && s < pc.segments; ++s) {
        const int begin = s * pc.length / pc.segments;
        const int end = (s + 1) * pc.length / pc.segments;
        kernels::Pattern part = kp;
        part.length = end - begin;
        part.band = kernels::band_samples(pc.band, part.length);
        part.threshold =
            static_cast<float>(pc.threshold * std::sqrt(static_cast<double>(part.length) / pc.length));
        part.dims.clear();
        for (int j = 0; j < kp.dim_count; ++j) {
          const auto row = kp.dims.begin() + static_cast<std::ptrdiff_t>(j) * pc.length;
          part.dims.insert(part.dims.end(), row + begin, row + end);
        }
        ce.segments.push_back({intern(part), begin, part.length});
      }
      if (pc.exhaust_factor > 0) {
        kernels::Pattern loose = kp;
        loose.threshold = static_cast<float>(pc.threshold * pc.exhaust_factor);
        if (pc.exhaust_band >= 0) loose.band = kernels::band_samples(pc.exhaust_band, pc.length);
        ce.exhaust_kernel = intern(loose);
      }
      cp.examples.push_back(std::move(ce));
    }
    cp.config = pc;
    for (auto& example : cp.config.examples) example.raw.clear();
    out.patterns.push_back(std::move(cp));
  }
  out.kernel_library = std::move(library);
  return out;
}

namespace {

// The reusable storage of combine_matches and combine_with_exhausting: phase 2
// redoes an example's combination whenever its window's best candidates
// change, so these must not allocate once warm. One per thread (the engine
// runs phase 2 of different slices on its host workers); not reentrant, and
// the functions below never call each other while a scratch is in use except
// where stated.
struct CombineScratch {
  struct Edge {
    int l, r;
    double w;
    const DimCandidate* c;
  };
  std::vector<const DimCandidate*> keyed;  // the candidates, by (pattern dim, stream dim)
  std::vector<const DimCandidate*> best;   // one per (j, i), ascending key
  std::vector<int> left, right;            // distinct pattern dims and stream dims, ascending
  std::vector<Edge> edges;                 // key order: the edges of one left vertex are adjacent
  std::vector<int> first_edge_of_left;     // edges of left l: [first[l], first[l + 1])
  std::vector<int> match_of_left, match_of_right;  // edge index, -1: unmatched
  std::vector<double> dist_left, dist_right;
  std::vector<int> via_right;  // edge that reached the right vertex
  std::vector<int> queue;      // FIFO: queue[queue_head..]
  std::vector<char> queued;
  // combine_with_exhausting's split of the candidates, and its second matching.
  std::vector<DimCandidate> own, loose;
  Combination extra;
};

CombineScratch& combine_scratch() {
  thread_local CombineScratch scratch;
  return scratch;
}

bool key_less(const DimCandidate* a, const DimCandidate* b) {
  return a->pattern_dim != b->pattern_dim ? a->pattern_dim < b->pattern_dim
                                          : a->stream_dim < b->stream_dim;
}

// combine_matches into `out` (its storage reused). Uses scratch's matching
// fields, not own/loose/extra. `out.edges` copies the candidates, so
// `candidates` may live in the scratch's own/loose.
void combine_matches_into(const std::vector<DimCandidate>& candidates,
                          const std::vector<int>& home_channel, double alpha, CombineScratch& s,
                          Combination& out) {
  // One edge per (j, i): its best candidate (lowest distance, then earliest
  // end; of equal ones the first given). Grouped by a stable sort, skipped
  // when the candidates come sorted with distinct keys (PatternTracker's).
  s.keyed.clear();
  for (const DimCandidate& c : candidates) s.keyed.push_back(&c);
  bool sorted_distinct = true;
  for (std::size_t i = 1; i < s.keyed.size() && sorted_distinct; ++i)
    sorted_distinct = key_less(s.keyed[i - 1], s.keyed[i]);
  if (!sorted_distinct) std::stable_sort(s.keyed.begin(), s.keyed.end(), key_less);
  s.best.clear();
  for (const DimCandidate* c : s.keyed) {
    if (!s.best.empty() && !key_less(s.best.back(), c)) {  // same key
      const DimCandidate*& kept = s.best.back();
      if (c->distance < kept->distance || (c->distance == kept->distance && c->end < kept->end))
        kept = c;
      continue;
    }
    s.best.push_back(c);
  }
  s.left.clear();
  s.right.clear();
  for (const DimCandidate* c : s.best) {
    if (s.left.empty() || s.left.back() != c->pattern_dim) s.left.push_back(c->pattern_dim);
    s.right.push_back(c->stream_dim);
  }
  std::sort(s.right.begin(), s.right.end());
  s.right.erase(std::unique(s.right.begin(), s.right.end()), s.right.end());
  s.edges.clear();
  s.first_edge_of_left.clear();
  for (const DimCandidate* c : s.best) {
    if (s.first_edge_of_left.empty() || s.left[s.first_edge_of_left.size() - 1] != c->pattern_dim)
      s.first_edge_of_left.push_back(static_cast<int>(s.edges.size()));
    const int l = static_cast<int>(s.first_edge_of_left.size()) - 1;
    const int r = static_cast<int>(std::lower_bound(s.right.begin(), s.right.end(), c->stream_dim) -
                                   s.right.begin());
    const bool home = c->stream_dim == home_channel[static_cast<std::size_t>(c->pattern_dim)];
    s.edges.push_back({l, r, c->distance * (home ? 1.0 : alpha), c});
  }
  s.first_edge_of_left.push_back(static_cast<int>(s.edges.size()));

  // Successive shortest augmenting paths: each augmentation along a
  // minimum-weight alternating path keeps the matching of minimum weight for
  // its size, and they run until no augmenting path is left (maximum size).
  // Shortest paths by label correction (Bellman-Ford with a queue): the graph
  // has at most k x (2 nr + 1) edges.
  const auto nl = s.left.size(), nr = s.right.size();
  s.match_of_left.assign(nl, -1);
  s.match_of_right.assign(nr, -1);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // Path lengths are sums of weights; a change below this is rounding, not a shorter path.
  constexpr double kTolerance = 1e-12;
  for (;;) {
    s.dist_left.assign(nl, kInf);
    s.dist_right.assign(nr, kInf);
    s.via_right.assign(nr, -1);
    s.queue.clear();
    std::size_t queue_head = 0;
    s.queued.assign(nl, 0);
    for (std::size_t l = 0; l < nl; ++l)
      if (s.match_of_left[l] < 0) {
        s.dist_left[l] = 0;
        s.queue.push_back(static_cast<int>(l));
        s.queued[l] = 1;
      }
    while (queue_head < s.queue.size()) {
      const auto l = static_cast<std::size_t>(s.queue[queue_head++]);
      s.queued[l] = 0;
      for (int e = s.first_edge_of_left[l]; e < s.first_edge_of_left[l + 1]; ++e) {
        if (s.match_of_left[l] == e) continue;
        const CombineScratch::Edge& edge = s.edges[static_cast<std::size_t>(e)];
        const auto r = static_cast<std::size_t>(edge.r);
        const double d = s.dist_left[l] + edge.w;
        if (d < s.dist_right[r] - kTolerance) {
          s.dist_right[r] = d;
          s.via_right[r] = e;
          const int back = s.match_of_right[r];
          if (back >= 0) {  // continue through the matched edge, backwards
            const CombineScratch::Edge& matched = s.edges[static_cast<std::size_t>(back)];
            const auto ml = static_cast<std::size_t>(matched.l);
            const double dl = d - matched.w;
            if (dl < s.dist_left[ml] - kTolerance) {
              s.dist_left[ml] = dl;
              if (!s.queued[ml]) {
                s.queue.push_back(matched.l);
                s.queued[ml] = 1;
              }
            }
          }
        }
      }
    }
    int target = -1;
    for (std::size_t r = 0; r < nr; ++r)
      if (s.match_of_right[r] < 0 && s.dist_right[r] < kInf &&
          (target < 0 || s.dist_right[r] < s.dist_right[static_cast<std::size_t>(target)] - kTolerance))
        target = static_cast<int>(r);
    if (target < 0) break;
    // Flip the path: every edge that reached a right vertex becomes matched.
    int r = target;
    while (r >= 0) {
      const int e = s.via_right[static_cast<std::size_t>(r)];
      const CombineScratch::Edge& edge = s.edges[static_cast<std::size_t>(e)];
      const int previous = s.match_of_left[static_cast<std::size_t>(edge.l)];
      s.match_of_left[static_cast<std::size_t>(edge.l)] = e;
      s.match_of_right[static_cast<std::size_t>(r)] = e;
      r = previous >= 0 ? s.edges[static_cast<std::size_t>(previous)].r : -1;
    }
  }
  out.edges.clear();
  out.distance = 0;
  out.recovered = 0;
  for (std::size_t l = 0; l < nl; ++l) {
    if (s.match_of_left[l] < 0) continue;
    const CombineScratch::Edge& edge = s.edges[static_cast<std::size_t>(s.match_of_left[l])];
    out.edges.push_back(*edge.c);
    out.distance += edge.w;
  }
}

// combine_with_exhausting into `out` (its storage reused).
void combine_with_exhausting_into(const std::vector<DimCandidate>& candidates,
                                  const std::vector<int>& home_channel, double alpha,
                                  CombineScratch& s, Combination& out) {
  const bool any_loose = std::any_of(candidates.begin(), candidates.end(),
                                     [](const DimCandidate& c) { return c.loose; });
  if (!any_loose) return combine_matches_into(candidates, home_channel, alpha, s, out);
  s.own.clear();
  s.loose.clear();
  for (const DimCandidate& c : candidates) (c.loose ? s.loose : s.own).push_back(c);
  combine_matches_into(s.own, home_channel, alpha, s, out);
  if (out.edges.empty() || out.edges.size() >= home_channel.size()) return;
  // Only pattern dims the match misses, on stream dims it leaves free.
  auto used = [&out](const DimCandidate& c) {
    return std::any_of(out.edges.begin(), out.edges.end(), [&c](const DimCandidate& e) {
      return e.pattern_dim == c.pattern_dim || e.stream_dim == c.stream_dim;
    });
  };
  s.loose.erase(std::remove_if(s.loose.begin(), s.loose.end(), used), s.loose.end());
  if (s.loose.empty()) return;
  combine_matches_into(s.loose, home_channel, alpha, s, s.extra);
  const Combination& extra = s.extra;
  out.edges.insert(out.edges.end(), extra.edges.begin(), extra.edges.end());
  std::sort(out.edges.begin(), out.edges.end(), [](const DimCandidate& a, const DimCandidate& b) {
    return a.pattern_dim < b.pattern_dim;
  });
  out.distance += extra.distance;
  out.recovered = static_cast<int>(extra.edges.size());
}

}  // namespace

Combination combine_matches(const std::vector<DimCandidate>& candidates,
                            const std::vector<int>& home_channel, double alpha) {
  Combination out;
  combine_matches_into(candidates, home_channel, alpha, combine_scratch(), out);
  return out;
}

void example_candidates(const CompiledPattern& pattern, const CompiledExample& example,
                        const std::vector<std::vector<DimCandidate>>& by_kernel,
                        std::int64_t first_end, std::vector<DimCandidate>& out) {
  for (const DimCandidate& c : by_kernel[example.kernel])
    if (c.end >= first_end) out.push_back(c);
  const double threshold = pattern.config.threshold;
  const double m = pattern.config.length;
  for (const CompiledExample::Segment& segment : example.segments) {
    const double rest = threshold * threshold * (m - segment.length) / m;
    for (DimCandidate c : by_kernel[segment.kernel]) {
      if (c.end < first_end) continue;
      // The part passed threshold * sqrt(length / m): only rounding can put
      // the partial distance above the threshold.
      c.distance = std::min(threshold, std::sqrt(c.distance * c.distance + rest));
      out.push_back(c);
    }
  }
  if (example.exhaust_kernel == CompiledExample::kNone) return;
  for (DimCandidate c : by_kernel[example.exhaust_kernel]) {
    if (c.end < first_end) continue;
    c.loose = true;
    out.push_back(c);
  }
}

Combination combine_with_exhausting(const std::vector<DimCandidate>& candidates,
                                    const std::vector<int>& home_channel, double alpha) {
  Combination out;
  combine_with_exhausting_into(candidates, home_channel, alpha, combine_scratch(), out);
  return out;
}

namespace {

DecisionSummary summarize_decision(const CompiledPattern& pattern,
                                   const std::vector<ExampleMatch>& per_example, bool euclidean) {
  const config::PatternConfig& pc = pattern.config;
  const int dims = static_cast<int>(pattern.home_channel.size());
  const double unmatched = (euclidean ? 1.0 : pc.alpha) * pc.threshold;
  // Nearest = lowest completed distance; ties: more dims, then the earlier example.
  auto nearer = [](const ExampleMatch& a, const ExampleMatch& b) {
    if (a.completed != b.completed) return a.completed < b.completed;
    return a.combination.edges.size() > b.combination.edges.size();
  };
  DecisionSummary summary;
  for (std::size_t i = 0; i < per_example.size(); ++i) {
    const ExampleMatch& match = per_example[i];
    if (match.example < 0) continue;
    const bool negative = pattern.examples[static_cast<std::size_t>(match.example)].negative;
    int& nearest = negative ? summary.negative : summary.positive;
    if (nearest < 0 || nearer(match, per_example[static_cast<std::size_t>(nearest)]))
      nearest = static_cast<int>(i);
  }
  // An example none matches counts as completed at dims unmatched dims.
  const auto completed = [&](int nearest) {
    return nearest < 0 ? dims * unmatched : per_example[static_cast<std::size_t>(nearest)].completed;
  };
  summary.evidence = completed(summary.negative) - completed(summary.positive);
  if (pc.neighbours > 0) {
    // The k nearest matched examples vote; an example nothing matched does
    // not vote (it lies beyond the threshold on every dim).
    thread_local std::vector<std::pair<double, int>> nearest_first;
    nearest_first.clear();
    for (std::size_t i = 0; i < per_example.size(); ++i)
      if (per_example[i].example >= 0)
        nearest_first.emplace_back(per_example[i].completed, static_cast<int>(i));
    const std::size_t k = std::min(nearest_first.size(), static_cast<std::size_t>(pc.neighbours));
    std::partial_sort(nearest_first.begin(), nearest_first.begin() + static_cast<std::ptrdiff_t>(k),
                      nearest_first.end());
    int votes = 0;
    for (std::size_t n = 0; n < k; ++n) {
      const ExampleMatch& match = per_example[static_cast<std::size_t>(nearest_first[n].second)];
      votes += pattern.examples[static_cast<std::size_t>(match.example)].negative ? -1 : 1;
    }
    summary.evidence = votes;
  }
  if (pc.learned_decision)
    summary.evidence = learned_evidence(*pc.learned_decision, decision_features(pattern, per_example));
  const int needed = euclidean ? dims : pc.min_dims;
  summary.hold =
      summary.positive >= 0 &&
      static_cast<int>(
          per_example[static_cast<std::size_t>(summary.positive)].combination.edges.size()) >=
          needed &&
      summary.evidence >= pc.margin;
  summary.enter = summary.hold && summary.evidence >= pc.margin + pc.hysteresis;
  return summary;
}

bool by_end(const DimCandidate& a, const DimCandidate& b) { return a.end < b.end; }

}  // namespace

DecisionFeatures decision_features(const CompiledPattern& pattern,
                                   const std::vector<ExampleMatch>& per_example) {
  using config::DecisionFeature;
  const config::PatternConfig& pc = pattern.config;
  const bool euclidean = pc.measure == config::Measure::kEuclidean;
  const double dims = static_cast<double>(pattern.home_channel.size());
  const double scale = dims * (euclidean ? 1.0 : pc.alpha) * pc.threshold;
  // Matched examples, nearest first, as (scaled completed distance, negative).
  thread_local std::vector<std::pair<double, bool>> nearest_first;
  nearest_first.clear();
  int positive_dims = 0;
  double nearest_positive = 1;
  for (const ExampleMatch& match : per_example) {
    if (match.example < 0) continue;
    const bool negative = pattern.examples[static_cast<std::size_t>(match.example)].negative;
    const double scaled = std::min(1.0, match.completed / scale);
    nearest_first.emplace_back(scaled, negative);
    if (!negative && scaled < nearest_positive) {
      nearest_positive = scaled;
      positive_dims = static_cast<int>(match.combination.edges.size());
    }
  }
  std::sort(nearest_first.begin(), nearest_first.end());
  // Mean of the `count` nearest of one sign, unmatched ones counting as 1.
  const auto mean_nearest = [&](bool negative, int count) {
    double sum = 0;
    int taken = 0;
    for (const auto& [distance, is_negative] : nearest_first) {
      if (is_negative != negative) continue;
      sum += distance;
      if (++taken == count) break;
    }
    return (sum + (count - taken)) / count;
  };
  DecisionFeatures features{};
  const auto at = [&](DecisionFeature f) -> double& { return features[static_cast<std::size_t>(f)]; };
  at(DecisionFeature::kNearestPositive) = mean_nearest(false, 1);
  at(DecisionFeature::kNearestNegative) = mean_nearest(true, 1);
  at(DecisionFeature::kPositiveMean3) = mean_nearest(false, 3);
  at(DecisionFeature::kNegativeMean3) = mean_nearest(true, 3);
  at(DecisionFeature::kPositiveDims) = dims > 0 ? positive_dims / dims : 0;
  constexpr std::size_t kVoters = 5;
  int votes = 0;
  for (std::size_t n = 0; n < std::min(kVoters, nearest_first.size()); ++n)
    votes += nearest_first[n].second ? -1 : 1;
  at(DecisionFeature::kVote5) = static_cast<double>(votes) / kVoters;
  return features;
}

double learned_evidence(const config::LearnedDecision& decision, const DecisionFeatures& features) {
  double evidence = decision.bias;
  for (std::size_t f = 0; f < features.size(); ++f) evidence += decision.weights[f] * features[f];
  return evidence;
}

bool example_applies(const CompiledExample& example, std::uint32_t wearer) {
  return !example.wearer || *example.wearer == wearer;
}

Decision decide(const CompiledPattern& pattern, const std::vector<ExampleMatch>& per_example) {
  return expand_decision(pattern, per_example, summarize_decision(pattern, per_example));
}

DecisionSummary summarize_decision(const CompiledPattern& pattern,
                                   const std::vector<ExampleMatch>& per_example) {
  return summarize_decision(pattern, per_example,
                            pattern.config.measure == config::Measure::kEuclidean);
}

Decision expand_decision(const CompiledPattern& pattern,
                         const std::vector<ExampleMatch>& per_example,
                         const DecisionSummary& summary) {
  const config::PatternConfig& pc = pattern.config;
  const double unmatched =
      (pc.measure == config::Measure::kEuclidean ? 1.0 : pc.alpha) * pc.threshold;
  const auto nearest = [&](int index) {
    if (index >= 0) return per_example[static_cast<std::size_t>(index)];
    ExampleMatch none;
    none.completed = static_cast<int>(pattern.home_channel.size()) * unmatched;
    return none;
  };
  Decision decision;
  decision.positive = nearest(summary.positive);
  decision.negative = nearest(summary.negative);
  decision.evidence = summary.evidence;
  decision.hold = summary.hold;
  decision.enter = summary.enter;
  return decision;
}

void PatternTracker::PairWindow::push(const DimCandidate& c) {
  if (empty()) {  // restart at the front of the storage
    items.clear();
    head = 0;
  }
  items.push_back(c);
}

void PatternTracker::PairWindow::pop_front() {
  ++head;
  // Keep the storage bounded while the pair never empties: drop the popped
  // prefix once it is most of the vector (amortised O(1) per item).
  if (head >= 32 && 2 * head >= items.size()) {
    items.erase(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(head));
    head = 0;
  }
}

PatternTracker::PairWindow& PatternTracker::ExampleWindows::pair(int pattern_dim, int stream_dim) {
  const auto live_end = pairs.begin() + static_cast<std::ptrdiff_t>(live);
  const auto at = std::lower_bound(pairs.begin(), live_end, std::make_pair(pattern_dim, stream_dim),
                                   [](const PairWindow& w, const std::pair<int, int>& key) {
                                     return std::make_pair(w.pattern_dim, w.stream_dim) < key;
                                   });
  if (at != live_end && at->pattern_dim == pattern_dim && at->stream_dim == stream_dim) return *at;
  // A new pair: a spare one (its storage kept) moved into place.
  const auto index = static_cast<std::size_t>(at - pairs.begin());
  if (live == pairs.size()) pairs.emplace_back();
  PairWindow& spare = pairs[live];
  spare.pattern_dim = pattern_dim;
  spare.stream_dim = stream_dim;
  spare.items.clear();
  spare.head = 0;
  std::rotate(pairs.begin() + static_cast<std::ptrdiff_t>(index),
              pairs.begin() + static_cast<std::ptrdiff_t>(live),
              pairs.begin() + static_cast<std::ptrdiff_t>(live) + 1);
  ++live;
  return pairs[index];
}

bool PatternTracker::ExampleWindows::expire(std::int64_t last_expired_end) {
  if (earliest_front_end > last_expired_end) return false;
  bool popped = false;
  std::size_t kept = 0;
  earliest_front_end = std::numeric_limits<std::int64_t>::max();
  for (std::size_t i = 0; i < live; ++i) {
    PairWindow& window = pairs[i];
    while (!window.empty() && window.front().end <= last_expired_end) {
      window.pop_front();
      popped = true;
    }
    // An empty pair leaves the live range: it would be walked at every change.
    if (window.empty()) continue;
    earliest_front_end = std::min(earliest_front_end, window.front().end);
    if (i != kept) std::swap(pairs[i], pairs[kept]);
    ++kept;
  }
  live = kept;
  return popped;
}

std::vector<PatternTracker::Detection> PatternTracker::update(
    std::vector<std::vector<DimCandidate>> fresh, std::int64_t first_end,
    std::int64_t searched_until, const CompiledPattern& pattern, double sample_rate_hz) {
  std::vector<Detection> alerts;
  update_into(fresh, first_end, searched_until, pattern, sample_rate_hz, alerts);
  return alerts;
}

void PatternTracker::update_into(std::vector<std::vector<DimCandidate>>& fresh,
                                 std::int64_t first_end, std::int64_t searched_until,
                                 const CompiledPattern& pattern, double sample_rate_hz,
                                 std::vector<Detection>& alerts) {
  const config::PatternConfig& pc = pattern.config;
  const bool euclidean = pc.measure == config::Measure::kEuclidean;
  // A candidate ending at c takes part in the windows (t - span, t] with
  // c <= t < c + span: phase 2 pairs dims up to a pattern length apart; the
  // Euclidean baseline needs them at the same end.
  const std::int64_t span = euclidean ? 1 : pc.length;
  // A carer's false mark (a negative scoped to one wearer) stays twice as
  // long: it was cut where the pattern alerted, so the positive matches of
  // the same movement go on a few samples after it, and it must outlast them
  // or the marked movement alerts after all. Shipped negatives keep the
  // pattern's span: held longer they would also answer positives of later,
  // different movements.
  const std::int64_t mark_span = euclidean ? 1 : 2 * pc.length;
  const auto span_of = [&](std::size_t e) {
    const CompiledExample& example = pattern.examples[e];
    return example.negative && example.wearer ? mark_span : span;
  };
  const std::size_t examples = pattern.examples.size();
  windows_.resize(examples);
  if (first_end != searched_until_) active_ = false;  // a gap (or the first search)
  if (active_examples_.size() != examples) {
    active_examples_.resize(examples);
    for (std::size_t e = 0; e < examples; ++e)
      active_examples_[e] = wearer_ ? example_applies(pattern.examples[e], *wearer_)
                                    : !pattern.examples[e].wearer;
  }
  // Inactive examples' candidates are never taken in: their windows stay
  // empty, so they never match.
  const std::vector<char>& active = active_examples_;
  const std::size_t given = std::min(fresh.size(), examples);
  for (std::size_t e = 0; e < given; ++e)
    if (active[e]) std::sort(fresh[e].begin(), fresh[e].end(), by_end);
  // Per example: first fresh match not yet pushed (scratch kept per thread).
  thread_local std::vector<std::size_t> next;
  next.assign(examples, 0);
  // per_example_ and decision_ are functions of the windows' fronts (each
  // pair's best candidate) alone, kept from the last call: only an example
  // whose fronts change is matched again, and the decision is taken again
  // only then (taking an unchanged decision again changes nothing: after it
  // was taken, !hold implies !active_ and enter implies active_).
  if (per_example_.size() != examples) {
    per_example_.assign(examples, ExampleMatch{});
    fresh_state_ = true;
  }
  std::vector<ExampleMatch>& per_example = per_example_;
  DecisionSummary& decision = decision_;
  CombineScratch& scratch = combine_scratch();

  const auto min_duration =
      static_cast<std::int64_t>(std::llround(pc.min_duration_s * sample_rate_hz));
  const auto cooldown = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(std::llround(pc.cooldown_s * sample_rate_hz)));
  std::vector<DimCandidate>& best_per_pair = best_per_pair_;
  // The next window end after t where anything can happen: a fresh candidate
  // arrives, a front may expire, or the running episode may alert. At the
  // ends in between no window, hence no match and no decision, changes, and
  // no alert is due, so they are skipped.
  const auto next_event = [&](std::int64_t t) {
    std::int64_t event = searched_until;
    for (std::size_t e = 0; e < examples; ++e) {
      if (e < given && active[e] && next[e] < fresh[e].size())
        event = std::min(event, fresh[e][next[e]].end);
      const std::int64_t earliest = windows_[e].earliest_front_end;
      if (earliest != std::numeric_limits<std::int64_t>::max())
        event = std::min(event, earliest + span_of(e));
    }
    if (active_) event = std::min(event, std::max(episode_start_ + min_duration, cooldown_until_));
    return std::max(t + 1, event);
  };
  for (std::int64_t t = first_end; t < searched_until; t = next_event(t)) {
    // Slide every (example, pair) window to (t - span, t]: each keeps the
    // candidates that can still become its best (a monotonic queue: distances
    // increase from the front; of equal distances the earlier end stays).
    bool changed = false;
    for (std::size_t e = 0; e < examples; ++e) {
      ExampleWindows& windows = windows_[e];
      bool example_changed = fresh_state_;
      if (e < given && active[e]) {
        const std::vector<DimCandidate>& arrived = fresh[e];
        for (; next[e] < arrived.size() && arrived[next[e]].end <= t; ++next[e]) {
          const DimCandidate& c = arrived[next[e]];
          if (euclidean &&
              c.stream_dim != pattern.home_channel[static_cast<std::size_t>(c.pattern_dim)])
            continue;
          PairWindow& queue = windows.pair(c.pattern_dim, c.stream_dim);
          // Loose (exhausting) candidates rank after the pattern's own ones.
          while (!queue.empty() && std::make_pair(queue.back().loose, queue.back().distance) >
                                       std::make_pair(c.loose, c.distance))
            queue.pop_back();
          if (queue.empty()) {  // c becomes the pair's best
            example_changed = true;
            windows.earliest_front_end = std::min(windows.earliest_front_end, c.end);
          }
          queue.push(c);
        }
      }
      if (windows.expire(t - span_of(e))) example_changed = true;
      if (!example_changed) continue;
      changed = true;
      // Only an example whose window changed needs its matching again.
      best_per_pair.clear();
      for (std::size_t i = 0; i < windows.live; ++i) best_per_pair.push_back(windows.pairs[i].front());
      ExampleMatch& match = per_example[e];
      match.example = -1;
      match.completed = 0;
      if (best_per_pair.empty()) {
        match.combination.edges.clear();
        match.combination.distance = 0;
        match.combination.recovered = 0;
        continue;
      }
      match.example = static_cast<int>(e);
      combine_with_exhausting_into(best_per_pair, pattern.home_channel, pc.alpha, scratch,
                                   match.combination);
      const Combination& combination = match.combination;
      const double unmatched = (euclidean ? 1.0 : pc.alpha) * pc.threshold;
      const auto missing = pattern.home_channel.size() - combination.edges.size();
      match.completed = combination.distance + static_cast<double>(missing) * unmatched;
      // A recovered edge adds at most an unmatched dim's cost.
      if (combination.recovered > 0)
        for (const DimCandidate& e : combination.edges) {
          if (!e.loose) continue;
          const bool home = e.stream_dim == pattern.home_channel[static_cast<std::size_t>(e.pattern_dim)];
          const double weighted = e.distance * (home ? 1.0 : pc.alpha);
          match.completed -= weighted - std::min(weighted, unmatched);
        }
    }
    fresh_state_ = false;
    // At the first end of a search the decision is applied even when no
    // window changed: after a gap (active_ cleared) an episode may re-enter.
    if (changed || (t == first_end && examples > 0)) {
      decision = summarize_decision(pattern, per_example, euclidean);
      if (recording_)
        trace_.push_back({t, decision_features(pattern, per_example), decision.evidence, decision.hold});
      if (active_ && !decision.hold) active_ = false;
      if (!active_ && decision.enter) {
        active_ = true;
        episode_start_ = t;
      }
    }
    if (active_ && t >= episode_start_ + min_duration && t >= cooldown_until_) {
      alerts.push_back({t, expand_decision(pattern, per_example, decision)});
      cooldown_until_ = t + cooldown;
    }
  }
  searched_until_ = searched_until;
}

void PatternTracker::reset() {
  active_examples_.clear();
  windows_.clear();
  per_example_.clear();
  decision_ = DecisionSummary{};
  fresh_state_ = true;
  searched_until_ = -1;
  active_ = false;
  episode_start_ = 0;
  cooldown_until_ = 0;
}

}  // namespace gw::pipeline
