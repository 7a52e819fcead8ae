// Host-side code shared by both implementations (hash_table_internal.h), the
// names of the public enums, and the stand-ins for the GPU entry points when
// gaitwatch is built without CUDA.
#include <algorithm>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/hashtable/hash_functions.h"
#include "kernels/hashtable/hash_table.h"
#include "kernels/hashtable/hash_table_internal.h"

namespace gw::kernels::hashtable {

const char* to_string(OpStatus status) {
  switch (status) {
    case OpStatus::kFound:
      return "found";
    case OpStatus::kNotFound:
      return "not_found";
    case OpStatus::kInserted:
      return "inserted";
    case OpStatus::kDuplicate:
      return "duplicate";
    case OpStatus::kDeleted:
      return "deleted";
    case OpStatus::kPoolExhausted:
      return "pool_exhausted";
    case OpStatus::kInvalidOp:
      return "invalid_op";
  }
  return "unknown";
}

const char* to_string(OpKind kind) {
  switch (kind) {
    case OpKind::kSearch:
      return "search";
    case OpKind::kInsert:
      return "insert";
    case OpKind::kDelete:
      return "delete";
  }
  return "unknown";
}

const char* to_string(HashFunction function) {
  switch (function) {
    case HashFunction::kDek:
      return "DEK";
    case HashFunction::kSdbm:
      return "SDBM";
    case HashFunction::kPjw:
      return "PJW";
  }
  return "unknown";
}

const char* to_string(TableAssignment assignment) {
  switch (assignment) {
    case TableAssignment::kScaledUnitDouble:
      return "scaled_unit_double";
    case TableAssignment::kMix:
      return "mix";
  }
  return "unknown";
}

#if !defined(GW_HAVE_CUDA_HASHTABLE)
std::unique_ptr<HashTableBackend> make_gpu_hash_table(const HashTableConfig& config) {
  internal::validate_config(config);
  throw Error("hash table: gaitwatch was built without CUDA (GAITWATCH_CUDA=OFF or no nvcc)");
}

bool gpu_hash_table_available() { return false; }

RandomAccessCeiling measure_gpu_random_access(std::uint64_t, int) {
  throw Error("hash table: gaitwatch was built without CUDA (GAITWATCH_CUDA=OFF or no nvcc)");
}
#endif

namespace internal {

void check_capacity(std::uint64_t capacity) {
  if (capacity > kMaxNodeCapacity)
    throw Error("hash table: node_capacity " + std::to_string(capacity) + " exceeds the limit " +
                std::to_string(kMaxNodeCapacity) + " of 32-bit node indices");
}

void validate_config(const HashTableConfig& config) {
  if (config.tables < 1) throw Error("hash table: tables must be >= 1");
  if (config.buckets_per_table < 1) throw Error("hash table: buckets_per_table must be >= 1");
  if (static_cast<std::uint64_t>(config.tables) * config.buckets_per_table > (1ull << 31))
    throw Error("hash table: tables * buckets_per_table must be <= 2^31");
  check_capacity(config.node_capacity);
  if (config.hash_function != HashFunction::kDek && config.hash_function != HashFunction::kSdbm &&
      config.hash_function != HashFunction::kPjw)
    throw Error("hash table: unknown hash_function");
  if (config.table_assignment != TableAssignment::kScaledUnitDouble &&
      config.table_assignment != TableAssignment::kMix)
    throw Error("hash table: unknown table_assignment");
  if (config.cpu_threads < 0) throw Error("hash table: cpu_threads must be >= 0");
  if (config.gpu_block_size < 32 || config.gpu_block_size > 1024 || config.gpu_block_size % 32)
    throw Error("hash table: gpu_block_size must be a multiple of 32 in [32, 1024]");
  if (config.gpu_device < 0) throw Error("hash table: gpu_device must be >= 0");
}

TableGeometry make_geometry(const HashTableConfig& config) {
  validate_config(config);
  TableGeometry geometry;
  geometry.tables = static_cast<std::uint32_t>(config.tables);
  geometry.buckets = static_cast<std::uint32_t>(config.buckets_per_table);
  geometry.hash_function = static_cast<std::uint32_t>(config.hash_function);
  geometry.table_assignment = static_cast<std::uint32_t>(config.table_assignment);
  return geometry;
}

void reset_state(PoolState& state, const TableGeometry& geometry, std::uint64_t capacity) {
  check_capacity(capacity);
  state.geometry = geometry;
  state.heads.assign(static_cast<std::size_t>(geometry.tables) * geometry.buckets, kEmptyLink);
  state.nodes.assign(capacity, HashNode{kEmptyLink, 0, 0, 0});
  state.free_indices.resize(capacity);
  // The top of the free stack is taken first: index 0, then 1, ...
  for (std::uint64_t j = 0; j < capacity; ++j)
    state.free_indices[j] = static_cast<std::uint32_t>(capacity - 1 - j);
  state.free_count = capacity;
}

void grow_state(PoolState& state, std::uint64_t capacity) {
  check_capacity(capacity);
  const std::uint64_t old_capacity = state.capacity();
  if (capacity <= old_capacity) return;
  state.nodes.resize(capacity, HashNode{kEmptyLink, 0, 0, 0});
  state.free_indices.resize(capacity);
  // The new indices go below the existing free ones, so the old free nodes
  // are handed out first; any order would do.
  const std::uint64_t added = capacity - old_capacity;
  std::copy_backward(
      state.free_indices.begin(),
      state.free_indices.begin() + static_cast<std::ptrdiff_t>(state.free_count),
      state.free_indices.begin() + static_cast<std::ptrdiff_t>(state.free_count + added));
  for (std::uint64_t j = 0; j < added; ++j)
    state.free_indices[j] = static_cast<std::uint32_t>(capacity - 1 - j);
  state.free_count += added;
}

std::uint64_t build_state(PoolState& state,
                          const std::vector<std::pair<HashKey, HashValue>>& pairs) {
  const TableGeometry geometry = state.geometry;
  const std::uint64_t capacity = std::max<std::uint64_t>(state.capacity(), pairs.size());
  reset_state(state, geometry, capacity);

  // (bucket slot, key, position in pairs): sorting groups each chain in key
  // order with the first occurrence of a key ahead of its duplicates.
  struct Entry {
    std::uint64_t slot;
    HashKey key;
    std::uint64_t position;
  };
  std::vector<Entry> entries(pairs.size());
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const HashKey key = pairs[i].first;
    const std::uint64_t table =
        assign_table(static_cast<TableAssignment>(geometry.table_assignment), key, geometry.tables);
    const std::uint64_t bucket =
        assign_bucket(static_cast<HashFunction>(geometry.hash_function), key, geometry.buckets);
    entries[i] = {table * geometry.buckets + bucket, key, i};
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.slot != b.slot) return a.slot < b.slot;
    if (a.key != b.key) return a.key < b.key;
    return a.position < b.position;
  });
  // Keep the first of each key; number the kept pairs in input order.
  std::vector<char> kept(pairs.size(), 0);
  std::uint64_t duplicates = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i > 0 && entries[i].key == entries[i - 1].key) {
      ++duplicates;
    } else {
      kept[entries[i].position] = 1;
    }
  }
  std::vector<std::uint32_t> node_of(pairs.size(), kNullIndex);
  std::uint32_t used = 0;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    if (!kept[i]) continue;
    node_of[i] = used;
    state.nodes[used] = HashNode{kEmptyLink, pairs[i].first, pairs[i].second, 0};
    ++used;
  }
  // Link each chain back to front so every link points at a larger key.
  for (std::size_t i = entries.size(); i-- > 0;) {
    const std::uint32_t node = node_of[entries[i].position];
    if (node == kNullIndex) continue;
    LinkWord& head = state.heads[entries[i].slot];
    state.nodes[node].next = head;
    head = make_link(node);
  }
  // Free: indices used .. capacity-1, the smallest on top.
  state.free_count = capacity - used;
  for (std::uint64_t j = 0; j < state.free_count; ++j)
    state.free_indices[j] = static_cast<std::uint32_t>(capacity - 1 - j);
  return duplicates;
}

std::string validate_state(const PoolState& state,
                           std::vector<std::pair<HashKey, HashValue>>* contents) {
  std::ostringstream problems;
  int reported = 0;
  auto report = [&](const std::string& what) {
    if (reported++ < 10) problems << what << "\n";
  };
  const TableGeometry& geometry = state.geometry;
  const std::uint64_t capacity = state.capacity();
  if (state.free_count > capacity) report("free_count exceeds the capacity");
  // 0 = unseen, 1 = reachable, 2 = free.
  std::vector<char> seen(capacity, 0);
  std::uint64_t reachable = 0;
  if (contents) contents->clear();
  for (std::uint64_t slot = 0; slot < state.heads.size(); ++slot) {
    const std::uint32_t table = static_cast<std::uint32_t>(slot / geometry.buckets);
    const std::uint32_t bucket = static_cast<std::uint32_t>(slot % geometry.buckets);
    LinkWord word = state.heads[slot];
    if (link_marked(word)) report("bucket head " + std::to_string(slot) + " is marked");
    bool have_previous = false;
    HashKey previous = 0;
    for (std::uint32_t index = link_index(word); index != kNullIndex;) {
      if (index >= capacity) {
        report("bucket " + std::to_string(slot) + " links node index " + std::to_string(index) +
               " beyond the capacity");
        break;
      }
      if (seen[index]) {
        report("node " + std::to_string(index) + " is reachable twice (cycle or shared tail)");
        break;
      }
      seen[index] = 1;
      ++reachable;
      const HashNode& node = state.nodes[index];
      if (link_marked(node.next)) report("marked node " + std::to_string(index) + " is reachable");
      if (have_previous && node.key <= previous)
        report("bucket " + std::to_string(slot) + " is not strictly ordered at key " +
               std::to_string(node.key) + (node.key == previous ? " (duplicate key)" : ""));
      const std::uint32_t want_table = assign_table(
          static_cast<TableAssignment>(geometry.table_assignment), node.key, geometry.tables);
      const std::uint32_t want_bucket = assign_bucket(
          static_cast<HashFunction>(geometry.hash_function), node.key, geometry.buckets);
      if (want_table != table || want_bucket != bucket)
        report("key " + std::to_string(node.key) + " sits in the wrong bucket");
      if (contents) contents->emplace_back(node.key, node.value);
      have_previous = true;
      previous = node.key;
      index = link_index(node.next);
    }
  }
  for (std::uint64_t j = 0; j < state.free_count && j < state.free_indices.size(); ++j) {
    const std::uint32_t index = state.free_indices[j];
    if (index >= capacity) {
      report("free list holds index " + std::to_string(index) + " beyond the capacity");
    } else if (seen[index] == 1) {
      report("node " + std::to_string(index) + " is both reachable and free");
    } else if (seen[index] == 2) {
      report("node " + std::to_string(index) + " is free twice");
    } else {
      seen[index] = 2;
    }
  }
  if (reachable + state.free_count != capacity)
    report("leak: " + std::to_string(reachable) + " reachable + " +
           std::to_string(state.free_count) + " free != capacity " + std::to_string(capacity));
  if (contents) std::sort(contents->begin(), contents->end());
  return problems.str();
}

void count_statuses(const HashResult* results, std::size_t count, StatusCounters& counters) {
  ++counters.batches;
  counters.operations += count;
  for (std::size_t i = 0; i < count; ++i) {
    const auto status = static_cast<std::uint32_t>(results[i].status);
    if (status < static_cast<std::uint32_t>(kOpStatusCount)) ++counters.by_status[status];
  }
}

}  // namespace internal

std::unique_ptr<HashTableBackend> make_hash_table_backend(const std::string& kind,
                                                          std::string* note,
                                                          const HashTableConfig& config) {
  if (note) note->clear();
  if (kind == "cpu") return make_cpu_hash_table(config);
  if (kind == "cuda") return make_gpu_hash_table(config);
  if (kind != "auto")
    throw Error("hash table backend '" + kind + "' is not one of auto, cpu, cuda");
  if (!gpu_hash_table_available()) {
    if (note) *note = "hash table: no usable CUDA device (or built without CUDA); using the CPU table";
    return make_cpu_hash_table(config);
  }
  try {
    return make_gpu_hash_table(config);
  } catch (const Error& e) {
    // A device that is listed but cannot be used (allocation failure, busy
    // device) must not stop the daemon when the user asked for "auto".
    if (note) *note = std::string("hash table: GPU table failed (") + e.what() + "); using the CPU table";
    return make_cpu_hash_table(config);
  }
}

}  // namespace gw::kernels::hashtable
