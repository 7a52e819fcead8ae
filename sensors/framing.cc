#include "sensors/framing.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace gw::sensors {

std::vector<Frame> frames_from_recording(const Recording& rec, std::uint32_t wearer,
                                         std::uint16_t device, DeviceKind kind, int frame_samples,
                                         std::size_t begin, std::size_t end, bool int16) {
  if (frame_samples < 1) throw Error("frame samples must be >= 1");
  end = std::min(end, rec.samples());
  const auto channels = static_cast<int>(rec.channels());
  std::vector<float> scales;
  if (int16) {
    std::vector<float> selected(rec.values.begin() + static_cast<std::ptrdiff_t>(begin * channels),
                                rec.values.begin() + static_cast<std::ptrdiff_t>(end * channels));
    scales = fit_int16_scales(selected, channels);
  }
  std::vector<Frame> frames;
  std::uint32_t sequence = 0;
  for (std::size_t s = begin; s < end; s += static_cast<std::size_t>(frame_samples)) {
    const std::size_t n = std::min<std::size_t>(frame_samples, end - s);
    Frame f;
    f.kind = kind;
    f.format = int16 ? SampleFormat::kInt16Scaled : SampleFormat::kFloat32;
    f.wearer_id = wearer;
    f.device_id = device;
    f.channels = static_cast<std::uint16_t>(channels);
    f.samples = static_cast<std::uint16_t>(n);
    f.sample_rate_hz = static_cast<float>(rec.sample_rate_hz);
    f.sequence = sequence++;
    f.device_time_us = static_cast<std::uint64_t>(std::llround(std::max(0.0, rec.time_s[s]) * 1e6));
    f.scales = scales;
    f.values.assign(rec.values.begin() + static_cast<std::ptrdiff_t>(s * channels),
                    rec.values.begin() + static_cast<std::ptrdiff_t>((s + n) * channels));
    if (int16) {
      // What the receiver will see after int16 quantisation.
      for (std::size_t i = 0; i < f.values.size(); ++i) {
        const float scale = scales[i % static_cast<std::size_t>(channels)];
        const float q = std::round(f.values[i] / scale);
        f.values[i] = std::clamp(q, -32768.0f, 32767.0f) * scale;
      }
    }
    frames.push_back(std::move(f));
  }
  return frames;
}

}  // namespace gw::sensors
