#include "pipeline/alignment.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "common/error.h"
#include "kernels/dtw.h"
#include "pipeline/baseline.h"
#include "pipeline/library.h"
#include "pipeline/marks.h"

namespace gw::pipeline {

Alignment dtw_alignment(const float* query, const float* window, int m, int band, bool znorm) {
  Alignment out;
  if (znorm) {
    out.query = kernels::znormalize(query, m);
    out.window = kernels::znormalize(window, m);
  } else {
    out.query.assign(query, query + m);
    out.window.assign(window, window + m);
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const auto n = static_cast<std::size_t>(m);
  std::vector<double> cost(n * n, kInf);
  auto at = [&](int i, int j) -> double& {
    return cost[static_cast<std::size_t>(i) * n + static_cast<std::size_t>(j)];
  };
  for (int i = 0; i < m; ++i) {
    for (int j = std::max(0, i - band); j <= std::min(m - 1, i + band); ++j) {
      const double d =
          out.query[static_cast<std::size_t>(i)] - out.window[static_cast<std::size_t>(j)];
      double best = 0;
      if (i > 0 || j > 0) {
        best = kInf;
        if (i > 0 && j > 0) best = std::min(best, at(i - 1, j - 1));
        if (i > 0) best = std::min(best, at(i - 1, j));
        if (j > 0) best = std::min(best, at(i, j - 1));
      }
      at(i, j) = d * d + best;
    }
  }
  out.distance = std::sqrt(at(m - 1, m - 1));
  // Back from the end, preferring the diagonal on ties.
  int i = m - 1, j = m - 1;
  out.path.emplace_back(i, j);
  while (i > 0 || j > 0) {
    if (i > 0 && j > 0 && at(i - 1, j - 1) <= at(i - 1, j) && at(i - 1, j - 1) <= at(i, j - 1)) {
      --i;
      --j;
    } else if (i > 0 && (j == 0 || at(i - 1, j) <= at(i, j - 1))) {
      --i;
    } else {
      --j;
    }
    out.path.emplace_back(i, j);
  }
  std::reverse(out.path.begin(), out.path.end());
  return out;
}

std::optional<std::size_t> nearest_positive_example(
    const CompiledLibrary& library, const CompiledPattern& pattern, std::uint32_t wearer,
    const std::vector<std::pair<int, std::vector<float>>>& windows) {
  const auto& kernels = library.kernel_library->patterns;
  const int m = pattern.config.length;
  std::optional<std::size_t> best_example;
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t e = 0; e < pattern.examples.size(); ++e) {
    const CompiledExample& example = pattern.examples[e];
    if (example.negative || (example.wearer && *example.wearer != wearer)) continue;
    const auto& kernel = kernels[example.kernel];
    double sum = 0;
    for (const auto& [dim, window] : windows)
      sum += dtw_alignment(kernel.dims.data() + static_cast<std::size_t>(dim) * m, window.data(), m,
                           kernel.band, pattern.config.znorm)
                 .distance;
    if (sum < best) {
      best = sum;
      best_example = e;
    }
  }
  return best_example;
}

AlertExplanation explain_alert(const config::Config& config, const Alert& alert,
                               const AlertWindow& window) {
  const config::DeviceProfile* device = config.device_by_id(alert.device);
  if (!device) throw Error("device " + std::to_string(alert.device) + " is no longer configured");
  config::Config one = config;
  one.patterns.clear();
  for (const config::PatternConfig& p : config.patterns)
    if (p.name == window.pattern) {
      one.patterns.push_back(p);
      one.patterns.back().agree = {};  // alone here: its partners are not compiled
    }
  if (one.patterns.empty()) throw Error("pattern '" + window.pattern + "' is no longer configured");
  if (pattern_shape_key(one.patterns.front(), device->sample_rate_hz) != window.shape)
    throw Error("pattern '" + window.pattern + "' changed since the alert's window was cut");
  const CompiledLibrary library = compile_library(one);
  const CompiledPattern& pattern = library.patterns.front();
  const ChannelView& view = library.views[pattern.view];
  const int m = pattern.config.length;

  // The window's rows as the device sends them: the pattern's channels in
  // their device columns (others zero: the view reads only these).
  const int rows = window.lead_in + window.length;
  const int width = static_cast<int>(device->channels.size());
  std::vector<float> raw(static_cast<std::size_t>(rows) * static_cast<std::size_t>(width), 0.0f);
  for (std::size_t c = 0; c < window.channels.size(); ++c) {
    const auto at = std::find(device->channels.begin(), device->channels.end(), window.channels[c]);
    if (at == device->channels.end()) continue;
    const auto column = static_cast<std::size_t>(at - device->channels.begin());
    for (int k = 0; k < rows; ++k)
      raw[static_cast<std::size_t>(k) * static_cast<std::size_t>(width) + column] =
          window.values[c * static_cast<std::size_t>(rows) + static_cast<std::size_t>(k)];
  }
  std::vector<float> samples;  // view samples, sample-major
  int first_row = 0;           // the raw row of view sample 0
  if (view.raw) {
    samples = raw;
  } else {
    view_samples(view, raw.data(), rows, width, samples);
    first_row = view.history;
  }
  const auto channels = static_cast<int>(view.channel_names.size());
  const int view_rows = channels == 0 ? 0 : static_cast<int>(samples.size()) / channels;
  // A normalised pattern's window keeps the baseline the stream had: its
  // samples normalised as the search saw them.
  const bool has_baseline = view.normalise.enabled &&
                            window.baseline_center.size() == static_cast<std::size_t>(channels) &&
                            window.baseline_spread.size() == static_cast<std::size_t>(channels);
  if (has_baseline)
    apply_baseline({window.baseline_center, window.baseline_spread}, samples.data(),
                   static_cast<std::size_t>(view_rows));
  // The window's last raw row is the alert's end_index.
  const std::int64_t window_first = alert.end_index - rows + 1;

  if (view_rows < m) throw Error("the stored window is shorter than the pattern");
  std::vector<std::pair<int, std::vector<float>>> windows;
  std::vector<std::string> names;
  bool shifted = false;
  for (const DimMatch& d : alert.dims) {
    if (d.stream_dim < 0 || d.stream_dim >= channels)
      throw Error("pattern dim " + std::to_string(d.pattern_dim) + " matched a channel the view lacks");
    // The view row of the dim's end. A dim whose match ended earlier than
    // the alert's may reach before the stored lead-in: the nearest window
    // the store holds stands in for it.
    const std::int64_t wanted = d.end_index - window_first - first_row;
    const std::int64_t last = std::clamp<std::int64_t>(wanted, m - 1, view_rows - 1);
    shifted = shifted || last != wanted;
    std::vector<float> values;
    for (std::int64_t k = last - m + 1; k <= last; ++k)
      values.push_back(samples[static_cast<std::size_t>(k * channels + d.stream_dim)]);
    windows.emplace_back(d.pattern_dim, std::move(values));
    names.push_back(view.channel_names[static_cast<std::size_t>(d.stream_dim)]);
  }
  const auto example = nearest_positive_example(library, pattern, alert.wearer, windows);
  if (!example) throw Error("pattern '" + window.pattern + "' has no positive example");
  AlertExplanation out;
  out.example = *example;
  out.approximate = (view.normalise.enabled && !has_baseline) || shifted;
  const auto& kernel = library.kernel_library->patterns[pattern.examples[*example].kernel];
  for (std::size_t i = 0; i < windows.size(); ++i) {
    const int dim = windows[i].first;
    out.dims.push_back({dim, names[i],
                        dtw_alignment(kernel.dims.data() + static_cast<std::size_t>(dim) * m,
                                      windows[i].second.data(), m, kernel.band,
                                      pattern.config.znorm)});
  }
  return out;
}

}  // namespace gw::pipeline
