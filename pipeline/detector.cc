#include "pipeline/detector.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "common/error.h"

namespace gw::pipeline {

int CompiledLibrary::max_length_for(std::uint16_t device) const {
  int longest = 0;
  for (std::size_t p = 0; p < patterns.size(); ++p)
    if (kernel_library->patterns[p].profile == device)
      longest = std::max(longest, kernel_library->patterns[p].length);
  return longest;
}

namespace {

// The channel range [first, last] of the group holding `channel`.
std::pair<int, int> group_of(const config::DeviceProfile& device, int channel) {
  for (const auto& g : device.groups)
    if (channel >= g.first && channel <= g.last) return {g.first, g.last};
  return {0, static_cast<int>(device.channels.size()) - 1};
}

}  // namespace

CompiledLibrary compile_library(const config::Config& config) {
  CompiledLibrary out;
  auto library = std::make_shared<kernels::PatternLibrary>();
  for (const auto& pc : config.patterns) {
    const config::DeviceProfile* device = config.device_by_name(pc.device);
    if (!device) throw Error("pattern '" + pc.name + "': unknown device '" + pc.device + "'");
    kernels::Pattern kp;
    kp.profile = device->id;
    kp.length = pc.length;
    kp.band = static_cast<int>(std::floor(pc.band * pc.length));
    if (kp.band >= kp.length) kp.band = kp.length - 1;
    kp.znorm = pc.znorm;
    kp.mode = pc.mode == "streaming" ? kernels::SearchMode::kStreaming : kernels::SearchMode::kWindow;
    kp.threshold = static_cast<float>(pc.threshold);
    kp.max_matches_per_pair = config.search.max_matches_per_pair;
    kp.dim_count = static_cast<int>(pc.channels.size());
    kp.dims = pc.shape;
    if (kp.dims.size() != static_cast<std::size_t>(kp.dim_count) * kp.length)
      throw Error("pattern '" + pc.name + "': shape has the wrong size");
    std::vector<int> homes;
    for (int j = 0; j < kp.dim_count; ++j) {
      const auto& names = device->channels;
      const auto it = std::find(names.begin(), names.end(), pc.channels[j]);
      if (it == names.end())
        throw Error("pattern '" + pc.name + "': no channel '" + pc.channels[j] + "'");
      const int home = static_cast<int>(it - names.begin());
      homes.push_back(home);
      const auto [first, last] = group_of(*device, home);
      for (int i = std::max(first, home - pc.nr); i <= std::min(last, home + pc.nr); ++i)
        kp.pairs.push_back({static_cast<std::uint16_t>(j), static_cast<std::uint16_t>(i)});
    }
    library->patterns.push_back(std::move(kp));
    out.home_channel.push_back(std::move(homes));
    out.patterns.push_back(pc);
  }
  out.kernel_library = std::move(library);
  return out;
}

Combination combine_matches(const std::vector<DimCandidate>& window_candidates,
                            const std::vector<int>& home_channel, double alpha) {
  std::map<std::pair<int, int>, DimCandidate> best;
  for (const auto& c : window_candidates) {
    auto [it, inserted] = best.try_emplace({c.pattern_dim, c.stream_dim}, c);
    if (!inserted && (c.distance < it->second.distance ||
                      (c.distance == it->second.distance && c.end < it->second.end)))
      it->second = c;
  }
  struct Edge {
    double weighted;
    DimCandidate c;
  };
  std::vector<Edge> edges;
  edges.reserve(best.size());
  for (const auto& [key, c] : best) {
    const bool same_dim = c.stream_dim == home_channel[static_cast<std::size_t>(c.pattern_dim)];
    edges.push_back({c.distance * (same_dim ? 1.0 : alpha), c});
  }
  // Map order makes the sort stable over (j, i) for equal weights: deterministic.
  std::stable_sort(edges.begin(), edges.end(),
                   [](const Edge& a, const Edge& b) { return a.weighted < b.weighted; });
  Combination out;
  std::vector<int> used_pattern_dims, used_stream_dims;
  for (const auto& e : edges) {
    if (std::count(used_pattern_dims.begin(), used_pattern_dims.end(), e.c.pattern_dim) ||
        std::count(used_stream_dims.begin(), used_stream_dims.end(), e.c.stream_dim))
      continue;
    used_pattern_dims.push_back(e.c.pattern_dim);
    used_stream_dims.push_back(e.c.stream_dim);
    out.edges.push_back(e.c);
    out.distance += e.weighted;
  }
  return out;
}

std::vector<std::pair<std::int64_t, Combination>> PatternTracker::update(
    std::vector<DimCandidate> fresh, std::int64_t searched_until,
    const config::PatternConfig& pattern, const std::vector<int>& home_channel,
    double sample_rate_hz) {
  std::vector<std::pair<std::int64_t, Combination>> alerts;
  const std::int64_t m = pattern.length;
  std::sort(fresh.begin(), fresh.end(), [](const DimCandidate& a, const DimCandidate& b) {
    return a.end < b.end;
  });
  std::vector<std::int64_t> ends;
  for (const auto& c : fresh) ends.push_back(c.end);
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  // fresh ends are all later than anything in history_: appending keeps it sorted.
  history_.insert(history_.end(), fresh.begin(), fresh.end());

  const auto cooldown = static_cast<std::int64_t>(std::llround(pattern.cooldown_s * sample_rate_hz));
  std::vector<DimCandidate> in_window;
  for (const std::int64_t t : ends) {
    if (t < cooldown_until_) continue;
    in_window.clear();
    const auto from = std::lower_bound(
        history_.begin(), history_.end(), t - m + 1,
        [](const DimCandidate& c, std::int64_t end) { return c.end < end; });
    for (auto it = from; it != history_.end() && it->end <= t; ++it) in_window.push_back(*it);
    Combination combination = combine_matches(in_window, home_channel, pattern.alpha);
    if (static_cast<int>(combination.edges.size()) >= pattern.min_dims) {
      alerts.emplace_back(t, std::move(combination));
      cooldown_until_ = t + std::max<std::int64_t>(cooldown, 1);
    }
  }
  // Later window ends are >= searched_until, so older candidates can no longer be in a window.
  const std::int64_t keep_from = searched_until - m + 1;
  history_.erase(history_.begin(),
                 std::lower_bound(history_.begin(), history_.end(), keep_from,
                                  [](const DimCandidate& c, std::int64_t end) { return c.end < end; }));
  return alerts;
}

void PatternTracker::reset() {
  history_.clear();
  cooldown_until_ = 0;
}

}  // namespace gw::pipeline
