// Several encoded frames in one JetStream message (docs/scale.md): the
// gateway publishes a partition's frames that arrived together as one
// message on "<prefix>.<partition>.b", so the server stores, acknowledges
// and deletes one message per batch instead of one per frame. The payload
// is the TCP ingest's framing: per frame a u32 little-endian length, then
// that many bytes. A message on a wearer's subject holds one frame as it is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gw::cluster {

// The last subject token of a batch message (wearer ids are numbers).
inline constexpr const char* kBatchToken = "b";
// Bytes of a record's length field, before the frame's bytes.
inline constexpr std::size_t kRecordLengthBytes = 4;

// "<prefix>.<partition>.b": inside the partition's filter "<prefix>.<partition>.>".
std::string batch_subject(const std::string& prefix, std::uint32_t partition);
// True when `subject` ends in the batch token.
bool is_batch_subject(const char* subject);

// Appends one frame's record (length, bytes) to `batch`.
void append_frame_record(std::vector<std::uint8_t>& batch, const std::uint8_t* frame, std::size_t size);

// The number of whole records at the start of `batch` (what
// for_each_frame_record would hand over), without visiting the frames.
std::size_t count_frame_records(const std::uint8_t* batch, std::size_t size);

// Calls `on_frame` for each record of `batch` in order. Returns the number
// of frames handed over; stops at a record whose length is 0 or runs past
// the end, and then reports it through `malformed` (set true).
std::size_t for_each_frame_record(const std::uint8_t* batch, std::size_t size,
                                  const std::function<void(const std::uint8_t*, std::size_t)>& on_frame,
                                  bool& malformed);

}  // namespace gw::cluster
