// Per-wearer normalisation (config::NormaliseConfig, docs/detection.md
// "Per-wearer normalisation"): the baseline of a view's transformed channels,
// learned from the first samples of one stream (or of an example's
// recording), and its application, x -> (x - center) / spread.
//
// The engine learns a stream's baseline and the pattern compiler learns an
// example's with the same BaselineLearner over the same transformed samples
// (view_samples), so an example and a live stream of the same recording are
// normalised alike.
//
// Thread safety: a learner belongs to one stream (one thread at a time);
// the functions are pure.
#pragma once

#include <cstddef>
#include <vector>

#include "config/config.h"

namespace gw::pipeline {

struct ChannelView;

// A spread below this is taken as this: a channel constant over the learning
// stretch (a sensor that lay still) must not divide by zero.
inline constexpr float kMinBaselineSpread = 1e-6f;

class BaselineLearner {
 public:
  BaselineLearner() = default;
  // `channels` transformed channels at `rate_hz`: learns from the first
  // settings.learn_samples(rate_hz) samples it is given (with
  // settings.gated(), the first that many active samples: some channel's
  // |value| above settings.active_above).
  BaselineLearner(const config::NormaliseConfig& settings, int channels, double rate_hz);

  int samples_needed() const { return needed_; }
  int samples_taken() const { return taken_; }
  bool learned() const { return taken_ >= needed_ && needed_ > 0; }

  // Reads `count` samples (sample-major, channels values each) in stream
  // order until it has all it needs; returns how many it read, the samples
  // it passed over as inactive included (so a caller knows where learning
  // stopped: the next sample is the first one it did not read).
  int add(const float* samples, int count);

  // The baseline of the samples taken (call once learned()): per channel the
  // center (median or mean) and spread (1, the median absolute deviation
  // from the median, or the standard deviation about the mean, at least
  // kMinBaselineSpread). The stored samples are released.
  config::ChannelBaseline finish();

 private:
  config::NormaliseConfig settings_;
  int channels_ = 0;
  int needed_ = 0;
  int taken_ = 0;
  std::vector<std::vector<float>> values_;  // per channel, in stream order
};

// The baseline learned from one channel's values (exposed for tests and the
// learner): center and spread as BaselineLearner::finish() defines them.
void channel_baseline(std::vector<float> values, const config::NormaliseConfig& settings,
                      float& center, float& spread);

// Normalises `count` samples (sample-major, baseline.center.size() channels
// each) in place.
void apply_baseline(const config::ChannelBaseline& baseline, float* samples, std::size_t count);

// The baseline a normalised `view` learns from `count` consecutive raw rows
// of a recording's start, sample-major, each holding the view's inputs in
// their order (ChannelView::inputs: a pattern's channels): the view's first
// transformed samples, as a stream of that recording would give them. Throws
// gw::Error when the rows are too few (view.history + learn samples; with a
// gated normalisation, when they never hold that many active samples).
config::ChannelBaseline learn_view_baseline(const ChannelView& view, const float* rows, int count,
                                            double rate_hz);

}  // namespace gw::pipeline
