// Owning device and page-locked host buffers for the CUDA code (the search
// backend, kernels/cuda_backend.cu, and the GPU hash table,
// kernels/hashtable/hash_table.cu), and how both make a device current
// (open_device). Include from .cu files only.
//
// Two ways a DeviceBuffer allocates (chosen when it is made; a move carries
// it along):
//   plain           cudaMalloc / cudaFree. cudaFree waits for the whole
//                   device, every stream's work included.
//   stream-ordered  cudaMallocAsync / cudaFreeAsync in the owner's stream.
//                   Growing never waits for another stream's kernels: the
//                   daemon's hash tables grow while a window search fills the
//                   GPU on the search backend's stream, and a device-wide
//                   wait there would hold an alert for the whole search. The
//                   stream must outlive the buffer (declare the stream first).
//                   On a device without memory pools
//                   (cudaDevAttrMemoryPoolsSupported) it allocates plainly.
// Errors: gw::Error naming `what` and the CUDA error.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"

namespace gw::kernels::cuda_memory {

inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw Error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(status));
}

// Makes `device` current. Host threads that wait for it (a stream or event
// synchronisation) then block instead of spinning: with one context on a
// many-core host, CUDA's default spins, and the thread that waits for each
// window search holds a core the phase 2 workers, the ingest threads
// and the writer need (docs/gpu.md). The flag is the device's, for the whole
// process: every open sets it again (all of gaitwatch's CUDA code wants the
// same), and with CUDA 12 and later this also applies to a device already in
// use.
inline void open_device(int device) {
  check(cudaSetDevice(device), "cudaSetDevice");
  const cudaError_t status = cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync);
  if (status == cudaErrorSetOnActiveProcess) {
    cudaGetLastError();  // not sticky: the device runs with the flags it has
    return;
  }
  check(status, "cudaSetDeviceFlags");
}

// How many allocations this header's buffers (DeviceBuffer, PinnedBuffer)
// have made in the process so far. Code that compares it around its own
// work learns whether that work had to allocate (one-off time, not what
// the next such work costs); allocations made meanwhile by other threads
// count too: an over-count, never an under-count.
inline std::atomic<std::uint64_t>& allocation_counter() {
  static std::atomic<std::uint64_t> count{0};
  return count;
}
inline std::uint64_t allocation_count() { return allocation_counter().load(std::memory_order_relaxed); }

// The size a buffer of `capacity` grows to for `wanted`: a first allocation
// is exact (library arrays); later growth adds at least half the capacity, so
// sizes that creep up from batch to batch do not reallocate each time.
inline std::size_t geometric_size(std::size_t capacity, std::size_t wanted) {
  return capacity == 0 ? wanted : std::max(wanted + wanted / 8, capacity + capacity / 2);
}

// A cudaStream_t that is destroyed with its owner, so that an owner whose
// constructor throws after create() leaks no stream.
class OwnedStream {
 public:
  OwnedStream() = default;
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  ~OwnedStream() {
    if (stream_) cudaStreamDestroy(stream_);
  }
  // Creates a non-blocking stream of `priority` (cudaDeviceGetStreamPriorityRange)
  // on the current device.
  void create(int priority) {
    check(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, priority),
          "cudaStreamCreate");
    int device = 0, pools = 0;
    if (cudaGetDevice(&device) == cudaSuccess &&
        cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device) == cudaSuccess)
      memory_pools_ = pools != 0;
    cudaGetLastError();  // a failed query only means plain allocations
  }
  cudaStream_t get() const { return stream_; }
  // Whether stream-ordered allocation works on the stream's device.
  bool memory_pools() const { return memory_pools_; }

 private:
  cudaStream_t stream_ = nullptr;
  bool memory_pools_ = false;
};

// A cudaEvent_t that is destroyed with its owner.
class OwnedEvent {
 public:
  OwnedEvent() = default;
  OwnedEvent(const OwnedEvent&) = delete;
  OwnedEvent& operator=(const OwnedEvent&) = delete;
  ~OwnedEvent() {
    if (event_) cudaEventDestroy(event_);
  }
  // Creates the event (cudaEventCreateWithFlags) on the current device; once.
  void create(unsigned flags) {
    check(cudaEventCreateWithFlags(&event_, flags), "cudaEventCreate");
  }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;  // plain
  // Stream-ordered in `order` (see the header comment). A null `order` is
  // plain.
  explicit DeviceBuffer(const OwnedStream& order) : order_(&order) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    swap(other);
    return *this;
  }
  ~DeviceBuffer() { release(); }

  // Room for `n` elements, growing geometrically (geometric_size). Discards
  // the contents when it grows.
  void reserve(std::size_t n) {
    if (n <= capacity_ && ptr_) return;
    replace(geometric_size(capacity_, n));
  }
  // Room for exactly `n` elements when it grows (pools whose size is a
  // contract). Discards the contents when it grows.
  void reserve_exact(std::size_t n) {
    if (n <= capacity_ && ptr_) return;
    replace(n);
  }
  // Grows to exactly `n` elements, moving the first `keep` old elements to
  // [at, at + keep) of the new buffer in `stream` (a stream-ordered buffer
  // always uses its own stream, where its free is ordered). The rest of the
  // new buffer is uninitialised. Nothing happens when it holds `n` already.
  void grow_keep(std::size_t n, std::size_t keep, std::size_t at, cudaStream_t stream) {
    if (n <= capacity_) return;
    if (at + keep > n) throw Error("CUDA: grow_keep past the new size");
    if (ordered()) stream = order_->get();
    T* fresh = allocate(n);
    if (keep) {
      const cudaError_t copied =
          cudaMemcpyAsync(fresh + at, ptr_, keep * sizeof(T), cudaMemcpyDeviceToDevice, stream);
      if (copied != cudaSuccess) free(fresh);
      check(copied, "copy on grow");
    }
    if (!ordered()) check(cudaStreamSynchronize(stream), "grow");
    free(ptr_);
    ptr_ = fresh;
    capacity_ = n;
  }
  void upload(const std::vector<T>& host, cudaStream_t stream) {
    reserve(host.size());
    if (!host.empty())
      check(cudaMemcpyAsync(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice,
                            stream),
            "upload");
  }
  void release() {
    free(ptr_);
    ptr_ = nullptr;
    capacity_ = 0;
  }
  T* get() const { return ptr_; }
  std::size_t capacity() const { return capacity_; }
  void swap(DeviceBuffer& other) {
    std::swap(ptr_, other.ptr_);
    std::swap(capacity_, other.capacity_);
    std::swap(order_, other.order_);
  }

 private:
  bool ordered() const { return order_ && order_->get() && order_->memory_pools(); }
  T* allocate(std::size_t n) {
    void* fresh = nullptr;
    const std::size_t bytes = std::max<std::size_t>(n, 1) * sizeof(T);
    allocation_counter().fetch_add(1, std::memory_order_relaxed);
    if (ordered())
      check(cudaMallocAsync(&fresh, bytes, order_->get()), "cudaMallocAsync");
    else
      check(cudaMalloc(&fresh, bytes), "cudaMalloc");
    return static_cast<T*>(fresh);
  }
  void free(T* ptr) {
    if (!ptr) return;
    if (ordered())
      cudaFreeAsync(ptr, order_->get());
    else
      cudaFree(ptr);
  }
  void replace(std::size_t n) {
    free(ptr_);
    ptr_ = nullptr;
    capacity_ = 0;
    ptr_ = allocate(n);
    capacity_ = n;
  }

  T* ptr_ = nullptr;
  std::size_t capacity_ = 0;
  const OwnedStream* order_ = nullptr;
};

// Page-locked host memory, so copies run as true asynchronous DMA. Grows
// geometrically (pinning is slow, and freeing pinned memory may wait for the
// device).
template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { cudaFreeHost(ptr_); }
  T* reserve(std::size_t n) {
    if (n > capacity_ || !ptr_) {
      cudaFreeHost(ptr_);
      ptr_ = nullptr;
      const std::size_t grown = geometric_size(capacity_, n);
      capacity_ = 0;
      allocation_counter().fetch_add(1, std::memory_order_relaxed);
      check(cudaMallocHost(&ptr_, std::max<std::size_t>(grown, 1) * sizeof(T)), "cudaMallocHost");
      capacity_ = grown;
    }
    return ptr_;
  }
  T* get() const { return ptr_; }

 private:
  T* ptr_ = nullptr;
  std::size_t capacity_ = 0;
};

}  // namespace gw::kernels::cuda_memory
