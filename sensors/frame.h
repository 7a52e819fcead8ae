// Wire frames: the versioned binary unit a device sends (one per UDP datagram,
// length-prefixed on TCP). The byte layout is specified in docs/protocol.md;
// this header is its C++ contract.
//
// Thread safety: free functions, no shared state.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gw::sensors {

inline constexpr std::uint32_t kFrameMagic = 0x46574147;  // "GAWF" little-endian bytes 'G','A','W','F'
// Version 1: no flags. Version 2: the same header; flag kFrameFlagMac says a
// kFrameMacBytes keyed MAC follows the payload (docs/protocol.md
// "Authenticated frames"). The decoder reads both; the encoder writes version
// 1 unless it is given a MAC key, so unauthenticated senders stay readable by
// older daemons.
inline constexpr std::uint8_t kFrameVersion = 1;
inline constexpr std::uint8_t kFrameVersionMac = 2;
inline constexpr std::uint8_t kFrameFlagMac = 0x01;
inline constexpr std::size_t kFrameMacBytes = 32;   // HMAC-SHA-256
inline constexpr std::size_t kFrameMacKeyBytes = 32;
inline constexpr std::size_t kFrameHeaderBytes = 40;
inline constexpr std::size_t kFrameCrcBytes = 4;
// Largest frame the decoder accepts at all (fits one UDP datagram).
inline constexpr std::size_t kMaxFrameBytes = 65507;

enum class DeviceKind : std::uint8_t {
  kPressureInsoleLeft = 1,   // 99 channels
  kPressureInsoleRight = 2,  // 99 channels
  kForceInsole8 = 3,         // 8 channels
  kAccelerometer3 = 4,       // 3 channels
  kGeneric = 5,              // N channels, as its profile says
};

enum class SampleFormat : std::uint8_t {
  kInt16Scaled = 1,  // per-channel float32 scale, then int16 samples; value = raw * scale
  kFloat32 = 2,
};

// A decoded frame. `values` is sample-major: values[s * channels + c].
struct Frame {
  DeviceKind kind = DeviceKind::kGeneric;
  SampleFormat format = SampleFormat::kFloat32;
  std::uint32_t wearer_id = 0;
  std::uint16_t device_id = 0;
  std::uint16_t channels = 0;
  std::uint16_t samples = 0;
  float sample_rate_hz = 0;
  std::uint32_t sequence = 0;
  std::uint64_t device_time_us = 0;  // time of the frame's first sample
  std::vector<float> scales;         // kInt16Scaled only: one per channel
  std::vector<float> values;
  // Decoded: the frame carries a MAC (version 2 with kFrameFlagMac). Whether
  // it is right is for verify_frame_mac with the device's key.
  bool has_mac = false;
};

// A device's frame MAC key (HMAC-SHA-256 key).
using FrameMacKey = std::array<std::uint8_t, kFrameMacKeyBytes>;

// Why a frame was rejected. Each value is a drop counter in the daemon.
enum class DecodeStatus : std::uint8_t {
  kOk = 0,
  kTruncated,       // shorter than a header + CRC, or than its declared payload
  kOversized,       // longer than kMaxFrameBytes or than its declared payload
  kBadMagic,
  kBadVersion,
  kBadKind,
  kBadFormat,
  kBadCounts,       // zero channels/samples, or a kind whose channel count is fixed and differs
  kBadRate,         // sample rate not finite or outside (0, 100000]
  kBadScale,        // a scale not finite or zero
  kBadValue,        // a float32 sample that is NaN or infinite
  kBadCrc,
};
inline constexpr int kDecodeStatusCount = 12;
const char* to_string(DecodeStatus status);
// The kind's name in configs and on command lines ("accelerometer_3"), and
// back; every kind in wire-code order, for listing the names.
const char* to_string(DeviceKind kind);
std::optional<DeviceKind> device_kind_from_name(const std::string& name);
inline constexpr DeviceKind kDeviceKinds[] = {
    DeviceKind::kPressureInsoleLeft, DeviceKind::kPressureInsoleRight, DeviceKind::kForceInsole8,
    DeviceKind::kAccelerometer3, DeviceKind::kGeneric};
// Channel count a kind fixes, or 0 for kGeneric.
int fixed_channel_count(DeviceKind kind);

// Validates every field and the CRC; never reads outside [data, data + size).
// On kOk, `out` holds the frame; otherwise `out` is unspecified.
DecodeStatus decode_frame(const std::uint8_t* data, std::size_t size, Frame& out);

// Encodes `frame` (scales are required for kInt16Scaled and each raw value is
// round(value / scale) clamped to int16). With `mac_key`: a version 2 frame
// carrying the MAC of its header and payload; without: version 1 (frame.has_mac
// is ignored). Throws gw::Error if the frame could not be decoded back
// (inconsistent counts, too large).
std::vector<std::uint8_t> encode_frame(const Frame& frame, const FrameMacKey* mac_key = nullptr);

// Rewrites the wearer, sequence number and device timestamp of an encoded
// frame without a MAC (as encode_frame wrote it) and its CRC: a sender that
// sends the same samples for many wearers or over and over encodes them
// once. Throws gw::Error when `bytes` is not such a frame (too short, its
// payload length disagrees, or it carries a MAC, which this cannot renew).
void restamp_frame(std::uint8_t* bytes, std::size_t size, std::uint32_t wearer_id,
                   std::uint32_t sequence, std::uint64_t device_time_us);

// For a frame that decode_frame accepted with has_mac: whether its MAC is
// the HMAC-SHA-256 under `key` of the bytes it covers (compared in constant
// time). False for a frame without a MAC.
bool verify_frame_mac(const std::uint8_t* data, std::size_t size, const FrameMacKey& key);

// MAC key files: one line "mac-key: <64 hex digits>" ('#' lines ignored).
// read_frame_mac_key throws gw::Error naming the file when it is unreadable,
// malformed, or readable by group or others (a key must be private: 0600).
FrameMacKey generate_frame_mac_key();
void write_frame_mac_key(const std::string& path, const FrameMacKey& key);  // created 0600
FrameMacKey read_frame_mac_key(const std::string& path);

// Chooses per-channel scales so that int16 covers max |value| of each channel.
std::vector<float> fit_int16_scales(const std::vector<float>& values, int channels);

}  // namespace gw::sensors
