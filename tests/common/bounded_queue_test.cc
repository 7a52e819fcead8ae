#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "common/bounded_queue.h"

using gw::BoundedQueue;
using gw::OverflowPolicy;

TEST_CASE("drop_newest keeps the first items and counts the rest", "[queue]") {
  BoundedQueue<int> q(2, OverflowPolicy::kDropNewest);
  CHECK(q.push(1));
  CHECK(q.push(2));
  CHECK_FALSE(q.push(3));
  CHECK(q.dropped() == 1);
  std::vector<int> out;
  q.drain(out);
  CHECK(out == std::vector<int>{1, 2});
}

TEST_CASE("drop_oldest keeps the newest items and counts the rest", "[queue]") {
  BoundedQueue<int> q(2, OverflowPolicy::kDropOldest);
  for (int i = 1; i <= 5; ++i) CHECK(q.push(i));
  CHECK(q.dropped() == 3);
  std::vector<int> out;
  q.drain(out);
  CHECK(out == std::vector<int>{4, 5});
}

TEST_CASE("drain with a limit takes the oldest items, appends, and frees room", "[queue]") {
  BoundedQueue<int> q(4, OverflowPolicy::kDropNewest);
  for (int i = 1; i <= 4; ++i) CHECK(q.push(i));
  std::vector<int> out{0};
  CHECK(q.drain(out, 3) == 3);
  CHECK(out == std::vector<int>{0, 1, 2, 3});
  CHECK(q.size() == 1);
  CHECK(q.push(5));
  CHECK(q.drain(out, 10) == 2);
  CHECK(out == std::vector<int>{0, 1, 2, 3, 4, 5});
  CHECK(q.drain(out, 10) == 0);
  CHECK(q.dropped() == 0);
}

TEST_CASE("block waits for room and loses nothing", "[queue]") {
  BoundedQueue<int> q(1, OverflowPolicy::kBlock);
  std::thread producer([&] {
    for (int i = 0; i < 100; ++i) q.push(i);
  });
  std::vector<int> got;
  while (got.size() < 100) {
    auto v = q.pop_for(std::chrono::seconds(5));
    REQUIRE(v.has_value());
    got.push_back(*v);
  }
  producer.join();
  CHECK(q.dropped() == 0);
  for (int i = 0; i < 100; ++i) CHECK(got[i] == i);
}

TEST_CASE("push_waiting waits for room under any policy, loses nothing, and stops at close", "[queue]") {
  for (const OverflowPolicy policy : {OverflowPolicy::kDropNewest, OverflowPolicy::kDropOldest}) {
    BoundedQueue<int> q(2, policy);
    // Catch's assertions are for the test's own thread: the producer only counts.
    std::atomic<int> refused{0};
    std::thread producer([&] {
      for (int i = 0; i < 200; ++i)
        if (!q.push_waiting(i)) ++refused;
    });
    std::vector<int> got;
    while (got.size() < 200) {
      auto v = q.pop_for(std::chrono::seconds(5));
      REQUIRE(v.has_value());
      got.push_back(*v);
    }
    producer.join();
    CHECK(refused == 0);
    CHECK(q.dropped() == 0);
    for (int i = 0; i < 200; ++i) CHECK(got[static_cast<std::size_t>(i)] == i);
  }
  BoundedQueue<int> full(1, OverflowPolicy::kDropNewest);
  CHECK(full.push_waiting(1));
  std::atomic<bool> queued_after_close{true};
  std::thread waiting([&] { queued_after_close = full.push_waiting(2); });  // full: waits until the close
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  full.close();
  waiting.join();
  CHECK_FALSE(queued_after_close);
  CHECK(full.size() == 1);
  CHECK(full.dropped() == 0);
  CHECK(full.refused_closed() == 1);
}

TEST_CASE("close wakes a blocked consumer and refuses pushes", "[queue]") {
  BoundedQueue<int> q(4, OverflowPolicy::kBlock);
  q.push(7);
  q.close();
  CHECK_FALSE(q.push(8));
  CHECK(q.refused_closed() == 1);
  CHECK(q.dropped() == 0);
  auto v = q.pop_for(std::chrono::milliseconds(10));
  REQUIRE(v);
  CHECK(*v == 7);
  CHECK_FALSE(q.pop_for(std::chrono::milliseconds(10)));
}

TEST_CASE("push_all applies each policy item by item and empties its input", "[queue]") {
  BoundedQueue<int> newest(3, OverflowPolicy::kDropNewest);
  std::vector<int> items{1, 2, 3, 4, 5};
  CHECK(newest.push_all(items) == 3);
  CHECK(items.empty());
  CHECK(newest.dropped() == 2);
  BoundedQueue<int> oldest(3, OverflowPolicy::kDropOldest);
  items = {1, 2, 3, 4, 5};
  CHECK(oldest.push_all(items) == 5);
  CHECK(oldest.dropped() == 2);
  CHECK(oldest.high_water() == 3);
  std::vector<int> out;
  newest.drain(out);
  oldest.drain(out);
  CHECK(out == std::vector<int>{1, 2, 3, 3, 4, 5});
}

TEST_CASE("push_all blocks for room in order and wakes a consumer that waits", "[queue]") {
  // Bunches larger than the queue: the producer must hand over what it has
  // queued before it waits, or a consumer asleep on an empty queue never
  // sees it (the timeout here is far longer than the test).
  BoundedQueue<int> q(4, OverflowPolicy::kBlock);
  std::size_t queued = 0;  // read after join (Catch assertions are not thread-safe)
  std::thread producer([&] {
    for (int bunch = 0; bunch < 20; ++bunch) {
      std::vector<int> items;
      for (int i = 0; i < 10; ++i) items.push_back(bunch * 10 + i);
      queued += q.push_all(items);
    }
  });
  std::vector<int> got;
  const auto start = std::chrono::steady_clock::now();
  while (got.size() < 200) {
    auto v = q.pop_for(std::chrono::seconds(30));
    REQUIRE(v.has_value());
    got.push_back(*v);
  }
  producer.join();
  CHECK(queued == 200);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  CHECK(q.dropped() == 0);
  CHECK(q.high_water() == 4);  // it was full while the producer blocked
  for (int i = 0; i < 200; ++i) CHECK(got[i] == i);
}

TEST_CASE("a close counts what blocked pushes held as refused, apart from overflow drops", "[queue]") {
  // A producer waiting for room in a full kBlock queue when the consumer
  // closes it: what it was pushing is refused and counted, item by item.
  BoundedQueue<int> q(2, OverflowPolicy::kBlock);
  std::size_t queued = 0;  // read after join
  std::thread producer([&] {
    std::vector<int> items{1, 2, 3, 4, 5};
    queued = q.push_all(items);
  });
  while (q.size() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the producer waits for room
  q.close();
  producer.join();
  CHECK(queued == 2);
  CHECK(q.refused_closed() == 3);
  CHECK(q.dropped() == 0);
  BoundedQueue<int> newest(1, OverflowPolicy::kDropNewest);
  std::vector<int> items{1, 2};
  CHECK(newest.push_all(items) == 1);
  newest.close();
  items = {3, 4, 5};
  CHECK(newest.push_all(items) == 0);
  CHECK(newest.dropped() == 1);
  CHECK(newest.refused_closed() == 3);
}
