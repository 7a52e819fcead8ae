// The memory layout of the lock-free parallel hash table, shared by the CPU
// implementation (hash_table_cpu.cc), the GPU implementation (hash_table.cu)
// and the host-side snapshot code (hash_table_common.cc), and the
// trivially-copyable view of the device-resident table that is passed by value
// into the kernels (cuCollections style; the owner is GpuHashTable in
// hash_table.cu). Plain C++: no CUDA header needed to include this.
//
// Layout (docs/hashtable.md has the picture):
//   heads[t * buckets + b]   one link word per bucket b of sub-table t
//   nodes[i]                 the node pool; a node is one 32-byte sector
//   free_indices[0, free_count)  node indices that are free; allocations take
//                            them from the top: the p-th claim of a batch
//                            gets free_indices[free_count - 1 - p]
//   limbo[0, limbo_count)    nodes unlinked (or allocated but never linked)
//                            during the current batch; appended to the free
//                            indices only between batches (epoch reclamation)
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/hashtable/hash_functions.h"  // GW_HT_HOST_DEVICE

namespace gw::kernels::hashtable {

// Every word the algorithm CASes is 64 bits: CUDA's atomicCAS takes
// unsigned long long, so that is the word type on both sides.
using LinkWord = unsigned long long;
static_assert(sizeof(LinkWord) == 8, "link words must be 64-bit");

// A link word is <Mark, Next> in one atomically-CASed word: bit 63 is the
// Mark bit (the node that OWNS this word is logically deleted), the low 32
// bits are the index of the next node in the pool, kNullIndex for the end of
// the chain. Bits 32..62 are zero. No ABA tag is needed because a node index
// is never reused within a batch (see docs/hashtable.md, "ABA").
constexpr std::uint32_t kNullIndex = 0xFFFFFFFFu;
constexpr LinkWord kMarkBit = 1ull << 63;
constexpr LinkWord kIndexMask = 0xFFFFFFFFull;
constexpr LinkWord kEmptyLink = kNullIndex;  // unmarked, next = null
// The most nodes a pool may hold (indices 0 .. kNullIndex - 1).
constexpr std::uint64_t kMaxNodeCapacity = kNullIndex;

GW_HT_HOST_DEVICE constexpr LinkWord make_link(std::uint32_t index, bool marked = false) {
  return (marked ? kMarkBit : 0ull) | static_cast<LinkWord>(index);
}
GW_HT_HOST_DEVICE constexpr std::uint32_t link_index(LinkWord word) {
  return static_cast<std::uint32_t>(word & kIndexMask);
}
GW_HT_HOST_DEVICE constexpr bool link_marked(LinkWord word) { return (word & kMarkBit) != 0; }

// One pool entry (seed Figure 23, widened to 64-bit keys and values). The
// link word and the key share the first 16 bytes so a traversal step reads
// one 32-byte sector. key and value are written before the node is linked and
// never change while it is reachable.
struct alignas(32) HashNode {
  LinkWord next;
  unsigned long long key;
  unsigned long long value;
  unsigned long long unused;  // pads the node to one 32-byte sector
};
static_assert(sizeof(HashNode) == 32, "a node is one 32-byte sector");
static_assert(std::is_trivially_copyable<HashNode>::value, "nodes are copied as bytes");

// Where a key lives: sub-table TA(k) of `tables`, bucket h(k) mod `buckets`.
struct TableGeometry {
  std::uint32_t tables = 1;
  std::uint32_t buckets = 1024;
  std::uint32_t hash_function = 0;     // HashFunction
  std::uint32_t table_assignment = 0;  // TableAssignment
};

// Per-batch allocation and reclamation counters, in device memory for the GPU.
struct PoolCounters {
  unsigned long long free_count;      // valid free_indices entries; fixed during a batch
  unsigned long long taken;           // claims made this batch (may exceed free_count)
  unsigned long long limbo_count;     // retired nodes this batch
  unsigned long long limbo_overflow;  // retirements that found limbo full (must stay 0)
  unsigned int reclaim_blocks_done;   // reclaim_kernel's blocks finished (0 between batches)
  unsigned int unused;
};
static_assert(std::is_trivially_copyable<PoolCounters>::value, "copied to and from the device");

// The whole device-resident table, passed by value into every kernel.
struct HashTableView {
  TableGeometry geometry;
  LinkWord* heads = nullptr;              // geometry.tables * geometry.buckets words
  HashNode* nodes = nullptr;              // node_capacity nodes
  std::uint32_t* free_indices = nullptr;  // node_capacity entries
  std::uint32_t* limbo = nullptr;         // node_capacity entries
  PoolCounters* counters = nullptr;
  unsigned long long node_capacity = 0;
};
static_assert(std::is_trivially_copyable<HashTableView>::value, "passed by value to kernels");

}  // namespace gw::kernels::hashtable
