// libFuzzer target for the wire frame decoder (sensors/frame.h).
//
// Properties checked on every input, beyond "no crash, no sanitizer report":
// * decode_frame never reads outside the input (ASan sees the exact buffer:
//   libFuzzer hands over a heap copy of precisely `size` bytes);
// * a frame it accepts is one the encoder can write again (encode_frame does
//   not throw) and decoding that again gives the same frame, field by field,
//   so the decoder accepts nothing the protocol does not define.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "sensors/frame.h"

namespace {

using gw::sensors::DecodeStatus;
using gw::sensors::Frame;

[[noreturn]] void fail(const char* what) {
  // abort() is what libFuzzer reports as a crash, with the input saved.
  std::fprintf(stderr, "frame_fuzz: %s\n", what);
  std::abort();
}

bool same_frame(const Frame& a, const Frame& b) {
  return a.kind == b.kind && a.format == b.format && a.wearer_id == b.wearer_id &&
         a.device_id == b.device_id && a.channels == b.channels && a.samples == b.samples &&
         std::memcmp(&a.sample_rate_hz, &b.sample_rate_hz, sizeof(float)) == 0 &&
         a.sequence == b.sequence && a.device_time_us == b.device_time_us &&
         a.scales == b.scales && a.values == b.values;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Frame frame;
  const DecodeStatus status = gw::sensors::decode_frame(data, size, frame);
  if (static_cast<int>(status) < 0 ||
      static_cast<int>(status) >= gw::sensors::kDecodeStatusCount) {
    fail("status outside the counter range");
  }
  if (status != DecodeStatus::kOk) return 0;

  std::vector<std::uint8_t> again;
  try {
    again = gw::sensors::encode_frame(frame);
  } catch (const gw::Error& e) {
    std::fprintf(stderr, "frame_fuzz: %s\n", e.what());
    fail("a decoded frame cannot be encoded");
  }
  Frame twice;
  if (gw::sensors::decode_frame(again.data(), again.size(), twice) != DecodeStatus::kOk) {
    fail("the re-encoded frame does not decode");
  }
  if (!same_frame(frame, twice)) fail("decode(encode(frame)) differs from frame");
  // The float32 layout has one encoding per frame, so the bytes must match.
  if (frame.format == gw::sensors::SampleFormat::kFloat32 &&
      (again.size() != size || std::memcmp(again.data(), data, size) != 0)) {
    fail("a float32 frame re-encodes to other bytes");
  }
  return 0;
}
