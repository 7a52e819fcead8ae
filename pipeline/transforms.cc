#include "pipeline/transforms.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "common/error.h"

namespace gw::pipeline {

namespace {

constexpr double kPi = 3.14159265358979323846;

}  // namespace

std::vector<double> lowpass(const std::vector<double>& x, double cutoff_hz, int taps,
                            double rate_hz) {
  // Windowed sinc (Hamming), normalised to unit gain at 0 Hz. Causal: the
  // output lags the input by (taps - 1) / 2 samples.
  const double fc = cutoff_hz / rate_hz;  // cycles per sample
  const int centre = (taps - 1) / 2;
  std::vector<double> h(static_cast<std::size_t>(taps));
  double sum = 0;
  for (int n = 0; n < taps; ++n) {
    const double k = n - centre;
    const double sinc = k == 0 ? 2 * fc : std::sin(2 * kPi * fc * k) / (kPi * k);
    const double window = 0.54 - 0.46 * std::cos(2 * kPi * n / (taps - 1));
    h[static_cast<std::size_t>(n)] = sinc * window;
    sum += h[static_cast<std::size_t>(n)];
  }
  for (double& v : h) v /= sum;
  const int n_out = static_cast<int>(x.size()) - (taps - 1);
  std::vector<double> y(static_cast<std::size_t>(std::max(0, n_out)));
  for (int k = 0; k < n_out; ++k) {
    const int t = k + taps - 1;
    double acc = 0;
    for (int n = 0; n < taps; ++n)
      acc += h[static_cast<std::size_t>(n)] * x[static_cast<std::size_t>(t - n)];
    y[static_cast<std::size_t>(k)] = acc;
  }
  return y;
}

std::vector<double> derivative(const std::vector<double>& x, double rate_hz) {
  std::vector<double> y;
  for (std::size_t t = 1; t < x.size(); ++t) y.push_back((x[t] - x[t - 1]) * rate_hz);
  return y;
}

std::vector<double> freeze_index(const std::vector<double>& x, const config::TransformStep& step,
                                 double rate_hz) {
  const int window = step.window_samples(rate_hz);
  // Bins of each band: k with low <= k * rate / window < high.
  auto bins = [&](const double band[2]) {
    std::vector<int> out;
    for (int k = 1; k <= window / 2; ++k) {
      const double f = k * rate_hz / window;
      if (f >= band[0] && f < band[1]) out.push_back(k);
    }
    return out;
  };
  const std::vector<int> locomotion = bins(step.locomotion_band_hz);
  const std::vector<int> freeze = bins(step.freeze_band_hz);
  std::vector<double> cos_table(static_cast<std::size_t>(window)),
      sin_table(static_cast<std::size_t>(window));
  for (int n = 0; n < window; ++n) {
    cos_table[static_cast<std::size_t>(n)] = std::cos(2 * kPi * n / window);
    sin_table[static_cast<std::size_t>(n)] = std::sin(2 * kPi * n / window);
  }
  const double scale = 2.0 / (static_cast<double>(window) * window);
  auto band_power = [&](const double* w, const std::vector<int>& ks) {
    double power = 0;
    for (const int k : ks) {
      double re = 0, im = 0;
      int phase = 0;  // (k * n) mod window, kept incrementally
      for (int n = 0; n < window; ++n) {
        re += w[n] * cos_table[static_cast<std::size_t>(phase)];
        im -= w[n] * sin_table[static_cast<std::size_t>(phase)];
        phase += k;
        if (phase >= window) phase -= window;
      }
      power += (re * re + im * im) * scale;
    }
    return power;
  };
  const int n_out = static_cast<int>(x.size()) - (window - 1);
  std::vector<double> y(static_cast<std::size_t>(std::max(0, n_out)));
  for (int k = 0; k < n_out; ++k) {
    const double* w = x.data() + k;
    const double p_loco = band_power(w, locomotion);
    const double p_freeze = band_power(w, freeze);
    y[static_cast<std::size_t>(k)] =
        std::log((p_freeze + step.power_floor) / (p_loco + step.power_floor));
  }
  return y;
}

std::vector<double> orientation_change(const std::vector<std::array<double, 3>>& a, int window,
                                       int lag) {
  // Running sums make each mean O(1): sum[i] = a[0] + ... + a[i - 1].
  const std::size_t n = a.size();
  std::vector<std::array<double, 3>> sum(n + 1, {0, 0, 0});
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t c = 0; c < 3; ++c) sum[i + 1][c] = sum[i][c] + a[i][c];
  const int history = lag + window - 1;
  const int n_out = static_cast<int>(n) - history;
  std::vector<double> y(static_cast<std::size_t>(std::max(0, n_out)));
  for (int k = 0; k < n_out; ++k) {
    // Output k belongs to sample t = history + k: the mean of t-window+1..t
    // against the mean of t-lag-window+1..t-lag (sums, as only the angle counts).
    const std::size_t now_end = static_cast<std::size_t>(history + k + 1);
    const std::size_t then_end = now_end - static_cast<std::size_t>(lag);
    double dot = 0, now_sq = 0, then_sq = 0;
    for (std::size_t c = 0; c < 3; ++c) {
      const double now = sum[now_end][c] - sum[now_end - static_cast<std::size_t>(window)][c];
      const double then = sum[then_end][c] - sum[then_end - static_cast<std::size_t>(window)][c];
      dot += now * then;
      now_sq += now * now;
      then_sq += then * then;
    }
    // A mean of (near) zero has no direction: no turn is measured against it.
    const double norms = std::sqrt(now_sq * then_sq);
    y[static_cast<std::size_t>(k)] =
        norms > 1e-12 ? std::acos(std::clamp(dot / norms, -1.0, 1.0)) * 180 / kPi : 0;
  }
  return y;
}

TransformChain::TransformChain(const std::vector<int>& inputs,
                               const std::vector<config::DerivedChannel>& dims,
                               std::vector<config::TransformStep> steps, double sample_rate_hz)
    : inputs_(inputs.size()),
      steps_(std::move(steps)),
      rate_hz_(sample_rate_hz),
      history_(config::transform_history(steps_, sample_rate_hz)) {
  for (const auto& dim : dims) {
    std::vector<int> positions;
    for (const int channel : dim.inputs) {
      const auto it = std::find(inputs.begin(), inputs.end(), channel);
      if (it == inputs.end())
        throw Error("transform: derived channel '" + dim.name + "' reads channel " +
                    std::to_string(channel) + ", which is not an input");
      positions.push_back(static_cast<int>(it - inputs.begin()));
    }
    dim_inputs_.push_back(std::move(positions));
  }
}

void TransformChain::apply(const float* in, int samples, std::vector<float>& out) const {
  if (samples <= history_) return;
  const int n_out = samples - history_;
  const std::size_t first = out.size();
  out.resize(first + static_cast<std::size_t>(n_out) * dim_inputs_.size());
  using Kind = config::TransformStep::Kind;
  const Kind first_step = steps_.empty() ? Kind::kRaw : steps_[0].kind;
  for (std::size_t d = 0; d < dim_inputs_.size(); ++d) {
    // The derived channel before the per-channel steps: one input, the
    // magnitude of its inputs, or their turn.
    std::vector<double> x;
    if (first_step == Kind::kOrientationChange) {
      // Two or three axes of the group (the config allows no other count);
      // a missing third reads as 0: a turn in a plane.
      std::vector<std::array<double, 3>> axes(static_cast<std::size_t>(samples), {0, 0, 0});
      for (int s = 0; s < samples; ++s) {
        const float* row = in + static_cast<std::size_t>(s) * inputs_;
        for (std::size_t c = 0; c < dim_inputs_[d].size() && c < 3; ++c)
          axes[static_cast<std::size_t>(s)][c] = row[dim_inputs_[d][c]];
      }
      x = orientation_change(axes, steps_[0].window_samples(rate_hz_),
                             steps_[0].lag_samples(rate_hz_));
    } else {
      x.resize(static_cast<std::size_t>(samples));
      for (int s = 0; s < samples; ++s) {
        const float* row = in + static_cast<std::size_t>(s) * inputs_;
        if (first_step == Kind::kMagnitude) {
          double sum = 0;
          for (const int p : dim_inputs_[d]) sum += static_cast<double>(row[p]) * row[p];
          x[static_cast<std::size_t>(s)] = std::sqrt(sum);
        } else {
          x[static_cast<std::size_t>(s)] = row[dim_inputs_[d][0]];
        }
      }
    }
    for (const auto& step : steps_) {
      switch (step.kind) {
        case config::TransformStep::Kind::kRaw:
        case config::TransformStep::Kind::kMagnitude:
        case config::TransformStep::Kind::kOrientationChange:
          break;
        case config::TransformStep::Kind::kLowpass:
          x = lowpass(x, step.cutoff_hz, step.lowpass_taps(rate_hz_), rate_hz_);
          break;
        case config::TransformStep::Kind::kDerivative:
          x = derivative(x, rate_hz_);
          break;
        case config::TransformStep::Kind::kFreezeIndex:
          x = freeze_index(x, step, rate_hz_);
          break;
      }
    }
    for (int k = 0; k < n_out; ++k)
      out[first + static_cast<std::size_t>(k) * dim_inputs_.size() + d] =
          static_cast<float>(x[static_cast<std::size_t>(k)]);
  }
}

}  // namespace gw::pipeline
