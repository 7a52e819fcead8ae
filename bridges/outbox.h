// The outbox of a bridge: a bounded queue of messages and one sender thread
// that hands them, in the order pushed, to the bridge's delivery function.
// Both bridges (MQTT, webhook) send through one; what differs between them
// is only how one message is delivered.
//
// Accounting: every pushed message ends in exactly one of delivered, failed
// or dropped, or is still queued / in hand:
//   delivered  the delivery function said kDelivered
//   failed     it said kFailed (refused, or out of attempts)
//   dropped    the oldest, dropped from a full queue; one the delivery gave
//              up on at the stop deadline (kAbandoned, or held past it); one
//              still queued when stop() returns
// A full queue is logged at most every 10 s.
//
// Thread safety: push(), counters(), wake() from any thread, never blocking
// on delivery; pause() from the delivery function; start() and stop() from
// one thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace gw::bridges {

struct OutboxMessage {
  std::string topic;
  std::string body;
  bool retain = false;  // passed through to the delivery (MQTT retained); the outbox ignores it
};

enum class DeliveryOutcome {
  kDelivered,  // done
  kFailed,     // cannot be delivered; counted failed, the next goes on
  kHold,       // not now (no connection): offered again after a poll period or wake()
  kAbandoned,  // the delivery gave up because the stop deadline passed; counted dropped
};

struct OutboxOptions {
  std::string log_name;  // "MQTT bridge", "webhook": how the log names the bridge
  std::string thread_name;
  std::size_t max_queued = 1000;  // >= 1
  // Ends the full-queue log line: what to check ("is the broker at H:P reachable?").
  std::string drop_hint;
  // How long a held message waits before it is offered again without a
  // wake(), and how often the idle sender looks at the stop flag.
  std::chrono::milliseconds poll = std::chrono::milliseconds(100);
};

struct OutboxCounters {
  std::uint64_t delivered = 0;
  std::uint64_t failed = 0;
  std::uint64_t dropped = 0;
  std::uint64_t queued = 0;   // waiting in the queue, the one in hand not included
  std::uint64_t in_hand = 0;  // 1 while the delivery function has (or holds) a message
};

class Outbox {
 public:
  using Deliver = std::function<DeliveryOutcome(const OutboxMessage&)>;

  // Does not start the sender: the delivery function may use state its
  // owner sets up after constructing the outbox.
  Outbox(OutboxOptions options, Deliver deliver);
  ~Outbox();  // stop() with no time to flush, when not stopped yet
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;

  void start();
  // Queues the message; when the queue is full the oldest goes. Ignored
  // after stop().
  void push(OutboxMessage message);
  // A held message is offered again now (a connection came up).
  void wake();
  // For a delivery function's back-off: waits `pause`, ending early once
  // stop() has been called (a stopping outbox does not wait out a back-off).
  // False when the stop deadline has passed: give up (kAbandoned).
  bool pause(std::chrono::milliseconds pause);
  OutboxCounters counters() const;
  // Lets the sender go on for at most `flush`, then joins it; what is left
  // counts as dropped. Idempotent.
  void stop(std::chrono::milliseconds flush);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gw::bridges
