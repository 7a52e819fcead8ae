#include "pipeline/library.h"

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
    if (views[v].inputs == channels && view_steps[v] == pc.transforms &&
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
    try {
      known = learned.emplace(key, learn_view_baseline(view, rows.data(), count, rate_hz)).first;
    } catch (const Error& e) {
      throw Error("pattern '" + pc.name + "': example " + example.describe() +
                  ": its wearer's baseline cannot be learned: " + e.what());
    }
  }
  return known->second;
}

}  // namespace

bool same_view_samples(const ChannelView& a, const ChannelView& b) {
  return a.device == b.device && a.raw == b.raw && a.inputs == b.inputs &&
         a.steps == b.steps && a.normalise == b.normalise;
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
    kp.mode =
        pc.mode == config::PatternMode::kStreaming ? kernels::SearchMode::kStreaming
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

}  // namespace gw::pipeline
