#include "sensors/frame.h"

#include <sodium.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"

using gw::sensors::decode_frame;
using gw::sensors::DecodeStatus;
using gw::sensors::DeviceKind;
using gw::sensors::encode_frame;
using gw::sensors::fit_int16_scales;
using gw::sensors::Frame;
using gw::sensors::kFrameCrcBytes;
using gw::sensors::kFrameHeaderBytes;
using gw::sensors::kMaxFrameBytes;
using gw::sensors::SampleFormat;

namespace {

using Bytes = std::vector<std::uint8_t>;

// Field offsets as docs/protocol.md specifies them; the tests write bytes at
// these offsets on purpose instead of using the codec's own constants.
constexpr std::size_t kVersionAt = 4, kKindAt = 5, kFormatAt = 6, kFlagsAt = 7, kWearerAt = 8,
                      kDeviceAt = 12, kChannelsAt = 14, kSamplesAt = 16, kReservedAt = 18,
                      kRateAt = 20, kSequenceAt = 24, kTimeAt = 28, kPayloadBytesAt = 36;

void put_le(Bytes& b, std::size_t at, std::uint64_t v, std::size_t size) {
  for (std::size_t i = 0; i < size; ++i) b.at(at + i) = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint64_t get_le(const Bytes& b, std::size_t at, std::size_t size) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < size; ++i) v |= std::uint64_t{b.at(at + i)} << (8 * i);
  return v;
}
void put_f32(Bytes& b, std::size_t at, float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  put_le(b, at, bits, 4);
}
std::uint32_t crc_of(const std::uint8_t* data, std::size_t size) {
  return static_cast<std::uint32_t>(crc32(0L, data, static_cast<uInt>(size)));
}
// True when the last 4 bytes are the CRC32 of everything before them.
bool crc_matches(const Bytes& b) {
  if (b.size() < kFrameCrcBytes) return false;
  const std::size_t body = b.size() - kFrameCrcBytes;
  return get_le(b, body, 4) == crc_of(b.data(), body);
}
void fix_crc(Bytes& b) {
  const std::size_t body = b.size() - kFrameCrcBytes;
  put_le(b, body, crc_of(b.data(), body), 4);
}

DecodeStatus decode(const Bytes& b) {
  Frame out;
  return decode_frame(b.data(), b.size(), out);
}

Frame sample_frame(SampleFormat format, DeviceKind kind = DeviceKind::kForceInsole8,
                   std::uint16_t channels = 8, std::uint16_t samples = 5) {
  Frame f;
  f.kind = kind;
  f.format = format;
  f.wearer_id = 0xA1B2C3D4u;
  f.device_id = 0xBEEF;
  f.channels = channels;
  f.samples = samples;
  f.sample_rate_hz = 100.0f;
  f.sequence = 0x01020304u;
  f.device_time_us = 0x1122334455667788ull;
  for (int s = 0; s < samples; ++s) {
    for (int c = 0; c < channels; ++c) {
      f.values.push_back(std::sin(0.3f * s + c) * (1.0f + 10.0f * c) - 0.25f * c);
    }
  }
  if (format == SampleFormat::kInt16Scaled) f.scales = fit_int16_scales(f.values, channels);
  return f;
}

void require_same_header(const Frame& a, const Frame& b) {
  CHECK(a.kind == b.kind);
  CHECK(a.format == b.format);
  CHECK(a.wearer_id == b.wearer_id);
  CHECK(a.device_id == b.device_id);
  CHECK(a.channels == b.channels);
  CHECK(a.samples == b.samples);
  CHECK(a.sample_rate_hz == b.sample_rate_hz);
  CHECK(a.sequence == b.sequence);
  CHECK(a.device_time_us == b.device_time_us);
}

}  // namespace

TEST_CASE("float32 frames round-trip exactly", "[frame]") {
  const Frame in = sample_frame(SampleFormat::kFloat32);
  const Bytes bytes = encode_frame(in);
  REQUIRE(bytes.size() == kFrameHeaderBytes + 8 * 5 * 4 + kFrameCrcBytes);
  CHECK(get_le(bytes, 0, 4) == gw::sensors::kFrameMagic);
  CHECK(std::string(bytes.begin(), bytes.begin() + 4) == "GAWF");
  CHECK(get_le(bytes, kPayloadBytesAt, 4) == 8 * 5 * 4);

  Frame out;
  REQUIRE(decode_frame(bytes.data(), bytes.size(), out) == DecodeStatus::kOk);
  require_same_header(in, out);
  CHECK(out.scales.empty());
  CHECK(out.values == in.values);
}

TEST_CASE("int16 frames round-trip within half a scale step", "[frame]") {
  const Frame in = sample_frame(SampleFormat::kInt16Scaled, DeviceKind::kPressureInsoleLeft, 99, 7);
  const Bytes bytes = encode_frame(in);
  REQUIRE(bytes.size() == kFrameHeaderBytes + 99 * 4 + 99 * 7 * 2 + kFrameCrcBytes);

  Frame out;
  REQUIRE(decode_frame(bytes.data(), bytes.size(), out) == DecodeStatus::kOk);
  require_same_header(in, out);
  CHECK(out.scales == in.scales);
  REQUIRE(out.values.size() == in.values.size());
  for (std::size_t i = 0; i < in.values.size(); ++i) {
    const float scale = in.scales[i % 99];
    // Half a step, plus the float rounding of raw * scale.
    CHECK(std::fabs(out.values[i] - in.values[i]) <=
          0.5f * scale + 1e-6f * std::fabs(in.values[i]));
  }
  // Decoded values are exact multiples of the scale, so they re-encode to the same bytes.
  CHECK(encode_frame(out) == bytes);
}

TEST_CASE("fit_int16_scales covers each channel's largest magnitude", "[frame]") {
  // Channel 0 is all zeros, the others span very different magnitudes.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const std::vector<float> magnitude = {0.0f, 1e-3f, 1.0f, 3e4f, 1e9f};
  const int channels = static_cast<int>(magnitude.size());
  std::vector<float> values;
  for (int s = 0; s < 200; ++s) {
    for (int c = 0; c < channels; ++c) values.push_back(magnitude[c] * unit(rng));
  }
  values[3 * channels + 2] = -1.5f;  // the largest magnitude of channel 2 is negative
  const std::vector<float> scales = fit_int16_scales(values, channels);
  REQUIRE(scales.size() == magnitude.size());
  CHECK(scales[0] == 1.0f);
  CHECK(scales[2] == Approx(1.5f / 32767.0f));
  for (int c = 1; c < channels; ++c) {
    float max_abs = 0;
    for (int s = 0; s < 200; ++s) max_abs = std::max(max_abs, std::fabs(values[s * channels + c]));
    CHECK(scales[c] == Approx(max_abs / 32767.0f));
  }

  Frame f;
  f.format = SampleFormat::kInt16Scaled;
  f.channels = static_cast<std::uint16_t>(channels);
  f.samples = 200;
  f.sample_rate_hz = 64;
  f.values = values;
  f.scales = scales;
  const Bytes bytes = encode_frame(f);
  Frame out;
  REQUIRE(decode_frame(bytes.data(), bytes.size(), out) == DecodeStatus::kOk);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float scale = scales[i % channels];
    CHECK(std::fabs(out.values[i] - values[i]) <= 0.5f * scale + 1e-6f * std::fabs(values[i]));
  }
  for (int s = 0; s < 200; ++s) CHECK(out.values[s * channels] == 0.0f);

  CHECK_THROWS_AS(fit_int16_scales(values, 0), gw::Error);
  CHECK_THROWS_AS(fit_int16_scales({1, 2, 3}, 2), gw::Error);
}

TEST_CASE("values beyond a too small scale clamp to the int16 range", "[frame]") {
  Frame f;
  f.format = SampleFormat::kInt16Scaled;
  f.channels = 1;
  f.samples = 2;
  f.sample_rate_hz = 10;
  f.values = {1e6f, -1e6f};
  f.scales = {1.0f};
  const Bytes bytes = encode_frame(f);
  Frame out;
  REQUIRE(decode_frame(bytes.data(), bytes.size(), out) == DecodeStatus::kOk);
  CHECK(out.values == std::vector<float>{32767.0f, -32768.0f});
}

TEST_CASE("each corrupted header field maps to its own status", "[frame]") {
  const auto format = GENERATE(SampleFormat::kFloat32, SampleFormat::kInt16Scaled);
  const Bytes valid = encode_frame(sample_frame(format));
  REQUIRE(decode(valid) == DecodeStatus::kOk);

  struct Case {
    const char* what;
    std::size_t at;
    std::size_t size;
    std::uint64_t value;
    DecodeStatus expected;
  };
  const std::uint64_t payload = get_le(valid, kPayloadBytesAt, 4);
  const Case cases[] = {
      {"magic", 0, 4, 0x46574148, DecodeStatus::kBadMagic},
      {"magic byte order", 0, 4, 0x47415746, DecodeStatus::kBadMagic},
      {"version 0", kVersionAt, 1, 0, DecodeStatus::kBadVersion},
      {"version 3", kVersionAt, 1, 3, DecodeStatus::kBadVersion},
      {"kind 0", kKindAt, 1, 0, DecodeStatus::kBadKind},
      {"kind 6", kKindAt, 1, 6, DecodeStatus::kBadKind},
      {"kind 255", kKindAt, 1, 255, DecodeStatus::kBadKind},
      {"format 0", kFormatAt, 1, 0, DecodeStatus::kBadFormat},
      {"format 3", kFormatAt, 1, 3, DecodeStatus::kBadFormat},
      {"flags", kFlagsAt, 1, 1, DecodeStatus::kBadFormat},
      {"flags high bit", kFlagsAt, 1, 0x80, DecodeStatus::kBadFormat},
      {"reserved", kReservedAt, 2, 1, DecodeStatus::kBadFormat},
      {"zero channels", kChannelsAt, 2, 0, DecodeStatus::kBadCounts},
      {"channels differ from the kind's", kChannelsAt, 2, 9, DecodeStatus::kBadCounts},
      {"zero samples", kSamplesAt, 2, 0, DecodeStatus::kBadCounts},
      {"samples disagree with payload_bytes", kSamplesAt, 2, 6, DecodeStatus::kBadCounts},
      {"payload_bytes one more", kPayloadBytesAt, 4, payload + 1, DecodeStatus::kBadCounts},
      {"payload_bytes one less", kPayloadBytesAt, 4, payload - 1, DecodeStatus::kBadCounts},
      {"payload_bytes huge", kPayloadBytesAt, 4, 0xFFFFFFFF, DecodeStatus::kBadCounts},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    Bytes b = valid;
    put_le(b, c.at, c.value, c.size);
    fix_crc(b);
    CHECK(decode(b) == c.expected);
  }

  // A kind that fixes no count (generic) accepts the same 8 channels.
  Bytes generic = valid;
  put_le(generic, kKindAt, static_cast<std::uint8_t>(DeviceKind::kGeneric), 1);
  fix_crc(generic);
  CHECK(decode(generic) == DecodeStatus::kOk);
  // The 99-channel kinds reject 8 channels.
  Bytes insole = valid;
  put_le(insole, kKindAt, static_cast<std::uint8_t>(DeviceKind::kPressureInsoleRight), 1);
  fix_crc(insole);
  CHECK(decode(insole) == DecodeStatus::kBadCounts);

  for (float rate : {0.0f, -1.0f, 100000.5f, std::numeric_limits<float>::quiet_NaN(),
                     std::numeric_limits<float>::infinity()}) {
    INFO("rate " << rate);
    Bytes b = valid;
    put_f32(b, kRateAt, rate);
    fix_crc(b);
    CHECK(decode(b) == DecodeStatus::kBadRate);
  }
  Bytes fastest = valid;
  put_f32(fastest, kRateAt, 100000.0f);
  fix_crc(fastest);
  CHECK(decode(fastest) == DecodeStatus::kOk);
}

TEST_CASE("fields without invalid values decode as written and are covered by the CRC", "[frame]") {
  const Bytes valid = encode_frame(sample_frame(SampleFormat::kFloat32));
  struct Case {
    std::size_t at;
    std::size_t size;
    std::uint64_t value;
  };
  const Case cases[] = {
      {kWearerAt, 4, 17}, {kDeviceAt, 2, 3}, {kSequenceAt, 4, 99}, {kTimeAt, 8, 5}};
  for (const Case& c : cases) {
    Bytes b = valid;
    put_le(b, c.at, c.value, c.size);
    CHECK(decode(b) == DecodeStatus::kBadCrc);
    fix_crc(b);
    Frame out;
    REQUIRE(decode_frame(b.data(), b.size(), out) == DecodeStatus::kOk);
    const std::uint64_t got = c.at == kWearerAt     ? out.wearer_id
                              : c.at == kDeviceAt   ? out.device_id
                              : c.at == kSequenceAt ? out.sequence
                                                    : out.device_time_us;
    CHECK(got == c.value);
  }
}

TEST_CASE("bad scales and non-finite float samples are rejected", "[frame]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Bytes scaled = encode_frame(sample_frame(SampleFormat::kInt16Scaled));
  for (float scale : {0.0f, -0.0f, nan, inf, -inf, 3e38f}) {
    INFO("scale " << scale);
    Bytes b = scaled;
    put_f32(b, kFrameHeaderBytes + 4 * 3, scale);  // channel 3's scale
    fix_crc(b);
    CHECK(decode(b) == DecodeStatus::kBadScale);
  }
  const Bytes floats = encode_frame(sample_frame(SampleFormat::kFloat32));
  for (float value : {nan, inf, -inf}) {
    INFO("value " << value);
    Bytes b = floats;
    put_f32(b, kFrameHeaderBytes + 4 * 17, value);
    fix_crc(b);
    CHECK(decode(b) == DecodeStatus::kBadValue);
    // Without the CRC fix the same damage counts as line noise.
    Bytes noisy = floats;
    put_f32(noisy, kFrameHeaderBytes + 4 * 17, value);
    CHECK(decode(noisy) == DecodeStatus::kBadCrc);
  }
}

TEST_CASE("every single bit flip is detected", "[frame]") {
  const auto format = GENERATE(SampleFormat::kFloat32, SampleFormat::kInt16Scaled);
  const Bytes valid = encode_frame(sample_frame(format));
  std::size_t crc_statuses = 0;
  for (std::size_t i = 0; i < valid.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      Bytes b = valid;
      b[i] ^= static_cast<std::uint8_t>(1u << bit);
      const DecodeStatus status = decode(b);
      INFO("byte " << i << " bit " << bit);
      REQUIRE(status != DecodeStatus::kOk);
      // Payload and CRC bytes carry no structure: only the CRC can catch them.
      if (i >= kFrameHeaderBytes) CHECK(status == DecodeStatus::kBadCrc);
      crc_statuses += status == DecodeStatus::kBadCrc;
    }
  }
  CHECK(crc_statuses >= 8 * (valid.size() - kFrameHeaderBytes));
}

TEST_CASE("every truncation is reported as truncated", "[frame]") {
  const auto format = GENERATE(SampleFormat::kFloat32, SampleFormat::kInt16Scaled);
  const Bytes valid = encode_frame(sample_frame(format));
  for (std::size_t size = 0; size < valid.size(); ++size) {
    // A copy of exactly `size` bytes, so a sanitizer would see any overread.
    const Bytes prefix(valid.begin(), valid.begin() + static_cast<std::ptrdiff_t>(size));
    Frame out;
    INFO("size " << size);
    CHECK(decode_frame(prefix.data(), prefix.size(), out) == DecodeStatus::kTruncated);
  }
  Frame out;
  CHECK(decode_frame(nullptr, 0, out) == DecodeStatus::kTruncated);
}

TEST_CASE("oversized input is rejected before anything else", "[frame]") {
  const Bytes valid = encode_frame(sample_frame(SampleFormat::kFloat32));
  Bytes longer = valid;
  longer.push_back(0);
  CHECK(decode(longer) == DecodeStatus::kOversized);

  // A frame padded past the datagram limit is oversized even with a bad magic.
  Bytes huge(kMaxFrameBytes + 1, 0xFF);
  CHECK(decode(huge) == DecodeStatus::kOversized);
  std::copy(valid.begin(), valid.end(), huge.begin());
  CHECK(decode(huge) == DecodeStatus::kOversized);
}

TEST_CASE("the largest frame that fits a datagram round-trips and one more sample does not encode",
          "[frame]") {
  // 40 + 4 + 4 * samples * channels <= 65507 with 3 channels: 5455 samples.
  Frame f = sample_frame(SampleFormat::kFloat32, DeviceKind::kAccelerometer3, 3, 5455);
  const Bytes bytes = encode_frame(f);
  CHECK(bytes.size() == 65504);
  Frame out;
  CHECK(decode_frame(bytes.data(), bytes.size(), out) == DecodeStatus::kOk);

  f = sample_frame(SampleFormat::kFloat32, DeviceKind::kAccelerometer3, 3, 5456);
  CHECK_THROWS_WITH(encode_frame(f), Catch::Contains("exceed"));

  // A header whose counts imply more than a datagram is a counting error.
  Bytes b = bytes;
  put_le(b, kSamplesAt, 5456, 2);
  put_le(b, kPayloadBytesAt, 5456 * 3 * 4, 4);
  fix_crc(b);
  CHECK(decode(b) == DecodeStatus::kBadCounts);
}

TEST_CASE("encode_frame refuses frames that would not decode", "[frame]") {
  auto refuses = [](Frame f, const char* why) {
    INFO(why);
    CHECK_THROWS_AS(encode_frame(f), gw::Error);
  };
  const Frame ok = sample_frame(SampleFormat::kInt16Scaled);
  REQUIRE_NOTHROW(encode_frame(ok));
  Frame f = ok;
  f.kind = DeviceKind::kAccelerometer3;
  refuses(f, "8 channels for a 3-channel kind");
  f = ok;
  f.values.pop_back();
  refuses(f, "values do not fill channels x samples");
  f = ok;
  f.scales.pop_back();
  refuses(f, "one scale missing");
  f = ok;
  f.scales[0] = 0;
  refuses(f, "zero scale");
  f = ok;
  f.values[3] = std::numeric_limits<float>::quiet_NaN();
  refuses(f, "NaN value");
  f = ok;
  f.sample_rate_hz = 0;
  refuses(f, "zero rate");
  f = ok;
  f.samples = 0;
  f.values.clear();
  refuses(f, "no samples");
  f = ok;
  f.format = SampleFormat::kFloat32;
  refuses(f, "scales with float32 samples");
  f = ok;
  f.kind = static_cast<DeviceKind>(9);
  refuses(f, "unknown kind");
  f = ok;
  f.format = static_cast<SampleFormat>(7);
  refuses(f, "unknown format");
  CHECK_THROWS_WITH(
      encode_frame(sample_frame(SampleFormat::kFloat32, DeviceKind::kForceInsole8, 3)),
      Catch::Contains("wearer 2712847316") && Catch::Contains("force_insole_8"));
}

TEST_CASE("random buffers never decode unless their CRC matches", "[frame][fuzz]") {
  std::mt19937_64 rng(20240601);
  std::map<DecodeStatus, int> seen;
  for (int i = 0; i < 4000; ++i) {
    Bytes b(rng() % 300);
    for (auto& byte : b) byte = static_cast<std::uint8_t>(rng());
    // Half of them start like a frame so that they get past the first checks.
    if (i % 2 && b.size() >= 8) {
      put_le(b, 0, gw::sensors::kFrameMagic, 4);
      b[kVersionAt] = 1;
      b[kKindAt] = static_cast<std::uint8_t>(1 + rng() % 5);
      b[kFormatAt] = static_cast<std::uint8_t>(1 + rng() % 2);
    }
    Frame out;
    const DecodeStatus status = decode_frame(b.data(), b.size(), out);
    ++seen[status];
    if (status == DecodeStatus::kOk) CHECK(crc_matches(b));
  }
  CHECK(seen[DecodeStatus::kTruncated] > 0);
  CHECK(seen[DecodeStatus::kBadMagic] > 0);
  CHECK(seen[DecodeStatus::kOk] == 0);
}

TEST_CASE("random mutations of a valid frame never decode unless their CRC matches",
          "[frame][fuzz]") {
  std::mt19937_64 rng(99);
  std::map<DecodeStatus, int> seen;
  for (const auto format : {SampleFormat::kFloat32, SampleFormat::kInt16Scaled}) {
    const Bytes valid = encode_frame(sample_frame(format));
    for (int i = 0; i < 3000; ++i) {
      Bytes b = valid;
      const int mutations = 1 + static_cast<int>(rng() % 6);
      for (int m = 0; m < mutations; ++m) {
        switch (rng() % 4) {
          case 0: {  // overwrite a byte; half of the time one in the header
            const bool header = rng() % 2 == 0;
            const std::size_t range = header ? std::min(b.size(), kFrameHeaderBytes) : b.size();
            b[rng() % range] = static_cast<std::uint8_t>(rng());
            break;
          }
          case 1:  // cut the tail
            b.resize(rng() % (b.size() + 1));
            break;
          case 2:  // append garbage
            b.push_back(static_cast<std::uint8_t>(rng()));
            break;
          default:  // flip a bit
            if (!b.empty()) b[rng() % b.size()] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
        }
        if (b.empty()) break;
      }
      // Also let some mutants carry a valid CRC, so that the checks behind it run.
      const bool recrc = i % 3 == 0 && b.size() >= kFrameHeaderBytes + kFrameCrcBytes;
      if (recrc) fix_crc(b);
      Frame out;
      const DecodeStatus status = decode_frame(b.data(), b.size(), out);
      ++seen[status];
      if (status == DecodeStatus::kOk) {
        REQUIRE(crc_matches(b));
        // A frame that passes is fully consistent.
        CHECK(out.values.size() == std::size_t{out.channels} * out.samples);
        for (float v : out.values) CHECK(std::isfinite(v));
      }
    }
  }
  // The mutations reach most of the decoder's checks.
  for (DecodeStatus s :
       {DecodeStatus::kTruncated, DecodeStatus::kOversized, DecodeStatus::kBadMagic,
        DecodeStatus::kBadCounts, DecodeStatus::kBadCrc}) {
    INFO(gw::sensors::to_string(s));
    CHECK(seen[s] > 0);
  }
}

TEST_CASE("statuses and kinds have distinct names and fixed channel counts", "[frame]") {
  std::set<std::string> names;
  for (int s = 0; s < gw::sensors::kDecodeStatusCount; ++s) {
    names.insert(gw::sensors::to_string(static_cast<DecodeStatus>(s)));
  }
  CHECK(names.size() == static_cast<std::size_t>(gw::sensors::kDecodeStatusCount));
  CHECK(names.count("unknown") == 0);
  CHECK(std::string(gw::sensors::to_string(DecodeStatus::kBadCrc)) == "bad_crc");
  CHECK(std::string(gw::sensors::to_string(DeviceKind::kAccelerometer3)) == "accelerometer_3");

  CHECK(gw::sensors::fixed_channel_count(DeviceKind::kPressureInsoleLeft) == 99);
  CHECK(gw::sensors::fixed_channel_count(DeviceKind::kPressureInsoleRight) == 99);
  CHECK(gw::sensors::fixed_channel_count(DeviceKind::kForceInsole8) == 8);
  CHECK(gw::sensors::fixed_channel_count(DeviceKind::kAccelerometer3) == 3);
  CHECK(gw::sensors::fixed_channel_count(DeviceKind::kGeneric) == 0);
}

// Authenticated frames (docs/protocol.md "Authenticated frames"): version 2,
// flag 1, an HMAC-SHA-256 of header and payload between payload and CRC.
TEST_CASE("a frame with a MAC decodes, verifies under its key and under no other", "[frame][mac]") {
  const gw::sensors::FrameMacKey key = gw::sensors::generate_frame_mac_key();
  const gw::sensors::FrameMacKey other = gw::sensors::generate_frame_mac_key();
  REQUIRE(key != other);
  const Frame f = sample_frame(SampleFormat::kFloat32);
  const Bytes plain = encode_frame(f);
  const Bytes signed_bytes = encode_frame(f, &key);
  REQUIRE(signed_bytes.size() == plain.size() + gw::sensors::kFrameMacBytes);
  CHECK(signed_bytes[kVersionAt] == 2);
  CHECK(signed_bytes[kFlagsAt] == 1);
  CHECK(crc_matches(signed_bytes));  // the CRC covers the MAC too
  Frame out;
  REQUIRE(decode_frame(signed_bytes.data(), signed_bytes.size(), out) == DecodeStatus::kOk);
  CHECK(out.has_mac);
  require_same_header(f, out);
  CHECK(out.values == f.values);
  CHECK(gw::sensors::verify_frame_mac(signed_bytes.data(), signed_bytes.size(), key));
  CHECK_FALSE(gw::sensors::verify_frame_mac(signed_bytes.data(), signed_bytes.size(), other));
  // A version 1 frame has no MAC to verify.
  Frame plain_out;
  REQUIRE(decode_frame(plain.data(), plain.size(), plain_out) == DecodeStatus::kOk);
  CHECK_FALSE(plain_out.has_mac);
  CHECK_FALSE(gw::sensors::verify_frame_mac(plain.data(), plain.size(), key));
  // The MAC is the HMAC of bytes [0, 40 + payload_bytes): header and payload
  // exactly as sent (the spec a firmware implements).
  const std::size_t covered = plain.size() - kFrameCrcBytes;
  std::array<std::uint8_t, 32> expected{};
  crypto_auth_hmacsha256(expected.data(), signed_bytes.data(), covered, key.data());
  CHECK(std::equal(expected.begin(), expected.end(), signed_bytes.begin() + covered));
  CHECK(std::equal(plain.begin() + kPayloadBytesAt + 4, plain.begin() + covered,
                   signed_bytes.begin() + kPayloadBytesAt + 4));
}

TEST_CASE("a forged frame with a recomputed CRC fails the MAC", "[frame][mac]") {
  const gw::sensors::FrameMacKey key = gw::sensors::generate_frame_mac_key();
  const Bytes good = encode_frame(sample_frame(SampleFormat::kInt16Scaled), &key);
  // Each byte of header, payload and MAC changed by an attacker who fixes the
  // CRC: the frame may still decode, but never verifies.
  for (std::size_t at = 0; at + kFrameCrcBytes < good.size(); ++at) {
    Bytes forged = good;
    forged[at] ^= 0x20;
    fix_crc(forged);
    Frame out;
    if (decode_frame(forged.data(), forged.size(), out) != DecodeStatus::kOk) continue;
    INFO("byte " << at);
    CHECK_FALSE(gw::sensors::verify_frame_mac(forged.data(), forged.size(), key));
  }
  // Stripping the MAC (back to version 1, flags 0) leaves a frame without one.
  Bytes stripped(good.begin(), good.end() - gw::sensors::kFrameMacBytes - kFrameCrcBytes);
  stripped.resize(stripped.size() + kFrameCrcBytes);
  stripped[kVersionAt] = 1;
  stripped[kFlagsAt] = 0;
  fix_crc(stripped);
  Frame out;
  REQUIRE(decode_frame(stripped.data(), stripped.size(), out) == DecodeStatus::kOk);
  CHECK_FALSE(out.has_mac);
}

TEST_CASE("MAC flags outside version 2 and unknown flags are bad_format", "[frame][mac]") {
  const gw::sensors::FrameMacKey key = gw::sensors::generate_frame_mac_key();
  Bytes v1_flag = encode_frame(sample_frame(SampleFormat::kFloat32));
  v1_flag[kFlagsAt] = 1;
  fix_crc(v1_flag);
  CHECK(decode(v1_flag) == DecodeStatus::kBadFormat);
  Bytes v2_other_flag = encode_frame(sample_frame(SampleFormat::kFloat32), &key);
  v2_other_flag[kFlagsAt] = 3;
  fix_crc(v2_other_flag);
  CHECK(decode(v2_other_flag) == DecodeStatus::kBadFormat);
  Bytes v3 = encode_frame(sample_frame(SampleFormat::kFloat32), &key);
  v3[kVersionAt] = 3;
  fix_crc(v3);
  CHECK(decode(v3) == DecodeStatus::kBadVersion);
  // Version 2 without the flag: laid out as version 1.
  Bytes v2_plain = encode_frame(sample_frame(SampleFormat::kFloat32));
  v2_plain[kVersionAt] = 2;
  fix_crc(v2_plain);
  Frame out;
  CHECK(decode_frame(v2_plain.data(), v2_plain.size(), out) == DecodeStatus::kOk);
  CHECK_FALSE(out.has_mac);
}

TEST_CASE("MAC key files round-trip, are created 0600 and refused when readable by others",
          "[frame][mac]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("gw_mackey_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "dev.mackey").string();
  const gw::sensors::FrameMacKey key = gw::sensors::generate_frame_mac_key();
  gw::sensors::write_frame_mac_key(path, key);
  CHECK((fs::status(path).permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write));
  CHECK(gw::sensors::read_frame_mac_key(path) == key);
  fs::permissions(path, fs::perms::group_read, fs::perm_options::add);
  CHECK_THROWS_WITH(gw::sensors::read_frame_mac_key(path),
                    Catch::Contains("readable by group or others"));
  {
    std::ofstream out(dir / "bad.mackey");
    out << "mac-key: 1234\n";
  }
  fs::permissions(dir / "bad.mackey", fs::perms::owner_read | fs::perms::owner_write);
  CHECK_THROWS_WITH(gw::sensors::read_frame_mac_key((dir / "bad.mackey").string()),
                    Catch::Contains("bad.mackey:1: expected 'mac-key: <64 hex digits>'"));
  fs::remove_all(dir);
}

TEST_CASE("restamp_frame gives the bytes encode_frame writes for the new header fields",
          "[frame]") {
  for (const SampleFormat format : {SampleFormat::kFloat32, SampleFormat::kInt16Scaled}) {
    INFO("format " << static_cast<int>(format));
    Frame frame = sample_frame(format);
    Bytes bytes = encode_frame(frame);
    frame.wearer_id = 0xA1B2C3D4u;
    frame.sequence = 77777u;
    frame.device_time_us = 0x0102030405060708ull;
    gw::sensors::restamp_frame(bytes.data(), bytes.size(), frame.wearer_id, frame.sequence,
                               frame.device_time_us);
    CHECK(bytes == encode_frame(frame));
    Frame out;
    REQUIRE(decode_frame(bytes.data(), bytes.size(), out) == DecodeStatus::kOk);
    require_same_header(frame, out);
  }
  // Not an encoded frame, or one with a MAC (which it cannot renew): refused.
  Bytes short_bytes(kFrameHeaderBytes, 0);
  CHECK_THROWS_AS(gw::sensors::restamp_frame(short_bytes.data(), short_bytes.size(), 1, 2, 3),
                  gw::Error);
  Bytes trimmed = encode_frame(sample_frame(SampleFormat::kFloat32));
  trimmed.pop_back();
  CHECK_THROWS_AS(gw::sensors::restamp_frame(trimmed.data(), trimmed.size(), 1, 2, 3), gw::Error);
  const gw::sensors::FrameMacKey key = gw::sensors::generate_frame_mac_key();
  Bytes signed_bytes = encode_frame(sample_frame(SampleFormat::kFloat32), &key);
  CHECK_THROWS_AS(gw::sensors::restamp_frame(signed_bytes.data(), signed_bytes.size(), 1, 2, 3),
                  gw::Error);
}
