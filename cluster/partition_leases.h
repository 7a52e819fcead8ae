// Which worker consumes which partition of the frame stream
// (docs/scale.md): leases in a JetStream key-value bucket whose entries
// expire `ttl_s` after their last write. No election, no coordinator: each
// worker, every ttl_s / 3,
//   1. writes "worker.<id>" (its heartbeat; the live workers are the
//      "worker.*" keys present),
//   2. renews each partition it holds ("partition.<n>" = its id) with a
//      write conditional on the revision it last wrote; a refused renewal
//      means the lease expired and another worker took it: the partition is
//      lost at once,
//   3. keeps at most its fair share, ceil(partitions / live workers):
//      beyond it, releases partitions (deletes the key),
//   4. below it, claims free partitions ("partition.<n>" absent) with a
//      create that fails when another worker was first, starting from a
//      place given by its id so that workers starting together spread out.
// A worker killed without releasing loses its partitions ttl_s after its
// last renewal; the others claim them within a further ttl_s / 3.
//
// The callbacks run on the leases' own thread: on_gained(p) after the
// lease is written, on_lost(p) before a release is written (and when a
// renewal was refused). A partition is held from on_gained until on_lost.
//
// Thread safety: held() and counters() from any thread; the destructor
// (or stop()) releases every partition and deletes the heartbeat.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/nats_client.h"

struct __kvStore;

namespace gw::cluster {

struct PartitionLeasesOptions {
  std::string bucket = "GW_LEASES";
  std::string worker_id;  // unique among the workers; see default_worker_id()
  std::uint32_t partitions = 64;
  double ttl_s = 5;
  int replicas = 1;
};

struct PartitionLeasesCounters {
  std::atomic<std::uint64_t> rounds{0};
  std::atomic<std::uint64_t> claimed{0};   // leases gained
  std::atomic<std::uint64_t> released{0};  // given up: above the fair share, or at stop
  std::atomic<std::uint64_t> lost{0};      // renewal refused: expired and taken by another worker
  std::atomic<std::uint64_t> errors{0};    // bucket operations that failed (the round goes on)
  std::atomic<std::uint32_t> live_workers{0};
};

// "<host>-<pid>": unique on a host, and readable in the bucket.
std::string default_worker_id();

class PartitionLeases {
 public:
  using Callback = std::function<void(std::uint32_t partition)>;
  // Creates the bucket when missing (TTL ttl_s, history 1) and starts the
  // rounds on a thread of its own; the first round runs before the
  // constructor returns. Throws gw::Error when the bucket cannot be made.
  PartitionLeases(const NatsClient& client, const PartitionLeasesOptions& options, Callback on_gained,
                  Callback on_lost);
  ~PartitionLeases();
  PartitionLeases(const PartitionLeases&) = delete;
  PartitionLeases& operator=(const PartitionLeases&) = delete;

  // Stops the rounds, releases every partition held (on_lost for each) and
  // deletes the heartbeat. Idempotent.
  void stop();

  std::vector<std::uint32_t> held() const;
  const PartitionLeasesCounters& counters() const { return counters_; }
  // {worker, live_workers, held, partitions: [held, ascending], rounds,
  // claimed, released, lost, errors}.
  nlohmann::json counters_json() const;

 private:
  void round();
  void release(std::uint32_t partition);

  const NatsClient& client_;
  PartitionLeasesOptions options_;
  Callback on_gained_, on_lost_;
  __kvStore* kv_ = nullptr;
  PartitionLeasesCounters counters_;
  mutable std::mutex held_mu_;
  std::map<std::uint32_t, std::uint64_t> held_;  // partition -> revision of our last write
  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;
  bool stopping_ = false;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace gw::cluster
