#include "bridges/outbox.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/bounded_queue.h"
#include "common/thread_name.h"

namespace gw::bridges {
namespace {

using Clock = std::chrono::steady_clock;

// How often at most a dropping outbox says so in the log.
constexpr auto kDropReportPeriod = std::chrono::seconds(10);

}  // namespace

struct Outbox::Impl {
  Impl(OutboxOptions opts, Deliver fn)
      : options(std::move(opts)),
        deliver(std::move(fn)),
        queue(options.max_queued, OverflowPolicy::kDropOldest) {}

  bool past_deadline_locked() const { return stopping && Clock::now() >= stop_deadline; }

  bool past_deadline() const {
    std::lock_guard<std::mutex> lock(mu);
    return past_deadline_locked();
  }

  // Waits for wake() (or the stop deadline) at most one poll period.
  void wait_to_offer_again() {
    std::unique_lock<std::mutex> lock(mu);
    const auto until = std::min(Clock::now() + options.poll, stop_deadline);
    cv.wait_until(lock, until, [&] { return woken || past_deadline_locked(); });
    woken = false;
  }

  // Keeps one message in hand until the delivery is done with it, so that
  // order holds across a lost connection.
  void send_until_stopped() {
    while (true) {
      std::optional<OutboxMessage> message = queue.pop_for(options.poll);
      if (!message) {
        if (queue_closed.load()) return;  // closed and empty
        continue;
      }
      in_hand = true;
      bool keep_going = true;
      while (true) {
        const DeliveryOutcome outcome = deliver(*message);
        if (outcome == DeliveryOutcome::kDelivered) {
          ++delivered;
        } else if (outcome == DeliveryOutcome::kFailed) {
          ++failed;
        } else if (outcome == DeliveryOutcome::kAbandoned) {
          ++dropped;
          keep_going = false;
        } else if (past_deadline()) {  // held at the deadline
          ++dropped;
          keep_going = false;
        } else {
          wait_to_offer_again();
          continue;
        }
        break;
      }
      in_hand = false;
      if (!keep_going || past_deadline()) return;  // the rest is counted by stop()
    }
  }

  void report_drops() {
    const std::uint64_t lost = queue.dropped();
    if (lost <= dropped_reported.load() || Clock::now() < next_drop_report.load()) return;
    next_drop_report = Clock::now() + kDropReportPeriod;
    dropped_reported = lost;
    spdlog::warn("{}: {} messages dropped (the oldest, queue of {} full) since start; {}",
                 options.log_name, lost, options.max_queued, options.drop_hint);
  }

  const OutboxOptions options;
  const Deliver deliver;
  BoundedQueue<OutboxMessage> queue;
  mutable std::mutex mu;
  std::condition_variable cv;
  bool woken = false;                                          // guarded by mu
  bool stopping = false;                                       // guarded by mu
  Clock::time_point stop_deadline = Clock::time_point::max();  // guarded by mu
  std::atomic<bool> queue_closed{false};
  std::atomic<bool> in_hand{false};
  std::atomic<std::uint64_t> delivered{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<std::uint64_t> dropped{0};  // besides the queue's own count
  std::atomic<Clock::time_point> next_drop_report{Clock::time_point::min()};
  std::atomic<std::uint64_t> dropped_reported{0};
  std::mutex stop_mu;
  bool stopped = false;  // guarded by stop_mu
  std::thread sender;
};

Outbox::Outbox(OutboxOptions options, Deliver deliver)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(deliver))) {}

Outbox::~Outbox() { stop(std::chrono::milliseconds(0)); }

void Outbox::start() {
  if (impl_->sender.joinable()) return;
  impl_->sender = std::thread([impl = impl_.get()] {
    set_thread_name(impl->options.thread_name);
    impl->send_until_stopped();
  });
}

void Outbox::push(OutboxMessage message) {
  impl_->queue.push(std::move(message));
  impl_->report_drops();
}

void Outbox::wake() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->woken = true;
  }
  impl_->cv.notify_all();
}

bool Outbox::pause(std::chrono::milliseconds pause) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait_for(lock, pause, [&] { return impl_->stopping; });
  return !impl_->past_deadline_locked();
}

OutboxCounters Outbox::counters() const {
  OutboxCounters c;
  c.delivered = impl_->delivered.load();
  c.failed = impl_->failed.load();
  c.dropped = impl_->dropped.load() + impl_->queue.dropped();
  c.queued = impl_->queue.size();
  c.in_hand = impl_->in_hand.load() ? 1 : 0;
  return c;
}

void Outbox::stop(std::chrono::milliseconds flush) {
  Impl& impl = *impl_;
  std::lock_guard<std::mutex> stop_lock(impl.stop_mu);
  if (impl.stopped) return;
  impl.stopped = true;
  {
    std::lock_guard<std::mutex> lock(impl.mu);
    impl.stopping = true;
    impl.stop_deadline = Clock::now() + flush;
  }
  impl.queue.close();
  impl.queue_closed = true;
  impl.cv.notify_all();
  if (impl.sender.joinable()) impl.sender.join();
  std::vector<OutboxMessage> left;
  impl.queue.drain(left);
  impl.dropped += left.size();
}

}  // namespace gw::bridges
