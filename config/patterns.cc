// The patterns of a config: pattern items and included pattern packs,
// examples cut from recordings or read from template files, transforms,
// decisions, normalisation and agreement between views.
#include "config/patterns_reader.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <utility>

#include "common/spelling.h"
#include "config/yaml_reader.h"
#include "sensors/recording.h"

namespace gw::config::detail {

namespace {

// Patterns are compared sample by sample in kernels that size shared memory by
// the pattern length; 4096 is the longest the backends promise to handle.
constexpr int kMinPatternLength = 2;
constexpr int kMaxPatternLength = 4096;

// ---------------------------------------------------------------------------
// Patterns

// Recordings read once per parse, however many patterns cut from them.
class RecordingCache {
 public:
  // The recording, or nullptr with `error` set.
  const sensors::Recording* get(const std::string& file, const std::string& format,
                                std::string& error) {
    Slot& slot = slots_[{file, format}];
    if (!slot.loaded) {
      slot.loaded = true;
      try {
        slot.recording =
            std::make_unique<sensors::Recording>(sensors::read_recording(file, format));
      } catch (const std::exception& e) {
        slot.error = e.what();
      }
    }
    error = slot.error;
    return slot.recording.get();
  }

 private:
  struct Slot {
    bool loaded = false;
    std::unique_ptr<sensors::Recording> recording;
    std::string error;
  };
  std::map<std::pair<std::string, std::string>, Slot> slots_;
};

// Copies rows [first_row, first_row + rows) of the pattern's channels into
// example.raw (dim-major). `file_key` names the key issues are reported at.
bool cut_raw(const sensors::Recording& recording, std::int64_t first_row, int rows,
             const MapReader& file_map, const std::string& file_key, const PatternConfig& pattern,
             PatternExample& example) {
  std::vector<std::size_t> columns;
  bool ok = true;
  for (const std::string& channel : pattern.channels) {
    const auto it =
        std::find(recording.channel_names.begin(), recording.channel_names.end(), channel);
    if (it == recording.channel_names.end()) {
      file_map.add_issue(file_key, "'" + recording.source + "' has no channel '" + channel + "'" +
                                       did_you_mean(channel, recording.channel_names) +
                                       "; its channels: " + join(recording.channel_names));
      ok = false;
      continue;
    }
    columns.push_back(static_cast<std::size_t>(it - recording.channel_names.begin()));
  }
  if (!ok) return false;
  const auto row_count = static_cast<std::size_t>(rows);
  example.raw.assign(columns.size() * row_count, 0.0f);
  for (std::size_t d = 0; d < columns.size(); ++d) {
    for (std::size_t s = 0; s < row_count; ++s) {
      const auto row = static_cast<std::size_t>(first_row) + s;
      const float value = recording.at(row, columns[d]);
      if (!std::isfinite(value)) {
        file_map.add_issue(file_key, "sample " + std::to_string(row) + " of channel '" +
                                         pattern.channels[d] + "' is not a finite number");
        example.raw.clear();
        return false;
      }
      example.raw[d * row_count + s] = value;
    }
  }
  return true;
}

// What the examples of one pattern share while they are read. The pattern's
// length is fixed by `length`, or else by the first example that gives one;
// every later example must agree.
struct ExampleContext {
  const std::string& base_dir;
  const MapReader& pattern_map;
  bool load_shape = false;    // device, channels, transforms and length are valid
  bool length_given = false;  // the pattern's `length` key
  bool length_known = false;  // given, or taken from an earlier example
  const DeviceProfile* device = nullptr;
  int lead_in = 0;  // samples the transforms need before a window
  RecordingCache& cache;
  // Per recording file: its first lead_in + learn rows of the pattern's
  // channels (every row when only active samples are learned from), from
  // which a normalised pattern's examples learn their wearer's baseline
  // (PatternExample::baseline_rows).
  std::map<std::string, std::shared_ptr<const std::vector<float>>> baseline_rows = {};
};

// A normalised pattern's example cut from a recording learns its wearer's
// baseline from the same recording's first rows (or its first active
// samples, wherever they lie), as a live stream of that recording would
// (pipeline/baseline.h, when the pattern is compiled).
void attach_baseline_rows(const sensors::Recording& recording, const std::string& file,
                          const MapReader& map, ExampleContext& ctx, const PatternConfig& pattern,
                          PatternExample& out) {
  if (const auto known = ctx.baseline_rows.find(file); known != ctx.baseline_rows.end()) {
    out.baseline_rows = known->second;
    return;
  }
  const int needed = ctx.lead_in + pattern.normalise.learn_samples(ctx.device->sample_rate_hz);
  // Gated learning reads as far into the recording as its active samples
  // take it: the whole recording is kept for it.
  if (pattern.normalise.gated() &&
      recording.samples() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    map.add_issue("file", "the recording has " + std::to_string(recording.samples()) +
                              " samples, more than a baseline learned from its active samples "
                              "reads (give the example a baseline)");
    return;
  }
  const int rows = pattern.normalise.gated() ? static_cast<int>(recording.samples()) : needed;
  if (static_cast<std::int64_t>(recording.samples()) < needed) {
    map.add_issue("file", "the recording has " + std::to_string(recording.samples()) +
                              " samples; learning its wearer's baseline (normalise.learn_s " +
                              format_number(pattern.normalise.learn_s) + ") needs " +
                              std::to_string(needed) + " (or give the example a baseline)");
    return;
  }
  PatternExample first_rows;
  if (!cut_raw(recording, 0, rows, map, "file", pattern, first_rows)) return;
  const std::size_t channels = pattern.channels.size();
  auto sample_major = std::make_shared<std::vector<float>>(first_rows.raw.size());
  for (std::size_t c = 0; c < channels; ++c)
    for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r)
      (*sample_major)[r * channels + c] = first_rows.raw[c * static_cast<std::size_t>(rows) + r];
  ctx.baseline_rows.emplace(file, sample_major);
  out.baseline_rows = std::move(sample_major);
}

// Reads an example's `baseline:` {learn_s, statistic, scale, center, spread}:
// the pattern's normalise settings it was learned with (they must be the
// pattern's) and one center (and spread, unless the scale is none) per
// pattern dim.
void read_example_baseline(const MapReader& example_map, const PatternConfig& pattern,
                           PatternExample& out) {
  if (!example_map.has("baseline")) return;
  const NormaliseConfig& normalise = pattern.normalise;
  if (!normalise.enabled) {
    example_map.add_issue("baseline", "the pattern has no 'normalise' (a baseline is only used "
                                      "by a normalised pattern)");
    return;
  }
  const MapReader map(example_map.value("baseline"), example_map.key_path("baseline"),
                      {"learn_s", "statistic", "scale", "active_above", "center", "spread"},
                      example_map.issues());
  if (!map.valid()) return;
  bool ok = map.require("learn_s") & map.require("statistic") & map.require("scale") &
            map.require("center");
  double learn_s = 0;
  std::string statistic, scale;
  if (read_number(map, "learn_s", above(0), learn_s) && learn_s != normalise.learn_s) {
    map.add_issue("learn_s", "learned over " + format_number(learn_s) +
                                 " s, the pattern's normalise.learn_s is " +
                                 format_number(normalise.learn_s) + " (export the pattern again)");
    ok = false;
  }
  if (read_choice(map, "statistic", {"median", "mean"}, statistic) &&
      statistic != NormaliseConfig::name(normalise.statistic)) {
    map.add_issue("statistic", "learned as the " + statistic +
                                   ", the pattern's normalise.statistic is " +
                                   NormaliseConfig::name(normalise.statistic) +
                                   " (export the pattern again)");
    ok = false;
  }
  if (read_choice(map, "scale", {"none", "mad", "std"}, scale) &&
      scale != NormaliseConfig::name(normalise.scale)) {
    map.add_issue("scale", "learned with scale " + scale + ", the pattern's normalise.scale is " +
                               NormaliseConfig::name(normalise.scale) +
                               " (export the pattern again)");
    ok = false;
  }
  double active_above = 0;  // absent: learned from every sample
  const bool active_above_read =
      !map.has("active_above") || read_number(map, "active_above", at_least(0), active_above);
  if (!active_above_read) {
    ok = false;
  } else if (active_above != normalise.active_above) {
    map.add_issue("active_above", "learned from samples above " + format_number(active_above) +
                                      ", the pattern's normalise.active_above is " +
                                      format_number(normalise.active_above) +
                                      " (export the pattern again)");
    ok = false;
  }
  const bool scaled = normalise.scale != NormaliseConfig::Scale::kNone;
  if (scaled && !map.require("spread")) ok = false;
  if (!scaled && map.has("spread")) {
    map.add_issue("spread", "the pattern's normalise.scale is none: no spread");
    ok = false;
  }
  ChannelBaseline baseline;
  const auto read_values = [&](const std::string& key, bool positive, std::vector<float>& values) {
    if (!map.has(key)) return false;
    const YAML::Node node = map.value(key);
    if (!node.IsSequence()) {
      map.add_issue(key, "expected a list of numbers, got " + describe(node));
      return false;
    }
    if (static_cast<int>(node.size()) != pattern.dim_count) {
      map.add_issue(key, "expected one value per pattern dim (" +
                             std::to_string(pattern.dim_count) + " after the transforms), got " +
                             std::to_string(node.size()));
      return false;
    }
    bool values_ok = true;
    for (std::size_t i = 0; i < node.size(); ++i) {
      std::string error;
      const std::optional<double> value = parse_number(node[i], error);
      const std::string path = index_path(map.key_path(key), i);
      const int line = line_of(node[i]) > 0 ? line_of(node[i]) : map.line(key);
      if (!value || !std::isfinite(*value)) {
        map.issues().add(path, line, value ? "must be a finite number" : error);
        values_ok = false;
      } else if (positive && *value <= 0) {
        map.issues().add(path, line, "must be > 0, got " + node[i].Scalar());
        values_ok = false;
      } else {
        values.push_back(static_cast<float>(*value));
      }
    }
    return values_ok;
  };
  ok &= read_values("center", false, baseline.center);
  if (scaled)
    ok &= read_values("spread", true, baseline.spread);
  else
    baseline.spread.assign(baseline.center.size(), 1.0f);
  if (ok) out.baseline = std::move(baseline);
}

// Reads a {file, format, start, end} example and loads its raw values.
void read_window_example(const MapReader& map, ExampleContext& ctx, PatternConfig& pattern,
                         PatternExample& out) {
  ExampleSource example;
  // Every missing key is reported, so no short-circuit.
  const bool has_file = map.require("file");
  const bool has_format = map.require("format");
  const bool has_start = map.require("start");
  bool ok = has_file && has_format && has_start;
  ok &= !map.has("file") || read_string(map, "file", example.file);
  ok &= !map.has("format") ||
        read_choice(map, "format", {"gaitpdb", "daphnet", "csv", "values"}, example.format);
  ok &= !map.has("start") ||
        read_int(map, "start", 0, std::numeric_limits<std::int64_t>::max(), example.start);
  const bool end_given = map.has("end");
  const bool length_ok = ctx.length_known || !ctx.pattern_map.has("length");
  if (end_given) {
    if (read_int(map, "end", 1, std::numeric_limits<std::int64_t>::max(), example.end)) {
      if (ok && example.end <= example.start) {
        map.add_issue("end", "end (" + std::to_string(example.end) + ") must be after start (" +
                                 std::to_string(example.start) + ")");
        ok = false;
      }
    } else {
      ok = false;
    }
  } else if (!ctx.pattern_map.has("length") && !ctx.length_known) {
    map.issues().add(map.key_path("end"), map.line(),
                     "missing required key (or give the pattern's length)");
    ok = false;
  } else if (!length_ok) {
    ok = false;  // the length itself is wrong and already reported
  }
  example.file = resolve_path(ctx.base_dir, example.file);
  out.source = example;
  if (!ok) return;
  if (!end_given) example.end = example.start + pattern.length;
  const std::int64_t span = example.end - example.start;
  if (ctx.length_given && span != pattern.length) {
    ctx.pattern_map.add_issue("length",
                              "length " + std::to_string(pattern.length) +
                                  " does not match example end - start = " + std::to_string(span));
    ok = false;
  } else if (ctx.length_known && span != pattern.length) {
    map.add_issue("end", "end - start = " + std::to_string(span) +
                             " differs from the pattern's length " +
                             std::to_string(pattern.length) + " (set by its first example)");
    ok = false;
  } else if (!ctx.length_known) {
    if (span < kMinPatternLength || span > kMaxPatternLength) {
      map.add_issue(
          "end", "the example is " + std::to_string(span) + " samples long; patterns must be " +
                     std::to_string(kMinPatternLength) + ".." + std::to_string(kMaxPatternLength));
      ok = false;
    } else {
      pattern.length = static_cast<int>(span);
      ctx.length_known = true;
    }
  }
  out.source = example;
  if (!ok || !ctx.load_shape) return;
  if (example.start < ctx.lead_in) {
    map.add_issue("start", "the transforms read " + std::to_string(ctx.lead_in) +
                               " samples before the window, so start must be >= " +
                               std::to_string(ctx.lead_in) + ", got " +
                               std::to_string(example.start));
    return;
  }

  std::string error;
  const sensors::Recording* recording = ctx.cache.get(example.file, example.format, error);
  if (recording == nullptr) {
    map.add_issue("file", error);
    return;
  }
  const auto samples = static_cast<std::int64_t>(recording->samples());
  if (example.start >= samples) {
    map.add_issue("start", "start " + std::to_string(example.start) +
                               " is past the end of the recording (" + std::to_string(samples) +
                               " samples)");
    return;
  }
  if (example.end > samples) {
    map.issues().add(map.key_path("end"), map.line("end"),
                     "end " + std::to_string(example.end) + " is past the end of the recording (" +
                         std::to_string(samples) + " samples)");
    return;
  }
  // The formats with a fixed rate tell us the recording's rate; a pattern cut
  // at another rate than its device streams at would be time-scaled.
  const bool rate_known = example.format == "gaitpdb" || example.format == "daphnet";
  if (rate_known && ctx.device != nullptr &&
      std::abs(recording->sample_rate_hz - ctx.device->sample_rate_hz) >
          0.01 * ctx.device->sample_rate_hz) {
    map.add_issue("format", "the recording is sampled at " +
                                format_number(recording->sample_rate_hz) + " Hz but device '" +
                                ctx.device->name + "' at " +
                                format_number(ctx.device->sample_rate_hz) + " Hz");
    return;
  }
  out.lead_in = ctx.lead_in;
  if (!cut_raw(*recording, example.start - ctx.lead_in, ctx.lead_in + pattern.length, map, "file",
               pattern, out))
    return;
  if (pattern.normalise.enabled && !out.baseline)
    attach_baseline_rows(*recording, example.file, map, ctx, pattern, out);
}

// Reads a template file (under `key` of `map`) and loads its raw values: its
// first lead_in rows feed the transforms, the rest are the pattern.
void read_template_example(const MapReader& map, const std::string& key, ExampleContext& ctx,
                           PatternConfig& pattern, PatternExample& out) {
  if (!read_string(map, key, out.template_file)) return;
  out.template_file = resolve_path(ctx.base_dir, out.template_file);
  if (!ctx.load_shape) return;
  std::string error;
  const sensors::Recording* recording = ctx.cache.get(out.template_file, "csv", error);
  if (recording == nullptr) {
    map.add_issue(key, error);
    return;
  }
  const auto rows = static_cast<std::int64_t>(recording->samples()) - ctx.lead_in;
  const std::string lead_note =
      ctx.lead_in > 0 ? " (after the transforms' " + std::to_string(ctx.lead_in) + " rows)" : "";
  if (ctx.length_given && rows != pattern.length) {
    ctx.pattern_map.add_issue("length", "length " + std::to_string(pattern.length) +
                                            " does not match the template's " +
                                            std::to_string(rows) + " rows" + lead_note);
    return;
  }
  if (ctx.length_known && rows != pattern.length) {
    map.add_issue(key, "the template has " + std::to_string(rows) + " rows" + lead_note +
                           ", the pattern's length is " + std::to_string(pattern.length) +
                           " (set by its first example)");
    return;
  }
  if (rows < kMinPatternLength || rows > kMaxPatternLength) {
    map.add_issue(key, "the template has " + std::to_string(rows) + " rows" + lead_note +
                           "; patterns must be " + std::to_string(kMinPatternLength) + ".." +
                           std::to_string(kMaxPatternLength) + " samples long");
    return;
  }
  pattern.length = static_cast<int>(rows);
  ctx.length_known = true;
  out.lead_in = ctx.lead_in;
  cut_raw(*recording, 0, ctx.lead_in + pattern.length, map, key, pattern, out);
  // A template holds the window only, not its wearer's first minutes.
  if (pattern.normalise.enabled && !out.baseline && !map.has("baseline"))
    map.add_issue(key, "the pattern normalises per wearer (normalise): a template example needs "
                       "its wearer's 'baseline' (gaitwatch pattern export writes it)");
}

// Reads the list under `key` (examples | negatives): each item is a window
// {file, format, start, end} or {template: FILE}.
void read_example_list(const std::string& key, bool negative, ExampleContext& ctx,
                       PatternConfig& pattern) {
  for_each_item(ctx.pattern_map, key,
                [&](const YAML::Node& node, const std::string& path, std::size_t) {
                  const MapReader map(
                      node, path,
                      {"file", "format", "start", "end", "template", "subject", "baseline"},
                      ctx.pattern_map.issues());
                  if (!map.valid()) return;
                  PatternExample example;
                  example.negative = negative;
                  read_string(map, "subject", example.subject);
                  read_example_baseline(map, pattern, example);
                  if (map.has("template")) {
                    for (const char* other : {"file", "format", "start", "end"}) {
                      if (map.has(other)) {
                        map.add_issue(other, "give either a template or file/format/start/end");
                        return;
                      }
                    }
                    read_template_example(map, "template", ctx, pattern, example);
                  } else {
                    read_window_example(map, ctx, pattern, example);
                  }
                  pattern.examples.push_back(std::move(example));
                });
}

// Reads `transforms:`: a list of step names or {kind: NAME, options...}.
void read_transforms(const MapReader& pattern_map, PatternConfig& pattern, bool& ok) {
  const std::vector<std::string> kinds = {"raw",        "magnitude",    "lowpass",
                                          "derivative", "freeze_index", "orientation_change"};
  for_each_item(
      pattern_map, "transforms",
      [&](const YAML::Node& node, const std::string& path, std::size_t index) {
        TransformStep step;
        std::string kind;
        const bool shorthand = node.IsScalar();
        const MapReader map(shorthand ? YAML::Node(YAML::NodeType::Undefined) : node, path,
                            {"kind", "cutoff_hz", "window_s", "lag_s", "locomotion_band_hz",
                             "freeze_band_hz", "power_floor"},
                            pattern_map.issues());
        if (!map.valid()) {
          ok = false;
          return;
        }
        if (shorthand) {
          kind = node.Scalar();
          if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) {
            pattern_map.issues().add(path, line_of(node),
                                     "must be one of " + join(kinds, " | ") + ", got '" + kind +
                                         "'" + did_you_mean(kind, kinds));
            ok = false;
            return;
          }
        } else if (!map.require("kind") || !read_choice(map, "kind", kinds, kind)) {
          ok = false;
          return;
        }
        const std::vector<std::pair<std::string, TransformStep::Kind>> by_name = {
            {"raw", TransformStep::Kind::kRaw},
            {"magnitude", TransformStep::Kind::kMagnitude},
            {"lowpass", TransformStep::Kind::kLowpass},
            {"derivative", TransformStep::Kind::kDerivative},
            {"freeze_index", TransformStep::Kind::kFreezeIndex},
            {"orientation_change", TransformStep::Kind::kOrientationChange}};
        for (const auto& [name, value] : by_name)
          if (name == kind) step.kind = value;
        // Options of other kinds are mistakes, not silently ignored settings.
        using Kind = TransformStep::Kind;
        const std::map<std::string, std::vector<Kind>> option_owners = {
            {"cutoff_hz", {Kind::kLowpass}},
            {"window_s", {Kind::kFreezeIndex, Kind::kOrientationChange}},
            {"lag_s", {Kind::kOrientationChange}},
            {"locomotion_band_hz", {Kind::kFreezeIndex}},
            {"freeze_band_hz", {Kind::kFreezeIndex}},
            {"power_floor", {Kind::kFreezeIndex}}};
        for (const auto& [option, owners] : option_owners) {
          if (!map.has(option) ||
              std::find(owners.begin(), owners.end(), step.kind) != owners.end())
            continue;
          std::string owner_names;
          for (const Kind owner : owners)
            owner_names += (owner_names.empty() ? "" : " and ") + std::string(TransformStep::name(owner));
          map.add_issue(option, "applies to " + owner_names + " only, not to " + kind);
          ok = false;
        }
        if (step.combines_group() && index != 0) {
          pattern_map.issues().add(path, line_of(node),
                                   std::string(TransformStep::name(step.kind)) +
                                       " must be the first transform");
          ok = false;
        }
        if (step.kind == Kind::kOrientationChange) {
          step.window_s = 1;
          ok &= !map.has("window_s") || read_number(map, "window_s", above(0), step.window_s);
          ok &= !map.has("lag_s") || read_number(map, "lag_s", above(0), step.lag_s);
        }
        if (step.kind == TransformStep::Kind::kLowpass) {
          if (!map.require("cutoff_hz") || !read_number(map, "cutoff_hz", above(0), step.cutoff_hz))
            ok = false;
        }
        if (step.kind == TransformStep::Kind::kFreezeIndex) {
          ok &= !map.has("window_s") || read_number(map, "window_s", above(0), step.window_s);
          ok &= !map.has("power_floor") ||
                read_number(map, "power_floor", above(0), step.power_floor);
          for (const auto& [key, band] :
               {std::pair<std::string, double*>{"locomotion_band_hz", step.locomotion_band_hz},
                std::pair<std::string, double*>{"freeze_band_hz", step.freeze_band_hz}}) {
            if (!map.has(key)) continue;
            const YAML::Node value = map.value(key);
            std::string error;
            std::optional<double> low, high;
            if (value.IsSequence() && value.size() == 2) {
              low = parse_number(value[0], error);
              high = parse_number(value[1], error);
            }
            if (!low || !high || *low < 0 || *high <= *low) {
              map.add_issue(
                  key, "expected [low, high] in Hz with 0 <= low < high, got " + describe(value));
              ok = false;
              continue;
            }
            band[0] = *low;
            band[1] = *high;
          }
        }
        pattern.transforms.push_back(step);
      });
}

// Query segmentation and search exhausting (docs/detection.md): read after
// the examples, which may give the length.
void read_recall_options(const MapReader& map, PatternConfig& pattern) {
  constexpr int kMinSegmentLength = 8;
  if (read_int(map, "segments", 0, 64, pattern.segments) && pattern.segments == 1)
    map.add_issue("segments", "must be 0 (off) or >= 2 parts, got 1");
  if (pattern.segments >= 2 && pattern.length > 0 &&
      pattern.length / pattern.segments < kMinSegmentLength) {
    map.add_issue("segments", std::to_string(pattern.segments) + " parts of " +
                                  std::to_string(pattern.length) + " samples are shorter than " +
                                  std::to_string(kMinSegmentLength) + " samples");
    pattern.segments = 0;
  }
  if (read_number(map, "exhaust_factor", at_least(0), pattern.exhaust_factor) &&
      pattern.exhaust_factor > 0 && pattern.exhaust_factor < 1)
    map.add_issue("exhaust_factor", "must be 0 (off) or >= 1 (the looser threshold's factor), got " +
                                        map.value("exhaust_factor").Scalar());
  if (read_number(map, "exhaust_band", between(0, 1), pattern.exhaust_band)) {
    if (pattern.exhaust_factor <= 0)
      map.add_issue("exhaust_band", "needs exhaust_factor (search exhausting is off)");
    else if (pattern.mode != PatternMode::kWindow || pattern.measure != Measure::kDtw)
      map.add_issue("exhaust_band", "applies to mode window with measure dtw only");
    else if (pattern.exhaust_band < pattern.band)
      map.add_issue("exhaust_band", "must be >= band (" + format_number(pattern.band) + ")");
  }
  if (pattern.exhaust_factor == 1 &&
      (pattern.exhaust_band < 0 || pattern.exhaust_band == pattern.band))
    map.add_issue("exhaust_factor",
                  "1 with exhaust_band equal to band searches nothing looser; raise either");
}


// The pattern's `decision: {learned: FILE}`: the file `gaitwatch train`
// writes (bias, weights per feature name; the rest documents how it was
// fitted). Problems inside the file are reported at decision.learned, each
// naming the file, its line and the key path inside it.
void read_decision(const MapReader& map, const std::string& base_dir, PatternConfig& pattern) {
  if (!map.has("decision")) return;
  const MapReader decision(map.value("decision"), map.key_path("decision"), {"learned"},
                           map.issues());
  if (!decision.valid()) return;
  if (map.value("decision").IsNull()) {
    map.add_issue("decision", "expected a map with 'learned: FILE', got nothing");
    return;
  }
  std::string file;
  if (!decision.require("learned") || !read_string(decision, "learned", file)) return;
  if (pattern.neighbours > 0) {
    decision.add_issue("learned", "a learned decision replaces the vote: set neighbours to 0");
    return;
  }
  LearnedDecision learned;
  learned.file = resolve_path(base_dir, file);
  std::ifstream in(learned.file, std::ios::binary);
  if (!in) {
    decision.add_issue("learned", "cannot read decision file '" + learned.file +
                                      "': " + std::strerror(errno));
    return;
  }
  std::ostringstream text;
  text << in.rdbuf();
  IssueList inner;
  try {
    const YAML::Node document = parse_yaml(text.str(), learned.file);
    const MapReader root(document, "", {"rule", "bias", "weights", "trained", "evaluation", "command"},
                         inner);
    if (root.valid()) {
      std::string rule = "logistic";
      read_choice(root, "rule", {"logistic"}, rule);
      if (root.require("bias")) read_number(root, "bias", Range{}, learned.bias);
      std::vector<std::string> names(kDecisionFeatureNames.begin(), kDecisionFeatureNames.end());
      const MapReader weights(root.value("weights"), root.key_path("weights"), names, inner);
      if (root.require("weights") && weights.valid())
        for (std::size_t f = 0; f < kDecisionFeatureCount; ++f)
          read_number(weights, names[f], Range{}, learned.weights[f]);
    }
  } catch (const ConfigError& error) {
    for (const ConfigIssue& issue : error.issues()) inner.add(issue.path, issue.line, issue.message);
  }
  std::vector<ConfigIssue> found = inner.take();
  for (const ConfigIssue& issue : found)
    decision.add_issue("learned", file + ":" + std::to_string(issue.line) + ": " +
                                      (issue.path.empty() ? "" : issue.path + ": ") + issue.message);
  if (found.empty()) pattern.learned_decision = std::move(learned);
}

// Reads `normalise: {learn_s, statistic, scale, active_above}` (before the
// examples, whose baselines depend on it).
void read_normalise(const MapReader& pattern_map, PatternConfig& pattern) {
  if (!pattern_map.has("normalise")) return;
  const MapReader map(pattern_map.value("normalise"), pattern_map.key_path("normalise"),
                      {"learn_s", "statistic", "scale", "active_above"}, pattern_map.issues());
  if (!map.valid()) return;
  NormaliseConfig& normalise = pattern.normalise;
  normalise.enabled = true;
  // At most an hour: a stream holds the samples it learns from until it has
  // them all (the median needs every one).
  read_number(map, "learn_s", between(1, 3600), normalise.learn_s);
  std::string statistic = NormaliseConfig::name(normalise.statistic);
  if (read_choice(map, "statistic", {"median", "mean"}, statistic))
    normalise.statistic = statistic == "mean" ? NormaliseConfig::Statistic::kMean
                                              : NormaliseConfig::Statistic::kMedian;
  std::string scale = NormaliseConfig::name(normalise.scale);
  if (read_choice(map, "scale", {"none", "mad", "std"}, scale))
    normalise.scale = scale == "mad"   ? NormaliseConfig::Scale::kMad
                      : scale == "std" ? NormaliseConfig::Scale::kStd
                                       : NormaliseConfig::Scale::kNone;
  read_number(map, "active_above", at_least(0), normalise.active_above);
  // The raw view is shared by every raw pattern of a device; a normalised
  // view is a transformed one of its own.
  if (uses_raw_channels(pattern.transforms))
    pattern_map.add_issue("normalise", "needs transforms (a pattern on the raw channels shares "
                                       "them with every other raw pattern of the device)");
}

// Where a pattern's `agree` was given, for the checks across patterns
// (names, devices, cycles) that can only run once every pattern, the packs'
// included, has been read. One per pattern, in pattern order.
struct AgreementSite {
  std::string path;             // the pattern item's key path
  std::vector<int> with_lines;  // per element of agree.with
  std::string file;             // the pack it is in; empty for the config's own
  std::string note;             // appended to messages about a pack's pattern
};

// `agree: {with: [NAME, ...], within_s: S}`: what can be checked inside one
// pattern (shape, within_s, no self reference, no name twice).
void read_agreement(const MapReader& pattern_map, PatternConfig& pattern, AgreementSite& site) {
  site.path = pattern_map.path();
  read_bool(pattern_map, "publish", pattern.publish);
  if (!pattern_map.has("agree")) return;
  const MapReader map(pattern_map.value("agree"), pattern_map.key_path("agree"),
                      {"with", "within_s"}, pattern_map.issues());
  if (!map.valid()) return;
  std::vector<LocatedString> names;
  if (map.require("with") && read_string_list(map, "with", names) && names.empty())
    map.add_issue("with", "expected at least one pattern name");
  if (map.require("within_s")) read_number(map, "within_s", above(0), pattern.agree.within_s);
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string element_path = index_path(map.key_path("with"), i);
    if (names[i].value == pattern.name) {
      map.issues().add(element_path, names[i].line,
                       "a pattern cannot agree with itself; name its views");
      continue;
    }
    const auto earlier = std::find_if(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(i),
                                      [&](const LocatedString& n) { return n.value == names[i].value; });
    if (earlier != names.begin() + static_cast<std::ptrdiff_t>(i)) {
      map.issues().add(element_path, names[i].line,
                       "'" + names[i].value + "' is named twice (also at line " +
                           std::to_string(earlier->line) + ")");
      continue;
    }
    pattern.agree.with.push_back(names[i].value);
    site.with_lines.push_back(names[i].line);
  }
}

void read_pattern(const YAML::Node& node, const std::string& path, const std::string& base_dir,
                  const std::vector<DeviceProfile>& devices,
                  const std::vector<bool>& device_channels_ok, RecordingCache& cache,
                  IssueList& issues, PatternConfig& pattern, AgreementSite& site) {
  const MapReader map(
      node, path, {"name",       "kind",     "severity", "device",   "channels",   "transforms",
                   "length",     "measure",  "band",     "znorm",    "mode",       "nr",
                   "threshold",  "min_dims", "alpha",    "margin",   "hysteresis", "min_duration_s",
                   "cooldown_s", "example",  "template", "examples", "negatives",
                   "segments",   "exhaust_factor", "exhaust_band", "neighbours", "normalise",
                   "decision",   "publish",  "agree"},
      issues);
  if (!map.valid()) return;
  pattern.kind = "other";
  pattern.severity = "warning";
  if (map.require("name") && read_string(map, "name", pattern.name)) {
    if (pattern.name == "sensor_offline")
      map.add_issue("name", "'sensor_offline' is the daemon's own alert for a silent sensor");
    if (pattern.name == "pressure_hotspot")
      map.add_issue("name", "'pressure_hotspot' is the daemon's own alert for a pressure hotspot");
  }
  read_choice(map, "kind", {"fall", "stumble", "freezing_of_gait", "limp", "other"}, pattern.kind);
  read_choice(map, "severity", {"info", "warning", "critical"}, pattern.severity);

  // The device and its channels: everything about the shape depends on them.
  const DeviceProfile* device = nullptr;
  bool device_ok = false;
  if (map.require("device") && read_string(map, "device", pattern.device)) {
    std::vector<std::string> names;
    for (std::size_t d = 0; d < devices.size(); ++d) {
      names.push_back(devices[d].name);
      if (devices[d].name == pattern.device) {
        device = &devices[d];
        device_ok = device_channels_ok[d];
      }
    }
    if (device == nullptr) {
      map.add_issue(
          "device",
          "no device named '" + pattern.device + "'" + did_you_mean(pattern.device, names) +
              (names.empty() ? "; no devices are configured" : "; devices: " + join(names)));
    }
  }
  bool channels_ok = false;
  std::vector<int> channel_indices;
  if (map.require("channels")) {
    std::vector<LocatedString> channels;
    channels_ok = read_string_list(map, "channels", channels);
    if (channels_ok && channels.empty()) {
      map.add_issue("channels", "must list at least one channel");
      channels_ok = false;
    }
    std::set<std::string> seen;
    for (std::size_t k = 0; k < channels.size(); ++k) {
      const LocatedString& channel = channels[k];
      const std::string channel_path = index_path(map.key_path("channels"), k);
      pattern.channels.push_back(channel.value);
      if (!seen.insert(channel.value).second) {
        issues.add(channel_path, channel.line, "channel '" + channel.value + "' is listed twice");
        channels_ok = false;
        continue;
      }
      if (!device_ok) continue;
      const auto it = std::find(device->channels.begin(), device->channels.end(), channel.value);
      if (it == device->channels.end()) {
        issues.add(channel_path, channel.line,
                   "device '" + device->name + "' has no channel '" + channel.value + "'" +
                       did_you_mean(channel.value, device->channels));
        channels_ok = false;
        continue;
      }
      channel_indices.push_back(static_cast<int>(it - device->channels.begin()));
    }
  }
  bool transforms_ok = true;
  read_transforms(map, pattern, transforms_ok);
  // The pattern's dimensions and their groups, once the inputs are known.
  std::vector<DerivedChannel> dims;
  if (device_ok && channels_ok && transforms_ok) {
    dims = derived_channels(*device, channel_indices, pattern.transforms);
    pattern.dim_count = static_cast<int>(dims.size());
    // An orientation is a direction in space: two or three axes of one sensor.
    if (!pattern.transforms.empty() &&
        pattern.transforms[0].kind == TransformStep::Kind::kOrientationChange) {
      for (const DerivedChannel& dim : dims) {
        if (dim.inputs.size() == 2 || dim.inputs.size() == 3) continue;
        map.add_issue("channels", "orientation_change reads 2 or 3 axes of one device group; " +
                                      dim.name + " has " + std::to_string(dim.inputs.size()));
      }
    }
  } else {
    pattern.dim_count = static_cast<int>(pattern.channels.size());
  }

  const bool length_given =
      read_int(map, "length", kMinPatternLength, kMaxPatternLength, pattern.length);
  const bool length_ok = length_given || !map.has("length");
  read_choice(map, "measure", pattern.measure);
  const bool euclidean = pattern.measure == Measure::kEuclidean;
  const bool band_given = read_number(map, "band", between(0, 1), pattern.band);
  if (euclidean) {
    // Moazeni's EDT: synchronous windows, i.e. DTW with a band of 0.
    if (band_given && pattern.band != 0)
      map.add_issue("band", "measure euclidean compares synchronous samples: band must be 0");
    pattern.band = 0;
  }
  read_bool(map, "znorm", pattern.znorm);
  if (read_choice(map, "mode", pattern.mode) && euclidean && pattern.mode != PatternMode::kWindow)
    map.add_issue("mode", "measure euclidean needs mode window");
  if (read_int(map, "nr", 0, 65535, pattern.nr) && pattern.nr > 0) {
    if (euclidean) {
      map.add_issue("nr", "measure euclidean compares each dim with its own channel: nr must be 0");
    } else if (!dims.empty()) {
      // nr reaches neighbours inside a channel's group only; an nr as wide as
      // every group the pattern touches compares nothing more than nr = size-1.
      // In the raw view a dim reaches every channel of its device group; a
      // transformed view holds only the pattern's own derived channels.
      const bool raw_view = uses_raw_channels(pattern.transforms);
      std::map<int, int> group_size;
      for (const DerivedChannel& dim : dims) ++group_size[dim.group];
      int widest_group = 1;
      for (const DerivedChannel& dim : dims) {
        int size = group_size[dim.group];
        if (raw_view) {
          const ChannelGroup& group = device->groups[static_cast<std::size_t>(dim.group)];
          size = group.last - group.first + 1;
        }
        widest_group = std::max(widest_group, size);
      }
      if (pattern.nr >= widest_group) {
        map.add_issue("nr", "nr " + std::to_string(pattern.nr) +
                                " reaches past every group holding the pattern's channels (the "
                                "widest has " +
                                std::to_string(widest_group) +
                                " channels, so nr <= " + std::to_string(widest_group - 1) + ")");
      }
    }
  }
  if (map.require("threshold")) read_number(map, "threshold", above(0), pattern.threshold);
  if (read_int(map, "min_dims", 1, 65535, pattern.min_dims) && channels_ok && transforms_ok &&
      pattern.min_dims > pattern.dim_count) {
    const bool derived = pattern.dim_count != static_cast<int>(pattern.channels.size());
    map.add_issue("min_dims", "must be at most the pattern's " + std::to_string(pattern.dim_count) +
                                  (derived ? " dimensions (after the transforms)" : " channels") +
                                  ", got " + std::to_string(pattern.min_dims));
  }
  read_number(map, "alpha", at_least(1), pattern.alpha);
  read_int(map, "neighbours", 0, 1024, pattern.neighbours);
  read_decision(map, base_dir, pattern);
  // A learned decision's evidence is a log-odds: a negative margin (a
  // probability below one half) is meaningful there, not in distance units.
  read_number(map, "margin", pattern.learned_decision ? Range{} : at_least(0), pattern.margin);
  read_number(map, "hysteresis", at_least(0), pattern.hysteresis);
  read_number(map, "min_duration_s", at_least(0), pattern.min_duration_s);
  read_number(map, "cooldown_s", at_least(0), pattern.cooldown_s);
  read_normalise(map, pattern);

  // Shapes are only loaded when what selects them is right: otherwise the
  // file read would only add follow-on noise to the issues already found.
  ExampleContext ctx{base_dir,
                     map,
                     device_ok && channels_ok && transforms_ok && length_ok,
                     length_given,
                     length_given,
                     device,
                     device_ok && transforms_ok
                         ? transform_history(pattern.transforms, device->sample_rate_hz)
                         : 0,
                     cache};
  const bool has_example = map.has("example"), has_template = map.has("template");
  if (has_example && has_template) {
    map.add_issue("template", "give either 'example' or 'template', not both (example is at line " +
                                  std::to_string(map.line("example")) + ")");
  } else if (has_example) {
    const MapReader example_map(map.value("example"), map.key_path("example"),
                                {"file", "format", "start", "end", "subject"}, issues);
    if (example_map.valid()) {
      if (map.value("example").IsNull()) {
        map.add_issue("example", "expected a map with file, format, start and end, got nothing");
      } else {
        PatternExample example;
        read_string(example_map, "subject", example.subject);
        read_window_example(example_map, ctx, pattern, example);
        pattern.examples.push_back(std::move(example));
      }
    }
  } else if (has_template) {
    PatternExample example;
    read_template_example(map, "template", ctx, pattern, example);
    pattern.examples.push_back(std::move(example));
  }
  read_example_list("examples", false, ctx, pattern);
  if (!has_example && !has_template && !map.has("examples")) {
    issues.add(path, map.line(),
               "missing 'example' or 'template' or 'examples' (the pattern's shape)");
  }
  read_example_list("negatives", true, ctx, pattern);
  read_recall_options(map, pattern);
  read_agreement(map, pattern, site);
}


// Where pattern names were first given, for the uniqueness check across the
// config and its packs.
using PatternNameOrigins = std::map<std::string, std::string>;

// Reads one pattern item (not an include) and checks that its name is new.
// `origin` prefixes the item's key path in the duplicate message ("" for the
// config's own items, "PACK: " for a pack's).
void read_named_pattern(const YAML::Node& node, const std::string& path, const std::string& origin,
                        const std::string& base_dir, const std::vector<DeviceProfile>& devices,
                        const std::vector<bool>& device_channels_ok, RecordingCache& cache,
                        IssueList& issues, PatternNameOrigins& origins,
                        std::vector<PatternConfig>& patterns, std::vector<AgreementSite>& sites) {
  PatternConfig pattern;
  AgreementSite site;
  read_pattern(node, path, base_dir, devices, device_channels_ok, cache, issues, pattern, site);
  sites.push_back(std::move(site));
  if (!pattern.name.empty()) {
    const auto [it, inserted] = origins.emplace(pattern.name, origin + path);
    if (!inserted) {
      issues.add(path + ".name", line_of(node["name"]),
                 "duplicate pattern name '" + pattern.name + "' (also " + it->second + ")");
    }
  }
  patterns.push_back(std::move(pattern));
}

bool is_include_item(const YAML::Node& node) {
  return node.IsMap() && node["include"].IsDefined();
}


// Reads the pack named by the include item `node` (at key path `path` of the
// config) and appends its patterns. The pack's issues are reported with its
// file name (relative to the config's directory as the config is named) and
// a note naming the include item.
void read_pattern_pack(const YAML::Node& node, const std::string& path,
                       const std::string& config_base_dir, const std::string& config_source_name,
                       const std::vector<DeviceProfile>& devices,
                       const std::vector<bool>& device_channels_ok, RecordingCache& cache,
                       IssueList& issues, PatternNameOrigins& origins,
                       std::vector<PatternConfig>& patterns, std::vector<AgreementSite>& sites) {
  namespace fs = std::filesystem;
  const std::size_t first_pattern = patterns.size();
  const MapReader item(node, path, {"include"}, issues);
  if (!item.valid()) return;
  std::string include;
  if (!read_string(item, "include", include)) return;
  if (include.empty()) {
    item.add_issue("include", "expected a pack file name, got an empty string");
    return;
  }
  const std::string pack_path = resolve_path(config_base_dir, include);
  const std::string pack_name =
      fs::path(include).is_absolute()
          ? fs::path(include).lexically_normal().string()
          : (fs::path(config_source_name).parent_path() / include).lexically_normal().string();
  std::ifstream in(pack_path, std::ios::binary);
  if (!in) {
    item.add_issue("include", "cannot read pattern pack '" + pack_path +
                                  "': " + std::strerror(errno));
    return;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    item.add_issue("include", "cannot read pattern pack '" + pack_path + "'");
    return;
  }

  IssueList pack_issues;
  try {
    const YAML::Node document = parse_yaml(text.str(), pack_name);
    const MapReader pack(document, "", {"description", "built_by", "evaluation", "patterns"},
                         pack_issues);
    if (!document.IsDefined() || document.IsNull()) {
      pack_issues.add("", 0, "the pack is empty; a pack lists its patterns");
    } else if (pack.valid() && pack.require("patterns")) {
      const std::string pack_base_dir = fs::path(pack_path).parent_path().string();
      for_each_item(pack, "patterns",
                    [&](const YAML::Node& pack_node, const std::string& pack_item_path,
                        std::size_t) {
                      if (is_include_item(pack_node)) {
                        pack_issues.add(pack_item_path + ".include",
                                        line_of(pack_node["include"]),
                                        "a pattern pack cannot include other packs; include "
                                        "them from the main config");
                        return;
                      }
                      read_named_pattern(pack_node, pack_item_path, pack_name + ": ",
                                         pack_base_dir, devices, device_channels_ok, cache,
                                         pack_issues, origins, patterns, sites);
                    });
    }
  } catch (const ConfigError& error) {  // YAML syntax
    for (const ConfigIssue& issue : error.issues()) pack_issues.add(issue.path, issue.line, issue.message);
  }
  std::vector<ConfigIssue> found = pack_issues.take();
  sort_by_line(found);
  const std::string pulled_in_by =
      " (in the pack included by " + item.key_path("include") + " at " + config_source_name +
      ":" + std::to_string(item.line("include")) + ")";
  for (ConfigIssue& issue : found) {
    issue.file = pack_name;
    issue.message += pulled_in_by;
    issues.add(std::move(issue));
  }
  for (std::size_t p = first_pattern; p < sites.size(); ++p) {
    sites[p].file = pack_name;
    sites[p].note = pulled_in_by;
  }
}

// The checks of `agree` across patterns: every name is a pattern on the same
// device (one stream holds both), and no pattern waits, through others, for
// itself (it could never be confirmed).
void check_agreements(const std::vector<PatternConfig>& patterns,
                      const std::vector<AgreementSite>& sites, IssueList& issues) {
  std::map<std::string, std::size_t> index_of;
  std::vector<std::string> names;
  for (std::size_t p = 0; p < patterns.size(); ++p) {
    index_of.emplace(patterns[p].name, p);
    names.push_back(patterns[p].name);
  }
  const auto report = [&](std::size_t p, std::size_t k, const std::string& message) {
    const std::string path = sites[p].path + ".agree.with[" + std::to_string(k) + "]";
    issues.add(ConfigIssue{path, sites[p].with_lines[k], message + sites[p].note, sites[p].file});
  };
  // Edges p -> q for the names that resolve; bad ones are reported and left out.
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> edges(patterns.size());
  for (std::size_t p = 0; p < patterns.size(); ++p) {
    const PatternConfig& pattern = patterns[p];
    for (std::size_t k = 0; k < pattern.agree.with.size(); ++k) {
      const std::string& name = pattern.agree.with[k];
      const auto found = index_of.find(name);
      if (found == index_of.end()) {
        report(p, k, "no pattern '" + name + "'" + did_you_mean(name, names));
        continue;
      }
      const PatternConfig& view = patterns[found->second];
      if (view.device != pattern.device) {
        report(p, k, "pattern '" + name + "' watches device '" + view.device + "', this one '" +
                         pattern.device + "': views that agree must watch one stream");
        continue;
      }
      edges[p].emplace_back(found->second, k);
    }
  }
  // Depth-first; an edge back to a pattern on the path closes a cycle,
  // reported once, at the element that closes it.
  enum class Mark { kNew, kOnPath, kDone };
  std::vector<Mark> mark(patterns.size(), Mark::kNew);
  std::vector<std::size_t> path;
  std::function<void(std::size_t)> visit = [&](std::size_t p) {
    mark[p] = Mark::kOnPath;
    path.push_back(p);
    for (const auto& [q, k] : edges[p]) {
      if (mark[q] == Mark::kOnPath) {
        std::string cycle;
        for (auto it = std::find(path.begin(), path.end(), q); it != path.end(); ++it)
          cycle += patterns[*it].name + " -> ";
        report(p, k, "agreement cycle " + cycle + patterns[q].name +
                         ": each would wait for the other's confirmed detection");
      } else if (mark[q] == Mark::kNew) {
        visit(q);
      }
    }
    path.pop_back();
    mark[p] = Mark::kDone;
  };
  for (std::size_t p = 0; p < patterns.size(); ++p)
    if (mark[p] == Mark::kNew) visit(p);
}

}  // namespace

void read_patterns(const MapReader& root, const std::string& base_dir,
                   const std::string& source_name, const std::vector<DeviceProfile>& devices,
                   const std::vector<bool>& device_channels_ok,
                   std::vector<PatternConfig>& patterns) {
  RecordingCache cache;
  PatternNameOrigins origins;
  std::vector<AgreementSite> sites;
  for_each_item(
      root, "patterns", [&](const YAML::Node& node, const std::string& path, std::size_t) {
        if (is_include_item(node)) {
          read_pattern_pack(node, path, base_dir, source_name, devices, device_channels_ok, cache,
                            root.issues(), origins, patterns, sites);
        } else {
          read_named_pattern(node, path, "", base_dir, devices, device_channels_ok, cache,
                             root.issues(), origins, patterns, sites);
        }
      });
  check_agreements(patterns, sites, root.issues());
}

}  // namespace gw::config::detail
