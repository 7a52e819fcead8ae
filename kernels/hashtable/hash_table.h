// Lock-free parallel hash table PH[n] (Moazeni 2013, chapter 4): n sub-tables
// of m buckets, each bucket a Michael lock-free ordered list (Figs 20-22) of
// nodes taken from a pre-allocated pool. A key k lives in bucket h(k) mod m of
// sub-table TA(k) (kernels/hashtable/hash_functions.h). One interface, two
// implementations of the same algorithm: a multi-threaded CPU one (the
// reference, and the CPU_BASIC / CPU_PH baselines) and a CUDA one that runs a
// whole batch in one kernel (GPU_BASIC / GPU_PH / GPU_BIG).
//
// Bulk execution model and batch semantics
// ----------------------------------------
// run_batch() executes every operation of the batch concurrently and returns
// one HashResult per operation, in the order of the operations. Operations of
// one batch have NO defined order among themselves. The contract is
// linearizability of the batch: there is a total order of the batch's
// operations such that executing them one after another in that order, from
// the table's contents at the start of the batch, gives exactly the returned
// results and the table's contents after the batch. Consequences that tests
// check:
//   * If every key occurs in at most one operation of the batch, the results
//     and the final contents are unique: those of applying the operations in
//     any order (for instance batch order) to a sequential map.
//   * Whatever the batch, no key is ever present twice, every kInserted key
//     is present afterwards unless a kDeleted of the same key is in the batch,
//     and size() changes by (#kInserted - #kDeleted).
//   * Because a map's keys are independent objects, linearizability can be
//     checked key by key: the operations on one key must be explainable by
//     some order of just those operations
//     (tests/kernels/hashtable/hashtable_test_support.h checks exactly that).
// Different batches are ordered: a batch sees every effect of earlier ones.
//
// Errors (common/error.h convention)
// ----------------------------------
//   * Setup/control failures throw gw::Error: an invalid config, no CUDA
//     device, a failed device allocation or CUDA call, a capacity above the
//     32-bit index limit, an internal invariant violation.
//   * Data-path failures are per-operation statuses and are counted
//     (counters()): an insert that finds no free node returns
//     kPoolExhausted and changes nothing; an operation of unknown kind
//     returns kInvalidOp. The table is never corrupted by either; the caller
//     may reserve() a larger pool (or clear()/load()) between batches and
//     resubmit the failed operations.
//
// Threads: a HashTableBackend is used by one thread at a time (every method,
// including the const ones, must not run concurrently with run_batch()); the
// concurrency is inside run_batch(). Every method blocks until its work is
// done (the GPU implementation synchronizes its own CUDA stream before it
// returns); nothing is asynchronous at this interface.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/hashtable/hash_functions.h"

namespace gw::kernels::hashtable {

using HashKey = std::uint64_t;
using HashValue = std::uint64_t;

enum class OpKind : std::uint32_t { kSearch = 0, kInsert = 1, kDelete = 2 };

// One operation of a batch. `value` is read by inserts only.
struct HashOp {
  HashKey key = 0;
  HashValue value = 0;
  OpKind kind = OpKind::kSearch;
  std::uint32_t reserved = 0;
};

enum class OpStatus : std::uint32_t {
  kFound = 0,          // search: present; result value = its value
  kNotFound = 1,       // search or delete: absent; nothing changed
  kInserted = 2,       // insert: was absent, now present with op.value
  kDuplicate = 3,      // insert: already present; result value = the existing value, unchanged
  kDeleted = 4,        // delete: was present, now absent; result value = the removed value
  kPoolExhausted = 5,  // insert: absent, but no free node could be claimed; nothing changed
  kInvalidOp = 6,      // unknown OpKind; nothing changed
};
constexpr int kOpStatusCount = 7;

struct HashResult {
  HashValue value = 0;  // see OpStatus; 0 where the status says nothing about a value
  OpStatus status = OpStatus::kNotFound;
  std::uint32_t reserved = 0;
};

static_assert(std::is_trivially_copyable<HashOp>::value && sizeof(HashOp) == 24,
              "HashOp is copied to the GPU as bytes");
static_assert(std::is_trivially_copyable<HashResult>::value && sizeof(HashResult) == 16,
              "HashResult is copied from the GPU as bytes");

const char* to_string(OpStatus status);
const char* to_string(OpKind kind);
const char* to_string(HashFunction function);
const char* to_string(TableAssignment assignment);

struct HashTableConfig {
  int tables = 1;                          // n: PH[n]; 1 is the basic table
  int buckets_per_table = 1024;            // m
  std::uint64_t node_capacity = 1u << 20;  // pool size; < 2^32 - 1
  HashFunction hash_function = HashFunction::kDek;
  TableAssignment table_assignment = TableAssignment::kMix;
  int cpu_threads = 0;       // CPU: worker threads, 0 = all hardware threads
  int gpu_block_size = 256;  // GPU: threads per block, a multiple of 32 in [32, 1024]
  int gpu_device = 0;        // GPU: CUDA device ordinal
};

// Where the time of the last run_batch() went. CPU: compute_ms only (wall
// clock of the parallel section). GPU: CUDA event times on the table's stream;
// compute_ms covers the batch kernel and the reclamation kernels, not the
// copies.
struct BatchTiming {
  double upload_ms = 0;
  double compute_ms = 0;
  double download_ms = 0;
};

// Cumulative per-status counts over every batch run since construction.
struct StatusCounters {
  std::uint64_t batches = 0;
  std::uint64_t operations = 0;
  std::array<std::uint64_t, kOpStatusCount> by_status{};
  std::uint64_t count(OpStatus status) const { return by_status[static_cast<int>(status)]; }
};

class HashTableBackend {
 public:
  virtual ~HashTableBackend() = default;

  // "cpu" or "cuda".
  virtual std::string name() const = 0;
  virtual const HashTableConfig& config() const = 0;

  // Runs one batch (see the batch semantics above); results[i] answers
  // ops[i]. Blocks until the batch is complete. Never throws for data-path
  // failures (statuses); throws gw::Error on a CUDA failure or a violated
  // internal invariant, after which the table must be clear()ed or load()ed.
  virtual void run_batch(const HashOp* ops, std::size_t count, HashResult* results) = 0;
  std::vector<HashResult> run_batch(const std::vector<HashOp>& ops) {
    std::vector<HashResult> results(ops.size());
    run_batch(ops.data(), ops.size(), results.data());
    return results;
  }

  // Keys present now. O(1).
  virtual std::uint64_t size() const = 0;
  virtual std::uint64_t node_capacity() const = 0;

  // Grows the node pool to at least `node_capacity` nodes, keeping every
  // entry (node indices stay valid, so nothing is rehashed). Between batches
  // only. Never shrinks. Throws gw::Error above kMaxNodeCapacity.
  virtual void reserve(std::uint64_t node_capacity) = 0;

  // Empties the table (all nodes free), keeping the capacity.
  virtual void clear() = 0;

  // Rebuilds the table on the host to hold exactly `pairs` (the first of
  // duplicate keys wins), growing the pool if needed; nodes are assigned in
  // the order of `pairs`. Returns the number of duplicate keys skipped. The
  // fast way to preload a table, and the host-side "rebuild" between batches.
  virtual std::uint64_t load(const std::vector<std::pair<HashKey, HashValue>>& pairs) = 0;

  // Every (key, value) present, sorted by key. O(capacity); for tests and tools.
  virtual std::vector<std::pair<HashKey, HashValue>> contents() const = 0;

  // Checks the structure: every chain strictly ordered, no marked node
  // reachable, every key in bucket h(k) of table TA(k), free list and
  // reachable nodes disjoint and together the whole pool. Returns "" when all
  // holds, else a description of the first problems. O(capacity).
  virtual std::string validate() const = 0;

  virtual BatchTiming last_batch_timing() const = 0;
  virtual StatusCounters counters() const = 0;
};

// Throws gw::Error for an invalid config.
std::unique_ptr<HashTableBackend> make_cpu_hash_table(const HashTableConfig& config);

// Throws gw::Error for an invalid config, when gaitwatch was built without
// CUDA, or when there is no usable CUDA device.
std::unique_ptr<HashTableBackend> make_gpu_hash_table(const HashTableConfig& config);

// True when built with CUDA and at least one CUDA device is usable. Never throws.
bool gpu_hash_table_available();

// Creates a table backend by name (the config's hashtable.backend), shared by
// the daemon's jobs (alert de-duplication, the time-slot index):
//   "cpu"  : the multi-threaded CPU table.
//   "cuda" : the GPU table; throws gw::Error (with the reason) when gaitwatch
//            was built without CUDA or no device is usable: an explicit
//            request is never silently downgraded.
//   "auto" : the GPU table when gpu_hash_table_available(), else the CPU one.
//            If it falls back, or the GPU table fails to start, `note`
//            (when non-null) receives a one-line reason to log; otherwise it
//            is cleared.
// Any other kind throws gw::Error. `config` is validated by the factories.
std::unique_ptr<HashTableBackend> make_hash_table_backend(const std::string& kind,
                                                          std::string* note,
                                                          const HashTableConfig& config = {});

// The memory system's random-access ceiling on one GPU: independent random
// 8-byte reads, and random 64-bit atomicCAS, over a device table of
// `table_bytes` (choose it far larger than L2). Synchronizes; about a second.
// Throws gw::Error like make_gpu_hash_table.
struct RandomAccessCeiling {
  std::uint64_t table_bytes = 0;
  double reads_per_s = 0;
  double cas_per_s = 0;
  std::string device_name;
};
RandomAccessCeiling measure_gpu_random_access(std::uint64_t table_bytes, int device = 0);

}  // namespace gw::kernels::hashtable
