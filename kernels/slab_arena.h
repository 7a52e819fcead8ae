// Many small fixed-size blocks carved from a few large allocations.
//
// The CUDA backend keeps one device ring per stream (kernels/cuda_staging.h).
// Allocating each ring on its own costs one cudaMalloc per new stream, and
// cudaMalloc/cudaFree wait for the whole device: a station that starts with
// thousands of wearers, or a ring that must grow, then stalls every search
// in flight. A SlabArena serves blocks of one size class from slabs that
// hold many blocks, so N blocks take O(log N) allocations, and a released
// block is reused by the next request of its class without touching the
// allocator.
//
// `Backing` provides the memory:
//   void* allocate(std::size_t bytes);   // throws on failure
//   void deallocate(void* p) noexcept;
// (device memory for the CUDA backend; host memory in the tests).
//
// Contract: acquire(n) returns the start of `n` elements of T, aligned as
// the backing aligns its allocations and at least to 256 bytes between
// blocks; the block stays valid until release() of it, release_all() or
// the arena's destruction. Blocks of a size class that were released are
// handed out again before a new slab is made; memory goes back to the
// backing only when the arena is destroyed. A failed allocation (the
// backing throws) leaves the arena as it was. Not thread-safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace gw::kernels {

template <typename T, typename Backing>
class SlabArena {
  static_assert(256 % sizeof(T) == 0, "blocks start 256 bytes apart");

 public:
  // Slab sizes per size class: the first about `first_slab_bytes`, every
  // later one as large as the class's slabs so far (geometric growth), at
  // most about `max_slab_bytes`; always at least one block. So large blocks
  // do not pin a slab of many of them.
  explicit SlabArena(Backing backing = Backing(), std::size_t first_slab_bytes = 4u << 20,
                     std::size_t max_slab_bytes = 128u << 20)
      : backing_(std::move(backing)),
        first_slab_bytes_(std::max<std::size_t>(first_slab_bytes, 1)),
        max_slab_bytes_(std::max(max_slab_bytes, first_slab_bytes_)) {}
  SlabArena(const SlabArena&) = delete;
  SlabArena& operator=(const SlabArena&) = delete;
  ~SlabArena() {
    for (auto& [elements, cls] : classes_)
      for (void* slab : cls.slabs) backing_.deallocate(slab);
  }

  // A block of `elements` values of T (at least one).
  T* acquire(std::size_t elements) {
    const std::size_t stride = stride_of(elements);
    SizeClass& cls = classes_[stride];
    if (cls.free.empty()) add_slab(cls, stride);
    T* block = cls.free.back();
    cls.free.pop_back();
    return block;
  }

  // Gives back a block that acquire(`elements`) returned; the same
  // `elements` must be passed.
  void release(T* block, std::size_t elements) {
    if (block != nullptr) classes_[stride_of(elements)].free.push_back(block);
  }

  // Every block is free again (the slabs are kept).
  void release_all() {
    for (auto& [stride, cls] : classes_) {
      cls.free.clear();
      for (std::size_t s = 0; s < cls.slabs.size(); ++s) push_blocks(cls, s, stride);
    }
  }

  // Allocations made from the backing so far (one per slab).
  std::size_t slabs() const {
    std::size_t n = 0;
    for (const auto& [stride, cls] : classes_) n += cls.slabs.size();
    return n;
  }
  // Blocks handed out and not released, over all size classes.
  std::size_t blocks_in_use() const {
    std::size_t n = 0;
    for (const auto& [stride, cls] : classes_) n += cls.blocks - cls.free.size();
    return n;
  }

 private:
  struct SizeClass {
    std::vector<void*> slabs;
    std::vector<std::size_t> slab_blocks;  // blocks per slab, by slab
    std::vector<T*> free;
    std::size_t blocks = 0;  // in all slabs
  };

  // Elements per block, rounded so that blocks start 256 bytes apart
  // (coalesced access, any vector type).
  static std::size_t stride_of(std::size_t elements) {
    constexpr std::size_t kAlign = 256;
    const std::size_t bytes = std::max<std::size_t>(elements, 1) * sizeof(T);
    const std::size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    return (rounded + sizeof(T) - 1) / sizeof(T);
  }

  void add_slab(SizeClass& cls, std::size_t stride) {
    const std::size_t block_bytes = stride * sizeof(T);
    const std::size_t bytes =
        std::min(max_slab_bytes_, std::max(first_slab_bytes_, cls.blocks * block_bytes));
    const std::size_t blocks = std::max<std::size_t>(bytes / block_bytes, 1);
    // Room first, so that nothing below the allocation can throw.
    cls.slabs.reserve(cls.slabs.size() + 1);
    cls.slab_blocks.reserve(cls.slab_blocks.size() + 1);
    cls.free.reserve(cls.blocks + blocks);
    void* slab = backing_.allocate(blocks * block_bytes);
    cls.slabs.push_back(slab);
    cls.slab_blocks.push_back(blocks);
    cls.blocks += blocks;
    push_blocks(cls, cls.slabs.size() - 1, stride);
  }

  // Puts slab `s`'s blocks on the free list, last block first, so that
  // acquire() hands them out in address order.
  static void push_blocks(SizeClass& cls, std::size_t s, std::size_t stride) {
    T* base = static_cast<T*>(cls.slabs[s]);
    for (std::size_t b = cls.slab_blocks[s]; b-- > 0;) cls.free.push_back(base + b * stride);
  }

  Backing backing_;
  std::size_t first_slab_bytes_;
  std::size_t max_slab_bytes_;
  std::map<std::size_t, SizeClass> classes_;  // by stride in elements
};

}  // namespace gw::kernels
