#include "cluster/frame_batch.h"

#include <cstring>


namespace gw::cluster {

std::string batch_subject(const std::string& prefix, std::uint32_t partition) {
  return prefix + "." + std::to_string(partition) + "." + kBatchToken;
}

bool is_batch_subject(const char* subject) {
  if (subject == nullptr) return false;
  const std::size_t n = std::strlen(subject);
  return n >= 2 && subject[n - 2] == '.' && subject[n - 1] == kBatchToken[0];
}

void append_frame_record(std::vector<std::uint8_t>& batch, const std::uint8_t* frame, std::size_t size) {
  const auto length = static_cast<std::uint32_t>(size);
  for (std::size_t shift = 0; shift < 8 * kRecordLengthBytes; shift += 8) batch.push_back(static_cast<std::uint8_t>(length >> shift));
  batch.insert(batch.end(), frame, frame + size);
}

namespace {

// Walks the records, calling `on_frame` (when given) for each; see
// for_each_frame_record.
template <typename OnFrame>
std::size_t walk_records(const std::uint8_t* batch, std::size_t size, OnFrame&& on_frame, bool& malformed) {
  malformed = false;
  std::size_t at = 0, frames = 0;
  while (at < size) {
    if (size - at < kRecordLengthBytes) {
      malformed = true;
      break;
    }
    std::uint32_t length = 0;
    for (std::size_t i = 0; i < kRecordLengthBytes; ++i)
      length |= static_cast<std::uint32_t>(batch[at + i]) << (8 * i);
    at += kRecordLengthBytes;
    if (length == 0 || length > size - at) {
      malformed = true;
      break;
    }
    on_frame(batch + at, length);
    at += length;
    ++frames;
  }
  return frames;
}

}  // namespace

std::size_t count_frame_records(const std::uint8_t* batch, std::size_t size) {
  bool malformed = false;
  return walk_records(batch, size, [](const std::uint8_t*, std::size_t) {}, malformed);
}

std::size_t for_each_frame_record(const std::uint8_t* batch, std::size_t size,
                                  const std::function<void(const std::uint8_t*, std::size_t)>& on_frame,
                                  bool& malformed) {
  return walk_records(batch, size, on_frame, malformed);
}

}  // namespace gw::cluster
