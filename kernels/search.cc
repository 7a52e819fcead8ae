// The plain data types of kernels/search.h.
#include "kernels/search.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace gw::kernels {

int PatternLibrary::max_length() const {
  int longest = 0;
  for (const Pattern& pattern : patterns) longest = std::max(longest, pattern.length);
  return longest;
}

void SearchBatch::add_slice(std::uint32_t profile, int dims, const float* sample_major, int length,
                            std::int64_t first_index, std::int64_t first_new) {
  if (dims < 0 || length < 0) {
    throw Error("SearchBatch::add_slice: negative shape (dims " + std::to_string(dims) +
                ", length " + std::to_string(length) + ")");
  }
  StreamSlice slice;
  slice.profile = profile;
  slice.dims = dims;
  slice.length = length;
  slice.first_index = first_index;
  slice.first_new = first_new;
  slice.offset = data.size();
  const std::size_t count = static_cast<std::size_t>(dims) * static_cast<std::size_t>(length);
  data.resize(data.size() + count);
  // Dim-major, so that every (pattern dim, stream dim) search reads one
  // contiguous series.
  float* out = data.data() + slice.offset;
  for (int s = 0; s < length; ++s) {
    const float* sample = sample_major + static_cast<std::size_t>(s) * dims;
    for (int d = 0; d < dims; ++d) out[static_cast<std::size_t>(d) * length + s] = sample[d];
  }
  streams.push_back(slice);
}

void SearchStats::add(const SearchStats& o) {
  windows += o.windows;
  pruned_kim += o.pruned_kim;
  pruned_keogh_eq += o.pruned_keogh_eq;
  pruned_keogh_ec += o.pruned_keogh_ec;
  dtw_full += o.dtw_full;
  dtw_abandoned += o.dtw_abandoned;
  cells += o.cells;
}

}  // namespace gw::kernels
