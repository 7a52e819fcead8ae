// Builds the CUDA backend's device form of a pattern library
// (kernels/cuda_library.h).
#include "kernels/cuda_library.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/dtw.h"

namespace gw::kernels {
namespace {

using namespace cuda;

// The filter's row index of group g: for every (profile slot, stream dim),
// the group's pairs on that stream dim of patterns of that profile, sorted
// by pattern length (the filter computes statistics once per length).
void build_row_pairs(const PatternLibrary& lib, const std::vector<PairView>& pairs,
                     const std::vector<QueryView>& queries, const std::vector<float>& values,
                     const std::vector<float>& upper, const std::vector<float>& lower,
                     const ProfileSlots& profile_slots, BandGroup& g, cudaStream_t stream) {
  const int slots = static_cast<int>(profile_slots.size());
  int dim_stride = 1;
  for (int q = g.pair_begin; q < g.pair_end; ++q)
    dim_stride = std::max(dim_stride, pairs[q].stream_dim + 1);
  if (dim_stride > 65535)
    throw Error("CUDA backend: stream dims above 65534 are not supported in window mode");
  std::vector<std::vector<int>> per_row(static_cast<std::size_t>(slots) * dim_stride);
  for (int q = g.pair_begin; q < g.pair_end; ++q) {
    const int slot = profile_slots.at(lib.patterns[pairs[q].pattern].profile);
    per_row[static_cast<std::size_t>(slot) * dim_stride + pairs[q].stream_dim].push_back(q);
  }
  std::vector<int> offsets{0};
  std::vector<RowPair> list;
  for (auto& row : per_row) {
    auto length_of = [&](int q) { return lib.patterns[pairs[q].pattern].length; };
    std::stable_sort(row.begin(), row.end(),
                     [&](int a, int b) { return length_of(a) < length_of(b); });
    const std::size_t row_begin = list.size();
    for (const int q : row) {
      const Pattern& pat = lib.patterns[pairs[q].pattern];
      const QueryView& qv = queries[pairs[q].query];
      RowPair r;
      r.pair = q;
      r.packed_group = qv.packed_group;
      r.length = pat.length;
      r.znorm = pat.znorm ? 1 : 0;
      r.prune_sq = prune_threshold_sq(pat.threshold);
      r.cutoff_sq = cutoff_threshold_sq(pat.threshold);
      r.query_offset = static_cast<int>(qv.offset);
      const int m = pat.length;
      const int at[6] = {0, std::min(1, m - 1), std::min(2, m - 1), std::max(0, m - 3),
                         std::max(0, m - 2), m - 1};
      for (int k = 0; k < 6; ++k) r.kim_query[k] = values[qv.offset + at[k]];
      const int run = m / kPaaSegments;
      for (int g = 0; g < kPaaSegments && run == 0; ++g) {
        r.paa_upper[g] = INFINITY;  // no segments: the bound is 0
        r.paa_lower[g] = -INFINITY;
      }
      for (int g = 0; g < kPaaSegments && run > 0; ++g) {
        const std::size_t from = qv.offset + static_cast<std::size_t>(g) * run;
        r.paa_upper[g] = *std::max_element(upper.begin() + from, upper.begin() + from + run);
        r.paa_lower[g] = *std::min_element(lower.begin() + from, lower.begin() + from + run);
      }
      list.push_back(r);
    }
    // Each pair records where its run of equal lengths ends.
    for (std::size_t i = list.size(); i-- > row_begin;)
      list[i].run_end = (i + 1 < list.size() && list[i + 1].length == list[i].length)
                            ? list[i + 1].run_end
                            : static_cast<int>(i + 1);
    offsets.push_back(static_cast<int>(list.size()));
  }
  g.row_offsets.upload(offsets, stream);
  g.row_pairs.upload(list, stream);
  g.rows.offsets = g.row_offsets.get();
  g.rows.pairs = g.row_pairs.get();
  g.rows.dim_stride = dim_stride;
  g.rows.slots = slots;
  g.rows.min_length = g.min_length;
  g.rows.max_length = g.max_length;
  g.rows.band = g.band;
}

}  // namespace

DeviceLibrary upload_library(const PatternLibrary& library, int device, cudaStream_t stream) {
  for (std::size_t p = 0; p < library.patterns.size(); ++p)
    if (library.patterns[p].band > kMaxGeneralBand)
      throw Error("CUDA backend: pattern " + std::to_string(p) + ": band " +
                  std::to_string(library.patterns[p].band) + " exceeds " +
                  std::to_string(kMaxGeneralBand) + " (use the CPU backend)");
  check_backend(cudaSetDevice(device), "cudaSetDevice");
  int shared_limit = 0;
  check_backend(cudaDeviceGetAttribute(&shared_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
        "shared memory limit");
  for (std::size_t p = 0; p < library.patterns.size(); ++p) {
    const Pattern& pat = library.patterns[p];
    if (pat.mode == SearchMode::kWindow && pat.length > kMaxWindowLength)
      throw Error("CUDA backend: pattern " + std::to_string(p) + ": length " +
                  std::to_string(pat.length) + " exceeds " + std::to_string(kMaxWindowLength) +
                  " in window mode (use the CPU backend)");
    if (pat.mode == SearchMode::kWindow &&
        window_filter_max_shared_bytes(pat.length, pat.band) > static_cast<std::size_t>(shared_limit))
      throw Error("CUDA backend: pattern " + std::to_string(p) + ": length " +
                  std::to_string(pat.length) + " with band " + std::to_string(pat.band) +
                  " needs more shared memory than the device has (use the CPU backend)");
  }
  // Window-mode pairs ordered by band so each band is one contiguous range.
  std::vector<int> order(library.patterns.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const Pattern& pa = library.patterns[a];
    const Pattern& pb = library.patterns[b];
    if (pa.mode != pb.mode) return pa.mode < pb.mode;
    return pa.band < pb.band;
  });
  std::vector<PairView> pairs;
  std::vector<QueryView> queries;
  std::vector<float> values, upper, lower;
  std::vector<float4> eq_packed, ec_packed;
  std::vector<BandGroup> groups;
  std::vector<SpringPattern> springs;
  std::vector<int> query_of(library.patterns.size());
  std::unordered_map<std::uint32_t, int> profile_slots;
  for (const int p : order) {
    const Pattern& pat = library.patterns[p];
    const bool window = pat.mode == SearchMode::kWindow;
    query_of[p] = static_cast<int>(queries.size());
    for (int j = 0; j < pat.dim_count; ++j) {
      const float* raw = pat.dims.data() + static_cast<std::size_t>(j) * pat.length;
      std::vector<double> q(raw, raw + pat.length);
      if (window && pat.znorm) q = znormalize(raw, pat.length);
      queries.push_back({static_cast<long long>(values.size()), pat.length});
      for (int k = 0; k < pat.length; ++k) {
        values.push_back(static_cast<float>(q[k]));
        double u = q[k], l = q[k];
        for (int o = std::max(0, k - pat.band); o <= std::min(pat.length - 1, k + pat.band); ++o) {
          u = std::max(u, q[o]);
          l = std::min(l, q[o]);
        }
        upper.push_back(static_cast<float>(u));
        lower.push_back(static_cast<float>(l));
      }
      if (window) {
        // UCR Suite's visiting order: |value| descending, so the lower
        // bounds' partial sums grow fastest.
        const std::size_t at = queries.back().offset;
        std::vector<int> visit(pat.length);
        std::iota(visit.begin(), visit.end(), 0);
        std::stable_sort(visit.begin(), visit.end(), [&](int a, int b) {
          return std::fabs(values[at + a]) > std::fabs(values[at + b]);
        });
        queries.back().packed_group = static_cast<int>(ec_packed.size());
        for (std::size_t g0 = 0; g0 < visit.size(); g0 += 3) {
          float u[3] = {0, 0, 0}, l[3] = {0, 0, 0}, v[3] = {0, 0, 0};
          std::uint32_t positions = 0;
          for (std::size_t j = 0; j < 3 && g0 + j < visit.size(); ++j) {
            const int k = visit[g0 + j];
            u[j] = upper[at + k];
            l[j] = lower[at + k];
            v[j] = values[at + k];
            positions |= static_cast<std::uint32_t>(k) << (10 * j);
          }
          float packed;
          std::memcpy(&packed, &positions, sizeof(packed));
          eq_packed.push_back({u[0], l[0], u[1], l[1]});
          eq_packed.push_back({u[2], l[2], packed, 0.f});
          ec_packed.push_back({v[0], v[1], v[2], packed});
        }
      }
    }
    const int begin = static_cast<int>(pairs.size());
    for (const DimPair& dp : pat.pairs)
      pairs.push_back({p, query_of[p] + dp.pattern_dim, dp.stream_dim, dp.pattern_dim});
    const int end = static_cast<int>(pairs.size());
    if (window) {
      if (groups.empty() || groups.back().band != pat.band) {
        groups.emplace_back();
        groups.back().band = pat.band;
        groups.back().pair_begin = begin;
        groups.back().min_length = pat.length;
      }
      groups.back().pair_end = end;
      groups.back().min_length = std::min(groups.back().min_length, pat.length);
      groups.back().max_length = std::max(groups.back().max_length, pat.length);
      profile_slots.try_emplace(pat.profile, static_cast<int>(profile_slots.size()));
    } else {
      SpringPattern sp;
      sp.pattern = p;
      sp.pair_begin = begin;
      sp.pair_count = end - begin;
      sp.length = pat.length;
      springs.push_back(std::move(sp));
    }
  }
  // Rank of every pair in (pattern, pattern dim, stream dim) order: the
  // device sort's key for result order.
  std::vector<int> by_order(pairs.size());
  std::iota(by_order.begin(), by_order.end(), 0);
  std::sort(by_order.begin(), by_order.end(), [&](int a, int b) {
    return std::tie(pairs[a].pattern, pairs[a].pattern_dim, pairs[a].stream_dim) <
           std::tie(pairs[b].pattern, pairs[b].pattern_dim, pairs[b].stream_dim);
  });
  std::vector<int> rank(pairs.size());
  for (std::size_t r = 0; r < by_order.size(); ++r) rank[by_order[r]] = static_cast<int>(r);
  if (pairs.size() >= (1u << 24))
    throw Error("CUDA backend: more than 2^24 dim pairs in the pattern library");
  if (values.size() >= (1u << 31))
    throw Error("CUDA backend: the pattern library has more than 2^31 query values");
  for (BandGroup& g : groups)
    build_row_pairs(library, pairs, queries, values, upper, lower, profile_slots, g, stream);
  std::vector<PatternOutput> outputs(library.patterns.size());
  for (std::size_t p = 0; p < outputs.size(); ++p) {
    const Pattern& pat = library.patterns[p];
    outputs[p] = {pat.max_matches_per_pair, pat.length, pat.mode == SearchMode::kWindow ? 1 : 0};
  }
  DeviceLibrary lib;
  lib.pattern_outputs.upload(outputs, stream);
  lib.pair_rank.upload(rank, stream);
  lib.pairs.upload(pairs, stream);
  lib.queries.upload(queries, stream);
  lib.values.upload(values, stream);
  lib.upper.upload(upper, stream);
  lib.lower.upload(lower, stream);
  lib.eq_packed.upload(eq_packed, stream);
  lib.ec_packed.upload(ec_packed, stream);
  check_backend(cudaStreamSynchronize(stream), "library upload");
  lib.host_pairs = std::move(pairs);
  lib.groups = std::move(groups);
  lib.profile_slots = std::move(profile_slots);
  lib.springs = std::move(springs);
  return lib;
}

}  // namespace gw::kernels
