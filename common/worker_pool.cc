#include "common/worker_pool.h"

#include <algorithm>

#include "common/thread_name.h"

namespace gw {

int worker_count(int threads) {
  if (threads > 0) return threads;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

WorkerPool::WorkerPool(int threads, const std::string& name) {
  const int helper_count = std::max(threads, 1) - 1;
  helpers_.reserve(helper_count);
  for (int worker = 1; worker <= helper_count; ++worker) {
    helpers_.emplace_back([this, worker, name] {
      set_thread_name(name);
      helper_loop(worker);
    });
  }
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (std::thread& helper : helpers_) helper.join();
}

void WorkerPool::record_exception() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!error_) error_ = std::current_exception();
}

void WorkerPool::run(const std::function<void(int)>& task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    task_ = &task;
    error_ = nullptr;
    open_ = true;
    joined_ = 0;
    ++generation_;
  }
  if (!helpers_.empty()) start_.notify_all();
  try {
    task(0);
  } catch (...) {
    record_exception();
  }
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    open_ = false;  // helpers not in by now skip this run
    done_.wait(lock, [this] { return joined_ == 0; });
    task_ = nullptr;
    error = error_;
    error_ = nullptr;
  }
  if (error) std::rethrow_exception(error);
}

void WorkerPool::helper_loop(int worker) {
  std::uint64_t seen_generation = 0;
  for (;;) {
    const std::function<void(int)>* task = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_.wait(lock, [&] { return stopping_ || generation_ != seen_generation; });
      if (stopping_) return;
      seen_generation = generation_;
      if (!open_) continue;  // woke after the caller finished: nothing left
      ++joined_;
      task = task_;
    }
    try {
      (*task)(worker);
    } catch (...) {
      record_exception();
    }
    bool last = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      last = --joined_ == 0;
    }
    if (last) done_.notify_one();
  }
}

}  // namespace gw
