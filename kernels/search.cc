// The plain data types of kernels/search.h.
#include "kernels/search.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"

namespace gw::kernels {
namespace {

std::string pattern_error(std::size_t index, const std::string& what) {
  return "pattern library: pattern " + std::to_string(index) + ": " + what;
}

}  // namespace

// Library problems are setup errors (the library comes from configuration),
// so they throw instead of being skipped at search time.
void validate_library(const PatternLibrary& library) {
  for (std::size_t p = 0; p < library.patterns.size(); ++p) {
    const Pattern& pattern = library.patterns[p];
    if (pattern.length < 2) {
      throw Error(pattern_error(p, "length " + std::to_string(pattern.length) + " < 2"));
    }
    if (pattern.band < 0 || pattern.band >= pattern.length) {
      throw Error(pattern_error(p, "band " + std::to_string(pattern.band) + " outside [0, " +
                                       std::to_string(pattern.length) + ")"));
    }
    if (pattern.max_matches_per_pair < 1) {
      throw Error(pattern_error(
          p, "max_matches_per_pair " + std::to_string(pattern.max_matches_per_pair) + " < 1"));
    }
    if (std::isnan(pattern.threshold)) throw Error(pattern_error(p, "threshold is NaN"));
    if (pattern.dim_count < 1) {
      throw Error(pattern_error(p, "dim_count " + std::to_string(pattern.dim_count) + " < 1"));
    }
    const std::size_t expected =
        static_cast<std::size_t>(pattern.dim_count) * static_cast<std::size_t>(pattern.length);
    if (pattern.dims.size() != expected) {
      throw Error(pattern_error(
          p, "dims holds " + std::to_string(pattern.dims.size()) +
                 " values, expected dim_count * length = " + std::to_string(expected)));
    }
    for (std::size_t k = 0; k < pattern.pairs.size(); ++k) {
      if (pattern.pairs[k].pattern_dim >= pattern.dim_count) {
        throw Error(pattern_error(p, "pair " + std::to_string(k) + ": pattern_dim " +
                                         std::to_string(pattern.pairs[k].pattern_dim) +
                                         " >= dim_count " + std::to_string(pattern.dim_count)));
      }
    }
  }
}


int PatternLibrary::max_length() const {
  int longest = 0;
  for (const Pattern& pattern : patterns) longest = std::max(longest, pattern.length);
  return longest;
}

void SearchBatch::add_slice(std::uint32_t profile, int dims, const float* sample_major, int length,
                            std::int64_t first_index, std::int64_t first_new,
                            std::uint64_t stream_key) {
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
  slice.stream_key = stream_key;
  slice.offset = data.size();
  const std::size_t count = static_cast<std::size_t>(dims) * static_cast<std::size_t>(length);
  data.resize(data.size() + count);
  transpose_to_dim_major(sample_major, length, dims, data.data() + slice.offset);
  streams.push_back(slice);
}

void transpose_to_dim_major(const float* sample_major, int length, int dims, float* dim_major) {
  // Dim-major, so that every (pattern dim, stream dim) search reads one
  // contiguous series. In tiles of kTile samples x kTile dims, so that the
  // reads and the strided writes of a tile stay in cache (this is most of
  // the engine's batch assembly, docs/benchmarks.md).
  constexpr int kTile = 16;
  for (int s0 = 0; s0 < length; s0 += kTile) {
    const int s1 = std::min(length, s0 + kTile);
    for (int d0 = 0; d0 < dims; d0 += kTile) {
      const int d1 = std::min(dims, d0 + kTile);
      for (int d = d0; d < d1; ++d) {
        float* row = dim_major + static_cast<std::size_t>(d) * length;
        for (int s = s0; s < s1; ++s) row[s] = sample_major[static_cast<std::size_t>(s) * dims + d];
      }
    }
  }
}

bool match_result_order(const Match& a, const Match& b) {
  // The key covers every field, so the order is total and independent of
  // which worker or thread found what.
  if (a.slice != b.slice) return a.slice < b.slice;
  if (a.pattern != b.pattern) return a.pattern < b.pattern;
  if (a.pattern_dim != b.pattern_dim) return a.pattern_dim < b.pattern_dim;
  if (a.stream_dim != b.stream_dim) return a.stream_dim < b.stream_dim;
  if (a.distance != b.distance) return a.distance < b.distance;
  return a.end < b.end;
}

void sort_and_cap_matches(std::vector<Match>& matches, const PatternLibrary& library) {
  std::sort(matches.begin(), matches.end(), match_result_order);
  cap_sorted_matches(matches, library);
}

void cap_sorted_matches(std::vector<Match>& matches, const PatternLibrary& library) {
  std::size_t kept = 0, run = 0;
  for (std::size_t i = 0; i < matches.size(); ++i) {
    const Match& m = matches[i];
    const bool same_group = kept > 0 && matches[kept - 1].slice == m.slice &&
                            matches[kept - 1].pattern == m.pattern &&
                            matches[kept - 1].pattern_dim == m.pattern_dim &&
                            matches[kept - 1].stream_dim == m.stream_dim;
    run = same_group ? run + 1 : 1;
    if (static_cast<int>(run) <= library.patterns[m.pattern].max_matches_per_pair)
      matches[kept++] = m;
    else
      --run;
  }
  matches.resize(kept);
}

void SearchStats::add(const SearchStats& o) {
  windows += o.windows;
  pruned_kim += o.pruned_kim;
  pruned_keogh_eq += o.pruned_keogh_eq;
  pruned_keogh_ec += o.pruned_keogh_ec;
  dtw_full += o.dtw_full;
  dtw_abandoned += o.dtw_abandoned;
  cells += o.cells;
  buffer_growths += o.buffer_growths;
}

}  // namespace gw::kernels
