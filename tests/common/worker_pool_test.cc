// The worker pool the CPU backend and the engine share: every item of a task
// that hands out its work by an atomic counter is done exactly once, errors
// come back to the caller, and no helper calls a task after its run returned
// (the task lives on the caller's stack).
#include "common/worker_pool.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <vector>

using gw::WorkerPool;

TEST_CASE("WorkerPool: every claimed item is done once, whoever joins", "[pool]") {
  WorkerPool pool(4, "gw-test");
  REQUIRE(pool.size() == 4);
  constexpr std::size_t kItems = 5000;
  std::vector<std::atomic<int>> done(kItems);
  for (int run = 0; run < 50; ++run) {
    std::atomic<std::size_t> next{0};
    std::vector<int> calls(static_cast<std::size_t>(pool.size()), 0);
    pool.run([&](int worker) {
      ++calls[static_cast<std::size_t>(worker)];
      for (std::size_t i; (i = next.fetch_add(1)) < kItems;) done[i].fetch_add(1);
    });
    CHECK(calls[0] == 1);  // the caller always runs it
    for (int c : calls) CHECK(c <= 1);
  }
  for (const auto& d : done) CHECK(d.load() == 50);
}

TEST_CASE("WorkerPool: no helper calls a task after its run returned", "[pool]") {
  // Tiny runs the caller finishes alone, back to back: helpers wake up
  // after most of them have returned and must skip those.
  WorkerPool pool(8, "gw-test");
  std::atomic<int> late_calls{0};
  std::vector<std::unique_ptr<std::atomic<bool>>> open;  // per run; kept alive
  for (int run = 0; run < 3000; ++run) {
    open.push_back(std::make_unique<std::atomic<bool>>(true));
    std::atomic<bool>* running = open.back().get();
    pool.run([&late_calls, running](int) {
      if (!running->load()) late_calls.fetch_add(1);
    });
    running->store(false);
  }
  CHECK(late_calls.load() == 0);
}

TEST_CASE("WorkerPool: an exception in the task reaches the caller and the pool goes on",
          "[pool]") {
  WorkerPool pool(3, "gw-test");
  std::atomic<int> next{0};
  CHECK_THROWS_AS(pool.run([&](int) {
                    for (int i; (i = next.fetch_add(1)) < 100;)
                      if (i == 57) throw std::runtime_error("item 57");
                  }),
                  std::runtime_error);
  std::atomic<int> sum{0};
  std::atomic<int> item{0};
  pool.run([&](int) {
    for (int i; (i = item.fetch_add(1)) < 100;) sum.fetch_add(i);
  });
  CHECK(sum.load() == 4950);
}

TEST_CASE("WorkerPool::for_ranges covers every index once in ranges of at most chunk", "[pool]") {
  WorkerPool pool(4, "gw-test");
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{64},
                              std::size_t{1000}, std::size_t{4097}}) {
    for (const std::size_t chunk : {std::size_t{1}, std::size_t{7}, std::size_t{64}}) {
      std::vector<std::atomic<int>> seen(n);
      std::atomic<bool> too_long{false};
      pool.for_ranges(n, chunk, [&](std::size_t begin, std::size_t end) {
        if (end <= begin || end - begin > chunk) too_long = true;
        for (std::size_t i = begin; i < end; ++i) seen[i].fetch_add(1);
      });
      INFO("n " << n << " chunk " << chunk);
      CHECK_FALSE(too_long.load());
      for (std::size_t i = 0; i < n; ++i) REQUIRE(seen[i].load() == 1);
    }
  }
}
