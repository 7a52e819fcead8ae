// The gateway's side of the JetStream frame path (docs/scale.md): encoded
// frames published to a JetStream stream, one subject per wearer under its
// partition (cluster/partition.h), acknowledged by the server
// asynchronously. With `frames_per_message` above 1 a partition's frames are
// gathered and published together (cluster/frame_batch.h) when that many
// have gathered, when the next would take the message past 512 KB, or at
// flush_batches(); a batch of one goes out as a single frame on its wearer's
// subject.
//
// The stream is created when it does not exist: subjects "<subject>.>",
// file storage, work-queue retention (a frame stays until a worker
// acknowledges it, or `max_age_s`), `replicas` replicas. An existing stream
// of that name is used as it is.
//
// Bounded: at most `max_pending` publishes wait for their acknowledgement;
// a frame that would exceed it (the server slow or away) is dropped and
// counted, never queued without bound, and publish() does not block for
// longer than about a millisecond. While the connection is down the client
// reconnects for ever; frames published meanwhile count as dropped once the
// client's reconnect buffer is full.
//
// Thread safety: publish() and flush() from one thread; counters() from
// any (the acknowledgements are counted on the client's own thread).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/nats_client.h"

namespace gw::cluster {

struct FramePublisherOptions {
  std::string url = "nats://127.0.0.1:4222";
  std::string stream = "GW_FRAMES";
  std::string subject = "gw.frames";
  std::uint32_t partitions = 64;
  std::size_t max_pending = 65536;
  double max_age_s = 30;
  int replicas = 1;
  double connect_timeout_s = 5;
  std::size_t frames_per_message = 1;  // >= 1
};

// In frames, except `messages`.
struct FramePublisherCounters {
  std::atomic<std::uint64_t> published{0};  // handed to the client, awaiting or past their ack
  std::atomic<std::uint64_t> messages{0};   // the messages they went in
  std::atomic<std::uint64_t> acked{0};      // acknowledged by JetStream (stored)
  std::atomic<std::uint64_t> failed{0};     // refused by JetStream (a negative acknowledgement)
  std::atomic<std::uint64_t> dropped{0};    // not published: pending at max_pending, or the client refused
};

class FramePublisher {
 public:
  // Connects and makes sure the stream exists. Throws gw::Error naming the
  // URL or the stream and the server's reason.
  explicit FramePublisher(const FramePublisherOptions& options);
  // Waits up to 2 s for what is pending, then closes.
  ~FramePublisher();
  FramePublisher(const FramePublisher&) = delete;
  FramePublisher& operator=(const FramePublisher&) = delete;

  // Publishes one encoded frame of `wearer`, or adds it to its partition's
  // batch (publishing the batch once it is full); false when a publish
  // dropped frames.
  bool publish(std::uint32_t wearer, const std::uint8_t* data, std::size_t size);
  // Publishes every partition's gathered frames; false when any was dropped.
  bool flush_batches();
  // Frames gathered and not yet published.
  std::size_t batched_frames() const { return batched_frames_; }
  // Publishes the gathered frames, then waits up to `timeout_s` for every
  // pending acknowledgement; true when none is left.
  bool flush(double timeout_s);

  const FramePublisherCounters& counters() const { return counters_; }
  // {published, acked, failed, dropped, pending}.
  nlohmann::json counters_json() const;
  const FramePublisherOptions& options() const { return options_; }

 private:
  struct Batch {
    std::vector<std::uint8_t> records;  // cluster/frame_batch.h
    std::size_t frames = 0;
    std::uint32_t first_wearer = 0;
  };
  const std::string& wearer_subject(std::uint32_t wearer);
  bool publish_message(const char* subject, const std::uint8_t* data, std::size_t size, std::size_t frames);
  bool publish_batch(std::uint32_t partition);

  FramePublisherOptions options_;
  FramePublisherCounters counters_;
  std::unique_ptr<NatsClient> client_;
  std::unordered_map<std::uint32_t, std::string> subjects_;  // by wearer: publish() builds each once
  std::vector<Batch> batches_;                                // by partition, with frames_per_message > 1
  std::vector<std::string> batch_subjects_;
  std::size_t batched_frames_ = 0;
};

}  // namespace gw::cluster
