// A bounded multi-producer / multi-consumer queue with an explicit overflow
// policy and a counter of what was dropped (spdlog's async queue idea).
//
// Thread safety: all members may be called from any thread.
// Blocking: push() blocks only with OverflowPolicy::kBlock; pop_for() blocks
// up to its timeout. close() wakes every waiter; after close() push() returns
// false and pop_for() drains what is left, then returns false; what a closed
// queue refuses is counted (refused_closed()), apart from what the overflow
// policy drops (dropped()).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"

namespace gw {

enum class OverflowPolicy { kBlock, kDropOldest, kDropNewest };

template <typename T>
class BoundedQueue {
 public:
  BoundedQueue(std::size_t capacity, OverflowPolicy policy)
      : capacity_(capacity == 0 ? 1 : capacity), policy_(policy) {}

  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  // Returns true when the item was queued. With kDropNewest a full queue drops
  // `item` (returns false); with kDropOldest it drops the oldest queued item
  // (returns true). Either way dropped() grows by one.
  bool push(T item) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!make_room(lock)) return false;
    items_.push_back(std::move(item));
    high_water_ = std::max(high_water_, items_.size());
    not_empty_.notify_one();
    return true;
  }

  // Queues `item`, waiting for room whatever the overflow policy: for a
  // producer that can hold its input back (a stream it pulls from), where
  // waiting loses nothing. False (nothing queued) once the queue is closed.
  bool push_waiting(T item) {
    std::unique_lock<std::mutex> lock(mu_);
    if (items_.size() >= capacity_) not_empty_.notify_all();
    not_full_.wait(lock, [&] { return closed_ || items_.size() < capacity_; });
    if (closed_) {
      ++refused_closed_;
      return false;
    }
    items_.push_back(std::move(item));
    high_water_ = std::max(high_water_, items_.size());
    not_empty_.notify_one();
    return true;
  }

  // push() of every item of `items` in order, under one lock while they fit
  // (a producer with many items at once takes the lock once, not per item).
  // Returns how many were queued; `items` is left empty.
  std::size_t push_all(std::vector<T>& items) {
    std::size_t queued = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      for (T& item : items) {
        if (!make_room(lock)) continue;
        items_.push_back(std::move(item));
        high_water_ = std::max(high_water_, items_.size());
        ++queued;
      }
    }
    items.clear();
    if (queued > 0) not_empty_.notify_all();
    return queued;
  }

  // Waits up to `timeout` for an item. Returns nullopt on timeout or when the
  // queue is closed and empty.
  template <typename Rep, typename Period>
  std::optional<T> pop_for(std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!not_empty_.wait_for(lock, timeout, [&] { return closed_ || !items_.empty(); }))
      return std::nullopt;
    if (items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return item;
  }

  // Moves the oldest queued items, at most `max_items`, into `out` (appends)
  // without waiting; returns how many.
  std::size_t drain(std::vector<T>& out, std::size_t max_items = SIZE_MAX) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::size_t n = std::min(items_.size(), max_items);
    out.reserve(out.size() + n);  // the moves below cannot throw then
    const auto end = items_.begin() + static_cast<std::ptrdiff_t>(n);
    for (auto it = items_.begin(); it != end; ++it) out.push_back(std::move(*it));
    items_.erase(items_.begin(), end);
    if (n > 0) not_full_.notify_all();
    return n;
  }

  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    not_empty_.notify_all();
    not_full_.notify_all();
  }

  std::size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return items_.size();
  }
  std::uint64_t dropped() const {
    std::lock_guard<std::mutex> lock(mu_);
    return dropped_;
  }
  // Items a push refused because the queue was closed (before or while it
  // waited for room).
  std::uint64_t refused_closed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return refused_closed_;
  }
  std::size_t high_water() const {
    std::lock_guard<std::mutex> lock(mu_);
    return high_water_;
  }
  std::size_t capacity() const { return capacity_; }
  OverflowPolicy policy() const { return policy_; }

 private:
  // Under `lock`: whether one more item may go in, after applying the
  // overflow policy to a full queue (kBlock waits; kDropNewest refuses and
  // counts; kDropOldest drops the oldest and counts). False once closed.
  bool make_room(std::unique_lock<std::mutex>& lock) {
    if (closed_) {
      ++refused_closed_;
      return false;
    }
    if (items_.size() < capacity_) return true;
    switch (policy_) {
      case OverflowPolicy::kBlock:
        // push_all may have queued items it has not announced yet.
        not_empty_.notify_all();
        not_full_.wait(lock, [&] { return closed_ || items_.size() < capacity_; });
        if (closed_) ++refused_closed_;
        return !closed_;
      case OverflowPolicy::kDropNewest:
        ++dropped_;
        return false;
      case OverflowPolicy::kDropOldest:
        items_.pop_front();
        ++dropped_;
        return true;
    }
    return false;
  }

  const std::size_t capacity_;
  const OverflowPolicy policy_;
  mutable std::mutex mu_;
  std::condition_variable not_empty_;
  std::condition_variable not_full_;
  std::deque<T> items_;
  std::uint64_t dropped_ = 0;
  std::uint64_t refused_closed_ = 0;
  std::size_t high_water_ = 0;
  bool closed_ = false;
};

}  // namespace gw
