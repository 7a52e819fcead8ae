// The bridges' outbox with a delivery function under the test's control:
// order, failures, held messages woken, a full queue dropping the oldest,
// and the stop deadline accounting for everything left.
#include "bridges/outbox.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using gw::bridges::DeliveryOutcome;
using gw::bridges::Outbox;
using gw::bridges::OutboxCounters;
using gw::bridges::OutboxMessage;
using gw::bridges::OutboxOptions;
using namespace std::chrono_literals;

OutboxOptions options_with(std::size_t max_queued) {
  OutboxOptions options;
  options.log_name = "test outbox";
  options.thread_name = "gw-test-outbox";
  options.max_queued = max_queued;
  options.drop_hint = "the test blocks the delivery";
  options.poll = 20ms;
  return options;
}

// Records what the outbox hands over; answers with `answer` (a function of
// the topic) and can be told to block until released.
class Receiver {
 public:
  DeliveryOutcome deliver(const OutboxMessage& message) {
    std::unique_lock<std::mutex> lock(mu_);
    ++calls_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !blocked_; });
    const DeliveryOutcome outcome = answer ? answer(message.topic) : DeliveryOutcome::kDelivered;
    if (outcome == DeliveryOutcome::kDelivered) topics_.push_back(message.topic);
    return outcome;
  }
  void block() {
    std::lock_guard<std::mutex> lock(mu_);
    blocked_ = true;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      blocked_ = false;
    }
    cv_.notify_all();
  }
  bool wait_for_calls(int n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return calls_ >= n; });
  }
  std::vector<std::string> topics() {
    std::lock_guard<std::mutex> lock(mu_);
    return topics_;
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

  std::function<DeliveryOutcome(const std::string&)> answer;  // set before start()

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool blocked_ = false;
  int calls_ = 0;
  std::vector<std::string> topics_;
};

bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

}  // namespace

TEST_CASE("Outbox: in order, failures counted and passed over", "[bridges]") {
  Receiver receiver;
  receiver.answer = [](const std::string& topic) {
    return topic == "bad" ? DeliveryOutcome::kFailed : DeliveryOutcome::kDelivered;
  };
  Outbox outbox(options_with(100), [&](const OutboxMessage& m) { return receiver.deliver(m); });
  outbox.start();
  for (const char* topic : {"a", "bad", "b", "c"}) outbox.push({topic, "{}"});
  REQUIRE(wait_until([&] { return outbox.counters().delivered == 3; }, 5s));
  outbox.stop(1s);
  CHECK(receiver.topics() == std::vector<std::string>{"a", "b", "c"});
  const OutboxCounters c = outbox.counters();
  CHECK(c.delivered == 3);
  CHECK(c.failed == 1);
  CHECK(c.dropped == 0);
  CHECK(c.queued == 0);
  CHECK(c.in_hand == 0);
}

TEST_CASE("Outbox: a full queue drops the oldest, stop counts what is left", "[bridges]") {
  Receiver receiver;
  Outbox outbox(options_with(3), [&](const OutboxMessage& m) { return receiver.deliver(m); });
  receiver.block();
  outbox.start();
  outbox.push({"first", "{}"});
  REQUIRE(receiver.wait_for_calls(1, 5s));  // "first" is in hand, blocked
  for (int i = 0; i < 5; ++i) outbox.push({"m" + std::to_string(i), "{}"});
  OutboxCounters c = outbox.counters();
  CHECK(c.in_hand == 1);
  CHECK(c.queued == 3);
  CHECK(c.dropped == 2);  // m0, m1
  receiver.release();
  REQUIRE(wait_until([&] { return outbox.counters().delivered == 4; }, 5s));
  CHECK(receiver.topics() == std::vector<std::string>{"first", "m2", "m3", "m4"});

  // Blocked again, with two waiting: a stop with no time delivers the one
  // in hand (the delivery cannot be interrupted) and drops the rest.
  receiver.block();
  outbox.push({"x", "{}"});
  REQUIRE(receiver.wait_for_calls(5, 5s));
  outbox.push({"y", "{}"});
  outbox.push({"z", "{}"});
  std::thread releaser([&] {
    std::this_thread::sleep_for(50ms);
    receiver.release();
  });
  outbox.stop(0ms);
  releaser.join();
  c = outbox.counters();
  CHECK(c.delivered == 5);
  CHECK(c.dropped == 2 + 2);
  CHECK(c.queued == 0);
  outbox.push({"after", "{}"});  // ignored once stopped
  CHECK(outbox.counters().queued == 0);
}

TEST_CASE("Outbox: a held message is offered again, woken, in order", "[bridges]") {
  Receiver receiver;
  std::atomic<bool> connected{false};
  receiver.answer = [&](const std::string&) {
    return connected.load() ? DeliveryOutcome::kDelivered : DeliveryOutcome::kHold;
  };
  OutboxOptions options = options_with(100);
  options.poll = 10s;  // only wake() can bring a held message back in time
  Outbox outbox(options, [&](const OutboxMessage& m) { return receiver.deliver(m); });
  outbox.start();
  outbox.push({"a", "{}"});
  outbox.push({"b", "{}"});
  REQUIRE(receiver.wait_for_calls(1, 5s));
  std::this_thread::sleep_for(50ms);
  CHECK(receiver.calls() == 1);  // held, waiting
  CHECK(outbox.counters().in_hand == 1);
  CHECK(outbox.counters().queued == 1);
  connected = true;
  outbox.wake();
  REQUIRE(wait_until([&] { return outbox.counters().delivered == 2; }, 5s));
  CHECK(receiver.topics() == std::vector<std::string>{"a", "b"});
  outbox.stop(0ms);
}

TEST_CASE("Outbox: held at the stop deadline counts dropped, a pause ends at stop", "[bridges]") {
  SECTION("held") {
    Receiver receiver;
    receiver.answer = [](const std::string&) { return DeliveryOutcome::kHold; };
    Outbox outbox(options_with(100), [&](const OutboxMessage& m) { return receiver.deliver(m); });
    outbox.start();
    for (int i = 0; i < 4; ++i) outbox.push({"m" + std::to_string(i), "{}"});
    REQUIRE(receiver.wait_for_calls(1, 5s));
    const auto start = std::chrono::steady_clock::now();
    outbox.stop(100ms);
    CHECK(std::chrono::steady_clock::now() - start < 5s);
    const OutboxCounters c = outbox.counters();
    CHECK(c.delivered == 0);
    CHECK(c.dropped == 4);  // the one held and the three behind it
    CHECK(c.in_hand == 0);
  }
  SECTION("a back-off") {
    std::atomic<int> pauses_passed{0};
    Outbox* self = nullptr;
    Outbox outbox(options_with(100), [&](const OutboxMessage&) {
      // Backs off for far longer than the test waits, until the deadline.
      while (self->pause(60s)) ++pauses_passed;
      return DeliveryOutcome::kAbandoned;
    });
    self = &outbox;
    outbox.start();
    outbox.push({"m", "{}"});
    REQUIRE(wait_until([&] { return outbox.counters().in_hand == 1; }, 5s));
    const auto start = std::chrono::steady_clock::now();
    outbox.stop(50ms);
    CHECK(std::chrono::steady_clock::now() - start < 5s);
    // The stop ended the first pause early; later ones run to the deadline
    // without waiting out the back-off.
    CHECK(pauses_passed.load() >= 1);
    CHECK(outbox.counters().dropped == 1);
    CHECK(outbox.counters().delivered == 0);
  }
}
