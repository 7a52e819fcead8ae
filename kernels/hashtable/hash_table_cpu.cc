// The CPU implementation of the lock-free parallel hash table: the list
// algorithm of hash_list.h run by a fixed set of std::threads over one
// PoolState, with GCC __atomic builtins on the link words. It is the
// reference the GPU implementation is tested against and the CPU_BASIC
// (tables = 1) / CPU_PH baselines of the benchmark.
//
// Allocation: each worker claims chunks of positions of the free stack with
// one fetch_add and hands them out privately, so workers do not all hit one
// counter per insert. Nodes a worker claimed but did not use go back to the
// pool at the end of the batch. Near exhaustion an insert may therefore get
// kPoolExhausted while up to threads * (chunk - 1) nodes sit unused in other
// workers' chunks; the chunk shrinks with the free pool (free / (8 *
// threads), at most kMaxAllocationChunk) so that slack stays small. Reclamation is the same epoch
// scheme as on the GPU: retired nodes collect in per-worker limbo lists and
// join the free stack only after all workers have finished the batch.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#include "common/error.h"
#include "common/worker_pool.h"
#include "kernels/hashtable/hash_list.h"
#include "kernels/hashtable/hash_table.h"
#include "kernels/hashtable/hash_table_internal.h"

namespace gw::kernels::hashtable {
namespace {

using internal::PoolState;

constexpr std::uint64_t kMaxAllocationChunk = 32;
constexpr std::size_t kOpsPerClaim = 64;

// hash_list.h's memory policy for one worker thread of one batch.
class CpuMemory {
 public:
  CpuMemory(PoolState& state, std::uint64_t chunk, std::atomic<std::uint64_t>& taken,
            std::vector<std::uint32_t>& limbo)
      : nodes_(state.nodes.data()),
        free_indices_(state.free_indices.data()),
        free_count_(state.free_count),
        chunk_(chunk),
        taken_(taken),
        limbo_(limbo) {}

  HashNode* nodes() const { return nodes_; }
  LinkWord load_link(const LinkWord* word) const { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }
  unsigned long long load_payload(const unsigned long long* field) const {
    return __atomic_load_n(field, __ATOMIC_RELAXED);
  }
  void store_private(unsigned long long* field, unsigned long long value) {
    __atomic_store_n(field, value, __ATOMIC_RELAXED);
  }
  // The linking CAS below is a release: nothing more is needed on the CPU.
  void publish_fence() {}
  bool cas_link(LinkWord* word, LinkWord expected, LinkWord desired) {
    return __atomic_compare_exchange_n(word, &expected, desired, /*weak=*/false, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE);
  }

  std::uint32_t allocate() {
    if (chunk_next_ == chunk_end_) {
      const std::uint64_t first = taken_.fetch_add(chunk_, std::memory_order_relaxed);
      if (first >= free_count_) return kNullIndex;
      chunk_next_ = first;
      chunk_end_ = std::min(first + chunk_, free_count_);
    }
    return free_indices_[free_count_ - 1 - chunk_next_++];
  }

  void retire(std::uint32_t index) { limbo_.push_back(index); }

  // End of batch: claimed but unused nodes are retired so they return to the pool.
  void return_unused() {
    while (chunk_next_ < chunk_end_)
      limbo_.push_back(free_indices_[free_count_ - 1 - chunk_next_++]);
  }

 private:
  HashNode* const nodes_;
  const std::uint32_t* const free_indices_;
  const std::uint64_t free_count_;
  const std::uint64_t chunk_;
  std::atomic<std::uint64_t>& taken_;
  std::vector<std::uint32_t>& limbo_;
  std::uint64_t chunk_next_ = 0;
  std::uint64_t chunk_end_ = 0;
};

class CpuHashTable final : public HashTableBackend {
 public:
  explicit CpuHashTable(const HashTableConfig& config)
      : config_(config),
        workers_(worker_count(config.cpu_threads), "gw-hashtable"),
        limbo_(static_cast<std::size_t>(workers_.size())) {
    internal::reset_state(state_, internal::make_geometry(config), config.node_capacity);
  }

  std::string name() const override { return "cpu"; }
  const HashTableConfig& config() const override { return config_; }

  void run_batch(const HashOp* ops, std::size_t count, HashResult* results) override {
    const auto start = std::chrono::steady_clock::now();
    std::atomic<std::uint64_t> taken{0};
    std::atomic<std::size_t> next_op{0};
    for (std::vector<std::uint32_t>& limbo : limbo_) limbo.clear();
    const TableGeometry geometry = state_.geometry;
    LinkWord* const heads = state_.heads.data();
    const std::uint64_t chunk = std::clamp<std::uint64_t>(
        state_.free_count / (8 * static_cast<std::uint64_t>(workers_.size())), 1,
        kMaxAllocationChunk);
    workers_.run([&](int worker) {
      CpuMemory memory(state_, chunk, taken, limbo_[worker]);
      for (;;) {
        const std::size_t begin = next_op.fetch_add(kOpsPerClaim, std::memory_order_relaxed);
        if (begin >= count) break;
        const std::size_t end = std::min(count, begin + kOpsPerClaim);
        for (std::size_t i = begin; i < end; ++i)
          results[i] = apply_op(memory, geometry, heads, ops[i]);
      }
      memory.return_unused();
    });
    // Epoch boundary: no worker runs, so retired nodes may be reused now.
    const std::uint64_t consumed = std::min<std::uint64_t>(taken.load(), state_.free_count);
    std::uint64_t free_count = state_.free_count - consumed;
    for (const std::vector<std::uint32_t>& limbo : limbo_) {
      if (free_count + limbo.size() > state_.capacity())
        throw Error(
            "hash table (cpu): internal invariant violated: more retired nodes than the pool");
      std::copy(limbo.begin(), limbo.end(), state_.free_indices.begin() + free_count);
      free_count += limbo.size();
    }
    state_.free_count = free_count;
    timing_ = BatchTiming{};
    timing_.compute_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    internal::count_statuses(results, count, counters_);
  }

  std::uint64_t size() const override { return state_.size(); }
  std::uint64_t node_capacity() const override { return state_.capacity(); }
  void reserve(std::uint64_t capacity) override { internal::grow_state(state_, capacity); }
  void clear() override { internal::reset_state(state_, state_.geometry, state_.capacity()); }
  std::uint64_t load(const std::vector<std::pair<HashKey, HashValue>>& pairs) override {
    return internal::build_state(state_, pairs);
  }
  std::vector<std::pair<HashKey, HashValue>> contents() const override {
    std::vector<std::pair<HashKey, HashValue>> pairs;
    internal::validate_state(state_, &pairs);
    return pairs;
  }
  std::string validate() const override { return internal::validate_state(state_, nullptr); }
  BatchTiming last_batch_timing() const override { return timing_; }
  StatusCounters counters() const override { return counters_; }

 private:
  HashTableConfig config_;
  PoolState state_;
  WorkerPool workers_;
  std::vector<std::vector<std::uint32_t>> limbo_;  // one per worker, reused across batches
  BatchTiming timing_;
  StatusCounters counters_;
};

}  // namespace

std::unique_ptr<HashTableBackend> make_cpu_hash_table(const HashTableConfig& config) {
  internal::validate_config(config);
  return std::make_unique<CpuHashTable>(config);
}

}  // namespace gw::kernels::hashtable
