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
  for (int shift = 0; shift < 32; shift += 8) batch.push_back(static_cast<std::uint8_t>(length >> shift));
  batch.insert(batch.end(), frame, frame + size);
}

std::size_t for_each_frame_record(const std::uint8_t* batch, std::size_t size,
                                  const std::function<void(const std::uint8_t*, std::size_t)>& on_frame,
                                  bool& malformed) {
  malformed = false;
  std::size_t at = 0, frames = 0;
  while (at < size) {
    if (size - at < 4) {
      malformed = true;
      break;
    }
    std::uint32_t length = 0;
    for (int i = 0; i < 4; ++i) length |= static_cast<std::uint32_t>(batch[at + static_cast<std::size_t>(i)]) << (8 * i);
    at += 4;
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

}  // namespace gw::cluster
