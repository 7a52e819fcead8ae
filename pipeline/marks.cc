#include "pipeline/marks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

#include "common/error.h"

namespace gw::pipeline {

namespace {

// Exact (round-trip) text of a number.
std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

}  // namespace

std::string pattern_shape_key(const config::PatternConfig& pattern, double sample_rate_hz) {
  std::string key = "length=" + std::to_string(pattern.length) + ";channels=";
  for (std::size_t c = 0; c < pattern.channels.size(); ++c)
    key += (c ? "," : "") + pattern.channels[c];
  key += ";transforms=";
  for (std::size_t i = 0; i < pattern.transforms.size(); ++i) {
    const config::TransformStep& t = pattern.transforms[i];
    key += (i ? "," : "") + std::string(config::TransformStep::name(t.kind));
    switch (t.kind) {
      case config::TransformStep::Kind::kLowpass:
        key += "(cutoff_hz=" + number(t.cutoff_hz) + ")";
        break;
      case config::TransformStep::Kind::kFreezeIndex:
        key += "(window_s=" + number(t.window_s) + ",locomotion=[" +
               number(t.locomotion_band_hz[0]) + "," + number(t.locomotion_band_hz[1]) +
               "),freeze=[" + number(t.freeze_band_hz[0]) + "," + number(t.freeze_band_hz[1]) +
               "),power_floor=" + number(t.power_floor) + ")";
        break;
      case config::TransformStep::Kind::kOrientationChange:
        key += "(window_s=" + number(t.window_s) + ",lag_s=" + number(t.lag_s) + ")";
        break;
      default:
        break;
    }
  }
  const int lead_in = config::uses_raw_channels(pattern.transforms)
                          ? 0
                          : config::transform_history(pattern.transforms, sample_rate_hz);
  key += ";lead_in=" + std::to_string(lead_in);
  // A window's baseline was learned under these settings (windows of
  // patterns without normalisation keep their key).
  const config::NormaliseConfig& n = pattern.normalise;
  if (n.enabled)
    key += ";normalise=(learn_s=" + number(n.learn_s) + ",statistic=" +
           config::NormaliseConfig::name(n.statistic) + ",scale=" +
           config::NormaliseConfig::name(n.scale) + ",active_above=" + number(n.active_above) + ")";
  return key;
}

int example_lead_in(const config::PatternConfig& pattern, const config::DeviceProfile& device) {
  return config::uses_raw_channels(pattern.transforms)
             ? 0
             : config::transform_history(pattern.transforms, device.sample_rate_hz);
}

AlertWindow window_from_rows(const config::PatternConfig& pattern,
                             const config::DeviceProfile& device, std::uint32_t wearer,
                             const float* rows, int row_width, const std::vector<int>& columns) {
  if (columns.size() != pattern.channels.size())
    throw Error("pattern '" + pattern.name + "': a window needs one column per channel (" +
                std::to_string(pattern.channels.size()) + "), got " +
                std::to_string(columns.size()));
  for (int column : columns)
    if (column < 0 || column >= row_width)
      throw Error("pattern '" + pattern.name + "': window column " + std::to_string(column) +
                  " is outside rows of " + std::to_string(row_width) + " values");
  AlertWindow window;
  window.pattern = pattern.name;
  window.wearer = wearer;
  window.lead_in = example_lead_in(pattern, device);
  window.length = pattern.length;
  window.channels = pattern.channels;
  window.shape = pattern_shape_key(pattern, device.sample_rate_hz);
  const auto row_count = static_cast<std::size_t>(window.lead_in + window.length);
  window.values.resize(columns.size() * row_count);
  for (std::size_t c = 0; c < columns.size(); ++c)
    for (std::size_t s = 0; s < row_count; ++s)
      window.values[c * row_count + s] =
          rows[s * static_cast<std::size_t>(row_width) + static_cast<std::size_t>(columns[c])];
  return window;
}

AlertWindow window_from_recording(const config::PatternConfig& pattern,
                                  const config::DeviceProfile& device,
                                  const sensors::Recording& recording, std::int64_t end_index,
                                  std::uint32_t wearer) {
  std::vector<int> columns;
  for (const std::string& name : pattern.channels) {
    const auto it = std::find(recording.channel_names.begin(), recording.channel_names.end(), name);
    if (it == recording.channel_names.end())
      throw Error(recording.source + ": no channel '" + name + "' (pattern '" + pattern.name +
                  "')");
    columns.push_back(static_cast<int>(it - recording.channel_names.begin()));
  }
  const std::int64_t rows = example_lead_in(pattern, device) + pattern.length;
  const std::int64_t first = end_index - rows + 1;
  if (first < 0 || end_index >= static_cast<std::int64_t>(recording.samples()))
    throw Error(recording.source + ": the window of pattern '" + pattern.name + "' ending at " +
                std::to_string(end_index) + " needs samples " + std::to_string(first) + ".." +
                std::to_string(end_index) + " (its transforms' lead-in included); the recording has " +
                std::to_string(recording.samples()));
  return window_from_rows(pattern, device, wearer,
                          recording.values.data() + static_cast<std::size_t>(first) * recording.channels(),
                          static_cast<int>(recording.channels()), columns);
}

config::PatternExample example_from_window(const config::PatternConfig& pattern,
                                           double sample_rate_hz, const AlertWindow& window,
                                           MarkVerdict verdict) {
  if (window.pattern != pattern.name)
    throw Error("the window was cut for pattern '" + window.pattern + "', not '" + pattern.name +
                "'");
  const std::string shape = pattern_shape_key(pattern, sample_rate_hz);
  if (window.shape != shape)
    throw Error("pattern '" + pattern.name + "' changed its shape since the window was cut (" +
                window.shape + " then, " + shape + " now)");
  const std::size_t expected = pattern.channels.size() *
                               static_cast<std::size_t>(window.lead_in + window.length);
  if (window.length != pattern.length || window.channels != pattern.channels ||
      window.values.size() != expected)
    throw Error("pattern '" + pattern.name + "': the window holds " +
                std::to_string(window.values.size()) + " values, its shape needs " +
                std::to_string(expected));
  if (!std::all_of(window.values.begin(), window.values.end(),
                   [](float v) { return std::isfinite(v); }))
    throw Error("pattern '" + pattern.name + "': the window holds a value that is not finite");
  // A normalised pattern's example is normalised with its wearer's
  // baseline: the one the stream had when the alert was raised.
  const bool has_baseline = !window.baseline_center.empty() || !window.baseline_spread.empty();
  if (pattern.normalise.enabled) {
    if (!has_baseline)
      throw Error("pattern '" + pattern.name +
                  "' normalises per wearer (normalise), and the window keeps no baseline of its "
                  "wearer");
    const auto finite = [](const std::vector<float>& v) {
      return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
    };
    // Its size against the pattern's transformed channels is checked where
    // the example is compiled (pipeline/library.h).
    if (window.baseline_center.size() != window.baseline_spread.size() ||
        !finite(window.baseline_center) ||
        !std::all_of(window.baseline_spread.begin(), window.baseline_spread.end(),
                     [](float x) { return std::isfinite(x) && x > 0; }))
      throw Error("pattern '" + pattern.name + "': the window's baseline holds " +
                  std::to_string(window.baseline_center.size()) + " centers and " +
                  std::to_string(window.baseline_spread.size()) +
                  " spreads; it needs one finite center and one finite spread above 0 per "
                  "transformed channel");
  } else if (has_baseline) {
    throw Error("pattern '" + pattern.name +
                "': the window keeps a baseline, and the pattern does not normalise");
  }
  config::PatternExample example;
  if (pattern.normalise.enabled)
    example.baseline = config::ChannelBaseline{window.baseline_center, window.baseline_spread};
  example.negative = verdict == MarkVerdict::kFalse;
  example.lead_in = window.lead_in;
  example.raw = window.values;
  example.wearer = window.wearer;
  return example;
}

MarkedExamplesApplied add_marked_examples(config::Config& config,
                                          const std::vector<MarkedExample>& examples,
                                          int max_per_wearer) {
  MarkedExamplesApplied report;
  // Newest first, so that the cap keeps the newest of each (pattern, wearer).
  std::vector<const MarkedExample*> newest_first;
  for (const MarkedExample& e : examples) newest_first.push_back(&e);
  std::stable_sort(newest_first.begin(), newest_first.end(),
                   [](const MarkedExample* a, const MarkedExample* b) { return a->mark > b->mark; });
  std::map<std::pair<std::string, std::uint32_t>, int> kept_per_wearer;
  std::vector<const MarkedExample*> kept;
  for (const MarkedExample* e : newest_first) {
    const auto pattern = std::find_if(config.patterns.begin(), config.patterns.end(),
                                      [&](const config::PatternConfig& p) { return p.name == e->pattern; });
    if (pattern == config.patterns.end()) {
      report.unknown_pattern.push_back(e->mark);
      continue;
    }
    if (e->example.wearer &&
        ++kept_per_wearer[{e->pattern, *e->example.wearer}] > std::max(1, max_per_wearer)) {
      report.over_cap.push_back(e->mark);
      continue;
    }
    kept.push_back(e);
  }
  // Back to mark order, then into the patterns.
  std::reverse(kept.begin(), kept.end());
  for (const MarkedExample* e : kept) {
    auto& pattern = *std::find_if(config.patterns.begin(), config.patterns.end(),
                                  [&](const config::PatternConfig& p) { return p.name == e->pattern; });
    auto& list = pattern.examples;
    if (e->example.negative) {
      list.push_back(e->example);
    } else {
      const auto first_negative = std::find_if(
          list.begin(), list.end(), [](const config::PatternExample& x) { return x.negative; });
      list.insert(first_negative, e->example);
    }
    report.applied.push_back(e->mark);
  }
  std::reverse(report.unknown_pattern.begin(), report.unknown_pattern.end());
  std::reverse(report.over_cap.begin(), report.over_cap.end());
  return report;
}

}  // namespace gw::pipeline
