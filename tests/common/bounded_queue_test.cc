#include <catch2/catch.hpp>

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

TEST_CASE("close wakes a blocked consumer and refuses pushes", "[queue]") {
  BoundedQueue<int> q(4, OverflowPolicy::kBlock);
  q.push(7);
  q.close();
  CHECK_FALSE(q.push(8));
  auto v = q.pop_for(std::chrono::milliseconds(10));
  REQUIRE(v);
  CHECK(*v == 7);
  CHECK_FALSE(q.pop_for(std::chrono::milliseconds(10)));
}

TEST_CASE("overflow policy names parse and bad names are errors", "[queue]") {
  CHECK(gw::parse_overflow_policy("block") == OverflowPolicy::kBlock);
  CHECK(gw::parse_overflow_policy("drop_oldest") == OverflowPolicy::kDropOldest);
  CHECK(gw::parse_overflow_policy("drop_newest") == OverflowPolicy::kDropNewest);
  CHECK_THROWS_AS(gw::parse_overflow_policy("spill"), gw::Error);
}
