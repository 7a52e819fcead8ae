// The GPU implementation of the lock-free parallel hash table: the kernels
// (one thread per operation of a batch, the list algorithm of hash_list.h with
// a CUDA memory policy; then the between-batch reclamation), their launches,
// and GpuHashTable, the owning host object behind HashTableBackend. Also the
// random-access ceiling measurement of hash_table.h.
//
// Memory ordering on the device (docs/hashtable.md, "Memory ordering"):
//   * Link words, keys and values are read with ld.relaxed.gpu: never served
//     from the non-coherent L1, never merged or hoisted by the compiler.
//   * An insert writes its node's key, value and next, executes
//     __threadfence(), then links the node with atomicCAS, so any thread that
//     reads the new link and then the node (an address-dependent read, in
//     order on the hardware) sees the initialised node.
//   * All CASes are atomicCAS on 64-bit words at device scope.
//   * Nodes are never reused within a batch (epoch reclamation), so a link
//     value can only recur naming the same live node: no ABA.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/cuda_memory.h"
#include "kernels/hashtable/hash_list.h"
#include "kernels/hashtable/hash_table.h"
#include "kernels/hashtable/hash_table_internal.h"
#include "kernels/hashtable/hash_table_views.h"

namespace gw::kernels::hashtable {
namespace {

namespace cg = cooperative_groups;
using internal::PoolState;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw Error(std::string("hash table (cuda): ") + what + ": " + cudaGetErrorString(status));
}

// ---------------------------------------------------------------- device code

__device__ __forceinline__ unsigned long long load_relaxed(const unsigned long long* address) {
  unsigned long long value;
  asm volatile("ld.relaxed.gpu.u64 %0, [%1];" : "=l"(value) : "l"(address) : "memory");
  return value;
}

// hash_list.h's memory policy for one thread of the batch kernel.
class DeviceMemory {
 public:
  __device__ explicit DeviceMemory(const HashTableView& table)
      : nodes_(table.nodes),
        free_indices_(table.free_indices),
        free_count_(table.counters->free_count),  // fixed while the batch kernel runs
        counters_(table.counters),
        limbo_(table.limbo),
        limbo_capacity_(table.node_capacity) {}

  __device__ HashNode* nodes() const { return nodes_; }
  __device__ LinkWord load_link(const LinkWord* word) const { return load_relaxed(word); }
  __device__ unsigned long long load_payload(const unsigned long long* field) const {
    return load_relaxed(field);
  }
  __device__ void store_private(unsigned long long* field, unsigned long long value) {
    *field = value;
  }
  __device__ void publish_fence() { __threadfence(); }
  __device__ bool cas_link(LinkWord* word, LinkWord expected, LinkWord desired) {
    return atomicCAS(word, expected, desired) == expected;
  }

  // Warp-aggregated: the threads of a warp that allocate at the same moment
  // make one atomicAdd for all of them; each takes its own slot of the claim.
  // A claim at or beyond free_count fails (the pool is exhausted).
  __device__ std::uint32_t allocate() {
    const unsigned long long claim = aggregated_claim(&counters_->taken);
    if (claim >= free_count_) return kNullIndex;
    return free_indices_[free_count_ - 1 - claim];
  }

  // Warp-aggregated append to the batch's limbo list.
  __device__ void retire(std::uint32_t index) {
    const unsigned long long slot = aggregated_claim(&counters_->limbo_count);
    if (slot < limbo_capacity_) {
      limbo_[slot] = index;
    } else {
      atomicAdd(&counters_->limbo_overflow, 1ull);  // impossible by construction; host checks
    }
  }

 private:
  // The calling thread's slot of one atomicAdd on `counter` made for all the
  // threads of its warp that call this at the same moment (each gets its own,
  // consecutive by rank within the group).
  static __device__ unsigned long long aggregated_claim(unsigned long long* counter) {
    const cg::coalesced_group group = cg::coalesced_threads();
    unsigned long long first = 0;
    if (group.thread_rank() == 0)
      first = atomicAdd(counter, static_cast<unsigned long long>(group.size()));
    first = group.shfl(first, 0);
    return first + group.thread_rank();
  }

  HashNode* const nodes_;
  const std::uint32_t* const free_indices_;
  const unsigned long long free_count_;
  PoolCounters* const counters_;
  std::uint32_t* const limbo_;
  const unsigned long long limbo_capacity_;
};

// One thread per operation (grid-stride for batches larger than the grid).
__global__ void batch_kernel(HashTableView table, const HashOp* ops, HashResult* results,
                             unsigned long long count) {
  DeviceMemory memory(table);
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i =
           static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    const HashOp op = ops[i];
    results[i] = apply_op(memory, table.geometry, table.heads, op);
  }
}

// Between batches (stream order: after batch_kernel, before the next one):
// the unclaimed part of the free stack is free_indices[0, free_count - taken);
// the batch's limbo is appended above it. No batch kernel runs now, so no
// thread can still hold a reference to a retired node.
struct ReclaimPlan {
  unsigned long long base;   // first free_indices slot the limbo goes to
  unsigned long long moved;  // limbo entries moved
};

__device__ __forceinline__ ReclaimPlan plan_reclaim(const PoolCounters& counters,
                                                    unsigned long long capacity) {
  const unsigned long long consumed = min(counters.taken, counters.free_count);
  ReclaimPlan plan;
  plan.base = counters.free_count - consumed;
  plan.moved = min(counters.limbo_count, capacity - plan.base);
  return plan;
}

// Copies the limbo list above the unclaimed free stack; the last block to
// finish (threadFenceReduction pattern) then publishes the new free_count and
// resets the batch counters, so the reclamation is one launch.
__global__ void reclaim_kernel(HashTableView table) {
  const PoolCounters counters = *table.counters;
  const ReclaimPlan plan = plan_reclaim(counters, table.node_capacity);
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i =
           static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < plan.moved; i += stride)
    table.free_indices[plan.base + i] = table.limbo[i];
  __syncthreads();  // this block's reads of the counters and copies are done
  __shared__ bool last_block;
  if (threadIdx.x == 0) {
    __threadfence();
    last_block = atomicAdd(&table.counters->reclaim_blocks_done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last_block || threadIdx.x != 0) return;
  // Every other block has read the counters and finished its copies.
  __threadfence();
  PoolCounters& live = *table.counters;
  if (plan.moved < counters.limbo_count) live.limbo_overflow += counters.limbo_count - plan.moved;
  live.free_count = plan.base + plan.moved;
  live.taken = 0;
  live.limbo_count = 0;
  live.reclaim_blocks_done = 0;
}

// The device half of GpuHashTable::reserve, after the node and free-index
// arrays grew to table.node_capacity (old contents at nodes[0, old_capacity)
// and free_indices[added, added + old_capacity)): empties the new nodes, puts
// their indices in descending order below the old free entries, and counts
// them free. Between batches only.
__global__ void grow_pool_kernel(HashTableView table, unsigned long long old_capacity) {
  const unsigned long long added = table.node_capacity - old_capacity;
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i =
           static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < added; i += stride) {
    table.nodes[old_capacity + i] = HashNode{kEmptyLink, 0, 0, 0};
    table.free_indices[i] = static_cast<std::uint32_t>(table.node_capacity - 1 - i);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) table.counters->free_count += added;
}

// Random-access ceiling: `per_thread` independent random 8-byte reads (or
// CASes) per thread over mask + 1 words (a power of two). xorshift indices; the xor of what was
// read is stored so the reads cannot be dropped.
__device__ __forceinline__ unsigned long long next_random(unsigned long long& state) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

__global__ void random_read_kernel(const unsigned long long* table, unsigned long long mask,
                                   int per_thread, unsigned long long* sink) {
  unsigned long long state =
      mix64(static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x + 1);
  unsigned long long acc = 0;
  for (int k = 0; k < per_thread; k += 4) {
    unsigned long long v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = __ldcg(table + (next_random(state) & mask));
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= v[u];
  }
  if (acc == 0x5eed) *sink = acc;  // practically never; keeps the loads alive
}

__global__ void random_cas_kernel(unsigned long long* table, unsigned long long mask,
                                  int per_thread, unsigned long long* sink) {
  unsigned long long state =
      mix64(static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x + 1);
  unsigned long long acc = 0;
  for (int k = 0; k < per_thread; ++k) {
    const unsigned long long index = next_random(state) & mask;
    acc += atomicCAS(table + index, index, index + 1);  // hash-table-like: expect a value
  }
  if (acc == 0x5eed) *sink = acc;
}

__global__ void iota_kernel(unsigned long long* table, unsigned long long words) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i =
           static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < words; i += stride)
    table[i] = i;
}

// ------------------------------------------------------------------ host code

using cuda_memory::DeviceBuffer;
using cuda_memory::OwnedEvent;
using cuda_memory::OwnedStream;
using cuda_memory::PinnedBuffer;

void select_device(int device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
    throw Error("hash table (cuda): no CUDA device is available");
  if (device >= count)
    throw Error("hash table (cuda): gpu_device " + std::to_string(device) + " but only " +
                std::to_string(count) + " CUDA device(s)");
  cuda_memory::open_device(device);
}

// Blocks for a grid-stride kernel over `work` items: enough to fill the GPU,
// no more than needed.
int grid_for(unsigned long long work, int block) {
  const unsigned long long blocks = (work + block - 1) / block;
  return static_cast<int>(
      std::max<unsigned long long>(1, std::min<unsigned long long>(blocks, 1u << 20)));
}

class GpuHashTable final : public HashTableBackend {
 public:
  explicit GpuHashTable(const HashTableConfig& config) : config_(config) {
    internal::validate_config(config);
    select_device(config.gpu_device);
    {
      // The highest priority the device has: the daemon's dedup and slot
      // tables run small batches while a window search fills every SM, and
      // their blocks should not queue behind all of the search's (each
      // batch is on an alert's way out, docs/hashtable.md).
      int least_priority = 0, greatest_priority = 0;
      check(cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority),
            "cudaDeviceGetStreamPriorityRange");
      owned_stream_.create(greatest_priority);
      stream_ = owned_stream_.get();
      for (OwnedEvent& event : events_) event.create(cudaEventDefault);
      check(cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount,
                                   config.gpu_device),
            "cudaDeviceGetAttribute");
      PoolState state;
      internal::reset_state(state, internal::make_geometry(config), config.node_capacity);
      upload_state(state);
    }
  }

  // The buffers free in the stream's order, then the events and the stream
  // go (members are destroyed in reverse order of declaration; those a
  // throwing constructor had made are destroyed the same way).
  ~GpuHashTable() override = default;

  std::string name() const override { return "cuda"; }
  const HashTableConfig& config() const override { return config_; }

  // Copies the batch in, launches batch_kernel + reclamation on the table's
  // stream, copies results and counters back, synchronizes the stream.
  void run_batch(const HashOp* ops, std::size_t count, HashResult* results) override {
    check(cudaSetDevice(config_.gpu_device), "cudaSetDevice");
    if (count > 0) {
      staged_ops_.reserve(count);
      staged_results_.reserve(count);
      device_ops_.reserve(count);
      device_results_.reserve(count);
      std::memcpy(staged_ops_.get(), ops, count * sizeof(HashOp));
    }
    const HashTableView table = view();
    check(cudaEventRecord(events_[0].get(), stream_), "cudaEventRecord");
    if (count > 0)
      check(cudaMemcpyAsync(device_ops_.get(), staged_ops_.get(), count * sizeof(HashOp),
                            cudaMemcpyHostToDevice, stream_),
            "copy operations to the device");
    check(cudaEventRecord(events_[1].get(), stream_), "cudaEventRecord");
    if (count > 0) {
      const int block = config_.gpu_block_size;
      batch_kernel<<<grid_for(count, block), block, 0, stream_>>>(table, device_ops_.get(),
                                                                  device_results_.get(), count);
      check(cudaGetLastError(), "launch batch_kernel");
      // Enough blocks to stream any limbo size; idle threads exit at once.
      reclaim_kernel<<<2 * multiprocessors_, 512, 0, stream_>>>(table);
      check(cudaGetLastError(), "launch reclaim_kernel");
    }
    check(cudaEventRecord(events_[2].get(), stream_), "cudaEventRecord");
    if (count > 0)
      check(cudaMemcpyAsync(staged_results_.get(), device_results_.get(),
                            count * sizeof(HashResult), cudaMemcpyDeviceToHost, stream_),
            "copy results to the host");
    check(cudaMemcpyAsync(staged_counters_.get(), counters_.get(), sizeof(PoolCounters),
                          cudaMemcpyDeviceToHost, stream_),
          "copy counters to the host");
    check(cudaEventRecord(events_[3].get(), stream_), "cudaEventRecord");
    check(cudaStreamSynchronize(stream_), "batch");
    if (count > 0) std::memcpy(results, staged_results_.get(), count * sizeof(HashResult));

    const PoolCounters& counters = *staged_counters_.get();
    if (counters.limbo_overflow != 0)
      throw Error("hash table (cuda): internal invariant violated: " +
                  std::to_string(counters.limbo_overflow) + " retired nodes found limbo full");
    free_count_ = counters.free_count;
    float upload = 0, compute = 0, download = 0;
    check(cudaEventElapsedTime(&upload, events_[0].get(), events_[1].get()), "cudaEventElapsedTime");
    check(cudaEventElapsedTime(&compute, events_[1].get(), events_[2].get()), "cudaEventElapsedTime");
    check(cudaEventElapsedTime(&download, events_[2].get(), events_[3].get()), "cudaEventElapsedTime");
    timing_ = BatchTiming{upload, compute, download};
    internal::count_statuses(results, count, status_counters_);
  }

  std::uint64_t size() const override { return capacity_ - free_count_; }
  std::uint64_t node_capacity() const override { return capacity_; }

  // On the device, in the table's stream, with stream-ordered allocations:
  // no host round trip of the pool and no wait for other streams' kernels
  // (the daemon grows its tables while a window search runs). The result is
  // internal::grow_state's, node for node: the old nodes keep their indices,
  // the new ones are empty, and the free list is the new indices in
  // descending order below the old free entries, so the CPU and GPU tables
  // hand out the same nodes after a growth.
  void reserve(std::uint64_t capacity) override {
    internal::check_capacity(capacity);
    if (capacity <= capacity_) return;
    check(cudaSetDevice(config_.gpu_device), "cudaSetDevice");
    const std::uint64_t old_capacity = capacity_;
    const std::uint64_t added = capacity - old_capacity;
    nodes_.grow_keep(capacity, old_capacity, 0, stream_);
    // Entries past the old free_count are stale and move along unread.
    free_indices_.grow_keep(capacity, old_capacity, added, stream_);
    limbo_.reserve_exact(capacity);  // empty between batches
    capacity_ = capacity;
    grow_pool_kernel<<<grid_for(added, 256), 256, 0, stream_>>>(view(), old_capacity);
    check(cudaGetLastError(), "launch grow_pool_kernel");
    check(cudaStreamSynchronize(stream_), "grow pool");
    free_count_ += added;
  }

  void clear() override {
    PoolState state;
    internal::reset_state(state, geometry_, capacity_);
    upload_state(state);
  }

  std::uint64_t load(const std::vector<std::pair<HashKey, HashValue>>& pairs) override {
    PoolState state;
    internal::reset_state(state, geometry_, capacity_);
    const std::uint64_t duplicates = internal::build_state(state, pairs);
    upload_state(state);
    return duplicates;
  }

  std::vector<std::pair<HashKey, HashValue>> contents() const override {
    std::vector<std::pair<HashKey, HashValue>> pairs;
    internal::validate_state(download_state(), &pairs);
    return pairs;
  }

  std::string validate() const override {
    return internal::validate_state(download_state(), nullptr);
  }

  BatchTiming last_batch_timing() const override { return timing_; }
  StatusCounters counters() const override { return status_counters_; }

 private:
  HashTableView view() const {
    HashTableView table;
    table.geometry = geometry_;
    table.heads = heads_.get();
    table.nodes = nodes_.get();
    table.free_indices = free_indices_.get();
    table.limbo = limbo_.get();
    table.counters = counters_.get();
    table.node_capacity = capacity_;
    return table;
  }

  // Replaces the whole device table. Synchronizes.
  void upload_state(const PoolState& state) {
    check(cudaSetDevice(config_.gpu_device), "cudaSetDevice");
    geometry_ = state.geometry;
    const std::uint64_t capacity = state.capacity();
    heads_.reserve_exact(state.heads.size());
    nodes_.reserve_exact(capacity);
    free_indices_.reserve_exact(capacity);
    limbo_.reserve_exact(capacity);
    counters_.reserve_exact(1);
    staged_counters_.reserve(1);
    PoolCounters counters{state.free_count, 0, 0, 0, 0, 0};
    check(cudaMemcpyAsync(heads_.get(), state.heads.data(), state.heads.size() * sizeof(LinkWord),
                          cudaMemcpyHostToDevice, stream_),
          "upload bucket heads");
    check(cudaMemcpyAsync(nodes_.get(), state.nodes.data(), capacity * sizeof(HashNode),
                          cudaMemcpyHostToDevice, stream_),
          "upload nodes");
    check(cudaMemcpyAsync(free_indices_.get(), state.free_indices.data(),
                          capacity * sizeof(std::uint32_t), cudaMemcpyHostToDevice, stream_),
          "upload free list");
    check(cudaMemcpyAsync(counters_.get(), &counters, sizeof counters, cudaMemcpyHostToDevice,
                          stream_),
          "upload counters");
    check(cudaStreamSynchronize(stream_), "upload table");
    capacity_ = capacity;
    free_count_ = state.free_count;
  }

  // The whole device table on the host. Synchronizes.
  PoolState download_state() const {
    check(cudaSetDevice(config_.gpu_device), "cudaSetDevice");
    PoolState state;
    state.geometry = geometry_;
    state.heads.resize(static_cast<std::size_t>(geometry_.tables) * geometry_.buckets);
    state.nodes.resize(capacity_);
    state.free_indices.resize(capacity_);
    PoolCounters counters{};
    check(cudaMemcpyAsync(state.heads.data(), heads_.get(), state.heads.size() * sizeof(LinkWord),
                          cudaMemcpyDeviceToHost, stream_),
          "download bucket heads");
    check(cudaMemcpyAsync(state.nodes.data(), nodes_.get(), capacity_ * sizeof(HashNode),
                          cudaMemcpyDeviceToHost, stream_),
          "download nodes");
    check(cudaMemcpyAsync(state.free_indices.data(), free_indices_.get(),
                          capacity_ * sizeof(std::uint32_t), cudaMemcpyDeviceToHost, stream_),
          "download free list");
    check(cudaMemcpyAsync(&counters, counters_.get(), sizeof counters, cudaMemcpyDeviceToHost,
                          stream_),
          "download counters");
    check(cudaStreamSynchronize(stream_), "download table");
    if (counters.taken != 0 || counters.limbo_count != 0 || counters.limbo_overflow != 0 ||
        counters.reclaim_blocks_done != 0)
      throw Error(
          "hash table (cuda): internal invariant violated: pool counters not reset "
          "between batches");
    state.free_count = counters.free_count;
    return state;
  }

  HashTableConfig config_;
  TableGeometry geometry_;
  // Declared before the buffers: they free in its order when destroyed.
  OwnedStream owned_stream_;
  cudaStream_t stream_ = nullptr;  // owned_stream_'s
  OwnedEvent events_[4];
  int multiprocessors_ = 1;
  DeviceBuffer<LinkWord> heads_{owned_stream_};
  DeviceBuffer<HashNode> nodes_{owned_stream_};
  DeviceBuffer<std::uint32_t> free_indices_{owned_stream_};
  DeviceBuffer<std::uint32_t> limbo_{owned_stream_};
  DeviceBuffer<PoolCounters> counters_{owned_stream_};
  DeviceBuffer<HashOp> device_ops_{owned_stream_};
  DeviceBuffer<HashResult> device_results_{owned_stream_};
  PinnedBuffer<HashOp> staged_ops_;
  PinnedBuffer<HashResult> staged_results_;
  PinnedBuffer<PoolCounters> staged_counters_;
  std::uint64_t capacity_ = 0;
  std::uint64_t free_count_ = 0;
  BatchTiming timing_;
  StatusCounters status_counters_;
};

}  // namespace

std::unique_ptr<HashTableBackend> make_gpu_hash_table(const HashTableConfig& config) {
  internal::validate_config(config);
  return std::make_unique<GpuHashTable>(config);
}

bool gpu_hash_table_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return false;
  }
  return count > 0;
}

RandomAccessCeiling measure_gpu_random_access(std::uint64_t table_bytes, int device) {
  select_device(device);
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
  // A power of two of words, so a random index is a mask, not a 64-bit division.
  unsigned long long words = 1024;
  while (words * 2 * 8 <= table_bytes) words *= 2;
  DeviceBuffer<unsigned long long> table;
  DeviceBuffer<unsigned long long> sink;
  table.reserve(words);
  sink.reserve(1);
  OwnedStream owned_stream;
  owned_stream.create(0);
  const cudaStream_t stream = owned_stream.get();
  OwnedEvent start_event, stop_event;
  start_event.create(cudaEventDefault);
  stop_event.create(cudaEventDefault);
  const cudaEvent_t start = start_event.get(), stop = stop_event.get();
  const int block = 256;
  const int blocks = properties.multiProcessorCount * 16;  // 4096 threads per SM of work
  const int per_thread = 256;
  const double accesses = static_cast<double>(blocks) * block * per_thread;
  iota_kernel<<<grid_for(words, block), block, 0, stream>>>(table.get(), words);
  auto timed = [&](auto launch) {
    launch();  // warm-up
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    launch();
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "random access kernel");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    return accesses / (ms * 1e-3);
  };
  RandomAccessCeiling ceiling;
  ceiling.table_bytes = words * 8;
  ceiling.device_name = properties.name;
  ceiling.reads_per_s = timed([&] {
    random_read_kernel<<<blocks, block, 0, stream>>>(table.get(), words - 1, per_thread,
                                                     sink.get());
  });
  ceiling.cas_per_s = timed([&] {
    random_cas_kernel<<<blocks, block, 0, stream>>>(table.get(), words - 1, per_thread, sink.get());
  });
  check(cudaGetLastError(), "random access kernels");
  return ceiling;
}

}  // namespace gw::kernels::hashtable
