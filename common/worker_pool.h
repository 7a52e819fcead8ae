// A fixed set of threads that run one task at a time: the CPU backend's
// search workers and the engine's per-stream host work (pipeline/engine.cc).
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace gw {

// The worker count a `threads` setting means (search.threads and the like):
// itself when > 0, else one per core (at least 1).
int worker_count(int threads);

// `threads` workers in total: threads - 1 helper threads that live as long as
// the pool, plus the thread that calls run(). Not copyable; run() must not be
// called from two threads at once (the CPU backend's search() and the
// engine are single-caller by contract).
class WorkerPool {
 public:
  // `name`: the helper threads' name (common/thread_name.h).
  explicit WorkerPool(int threads, const std::string& name = "gw-pool");
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return static_cast<int>(helpers_.size()) + 1; }

  // Calls task(0) on the calling thread and task(worker) on each helper that
  // wakes up before that call returns (at most once per worker in
  // [1, size())), and blocks until every call has returned. A helper that
  // wakes later does not call it: the task must hand out its work as the
  // workers ask for it (an atomic counter), so that whoever runs it finishes
  // all of it. The caller never waits for helpers to wake up (waking an idle
  // vCPU of a virtual machine is slow enough that a per-batch run paying it
  // would show; docs/benchmarks.md). If a call throws,
  // the first exception is rethrown here after all calls returned.
  void run(const std::function<void(int)>& task);

  // Calls fn(begin, end) (or fn(begin, end, worker)) over [0, n) in
  // consecutive ranges of at most `chunk` items, each range once, claimed by
  // whichever workers run (see run()); in order within a worker, in no order
  // across workers. n <= chunk runs inline on the caller (worker 0). Blocks
  // until every range is done.
  template <typename Fn>
  void for_ranges(std::size_t n, std::size_t chunk, Fn&& fn) {
    const auto call = [&fn](std::size_t begin, std::size_t end, int worker) {
      if constexpr (std::is_invocable_v<Fn&, std::size_t, std::size_t, int>)
        fn(begin, end, worker);
      else
        fn(begin, end);
    };
    if (chunk == 0) chunk = 1;
    if (n <= chunk) {
      if (n > 0) call(std::size_t{0}, n, 0);
      return;
    }
    std::atomic<std::size_t> next{0};
    run([&](int worker) {
      for (;;) {
        const std::size_t begin = next.fetch_add(chunk, std::memory_order_relaxed);
        if (begin >= n) return;
        call(begin, std::min(n, begin + chunk), worker);
      }
    });
  }

 private:
  void helper_loop(int worker);
  void record_exception();

  std::mutex mutex_;
  std::condition_variable start_;
  std::condition_variable done_;
  const std::function<void(int)>* task_ = nullptr;  // valid while a run is in progress
  std::uint64_t generation_ = 0;                    // bumped by every run()
  bool open_ = false;   // helpers may still join the current run
  int joined_ = 0;      // helpers in the current run's task
  bool stopping_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> helpers_;
};

}  // namespace gw
