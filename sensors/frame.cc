#include "sensors/frame.h"

#include <sodium.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include "common/error.h"
#include "common/private_file.h"

namespace gw::sensors {
namespace {

// Byte offsets of the header fields (docs/protocol.md, "Header").
constexpr std::size_t kMagicOffset = 0;
constexpr std::size_t kVersionOffset = 4;
constexpr std::size_t kKindOffset = 5;
constexpr std::size_t kFormatOffset = 6;
constexpr std::size_t kFlagsOffset = 7;
constexpr std::size_t kWearerOffset = 8;
constexpr std::size_t kDeviceOffset = 12;
constexpr std::size_t kChannelsOffset = 14;
constexpr std::size_t kSamplesOffset = 16;
constexpr std::size_t kReservedOffset = 18;
constexpr std::size_t kSampleRateOffset = 20;
constexpr std::size_t kSequenceOffset = 24;
constexpr std::size_t kDeviceTimeOffset = 28;
constexpr std::size_t kPayloadBytesOffset = 36;
static_assert(kPayloadBytesOffset + 4 == kFrameHeaderBytes);

constexpr float kMaxSampleRateHz = 100000.0f;
// A scale above this would turn an int16 raw value into infinity.
constexpr float kMaxScale = std::numeric_limits<float>::max() / 32768.0f;

// Little-endian loads and stores, byte by byte so the code is independent of
// the host's byte order and alignment. Callers check bounds first.
std::uint64_t load_le(const std::uint8_t* p, std::size_t bytes) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < bytes; ++i) v |= std::uint64_t{p[i]} << (8 * i);
  return v;
}
std::uint16_t load_u16(const std::uint8_t* p) { return static_cast<std::uint16_t>(load_le(p, 2)); }
std::uint32_t load_u32(const std::uint8_t* p) { return static_cast<std::uint32_t>(load_le(p, 4)); }
std::uint64_t load_u64(const std::uint8_t* p) { return load_le(p, 8); }
float load_f32(const std::uint8_t* p) {
  const std::uint32_t bits = load_u32(p);
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

void store_le(std::uint8_t* p, std::uint64_t v, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
void store_f32(std::uint8_t* p, float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  store_le(p, bits, 4);
}

bool valid_kind(std::uint8_t kind) {
  return kind >= static_cast<std::uint8_t>(DeviceKind::kPressureInsoleLeft) &&
         kind <= static_cast<std::uint8_t>(DeviceKind::kGeneric);
}

bool valid_format(std::uint8_t format) {
  return format == static_cast<std::uint8_t>(SampleFormat::kInt16Scaled) ||
         format == static_cast<std::uint8_t>(SampleFormat::kFloat32);
}

bool valid_rate(float rate) { return std::isfinite(rate) && rate > 0 && rate <= kMaxSampleRateHz; }

bool valid_scale(float scale) {
  return std::isfinite(scale) && scale != 0 && std::fabs(scale) <= kMaxScale;
}

// Payload size implied by the counts; 64-bit so that no count overflows it.
std::uint64_t payload_bytes_for(SampleFormat format, std::uint64_t channels,
                                std::uint64_t samples) {
  if (format == SampleFormat::kInt16Scaled) return channels * 4 + samples * channels * 2;
  return samples * channels * 4;
}

std::uint32_t crc_of(const std::uint8_t* data, std::size_t size) {
  // size <= kMaxFrameBytes, so it fits zlib's uInt.
  return static_cast<std::uint32_t>(crc32(crc32(0L, Z_NULL, 0), data, static_cast<uInt>(size)));
}

std::int16_t quantize(float value, float scale) {
  const double raw = std::round(static_cast<double>(value) / scale);
  return static_cast<std::int16_t>(std::clamp(raw, -32768.0, 32767.0));
}

void init_sodium() {
  static const int status = sodium_init();  // thread-safe once; 1 = already initialised
  if (status < 0) throw Error("libsodium cannot be initialised");
}

// Version 2 with the MAC flag: the tag's size; else 0.
std::size_t mac_bytes_of(std::uint8_t version, std::uint8_t flags) {
  return version == kFrameVersionMac && (flags & kFrameFlagMac) ? kFrameMacBytes : 0;
}

[[noreturn]] void throw_unencodable(const Frame& frame, const std::string& why) {
  throw Error("cannot encode frame (wearer " + std::to_string(frame.wearer_id) + ", device " +
              std::to_string(frame.device_id) + ", sequence " + std::to_string(frame.sequence) +
              "): " + why);
}

}  // namespace

const char* to_string(DecodeStatus status) {
  switch (status) {
    case DecodeStatus::kOk:
      return "ok";
    case DecodeStatus::kTruncated:
      return "truncated";
    case DecodeStatus::kOversized:
      return "oversized";
    case DecodeStatus::kBadMagic:
      return "bad_magic";
    case DecodeStatus::kBadVersion:
      return "bad_version";
    case DecodeStatus::kBadKind:
      return "bad_kind";
    case DecodeStatus::kBadFormat:
      return "bad_format";
    case DecodeStatus::kBadCounts:
      return "bad_counts";
    case DecodeStatus::kBadRate:
      return "bad_rate";
    case DecodeStatus::kBadScale:
      return "bad_scale";
    case DecodeStatus::kBadValue:
      return "bad_value";
    case DecodeStatus::kBadCrc:
      return "bad_crc";
  }
  return "unknown";
}

const char* to_string(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kPressureInsoleLeft:
      return "pressure_insole_left";
    case DeviceKind::kPressureInsoleRight:
      return "pressure_insole_right";
    case DeviceKind::kForceInsole8:
      return "force_insole_8";
    case DeviceKind::kAccelerometer3:
      return "accelerometer_3";
    case DeviceKind::kGeneric:
      return "generic";
  }
  return "unknown";
}

std::optional<DeviceKind> device_kind_from_name(const std::string& name) {
  for (const DeviceKind kind : kDeviceKinds)
    if (name == to_string(kind)) return kind;
  return std::nullopt;
}

int fixed_channel_count(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kPressureInsoleLeft:
    case DeviceKind::kPressureInsoleRight:
      return 99;
    case DeviceKind::kForceInsole8:
      return 8;
    case DeviceKind::kAccelerometer3:
      return 3;
    case DeviceKind::kGeneric:
      return 0;
  }
  return 0;
}

// Order of the checks (docs/protocol.md, "Validation"): the size limits, then
// every header field, so that a misconfigured sender is counted under its
// specific cause; then the CRC; then the payload contents, so that line noise
// inside the payload counts as kBadCrc rather than as a bad scale or value.
DecodeStatus decode_frame(const std::uint8_t* data, std::size_t size, Frame& out) {
  if (size > kMaxFrameBytes) return DecodeStatus::kOversized;
  if (data == nullptr || size < kFrameHeaderBytes + kFrameCrcBytes) return DecodeStatus::kTruncated;

  if (load_u32(data + kMagicOffset) != kFrameMagic) return DecodeStatus::kBadMagic;
  const std::uint8_t version = data[kVersionOffset];
  if (version != kFrameVersion && version != kFrameVersionMac) return DecodeStatus::kBadVersion;
  const std::uint8_t kind = data[kKindOffset];
  if (!valid_kind(kind)) return DecodeStatus::kBadKind;
  const std::uint8_t format = data[kFormatOffset];
  // Flags and the reserved field would announce layout features this version
  // does not define, so a frame using them cannot be interpreted. Version 2
  // defines one flag: the MAC.
  const std::uint8_t flags = data[kFlagsOffset];
  const std::uint8_t known_flags = version == kFrameVersionMac ? kFrameFlagMac : 0;
  if (!valid_format(format) || (flags & ~known_flags) != 0 ||
      load_u16(data + kReservedOffset) != 0) {
    return DecodeStatus::kBadFormat;
  }
  const std::size_t mac_bytes = mac_bytes_of(version, flags);

  const std::uint16_t channels = load_u16(data + kChannelsOffset);
  const std::uint16_t samples = load_u16(data + kSamplesOffset);
  const int fixed_channels = fixed_channel_count(static_cast<DeviceKind>(kind));
  if (channels == 0 || samples == 0 || (fixed_channels != 0 && channels != fixed_channels)) {
    return DecodeStatus::kBadCounts;
  }
  const float rate = load_f32(data + kSampleRateOffset);
  if (!valid_rate(rate)) return DecodeStatus::kBadRate;

  const std::uint64_t payload_bytes =
      payload_bytes_for(static_cast<SampleFormat>(format), channels, samples);
  if (load_u32(data + kPayloadBytesOffset) != payload_bytes ||
      kFrameHeaderBytes + payload_bytes + mac_bytes + kFrameCrcBytes > kMaxFrameBytes) {
    return DecodeStatus::kBadCounts;
  }
  const std::size_t crc_offset =
      kFrameHeaderBytes + static_cast<std::size_t>(payload_bytes) + mac_bytes;
  if (size < crc_offset + kFrameCrcBytes) return DecodeStatus::kTruncated;
  if (size > crc_offset + kFrameCrcBytes) return DecodeStatus::kOversized;
  if (load_u32(data + crc_offset) != crc_of(data, crc_offset)) return DecodeStatus::kBadCrc;

  out.kind = static_cast<DeviceKind>(kind);
  out.format = static_cast<SampleFormat>(format);
  out.wearer_id = load_u32(data + kWearerOffset);
  out.device_id = load_u16(data + kDeviceOffset);
  out.channels = channels;
  out.samples = samples;
  out.sample_rate_hz = rate;
  out.sequence = load_u32(data + kSequenceOffset);
  out.device_time_us = load_u64(data + kDeviceTimeOffset);
  out.has_mac = mac_bytes > 0;

  const std::size_t count = std::size_t{channels} * samples;
  const std::uint8_t* payload = data + kFrameHeaderBytes;
  out.values.resize(count);
  if (out.format == SampleFormat::kInt16Scaled) {
    out.scales.resize(channels);
    for (std::size_t c = 0; c < channels; ++c) {
      out.scales[c] = load_f32(payload + 4 * c);
      if (!valid_scale(out.scales[c])) return DecodeStatus::kBadScale;
    }
    const std::uint8_t* raw = payload + 4 * std::size_t{channels};
    for (std::size_t i = 0; i < count; i += channels) {
      for (std::size_t c = 0; c < channels; ++c) {
        const auto value = static_cast<std::int16_t>(load_u16(raw + 2 * (i + c)));
        out.values[i + c] = static_cast<float>(value) * out.scales[c];
      }
    }
  } else {
    out.scales.clear();
    for (std::size_t i = 0; i < count; ++i) {
      out.values[i] = load_f32(payload + 4 * i);
      if (!std::isfinite(out.values[i])) return DecodeStatus::kBadValue;
    }
  }
  return DecodeStatus::kOk;
}

std::vector<std::uint8_t> encode_frame(const Frame& frame, const FrameMacKey* mac_key) {
  const auto kind = static_cast<std::uint8_t>(frame.kind);
  const auto format = static_cast<std::uint8_t>(frame.format);
  if (!valid_kind(kind)) throw_unencodable(frame, "unknown device kind " + std::to_string(kind));
  if (!valid_format(format)) {
    throw_unencodable(frame, "unknown sample format " + std::to_string(format));
  }
  if (frame.channels == 0 || frame.samples == 0) {
    throw_unencodable(frame, "channels and samples must both be at least 1");
  }
  const int fixed_channels = fixed_channel_count(frame.kind);
  if (fixed_channels != 0 && frame.channels != fixed_channels) {
    throw_unencodable(frame, std::string(to_string(frame.kind)) + " has " +
                                 std::to_string(fixed_channels) + " channels, not " +
                                 std::to_string(frame.channels));
  }
  if (!valid_rate(frame.sample_rate_hz)) {
    throw_unencodable(frame, "sample rate " + std::to_string(frame.sample_rate_hz) +
                                 " Hz is outside (0, 100000]");
  }
  const std::size_t count = std::size_t{frame.channels} * frame.samples;
  if (frame.values.size() != count) {
    throw_unencodable(frame, std::to_string(frame.values.size()) + " values for " +
                                 std::to_string(frame.channels) + " channels x " +
                                 std::to_string(frame.samples) + " samples");
  }
  for (float v : frame.values) {
    if (!std::isfinite(v)) throw_unencodable(frame, "a value is NaN or infinite");
  }
  const bool scaled = frame.format == SampleFormat::kInt16Scaled;
  if (scaled && frame.scales.size() != frame.channels) {
    throw_unencodable(frame, std::to_string(frame.scales.size()) + " scales for " +
                                 std::to_string(frame.channels) + " channels");
  }
  if (!scaled && !frame.scales.empty())
    throw_unencodable(frame, "scales given for float32 samples");
  for (float s : frame.scales) {
    if (!valid_scale(s)) throw_unencodable(frame, "scale " + std::to_string(s) + " is unusable");
  }
  const std::uint64_t payload_bytes =
      payload_bytes_for(frame.format, frame.channels, frame.samples);
  const std::size_t mac_bytes = mac_key ? kFrameMacBytes : 0;
  const std::uint64_t total = kFrameHeaderBytes + payload_bytes + mac_bytes + kFrameCrcBytes;
  if (total > kMaxFrameBytes) {
    throw_unencodable(frame, std::to_string(total) + " bytes exceed the limit of " +
                                 std::to_string(kMaxFrameBytes));
  }

  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(total), 0);
  std::uint8_t* p = bytes.data();
  store_le(p + kMagicOffset, kFrameMagic, 4);
  p[kVersionOffset] = mac_key ? kFrameVersionMac : kFrameVersion;
  p[kKindOffset] = kind;
  p[kFormatOffset] = format;
  p[kFlagsOffset] = mac_key ? kFrameFlagMac : 0;
  store_le(p + kWearerOffset, frame.wearer_id, 4);
  store_le(p + kDeviceOffset, frame.device_id, 2);
  store_le(p + kChannelsOffset, frame.channels, 2);
  store_le(p + kSamplesOffset, frame.samples, 2);
  store_le(p + kReservedOffset, 0, 2);
  store_f32(p + kSampleRateOffset, frame.sample_rate_hz);
  store_le(p + kSequenceOffset, frame.sequence, 4);
  store_le(p + kDeviceTimeOffset, frame.device_time_us, 8);
  store_le(p + kPayloadBytesOffset, payload_bytes, 4);

  std::uint8_t* payload = p + kFrameHeaderBytes;
  if (scaled) {
    for (std::size_t c = 0; c < frame.channels; ++c) store_f32(payload + 4 * c, frame.scales[c]);
    std::uint8_t* raw = payload + 4 * std::size_t{frame.channels};
    for (std::size_t i = 0; i < count; i += frame.channels) {
      for (std::size_t c = 0; c < frame.channels; ++c) {
        const std::int16_t value = quantize(frame.values[i + c], frame.scales[c]);
        store_le(raw + 2 * (i + c), static_cast<std::uint16_t>(value), 2);
      }
    }
  } else {
    for (std::size_t i = 0; i < count; ++i) store_f32(payload + 4 * i, frame.values[i]);
  }
  const std::size_t covered = kFrameHeaderBytes + static_cast<std::size_t>(payload_bytes);
  if (mac_key) {
    init_sodium();
    crypto_auth_hmacsha256(p + covered, p, covered, mac_key->data());
  }
  const std::size_t crc_offset = covered + mac_bytes;
  store_le(p + crc_offset, crc_of(p, crc_offset), 4);
  return bytes;
}

void restamp_frame(std::uint8_t* bytes, std::size_t size, std::uint32_t wearer_id,
                   std::uint32_t sequence, std::uint64_t device_time_us) {
  if (bytes == nullptr || size < kFrameHeaderBytes + kFrameCrcBytes ||
      kFrameHeaderBytes + std::size_t{load_u32(bytes + kPayloadBytesOffset)} + kFrameCrcBytes != size)
    throw Error("restamp_frame: not an encoded frame of " + std::to_string(size) + " bytes");
  if (mac_bytes_of(bytes[kVersionOffset], bytes[kFlagsOffset]) != 0)
    throw Error("restamp_frame: the frame carries a MAC");
  store_le(bytes + kWearerOffset, wearer_id, 4);
  store_le(bytes + kSequenceOffset, sequence, 4);
  store_le(bytes + kDeviceTimeOffset, device_time_us, 8);
  const std::size_t crc_offset = size - kFrameCrcBytes;
  store_le(bytes + crc_offset, crc_of(bytes, crc_offset), 4);
}

bool verify_frame_mac(const std::uint8_t* data, std::size_t size, const FrameMacKey& key) {
  static_assert(kFrameMacBytes == crypto_auth_hmacsha256_BYTES);
  static_assert(kFrameMacKeyBytes == crypto_auth_hmacsha256_KEYBYTES);
  if (data == nullptr || size < kFrameHeaderBytes + kFrameMacBytes + kFrameCrcBytes) return false;
  if (mac_bytes_of(data[kVersionOffset], data[kFlagsOffset]) == 0) return false;
  const std::size_t covered = kFrameHeaderBytes + load_u32(data + kPayloadBytesOffset);
  if (covered + kFrameMacBytes + kFrameCrcBytes != size) return false;
  init_sodium();
  return crypto_auth_hmacsha256_verify(data + covered, data, covered, key.data()) == 0;
}

FrameMacKey generate_frame_mac_key() {
  init_sodium();
  FrameMacKey key;
  crypto_auth_hmacsha256_keygen(key.data());
  return key;
}

void write_frame_mac_key(const std::string& path, const FrameMacKey& key) {
  char hex[2 * kFrameMacKeyBytes + 1];
  sodium_bin2hex(hex, sizeof hex, key.data(), key.size());
  write_private_file(path,
                     std::string("# gaitwatch frame MAC key (HMAC-SHA-256), docs/protocol.md\n"
                                 "mac-key: ") + hex + "\n",
                     0600, "MAC key file");
}

FrameMacKey read_frame_mac_key(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Error(path + ": cannot read the MAC key file");
  if (st.st_mode & 0077)
    throw Error(path + ": the MAC key file is readable by group or others (chmod 600 it)");
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot read the MAC key file");
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    const std::string prefix = "mac-key:";
    std::string value = line.rfind(prefix, 0) == 0 ? line.substr(prefix.size()) : "";
    value.erase(0, value.find_first_not_of(" \t"));
    value.erase(value.find_last_not_of(" \t\r") + 1);
    FrameMacKey key;
    std::size_t length = 0;
    if (value.size() != 2 * kFrameMacKeyBytes ||
        sodium_hex2bin(key.data(), key.size(), value.c_str(), value.size(), nullptr, &length,
                       nullptr) != 0 ||
        length != key.size())
      throw Error(path + ":" + std::to_string(number) + ": expected 'mac-key: <" +
                  std::to_string(2 * kFrameMacKeyBytes) + " hex digits>'");
    return key;
  }
  throw Error(path + ": no 'mac-key:' line");
}

std::vector<float> fit_int16_scales(const std::vector<float>& values, int channels) {
  if (channels <= 0 || values.size() % static_cast<std::size_t>(channels) != 0) {
    throw Error("fit_int16_scales: " + std::to_string(values.size()) +
                " values do not split into " + std::to_string(channels) + " channels");
  }
  // Sample by sample (no index modulo: a division per value made this the
  // bulk of encoding a W1 frame).
  std::vector<float> max_abs(static_cast<std::size_t>(channels), 0.0f);
  for (std::size_t i = 0; i < values.size(); i += max_abs.size())
    for (std::size_t c = 0; c < max_abs.size(); ++c)
      max_abs[c] = std::max(max_abs[c], std::fabs(values[i + c]));
  std::vector<float> scales(max_abs.size());
  for (std::size_t c = 0; c < scales.size(); ++c) {
    // max_abs / 32767 can underflow to zero for tiny channels; the smallest
    // normal float still keeps the error within scale / 2.
    scales[c] =
        max_abs[c] == 0 ? 1.0f : std::max(max_abs[c] / 32767.0f, std::numeric_limits<float>::min());
  }
  return scales;
}

}  // namespace gw::sensors
