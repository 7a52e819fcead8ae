// A worker's side of the JetStream frame path (docs/scale.md): for each
// partition it holds (cluster/partition_leases.h), a durable pull consumer
// of "<subject>.<partition>.>" on the work-queue frame stream, read by one
// thread of its own, each frame handed to `on_frame` in stream order.
//
// Acknowledgement is what makes a takeover lose nothing. A frame is
// acknowledged (the work-queue stream then deletes it) only once it was
// received `retain_s` ago, i.e. once no detection window can need its
// samples any more (retain_s covers the longest window); the stream takes
// only explicit acknowledgements, one per frame. So at any moment the
// stream still holds at least the last retain_s of every partition, and
// start(p) on another worker, after the holder died, reads the partition
// from its first unacknowledged frame: the new holder rebuilds each
// wearer's rings from there, and an event that spans the takeover is seen
// whole. Each worker's consumer of a partition has a name of its own
// ("<stream>_p<partition>_<worker>"): start(p) deletes every other consumer
// of the partition first (a dead holder's, with its unacknowledged
// deliveries; the work-queue stream allows one consumer per subject) and
// creates its own, so frames come in stream order from the first one the
// stream holds. Because the names differ, a holder that stalled and lost
// its lease can neither pull from nor acknowledge into the new holder's
// consumer: its fetches fail until its leases notice, and stop(p) deletes
// only its own. Memory: the acknowledgement subject of every frame
// received in the last retain_s.
//
// Flow: each fetch takes at most `batch` frames and returns at once when
// there are none; on_frame may block (the daemon's frame queue applying
// back-pressure), which only delays the next fetch: the stream keeps the
// frames. At most `max_ack_pending` frames of a partition are delivered and
// unacknowledged; the server stops delivering beyond that.
//
// Thread safety: start(), stop() and stop_all() from one thread (the
// leases'); counters() from any. on_frame runs on the consumer's thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "cluster/nats_client.h"

namespace gw::cluster {

struct FrameConsumerOptions {
  // Letters, digits, '-' and '_' (part of consumer names); the leases' id.
  std::string worker_id;
  std::string stream = "GW_FRAMES";
  std::string subject = "gw.frames";
  double retain_s = 15;
  int batch = 256;
  std::int64_t max_ack_pending = 1 << 20;
};

struct FrameConsumerCounters {
  std::atomic<std::uint64_t> frames{0};       // handed to on_frame
  std::atomic<std::uint64_t> messages{0};     // fetched: one frame each, or a batch (cluster/frame_batch.h)
  std::atomic<std::uint64_t> malformed_batches{0};  // batches cut short: the frames before the fault handed over
  std::atomic<std::uint64_t> acks{0};         // messages acknowledged
  std::atomic<std::uint64_t> started{0};      // partitions started (consumer created)
  std::atomic<std::uint64_t> stopped{0};
  std::atomic<std::uint64_t> errors{0};       // failed fetches, creations or deletions
  std::atomic<std::uint32_t> partitions{0};   // consumed now (a gauge)
};

class FrameConsumer {
 public:
  using FrameHandler = std::function<void(std::uint32_t partition, const std::uint8_t* data, std::size_t size)>;
  FrameConsumer(const NatsClient& client, const FrameConsumerOptions& options, FrameHandler on_frame);
  ~FrameConsumer();  // stop_all()
  FrameConsumer(const FrameConsumer&) = delete;
  FrameConsumer& operator=(const FrameConsumer&) = delete;

  // Starts consuming `partition` from its first unacknowledged frame.
  // A failure is logged and counted; the partition is then not consumed
  // (the leases keep it; a later start() retries).
  void start(std::uint32_t partition);
  // Stops consuming `partition` without acknowledging what is unacknowledged
  // (its next holder reads it again) and deletes this worker's consumer of
  // it (when another worker took the partition over, that one is gone
  // already). Waits for a fetch of that partition in progress to be handed
  // over.
  void stop(std::uint32_t partition);
  void stop_all();

  const FrameConsumerCounters& counters() const { return counters_; }
  // {partitions, frames, acks, started, stopped, errors}.
  nlohmann::json counters_json() const;
  // This worker's durable consumer of a partition:
  // "<stream>_p<partition>_<worker_id>".
  std::string consumer_name(std::uint32_t partition) const;

 private:
  struct Partition;
  // "<stream>_p<partition>_": every worker's consumer of the partition.
  std::string partition_prefix(std::uint32_t partition) const;
  // Deletes every worker's consumer of `partition` (failures counted).
  void delete_partition_consumers(std::uint32_t partition);
  void run();
  // Fetches and hands over one batch of `partition`; the frames fetched.
  std::size_t fetch(Partition& partition);
  void ack_due(Partition& partition, double now_s);

  const NatsClient& client_;
  FrameConsumerOptions options_;
  FrameHandler on_frame_;
  FrameConsumerCounters counters_;
  std::mutex partitions_mu_;
  std::map<std::uint32_t, std::shared_ptr<Partition>> partitions_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace gw::cluster
