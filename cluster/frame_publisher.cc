#include "cluster/frame_publisher.h"

#include <nats/nats.h>

#include <cmath>
#include <memory>

#include "cluster/frame_batch.h"
#include "cluster/partition.h"
#include "common/error.h"

namespace gw::cluster {

namespace {

constexpr std::size_t kMaxBatchBytes = 512 * 1024;

// Frames in a published message: one, or a batch's records (only lengths
// are read; the publisher built the batch, so every record is whole).
std::uint64_t frames_in(natsMsg* msg) {
  if (!is_batch_subject(natsMsg_GetSubject(msg))) return 1;
  return count_frame_records(reinterpret_cast<const std::uint8_t*>(natsMsg_GetData(msg)),
                             static_cast<std::size_t>(natsMsg_GetDataLength(msg)));
}

// Each asynchronous publish's outcome, on the client's thread.
void count_ack(jsCtx*, natsMsg* msg, jsPubAck* ack, jsPubAckErr* error, void* closure) {
  auto* counters = static_cast<FramePublisherCounters*>(closure);
  if (ack) counters->acked.fetch_add(frames_in(msg), std::memory_order_relaxed);
  else if (error) counters->failed.fetch_add(frames_in(msg), std::memory_order_relaxed);
  natsMsg_Destroy(msg);
}

}  // namespace

FramePublisher::FramePublisher(const FramePublisherOptions& options) : options_(options) {
  if (options_.partitions == 0) throw Error("frame publisher: partitions must be at least 1");
  if (options_.frames_per_message == 0) throw Error("frame publisher: frames_per_message must be at least 1");
  if (options_.frames_per_message > 1) {
    batches_.resize(options_.partitions);
    for (std::uint32_t p = 0; p < options_.partitions; ++p) batch_subjects_.push_back(batch_subject(options_.subject, p));
  }
  NatsClientOptions client_options;
  client_options.url = options_.url;
  client_options.connect_timeout_s = options_.connect_timeout_s;
  client_options.max_pending_publishes = options_.max_pending;
  client_options.on_publish_ack = count_ack;
  client_options.on_publish_ack_closure = &counters_;
  client_ = std::make_unique<NatsClient>(client_options);
  StreamSpec spec;
  spec.name = options_.stream;
  spec.subjects = options_.subject + ".>";
  spec.work_queue = true;
  spec.max_age_s = options_.max_age_s;
  spec.replicas = options_.replicas;
  ensure_stream(*client_, spec);
}

FramePublisher::~FramePublisher() { flush(2.0); }

const std::string& FramePublisher::wearer_subject(std::uint32_t wearer) {
  auto subject = subjects_.find(wearer);
  if (subject == subjects_.end())
    subject = subjects_
                  .emplace(wearer, frame_subject(options_.subject, partition_of(wearer, options_.partitions), wearer))
                  .first;
  return subject->second;
}

bool FramePublisher::publish_message(const char* subject, const std::uint8_t* data, std::size_t size,
                                     std::size_t frames) {
  const natsStatus s = js_PublishAsync(client_->jetstream(), subject, data, static_cast<int>(size), nullptr);
  if (s != NATS_OK) {
    counters_.dropped.fetch_add(frames, std::memory_order_relaxed);
    return false;
  }
  counters_.published.fetch_add(frames, std::memory_order_relaxed);
  counters_.messages.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool FramePublisher::publish(std::uint32_t wearer, const std::uint8_t* data, std::size_t size) {
  if (batches_.empty()) return publish_message(wearer_subject(wearer).c_str(), data, size, 1);
  const std::uint32_t partition = partition_of(wearer, options_.partitions);
  Batch& batch = batches_[partition];
  // A message stays below the server's default largest payload (1 MB).
  bool ok = true;
  if (batch.frames > 0 && batch.records.size() + kRecordLengthBytes + size > kMaxBatchBytes) ok = publish_batch(partition);
  if (batch.frames == 0) batch.first_wearer = wearer;
  append_frame_record(batch.records, data, size);
  ++batch.frames;
  ++batched_frames_;
  if (batch.frames >= options_.frames_per_message) ok = publish_batch(partition) && ok;
  return ok;
}

bool FramePublisher::publish_batch(std::uint32_t partition) {
  Batch& batch = batches_[partition];
  if (batch.frames == 0) return true;
  // A batch of one is the frame alone, on its wearer's subject.
  const bool ok = batch.frames == 1
                      ? publish_message(wearer_subject(batch.first_wearer).c_str(), batch.records.data() + kRecordLengthBytes,
                                        batch.records.size() - kRecordLengthBytes, 1)
                      : publish_message(batch_subjects_[partition].c_str(), batch.records.data(),
                                        batch.records.size(), batch.frames);
  batched_frames_ -= batch.frames;
  batch.records.clear();
  batch.frames = 0;
  return ok;
}

bool FramePublisher::flush_batches() {
  bool ok = true;
  if (batched_frames_ == 0) return ok;
  for (std::uint32_t p = 0; p < batches_.size(); ++p) ok = publish_batch(p) && ok;
  return ok;
}

bool FramePublisher::flush(double timeout_s) {
  flush_batches();
  return client_->wait_for_publishes(timeout_s);
}

nlohmann::json FramePublisher::counters_json() const {
  const std::uint64_t published = counters_.published.load(), acked = counters_.acked.load(),
                      failed = counters_.failed.load();
  return {{"published", published},
          {"messages", counters_.messages.load()},
          {"acked", acked},
          {"failed", failed},
          {"dropped", counters_.dropped.load()},
          {"pending", published - std::min(published, acked + failed)}};
}

}  // namespace gw::cluster
