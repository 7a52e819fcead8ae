// The CUDA backend's upload path (kernels/cuda_staging.h).
#include "kernels/cuda_staging.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/error.h"

namespace gw::kernels {

using namespace cuda;
using cuda_memory::DeviceBuffer;

void* UploadStager::DeviceSlabs::allocate(std::size_t bytes) {
  void* slab = nullptr;
  cuda_memory::allocation_counter().fetch_add(1, std::memory_order_relaxed);
  check_backend(cudaMalloc(&slab, std::max<std::size_t>(bytes, 1)), "stream rings");
  return slab;
}

void UploadStager::DeviceSlabs::deallocate(void* p) noexcept { cudaFree(p); }

// Slabs of 4 MiB first (455 rings of 256 samples of 9 dims), growing to
// 128 MiB each.
UploadStager::UploadStager(WorkerPool& host_pool)
    : host_pool_(host_pool), rings_(DeviceSlabs{}, 4u << 20, 128u << 20) {
  for (StagedUpload& slot : staged_) slot.copied.create(cudaEventDisableTiming);
}

int UploadStager::held_samples(const StreamSlice& slice) const {
  std::lock_guard<std::mutex> lock(mutex_);
  // A prepared batch not searched yet has moved the histories on.
  for (const StagedUpload& slot : staged_)
    if (slot.batch != nullptr) return 0;
  if (slice.stream_key == 0) return 0;
  const auto it = histories_.find(slice.stream_key);
  if (it == histories_.end() || !history_continues(it->second, slice)) return 0;
  return static_cast<int>(slice.first_new - slice.first_index);
}

void UploadStager::prepare(const SearchBatch& next, const ProfileSlots& profile_slots,
                           cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  stage(next, profile_slots, stream);
}

StagedUpload& UploadStager::take(const SearchBatch& batch, const ProfileSlots& profile_slots,
                                 cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (StagedUpload& slot : staged_) {
    if (slot.batch == &batch) {
      slot.batch = nullptr;
      return slot;
    }
  }
  bool stale = false;
  for (StagedUpload& slot : staged_) {
    stale = stale || slot.batch != nullptr;
    slot.batch = nullptr;
  }
  if (stale) drop_histories();
  StagedUpload& slot = stage(batch, profile_slots, stream);
  slot.batch = nullptr;
  return slot;
}

void UploadStager::forget_histories() {
  std::lock_guard<std::mutex> lock(mutex_);
  drop_histories();
}

void UploadStager::forget_streams(const std::vector<std::uint64_t>& keys) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::uint64_t key : keys) {
    const auto it = histories_.find(key);
    if (it == histories_.end()) continue;
    rings_.release(it->second.ring, it->second.ring_elements());
    histories_.erase(it);
  }
}

// A batch that cannot be staged (refused, or out of device or pinned
// memory) leaves no history half-advanced and no plan that points at
// them: every stream starts over (uploads whole slices) in the next batch.
// Needs mutex_.
StagedUpload& UploadStager::stage(const SearchBatch& batch, const ProfileSlots& profile_slots,
                                  cudaStream_t stream) {
  try {
    return stage_planned(batch, profile_slots, stream);
  } catch (...) {
    drop_histories();
    throw;
  }
}

// Plans `batch`'s upload into the next staging slot, copies its new
// samples to pinned memory and starts the copy to the device on `stream`.
// Needs mutex_.
StagedUpload& UploadStager::stage_planned(const SearchBatch& batch,
                                          const ProfileSlots& profile_slots, cudaStream_t stream) {
  StagedUpload& slot = staged_[staged_next_];
  staged_next_ = 1 - staged_next_;
  slot.batch = &batch;
  slot.slices.clear();
  slot.uploads.clear();
  slot.rows = 0;
  const auto refuse = [](const std::string& why) { throw Error("CUDA backend: " + why); };
  const std::size_t n_host = batch.data.size();
  std::size_t n_device = 0;  // the assembled slices: every sample of every slice
  std::size_t n_upload = 0;
  std::unordered_map<std::uint64_t, bool> seen;
  for (std::size_t i = 0; i < batch.streams.size(); ++i) {
    const StreamSlice& s = batch.streams[i];
    if (s.dims < 0 || s.length < 0 || s.omitted < 0 || s.omitted > s.length ||
        s.offset > n_host || n_host - s.offset < s.data_size())
      refuse("slice " + std::to_string(i) + " does not fit the batch data");
    SliceView view{static_cast<long long>(n_device), s.first_index, s.dims, s.length, slot.rows};
    view.first_new = static_cast<int>(
        std::clamp<std::int64_t>(s.first_new - s.first_index, 0, s.length));
    const auto profile = profile_slots.find(s.profile);
    view.profile_slot = profile == profile_slots.end() ? -1 : profile->second;
    slot.slices.push_back(view);
    slot.rows += s.dims;
    n_device += static_cast<std::size_t>(s.dims) * s.length;
    SliceUpload up;
    const bool once = s.stream_key != 0 && seen.emplace(s.stream_key, true).second;
    if (s.omitted > 0 && (!once || s.omitted > view.first_new ||
                          !history_continues(history_of(s.stream_key), s)))
      refuse("slice " + std::to_string(i) + " omits " + std::to_string(s.omitted) +
             " samples the device does not hold");
    if (once) plan_history(s, &up);
    up.staging_offset = static_cast<long long>(n_upload);
    n_upload += static_cast<std::size_t>(s.dims) * (s.length - up.from);
    slot.uploads.push_back(up);
  }
  slot.device_size = n_device;
  float* staging = slot.staging.reserve(std::max<std::size_t>(n_upload, 1));
  const std::vector<SliceUpload>& uploads = slot.uploads;
  host_pool_.for_ranges(batch.streams.size(), 256, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const StreamSlice& s = batch.streams[i];
      const int from = uploads[i].from;  // >= s.omitted
      const int count = s.length - from;
      const int stride = s.length - s.omitted;
      const float* source = batch.data.data() + s.offset + (from - s.omitted);
      float* target = staging + uploads[i].staging_offset;
      if (count == stride) {  // the slice's host data is exactly what travels
        std::memcpy(target, source, s.data_size() * sizeof(float));
        continue;
      }
      for (int d = 0; d < s.dims; ++d)
        std::memcpy(target + static_cast<std::size_t>(d) * count,
                    source + static_cast<std::size_t>(d) * stride,
                    static_cast<std::size_t>(count) * sizeof(float));
    }
  });
  slot.device.reserve(std::max<std::size_t>(n_upload, 1));
  check_backend(cudaMemcpyAsync(slot.device.get(), staging, n_upload * sizeof(float),
                        cudaMemcpyHostToDevice, stream),
        "data upload");
  check_backend(cudaEventRecord(slot.copied.get(), stream), "cudaEventRecord");
  return slot;
}

// The ring of `key`, or an empty one (holds nothing) when it has none.
const UploadStager::StreamHistory& UploadStager::history_of(std::uint64_t key) const {
  static const StreamHistory none;
  const auto it = histories_.find(key);
  return it == histories_.end() ? none : it->second;
}

// Whether `h` holds the samples of `s` before its first new one: the ring
// fits the slice and continues only where the slice's new samples start
// right after what it holds (the rule streaming uses too). Samples before
// first_new were sent before and are taken from the ring; a slice that
// resends other values for old indices starts over.
bool UploadStager::history_continues(const StreamHistory& h, const StreamSlice& s) {
  const std::int64_t end = s.first_index + s.length;
  return h.dims == s.dims && h.capacity >= s.length && h.next >= 0 && s.first_new == h.next &&
         h.first <= s.first_index && h.next <= end;
}

// Decides which samples of slice `s` the device already holds in the ring
// of its stream key (`up->from`: the first one to upload; the ring is
// replaced when its shape no longer fits) and moves the history on to
// after this batch.
void UploadStager::plan_history(const StreamSlice& s, SliceUpload* up) {
  StreamHistory& h = histories_[s.stream_key];
  long long capacity = 256;
  while (capacity < s.length) capacity *= 2;
  if (h.dims != s.dims || h.capacity < s.length) {
    // A block given back here may go to another stream of this very batch:
    // every ring is read and written only by the assembly on the search
    // stream, in batch order, so this batch's writes follow the last
    // batch's reads of the old owner.
    rings_.release(h.ring, h.ring_elements());
    h = StreamHistory{};  // holds nothing, also when the acquire below throws
    h.ring = rings_.acquire(static_cast<std::size_t>(s.dims) * capacity);
    h.dims = s.dims;
    h.capacity = capacity;
  }
  const std::int64_t end = s.first_index + s.length;
  const bool continues = history_continues(h, s);
  up->from = continues ? static_cast<int>(h.next - s.first_index) : 0;
  up->ring = h.ring;
  up->ring_capacity = h.capacity;
  h.first = std::max<std::int64_t>(continues ? h.first : s.first_index, end - h.capacity);
  h.next = end;
}

void UploadStager::drop_histories() {
  histories_.clear();
  rings_.release_all();
  for (StagedUpload& slot : staged_) slot.batch = nullptr;  // planned against those rings
}

}  // namespace gw::kernels
