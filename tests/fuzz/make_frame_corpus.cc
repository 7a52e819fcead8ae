// Writes the seed corpus of frame_fuzz into the directory given as argv[1]:
// valid frames from the encoder for every device kind and both sample formats,
// then truncated, extended and corrupted copies of them. The output is checked
// in (tests/fuzz/corpus/frame_fuzz); rerun this after a protocol change.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "sensors/frame.h"

namespace {

using gw::sensors::DeviceKind;
using gw::sensors::Frame;
using gw::sensors::SampleFormat;
using Bytes = std::vector<std::uint8_t>;

void write(const std::string& dir, const std::string& name, const Bytes& bytes) {
  std::ofstream out(dir + "/" + name, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write %s/%s\n", dir.c_str(), name.c_str());
    std::exit(1);
  }
}

Frame make(DeviceKind kind, SampleFormat format, int channels, int samples, float rate) {
  Frame f;
  f.kind = kind;
  f.format = format;
  f.wearer_id = 7;
  f.device_id = static_cast<std::uint16_t>(kind);
  f.channels = static_cast<std::uint16_t>(channels);
  f.samples = static_cast<std::uint16_t>(samples);
  f.sample_rate_hz = rate;
  f.sequence = 42;
  f.device_time_us = 1700000000000000ull;
  f.values.resize(static_cast<std::size_t>(channels) * samples);
  for (std::size_t i = 0; i < f.values.size(); ++i) {
    f.values[i] = static_cast<float>(1000.0 * std::sin(0.01 * static_cast<double>(i)));
  }
  if (format == SampleFormat::kInt16Scaled) f.scales = gw::sensors::fit_int16_scales(f.values, channels);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_frame_corpus DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  struct Seed {
    const char* name;
    Frame frame;
  };
  const std::vector<Seed> seeds = {
      {"accel_f32", make(DeviceKind::kAccelerometer3, SampleFormat::kFloat32, 3, 8, 64)},
      {"accel_i16", make(DeviceKind::kAccelerometer3, SampleFormat::kInt16Scaled, 3, 8, 64)},
      {"insole_left_i16", make(DeviceKind::kPressureInsoleLeft, SampleFormat::kInt16Scaled, 99, 2, 100)},
      {"insole_right_f32", make(DeviceKind::kPressureInsoleRight, SampleFormat::kFloat32, 99, 1, 100)},
      {"force8_i16", make(DeviceKind::kForceInsole8, SampleFormat::kInt16Scaled, 8, 10, 100)},
      {"generic_f32_1x1", make(DeviceKind::kGeneric, SampleFormat::kFloat32, 1, 1, 1)},
      {"generic_i16_5x4", make(DeviceKind::kGeneric, SampleFormat::kInt16Scaled, 5, 4, 100000)},
      // Close to the datagram limit: 40 + 16365 * 4 + 4 = 65504 <= 65507.
      {"generic_f32_max", make(DeviceKind::kGeneric, SampleFormat::kFloat32, 1, 16365, 200)},
  };
  int written = 0;
  for (const Seed& seed : seeds) {
    const Bytes valid = gw::sensors::encode_frame(seed.frame);
    const std::string base = seed.name;
    write(dir, "valid_" + base, valid);
    ++written;
    if (valid.size() > 4096) continue;  // one big seed is enough; variants of the small ones
    // Truncated: inside the header, just after it, one byte short of the CRC.
    write(dir, "truncated_header_" + base, Bytes(valid.begin(), valid.begin() + 20));
    write(dir, "truncated_payload_" + base, Bytes(valid.begin(), valid.begin() + 44));
    write(dir, "truncated_crc_" + base, Bytes(valid.begin(), valid.end() - 1));
    // Extended: one trailing byte.
    Bytes longer = valid;
    longer.push_back(0);
    write(dir, "extended_" + base, longer);
    // Corrupted: a payload bit (bad CRC), the payload length field, the counts.
    Bytes flipped = valid;
    flipped[gw::sensors::kFrameHeaderBytes + 1] ^= 0x10;
    write(dir, "corrupt_payload_" + base, flipped);
    Bytes counts = valid;
    counts[16] = 0xff;  // samples (low byte)
    counts[17] = 0xff;
    write(dir, "corrupt_samples_" + base, counts);
    Bytes length = valid;
    length[36] ^= 0x04;
    write(dir, "corrupt_length_" + base, length);
    written += 7;
  }
  std::printf("%d seeds written to %s\n", written, dir.c_str());
  return 0;
}
