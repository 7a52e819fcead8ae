// A fixed set of threads that run one task at a time: the CPU backend's
// search workers and the engine's per-stream host work (pipeline/engine.cc).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gw::kernels {

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

  // Calls task(worker) once for every worker in [0, size()) concurrently, the
  // caller being worker 0, and blocks until all calls have returned. If a call
  // throws, the first exception is rethrown here after all calls returned.
  void run(const std::function<void(int)>& task);

 private:
  void helper_loop(int worker);
  void record_exception();

  std::mutex mutex_;
  std::condition_variable start_;
  std::condition_variable done_;
  const std::function<void(int)>* task_ = nullptr;  // valid while a run is in progress
  std::uint64_t generation_ = 0;                    // bumped by every run()
  int busy_helpers_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> helpers_;
};

}  // namespace gw::kernels
