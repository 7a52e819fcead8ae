// kernels/slab_arena.h on host memory: how many allocations a number of
// blocks takes, that blocks never overlap, and that given-back blocks are
// handed out again before the backing is asked for more.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <new>
#include <set>
#include <utility>
#include <vector>

#include "kernels/slab_arena.h"

namespace gw::kernels {
namespace {

// Host memory, with the allocations and frees counted by the test; with
// `fail` set, an allocation throws as a device out of memory would.
struct CountingBacking {
  std::map<void*, std::size_t>* live = nullptr;  // address -> bytes
  int* allocations = nullptr;
  const bool* fail = nullptr;
  void* allocate(std::size_t bytes) {
    if (fail != nullptr && *fail) throw std::bad_alloc();
    void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (p == nullptr) throw std::bad_alloc();
    (*live)[p] = bytes;
    ++*allocations;
    return p;
  }
  void deallocate(void* p) noexcept {
    live->erase(p);
    std::free(p);
  }
};

// Slabs of 4 blocks of 9 x 256 floats first, at most 64 of them.
constexpr std::size_t kRingBytes = 9 * 256 * sizeof(float);

struct Arena {
  std::map<void*, std::size_t> live;
  int allocations = 0;
  bool fail = false;
  SlabArena<float, CountingBacking> arena{CountingBacking{&live, &allocations, &fail},
                                          4 * kRingBytes, 64 * kRingBytes};
};

// Every block lies inside one live allocation, and none overlaps another.
void require_disjoint(const std::map<void*, std::size_t>& live,
                      const std::vector<std::pair<float*, std::size_t>>& blocks) {
  std::map<std::uintptr_t, std::uintptr_t> spans;  // begin -> end
  for (const auto& [block, elements] : blocks) {
    const auto begin = reinterpret_cast<std::uintptr_t>(block);
    const auto end = begin + elements * sizeof(float);
    CHECK(begin % 256 == 0);
    bool inside = false;
    for (const auto& [slab, bytes] : live) {
      const auto s = reinterpret_cast<std::uintptr_t>(slab);
      inside = inside || (begin >= s && end <= s + bytes);
    }
    CHECK(inside);
    spans[begin] = end;
  }
  REQUIRE(spans.size() == blocks.size());  // no two blocks start at one address
  std::uintptr_t last_end = 0;
  for (const auto& [begin, end] : spans) {
    CHECK(begin >= last_end);
    last_end = end;
  }
}

TEST_CASE("SlabArena serves many blocks from few allocations that grow geometrically",
          "[slab_arena]") {
  Arena a;
  std::vector<std::pair<float*, std::size_t>> blocks;
  for (int i = 0; i < 1000; ++i) blocks.emplace_back(a.arena.acquire(9 * 256), 9 * 256);
  // Slabs of 4, 4, 8, 16, 32, 64, 64, ... blocks: 1,000 blocks in 20
  // allocations.
  CHECK(a.allocations == 20);
  CHECK(a.arena.slabs() == 20);
  CHECK(a.arena.blocks_in_use() == 1000);
  require_disjoint(a.live, blocks);
  // A block is usable memory of the size asked for: write it whole.
  for (auto& [block, elements] : blocks)
    for (std::size_t e = 0; e < elements; ++e) block[e] = static_cast<float>(e);
}

TEST_CASE("SlabArena hands given-back blocks out again before it allocates", "[slab_arena]") {
  Arena a;
  std::vector<float*> first;
  for (int i = 0; i < 40; ++i) first.push_back(a.arena.acquire(100));
  const int allocations = a.allocations;
  const std::set<float*> given_back(first.begin(), first.begin() + 10);
  for (float* block : given_back) a.arena.release(block, 100);
  CHECK(a.arena.blocks_in_use() == 30);
  std::set<float*> again;
  for (int i = 0; i < 10; ++i) again.insert(a.arena.acquire(100));
  CHECK(again == given_back);
  CHECK(a.allocations == allocations);
  // Another size has its own blocks: none of the first size's is reused.
  float* other = a.arena.acquire(1000);
  CHECK(a.allocations == allocations + 1);
  CHECK(std::find(first.begin(), first.end(), other) == first.end());
  // release(nullptr) (a stream that held no block) changes nothing.
  a.arena.release(nullptr, 100);
  CHECK(a.arena.blocks_in_use() == 41);
}

TEST_CASE("SlabArena release_all frees every block and keeps its slabs", "[slab_arena]") {
  Arena a;
  std::vector<std::pair<float*, std::size_t>> blocks;
  for (int i = 0; i < 50; ++i) blocks.emplace_back(a.arena.acquire(64), 64);
  for (int i = 0; i < 20; ++i) blocks.emplace_back(a.arena.acquire(640), 640);
  const int allocations = a.allocations;
  a.arena.release_all();
  CHECK(a.arena.blocks_in_use() == 0);
  std::vector<std::pair<float*, std::size_t>> again;
  for (int i = 0; i < 50; ++i) again.emplace_back(a.arena.acquire(64), 64);
  for (int i = 0; i < 20; ++i) again.emplace_back(a.arena.acquire(640), 640);
  CHECK(a.allocations == allocations);
  require_disjoint(a.live, again);
}

TEST_CASE("SlabArena gives blocks larger than a slab one allocation each", "[slab_arena]") {
  Arena a;
  // 1-MiB blocks against slabs of at most 64 x 9 KiB: one block a slab,
  // not a slab of many such blocks that nobody asked for.
  constexpr std::size_t kLarge = 256 * 1024;
  std::vector<std::pair<float*, std::size_t>> blocks;
  for (int i = 0; i < 3; ++i) blocks.emplace_back(a.arena.acquire(kLarge), kLarge);
  CHECK(a.allocations == 3);
  for (const auto& [slab, bytes] : a.live) CHECK(bytes == kLarge * sizeof(float));
  require_disjoint(a.live, blocks);
}

TEST_CASE("SlabArena is unchanged by an allocation that fails", "[slab_arena]") {
  Arena a;
  std::vector<std::pair<float*, std::size_t>> blocks;
  for (int i = 0; i < 4; ++i) blocks.emplace_back(a.arena.acquire(9 * 256), 9 * 256);
  a.fail = true;
  CHECK_THROWS_AS(a.arena.acquire(9 * 256), std::bad_alloc);  // the first slab is full
  CHECK(a.arena.blocks_in_use() == 4);
  CHECK(a.arena.slabs() == 1);
  // A block given back is still handed out without the backing.
  a.arena.release(blocks.back().first, 9 * 256);
  CHECK(a.arena.acquire(9 * 256) == blocks.back().first);
  a.fail = false;
  blocks.emplace_back(a.arena.acquire(9 * 256), 9 * 256);
  CHECK(a.arena.slabs() == 2);
  CHECK(a.arena.blocks_in_use() == 5);
  require_disjoint(a.live, blocks);
}

TEST_CASE("SlabArena gives every allocation back when it is destroyed", "[slab_arena]") {
  std::map<void*, std::size_t> live;
  int allocations = 0;
  {
    SlabArena<float, CountingBacking> arena(CountingBacking{&live, &allocations, nullptr}, 2048,
                                            8192);
    for (int i = 0; i < 30; ++i) arena.acquire(static_cast<std::size_t>(1 + i % 3) * 70);
    CHECK(!live.empty());
  }
  CHECK(allocations > 0);
  CHECK(live.empty());
}

}  // namespace
}  // namespace gw::kernels
