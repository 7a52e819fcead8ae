// Channel transforms of a pattern (config::TransformStep): what the search
// sees instead of the raw channels, e.g. the ankle's acceleration magnitude or
// its freeze index. Computed in the pipeline before the search, so every
// backend searches the same values.
//
// Contract: every step is a pure function of a finite stretch of past input
// (its history, config::TransformStep::history_samples): the output at sample
// t depends on inputs t - history() .. t only. So a transformed stream does not
// depend on how it was cut into batches nor on where it started, and a pattern
// cut from a recording (with its lead-in) equals what a live stream produces
// for the same samples.
//
// Thread safety: a TransformChain is immutable after construction; apply() may
// run concurrently.
#pragma once

#include <array>
#include <vector>

#include "config/config.h"

namespace gw::pipeline {

class TransformChain {
 public:
  // `inputs`: device channel indices the chain reads, in the order its input
  // blocks hold them (a pattern's channels). `dims`: config::derived_channels()
  // of those channels. Throws gw::Error when a derived channel reads a channel
  // that is not among the inputs.
  TransformChain(const std::vector<int>& inputs, const std::vector<config::DerivedChannel>& dims,
                 std::vector<config::TransformStep> steps, double sample_rate_hz);

  int history() const { return history_; }
  int input_channels() const { return static_cast<int>(inputs_); }
  int output_channels() const { return static_cast<int>(dim_inputs_.size()); }

  // `in`: `samples` consecutive input samples, sample-major (input_channels()
  // values each). Appends (samples - history()) output samples, sample-major
  // (output_channels() values each), to `out`: output k belongs to input
  // sample history() + k. Nothing is appended when samples <= history().
  void apply(const float* in, int samples, std::vector<float>& out) const;

 private:
  std::size_t inputs_;
  std::vector<std::vector<int>> dim_inputs_;  // per output channel: positions in the input block
  std::vector<config::TransformStep> steps_;
  double rate_hz_;
  int history_;
};

// The per-step arithmetic, on one channel (exposed for tests). Each returns
// n - history values; element k belongs to input sample history + k.
std::vector<double> lowpass(const std::vector<double>& x, double cutoff_hz, int taps,
                            double rate_hz);
std::vector<double> derivative(const std::vector<double>& x, double rate_hz);
// ln((P_freeze + floor) / (P_locomotion + floor)) of the last `window` samples
// at every sample; P_band = sum over DFT bins k with band_low <= k * rate /
// window < band_high of 2 |X_k|^2 / window^2 (the band's mean power).
std::vector<double> freeze_index(const std::vector<double>& x, const config::TransformStep& step,
                                 double rate_hz);
// At every sample t: the angle in degrees (0..180) between the mean of
// a[t-window+1 .. t] and the mean of a[t-lag-window+1 .. t-lag]; 0 where
// either mean is the zero vector. History: lag + window - 1. A rotation of
// every a[i] by the same matrix leaves it unchanged.
std::vector<double> orientation_change(const std::vector<std::array<double, 3>>& a, int window,
                                       int lag);

}  // namespace gw::pipeline
