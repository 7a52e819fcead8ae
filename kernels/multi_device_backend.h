// One search backend over several (search.devices: one member per GPU).
//
// Each stream (StreamSlice::stream_key) belongs to one member, chosen when the
// stream is first seen: the member with the least load (the dims of the
// streams it owns). A batch is split by owner, the parts are searched on all
// members at once (one thread each), and their matches are merged back into
// SearchResult order over the whole batch with the batch's own slice indices.
// Every backend returns the same matches for the same slices
// (kernels/search.h), so the result equals one member's on the whole batch.
//
// A member whose search throws is lost for good: it is retired, the streams it
// owned move to the members left (which hold nothing of them yet, so their
// next slices travel whole), and search_into() throws SearchDeviceLost: the
// caller searches the same batch again with every sample present
// (StreamSlice::omitted = 0 everywhere). That search repeats window ends the
// GPUs left had searched already, so a streaming-mode pattern's state
// restarts at the batch for every stream (as after a gap); window mode keeps
// no state and loses nothing. When the last member is lost, its own
// error is rethrown instead, for the caller's fallback (the engine switches to
// the CPU backend).
//
// Thread safety: as SearchBackend; prepare() is not forwarded (the default,
// nothing staged ahead).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/search.h"

namespace gw::kernels {

// Thrown by a multi-device search_into() that lost a member: the batch was
// not searched and must be searched again with no samples omitted.
class SearchDeviceLost : public Error {
 public:
  SearchDeviceLost(const std::string& message, std::size_t devices)
      : Error(message), devices_(devices) {}
  // The devices retired by the search that threw.
  std::size_t devices() const { return devices_; }

 private:
  std::size_t devices_;
};

struct SearchMember {
  std::unique_ptr<SearchBackend> backend;
  std::string label;  // how logs name it, e.g. "GPU 1"
};

// At least two members; throws gw::Error otherwise. `copy_threads` (>= 1)
// copy each batch's samples into the members' parts and their matches back
// into one result: memory-bound work that one thread would make a large
// share of a W1 batch's time.
std::unique_ptr<SearchBackend> make_multi_device_backend(std::vector<SearchMember> members,
                                                         int copy_threads = 4);

}  // namespace gw::kernels
