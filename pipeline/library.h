// Turns configured patterns into what the backend searches: the channel views
// (raw channels or transform chains), the kernel patterns of every example and
// the compiled patterns phase 2 decides with. docs/detection.md describes the
// semantics.
//
// Thread safety: compile_library is a pure function of the config; a
// CompiledLibrary is read-only once built.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "kernels/search.h"
#include "pipeline/transforms.h"

namespace gw::pipeline {

// What the backend searches for one device: its raw channels, or the output
// of one transform chain over some of its channels. Patterns with equal
// chains over equal channels share a view (one slice per stream and batch).
struct ChannelView {
  std::uint16_t device = 0;
  std::uint32_t profile = 0;  // kernel profile id: the device id for the raw view
  bool raw = true;            // the device's own channels, no transform
  std::vector<int> inputs;    // device channels the chain reads (transformed views)
  std::shared_ptr<const TransformChain> chain;  // null for the raw view
  std::vector<config::TransformStep> steps;     // the chain's steps (empty for the raw view)
  // Per-wearer normalisation of the chain's output (pipeline/baseline.h):
  // patterns that differ in it search different views, since the engine
  // normalises a view's samples before the search.
  config::NormaliseConfig normalise;
  std::vector<std::string> channel_names;
  int history = 0;  // raw samples before a view sample that it depends on
  int longest_pattern = 0;
};

struct CompiledExample {
  std::size_t kernel = 0;  // index into kernel_library->patterns
  bool negative = false;
  // The example's wearer scope (config::PatternExample::wearer): decisions
  // for other wearers' streams leave it out. Unset = every wearer.
  std::optional<std::uint32_t> wearer;
  // The wearer's baseline the example was normalised with (normalised
  // patterns only; pattern export writes it out).
  std::optional<config::ChannelBaseline> baseline;
  // Query segmentation (config `segments`): one kernel pattern per part of
  // the example, samples [begin, begin + length) of it, searched at
  // threshold * sqrt(length / m) so that its partial distance (below) stays
  // within the threshold.
  struct Segment {
    std::size_t kernel = 0;
    int begin = 0;
    int length = 0;
  };
  std::vector<Segment> segments;
  // Search exhausting (config `exhaust_factor`): the kernel pattern of the
  // looser search of the same shape; kNone when off.
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::size_t exhaust_kernel = kNone;
};

struct CompiledPattern {
  config::PatternConfig config;  // examples' raw values dropped (the kernels hold the shapes)
  std::size_t view = 0;          // index into CompiledLibrary::views
  // home_channel[j]: the view channel pattern dim j is named after (f = 1 there).
  std::vector<int> home_channel;
  std::vector<CompiledExample> examples;  // config order: positives, then negatives
};

struct CompiledLibrary {
  std::vector<ChannelView> views;
  std::vector<CompiledPattern> patterns;  // config order
  // One kernel pattern per distinct example: identical examples of different
  // patterns (e.g. the folds of a cross-validation) are searched once.
  std::shared_ptr<const kernels::PatternLibrary> kernel_library;
};

// The samples `view` searches for `rows` raw device samples (sample-major,
// `device_channels` values each), appended to `out`: the samples themselves
// for the raw view; else the transform chain over the view's input channels,
// which yields rows - view.history samples, the first belonging to raw row
// view.history (none when rows <= history).
void view_samples(const ChannelView& view, const float* raw, int rows, int device_channels,
                  std::vector<float>& out);

// Whether two views yield the same samples for the same stream: same device,
// inputs, transform steps and normalisation (a learned baseline of one holds
// for the other, e.g. across a reload).
bool same_view_samples(const ChannelView& a, const ChannelView& b);

// Pairs: dim j on view channel c is compared with channels c-nr..c+nr of the
// same channel group. Transformed examples are computed here from their raw
// values; a normalised pattern's examples are then normalised with their own
// wearer's baseline (PatternExample::baseline, or learned from its
// baseline_rows with learn_view_baseline). Throws gw::Error for inconsistent input (load_config has already
// validated a config, so that means a bug).
CompiledLibrary compile_library(const config::Config& config);

}  // namespace gw::pipeline
