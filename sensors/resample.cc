#include "sensors/resample.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"

namespace gw::sensors {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kPassbandFraction = 0.8;  // passband edge / lower Nyquist frequency
constexpr double kRatioTolerance = 1e-9;

std::string hz(double rate) {
  std::string text = std::to_string(rate);
  text.erase(text.find_last_not_of('0') + 1);
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text + " Hz";
}

// Modified Bessel function of the first kind, order 0 (power series).
double bessel_i0(double x) {
  double sum = 1.0;
  double term = 1.0;
  const double quarter_x2 = x * x / 4.0;
  for (int k = 1; k < 500; ++k) {
    term *= quarter_x2 / (static_cast<double>(k) * k);
    sum += term;
    if (term < sum * 1e-17) break;
  }
  return sum;
}

// The polyphase branches of the lowpass: branch p holds taps p, p + L, p + 2L,
// ... of the prototype, each branch scaled to sum to 1.
struct PolyphaseFilter {
  long up = 1;
  long down = 1;
  std::int64_t centre = 0;  // (taps - 1) / 2: the prototype's delay, compensated
  std::vector<std::vector<double>> branches;
};

PolyphaseFilter design_filter(double source_rate_hz, double target_rate_hz, long up, long down) {
  const double upsampled_rate = source_rate_hz * static_cast<double>(up);
  const double lower_nyquist = std::min(source_rate_hz, target_rate_hz) / 2.0;
  const double passband_edge = kPassbandFraction * lower_nyquist;
  const double stopband_edge = lower_nyquist;
  const double cutoff = (passband_edge + stopband_edge) / 2.0;
  const double transition_rad = 2.0 * kPi * (stopband_edge - passband_edge) / upsampled_rate;
  const double attenuation = kResampleStopbandDb;
  const double beta = 0.1102 * (attenuation - 8.7);  // Kaiser, for attenuation > 50 dB
  auto taps = static_cast<std::int64_t>(std::ceil((attenuation - 7.95) / (2.285 * transition_rad))) + 1;
  if (taps % 2 == 0) ++taps;

  PolyphaseFilter filter;
  filter.up = up;
  filter.down = down;
  filter.centre = (taps - 1) / 2;
  const double normalised_cutoff = 2.0 * cutoff / upsampled_rate;  // of the upsampled Nyquist
  const double window_norm = bessel_i0(beta);
  std::vector<double> prototype(static_cast<std::size_t>(taps));
  for (std::int64_t i = 0; i < taps; ++i) {
    const double offset = static_cast<double>(i - filter.centre);
    const double x = normalised_cutoff * offset;
    const double sinc = offset == 0 ? 1.0 : std::sin(kPi * x) / (kPi * x);
    const double r = offset / static_cast<double>(filter.centre);
    const double window = bessel_i0(beta * std::sqrt(std::max(0.0, 1.0 - r * r))) / window_norm;
    prototype[static_cast<std::size_t>(i)] = normalised_cutoff * sinc * window;
  }
  filter.branches.resize(static_cast<std::size_t>(up));
  for (std::int64_t i = 0; i < taps; ++i)
    filter.branches[static_cast<std::size_t>(i % up)].push_back(prototype[static_cast<std::size_t>(i)]);
  for (auto& branch : filter.branches) {
    double sum = 0;
    for (double tap : branch) sum += tap;
    for (double& tap : branch) tap /= sum;
  }
  return filter;
}

}  // namespace

void resample_ratio(double source_rate_hz, double target_rate_hz, long& up, long& down) {
  if (!(std::isfinite(source_rate_hz) && source_rate_hz > 0 && std::isfinite(target_rate_hz) &&
        target_rate_hz > 0))
    throw Error("resample: rates must be positive numbers of Hz (from " + hz(source_rate_hz) +
                " to " + hz(target_rate_hz) + ")");
  const double ratio = target_rate_hz / source_rate_hz;
  // Continued-fraction convergents p/q of the ratio.
  long p_prev = 0, q_prev = 1, p = 1, q = 0;  // convergents -2 and -1
  double rest = ratio;
  for (int step = 0; step < 64; ++step) {
    const double whole = std::floor(rest);
    if (whole > static_cast<double>(kResampleMaxFactor)) break;
    const long a = static_cast<long>(whole);
    const long p_next = a * p + p_prev;
    const long q_next = a * q + q_prev;
    if (p_next > kResampleMaxFactor || q_next > kResampleMaxFactor) break;
    p_prev = p;
    q_prev = q;
    p = p_next;
    q = q_next;
    if (p > 0 && std::abs(static_cast<double>(p) / static_cast<double>(q) - ratio) <=
                     kRatioTolerance * ratio) {
      up = p;
      down = q;
      return;
    }
    const double fraction = rest - whole;
    if (fraction <= 0) break;
    rest = 1.0 / fraction;
  }
  throw Error("resample: " + hz(source_rate_hz) + " -> " + hz(target_rate_hz) +
              " is not a ratio L/M with L and M at most " + std::to_string(kResampleMaxFactor));
}

Recording resample(const Recording& rec, double target_rate_hz) {
  long up = 1, down = 1;
  resample_ratio(rec.sample_rate_hz, target_rate_hz, up, down);
  const std::size_t in_samples = rec.samples();
  const std::size_t width = rec.channels();
  if (in_samples == 0)
    throw Error("resample: " + rec.source + " has no samples");
  if (rec.values.size() != in_samples * width ||
      (!rec.time_s.empty() && rec.time_s.size() != in_samples) ||
      (!rec.labels.empty() && rec.labels.size() != in_samples))
    throw Error("resample: " + rec.source + " has per-sample vectors of different lengths");
  if (up == 1 && down == 1) {
    Recording same = rec;
    same.sample_rate_hz = target_rate_hz;
    return same;
  }

  const PolyphaseFilter filter = design_filter(rec.sample_rate_hz, target_rate_hz, up, down);
  const auto last_input = static_cast<std::int64_t>(in_samples) - 1;
  const std::size_t out_samples =
      static_cast<std::size_t>(last_input * up / down) + 1;

  Recording out;
  out.source = rec.source;
  out.sample_rate_hz = target_rate_hz;
  out.channel_names = rec.channel_names;
  out.values.resize(out_samples * width);
  out.time_s.resize(out_samples);
  const double start_s = rec.time_s.empty() ? 0.0 : rec.time_s.front();
  if (!rec.labels.empty()) out.labels.resize(out_samples);

  std::vector<double> sums(width);
  for (std::size_t k = 0; k < out_samples; ++k) {
    // Output k sits at upsampled index k*M; the centred prototype reads
    // upsampled index k*M + centre - i for tap i, which holds input n when it
    // equals n*L.
    const std::int64_t reach = static_cast<std::int64_t>(k) * down + filter.centre;
    const std::int64_t phase = reach % up;
    const std::int64_t newest = reach / up;  // input index of the branch's tap 0
    const std::vector<double>& branch = filter.branches[static_cast<std::size_t>(phase)];
    std::fill(sums.begin(), sums.end(), 0.0);
    for (std::size_t j = 0; j < branch.size(); ++j) {
      const std::int64_t n =
          std::clamp<std::int64_t>(newest - static_cast<std::int64_t>(j), 0, last_input);
      const float* row = &rec.values[static_cast<std::size_t>(n) * width];
      for (std::size_t c = 0; c < width; ++c) sums[c] += branch[j] * row[c];
    }
    for (std::size_t c = 0; c < width; ++c)
      out.values[k * width + c] = static_cast<float>(sums[c]);
    out.time_s[k] = start_s + static_cast<double>(k) / target_rate_hz;
    if (!rec.labels.empty()) {
      // Nearest input sample in time: round(k * M / L).
      const std::int64_t nearest =
          (2 * static_cast<std::int64_t>(k) * down + up) / (2 * up);
      out.labels[k] = rec.labels[static_cast<std::size_t>(std::min(nearest, last_input))];
    }
  }
  return out;
}

}  // namespace gw::sensors
