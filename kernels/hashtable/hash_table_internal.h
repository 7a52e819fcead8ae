// Host-side pieces shared by the CPU and GPU implementations: config checks,
// the whole table as host vectors (PoolState, the same layout as the device
// buffers), building it from pairs, growing it, and checking it. Internal to
// kernels/hashtable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/hashtable/hash_table.h"
#include "kernels/hashtable/hash_table_views.h"

namespace gw::kernels::hashtable::internal {

// Throws gw::Error naming the offending field.
void validate_config(const HashTableConfig& config);
TableGeometry make_geometry(const HashTableConfig& config);

// A table between batches: no limbo, no claims in flight.
struct PoolState {
  TableGeometry geometry;
  std::vector<LinkWord> heads;              // tables * buckets
  std::vector<HashNode> nodes;              // capacity
  std::vector<std::uint32_t> free_indices;  // capacity; [0, free_count) are free
  std::uint64_t free_count = 0;

  std::uint64_t capacity() const { return nodes.size(); }
  std::uint64_t size() const { return capacity() - free_count; }
};

// An empty table of `capacity` nodes (allocations then take indices 0, 1, ...).
void reset_state(PoolState& state, const TableGeometry& geometry, std::uint64_t capacity);

// Grows the pool keeping every entry; no-op when already large enough.
void grow_state(PoolState& state, std::uint64_t capacity);

// Rebuilds `state` to hold `pairs` (first of duplicate keys wins), growing the
// pool to fit. Returns the number of duplicates skipped.
std::uint64_t build_state(PoolState& state,
                          const std::vector<std::pair<HashKey, HashValue>>& pairs);

// See HashTableBackend::validate(). When `contents` is not null it receives
// the reachable pairs sorted by key.
std::string validate_state(const PoolState& state,
                           std::vector<std::pair<HashKey, HashValue>>* contents);

void count_statuses(const HashResult* results, std::size_t count, StatusCounters& counters);

void check_capacity(std::uint64_t capacity);

}  // namespace gw::kernels::hashtable::internal
