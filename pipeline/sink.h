// The alert sink: a writer thread that commits alerts to the HitStore in
// batched transactions and, only after a batch commits, publishes each alert on
// a ZeroMQ PUB socket as [topic, JSON]. It also publishes status messages
// ([ "stats.", JSON ]) handed to it.
//
// Thread safety: submit()/submit_stats()/counters() from any thread.
// submit() blocks when the queue is full (alerts are never dropped).
// stop() drains the queue, commits, publishes, closes the socket and joins.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/bounded_queue.h"
#include "pipeline/alert.h"

namespace gw::pipeline {

struct SinkOptions {
  std::string db_path;
  double retention_days = 30;        // 0 = keep forever
  // Longest an alert submit()ted alone waits for its transaction. The alerts
  // of one submit_all() (a tick's) are committed as soon as they are all in,
  // together with whatever queued behind them (group commit).
  int commit_interval_ms = 50;
  int max_batch = 4096;              // most alerts in one transaction
  std::string publish_endpoint;      // e.g. tcp://127.0.0.1:7710; empty = do not publish
  int send_hwm = 10000;              // ZeroMQ high-water mark per subscriber
  // ZeroMQ CURVE: the server key file and the authorized client keys'
  // directory (pipeline/curve.h); empty = plain TCP.
  std::string curve_secret_key;
  std::string curve_authorized_keys;
  std::size_t queue_capacity = 4096;
};

struct SinkCounters {
  std::uint64_t committed = 0;
  std::uint64_t published = 0;
  std::uint64_t transactions = 0;
  std::uint64_t retention_deleted = 0;
  std::uint64_t last_seq = 0;
  std::uint64_t store_errors = 0;
  std::uint64_t checkpoints = 0;  // WAL checkpoints run (off the writer thread)
  // Cumulative wall seconds of the writer thread in transactions (rows and
  // fsync) and in publishing committed alerts (JSON and sockets).
  double commit_s = 0;
  double publish_s = 0;
};

class AlertSink {
 public:
  // Opens the store and binds the socket (throws gw::Error on failure), then
  // starts the writer thread.
  explicit AlertSink(const SinkOptions& options);
  ~AlertSink();  // calls stop()
  AlertSink(const AlertSink&) = delete;
  AlertSink& operator=(const AlertSink&) = delete;

  // Queues an alert for the writer (blocks while its queue is full). Throws
  // gw::Error after stop(): the alert can no longer be stored.
  void submit(Alert alert);
  // submit() of each alert in order, under one lock of the writer's queue
  // (a batch at thousands of wearers has about a thousand), as one group:
  // the writer commits it without waiting for commit_interval_ms. `alerts`
  // is left empty.
  void submit_all(std::vector<Alert>& alerts);
  void submit_stats(nlohmann::json stats);
  void stop();
  SinkCounters counters() const;
  // Endpoint actually bound (resolves tcp://...:0 / wildcards).
  std::string bound_endpoint() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gw::pipeline
