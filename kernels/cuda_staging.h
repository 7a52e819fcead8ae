// How a batch's samples reach the CUDA backend's device: per stream key a
// device ring keeps the stream's latest samples, so a batch uploads only
// what the device does not hold yet (the daemon's slices repeat m - 1
// samples of history), and two staging slots alternate, so prepare() of
// batch k + 1 plans and copies while the search of batch k runs.
// Include from .cu files only.
//
// Thread safety: prepare() may run on one thread while take(),
// held_samples() and forget_streams() run on another; forget_histories()
// must not run beside either (set_library does not overlap a search).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <cuda_runtime.h>

#include "common/worker_pool.h"
#include "kernels/cuda_library.h"
#include "kernels/cuda_memory.h"
#include "kernels/cuda_views.h"
#include "kernels/search.h"
#include "kernels/slab_arena.h"

namespace gw::kernels {

// A batch's data on its way to the device: the host plan, the pinned copy of
// its new samples and their device buffer.
struct StagedUpload {
  const SearchBatch* batch = nullptr;  // prepared for, not searched yet
  std::vector<cuda::SliceView> slices;
  std::vector<cuda::SliceUpload> uploads;
  int rows = 0;
  std::size_t device_size = 0;  // values of the assembled slices
  cuda_memory::PinnedBuffer<float> staging;
  cuda_memory::DeviceBuffer<float> device;
  cuda_memory::OwnedEvent copied;  // recorded after the copy to `device`
};

class UploadStager {
 public:
  // Creates the slots' events on the current device. `host_pool` copies the
  // new samples into pinned memory; it must outlive the stager.
  explicit UploadStager(WorkerPool& host_pool);
  UploadStager(const UploadStager&) = delete;
  UploadStager& operator=(const UploadStager&) = delete;

  // The leading samples of `slice` that the ring of its stream key holds
  // (history_continues): the slice may omit them. None while a prepared
  // batch waits to be searched, since its staging has moved the rings on.
  int held_samples(const StreamSlice& slice) const;

  // Plans `next` (slices laid out against `profile_slots`), copies its new
  // samples to pinned memory and starts their copy to the device on
  // `stream`. Throws gw::Error for a batch whose slices do not fit its data
  // or omit samples the device does not hold; then every ring starts over.
  void prepare(const SearchBatch& next, const ProfileSlots& profile_slots, cudaStream_t stream);

  // The staged upload of `batch`: the one prepare() made for it, or one made
  // now on `stream`. A prepared batch that was never searched advanced the
  // rings past samples the device never got, so then every ring starts over
  // (the next batch uploads whole slices). The result stays valid until the
  // next prepare() after the one that follows it; wait for its `copied`
  // event before reading `device`.
  StagedUpload& take(const SearchBatch& batch, const ProfileSlots& profile_slots,
                     cudaStream_t stream);

  // The rings hold samples of views that may have changed (a new library):
  // nothing is held any more, and no prepared batch stays valid.
  void forget_histories();

  // The streams of `keys` are gone: their rings go back to the pool for
  // new streams. A batch prepared with them stays valid (the assembly on
  // the search stream reads and writes a ring in batch order, so a later
  // owner's writes follow it).
  void forget_streams(const std::vector<std::uint64_t>& keys);

 private:
  // The stream's latest samples on the device, in a block of rings_.
  struct StreamHistory {
    float* ring = nullptr;
    int dims = 0;
    long long capacity = 0;
    std::int64_t first = -1, next = -1;  // the ring holds samples [first, next)
    // The ring's size in rings_ (what it was acquired with).
    std::size_t ring_elements() const { return static_cast<std::size_t>(dims) * capacity; }
  };

  StagedUpload& stage(const SearchBatch& batch, const ProfileSlots& profile_slots,
                      cudaStream_t stream);
  StagedUpload& stage_planned(const SearchBatch& batch, const ProfileSlots& profile_slots,
                              cudaStream_t stream);
  const StreamHistory& history_of(std::uint64_t key) const;
  static bool history_continues(const StreamHistory& h, const StreamSlice& s);
  void plan_history(const StreamSlice& s, cuda::SliceUpload* up);
  // Nothing is held any more: every ring is free again, and no prepared
  // batch stays valid (its plan points at those rings).
  void drop_histories();

  // Device memory for the rings: one cudaMalloc per slab of many rings, not
  // per stream (cudaMalloc waits for the whole device), counted in
  // cuda_memory::allocation_count().
  struct DeviceSlabs {
    void* allocate(std::size_t bytes);
    void deallocate(void* p) noexcept;
  };

  WorkerPool& host_pool_;
  SlabArena<float, DeviceSlabs> rings_;
  std::unordered_map<std::uint64_t, StreamHistory> histories_;
  StagedUpload staged_[2];
  int staged_next_ = 0;
  // staged_, histories_, rings_: prepare() runs beside take().
  mutable std::mutex mutex_;
};

}  // namespace gw::kernels
