#include "pipeline/baseline.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "common/error.h"
#include "pipeline/detector.h"

namespace gw::pipeline {

namespace {

// The median of `values` (reordered); the mean of the two middle values for
// an even count, so that it does not depend on which of them nth_element
// leaves where.
double median_of(std::vector<float>& values) {
  const std::size_t n = values.size();
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(values.begin(), mid, values.end());
  const double upper = *mid;
  if (n % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), mid);
  return (lower + upper) / 2;
}

}  // namespace

BaselineLearner::BaselineLearner(const config::NormaliseConfig& settings, int channels,
                                 double rate_hz)
    : settings_(settings),
      channels_(channels),
      needed_(settings.learn_samples(rate_hz)),
      values_(static_cast<std::size_t>(channels)) {
  for (auto& v : values_) v.reserve(static_cast<std::size_t>(needed_));
}

int BaselineLearner::add(const float* samples, int count) {
  const auto width = static_cast<std::size_t>(channels_);
  const float active_above = static_cast<float>(settings_.active_above);
  int read = 0;
  for (; read < count && taken_ < needed_; ++read) {
    const float* sample = samples + static_cast<std::size_t>(read) * width;
    if (settings_.gated() &&
        std::none_of(sample, sample + width, [&](float v) { return std::fabs(v) > active_above; }))
      continue;
    for (std::size_t c = 0; c < width; ++c) values_[c].push_back(sample[c]);
    ++taken_;
  }
  return read;
}

config::ChannelBaseline BaselineLearner::finish() {
  config::ChannelBaseline out;
  for (auto& values : values_) {
    float center = 0, spread = 1;
    channel_baseline(std::move(values), settings_, center, spread);
    out.center.push_back(center);
    out.spread.push_back(spread);
  }
  values_.assign(values_.size(), {});
  return out;
}

void channel_baseline(std::vector<float> values, const config::NormaliseConfig& settings,
                      float& center, float& spread) {
  using Statistic = config::NormaliseConfig::Statistic;
  using Scale = config::NormaliseConfig::Scale;
  if (values.empty()) throw Error("baseline: no samples to learn from");
  const auto n = static_cast<double>(values.size());
  double mean = 0;
  for (const float v : values) mean += v;
  mean /= n;
  double variance = 0;
  for (const float v : values) variance += (v - mean) * (v - mean);
  variance /= n;
  double c = mean;
  double s = 1;
  switch (settings.scale) {
    case Scale::kNone:
      if (settings.statistic == Statistic::kMedian) c = median_of(values);
      break;
    case Scale::kStd:
      if (settings.statistic == Statistic::kMedian) c = median_of(values);
      s = std::sqrt(variance);
      break;
    case Scale::kMad: {
      const double median = median_of(values);
      if (settings.statistic == Statistic::kMedian) c = median;
      for (float& v : values) v = static_cast<float>(std::abs(v - median));
      s = median_of(values);
      break;
    }
  }
  center = static_cast<float>(c);
  spread = std::max(static_cast<float>(s), kMinBaselineSpread);
}

void apply_baseline(const config::ChannelBaseline& baseline, float* samples, std::size_t count) {
  const std::size_t width = baseline.center.size();
  for (std::size_t s = 0; s < count; ++s)
    for (std::size_t c = 0; c < width; ++c) {
      float& x = samples[s * width + c];
      x = (x - baseline.center[c]) / baseline.spread[c];
    }
}

config::ChannelBaseline learn_view_baseline(const ChannelView& view, const float* rows, int count,
                                            double rate_hz) {
  if (!view.chain) throw Error("baseline: a normalised view needs transforms");
  BaselineLearner learner(view.normalise, view.chain->output_channels(), rate_hz);
  if (count < view.history + learner.samples_needed())
    throw Error("baseline: " + std::to_string(count) + " rows, learning needs " +
                std::to_string(view.history + learner.samples_needed()));
  // Gated, the active samples may lie anywhere in the rows given: the rows
  // are transformed a piece at a time (each piece with the transforms'
  // history before it, so the samples are those of one pass) until learned.
  const std::size_t width = view.inputs.size();
  const int piece = view.normalise.gated() ? std::max(learner.samples_needed(), 4096)
                                           : learner.samples_needed();
  std::vector<float> transformed;
  for (int from = view.history; from < count && !learner.learned(); from += piece) {
    const int upto = std::min(count, from + piece);
    transformed.clear();
    view.chain->apply(rows + static_cast<std::size_t>(from - view.history) * width,
                      upto - from + view.history, transformed);
    learner.add(transformed.data(), upto - from);
  }
  if (!learner.learned()) {
    std::ostringstream message;
    message << count - view.history << " transformed samples hold " << learner.samples_taken()
            << " active ones (some channel's |value| above " << view.normalise.active_above
            << "); learning needs " << learner.samples_needed();
    throw Error(message.str());
  }
  return learner.finish();
}

}  // namespace gw::pipeline
