#include "cluster/frame_publisher.h"

#include <nats/nats.h>

#include <cmath>
#include <memory>

#include "cluster/partition.h"
#include "common/error.h"

namespace gw::cluster {

namespace {

// Each asynchronous publish's outcome, on the client's thread.
void count_ack(jsCtx*, natsMsg* msg, jsPubAck* ack, jsPubAckErr* error, void* closure) {
  auto* counters = static_cast<FramePublisherCounters*>(closure);
  if (ack) counters->acked.fetch_add(1, std::memory_order_relaxed);
  else if (error) counters->failed.fetch_add(1, std::memory_order_relaxed);
  natsMsg_Destroy(msg);
}

}  // namespace

FramePublisher::FramePublisher(const FramePublisherOptions& options) : options_(options) {
  if (options_.partitions == 0) throw Error("frame publisher: partitions must be at least 1");
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

bool FramePublisher::publish(std::uint32_t wearer, const std::uint8_t* data, std::size_t size) {
  auto subject = subjects_.find(wearer);
  if (subject == subjects_.end())
    subject = subjects_
                  .emplace(wearer, frame_subject(options_.subject, partition_of(wearer, options_.partitions), wearer))
                  .first;
  const natsStatus s = js_PublishAsync(client_->jetstream(), subject->second.c_str(), data, static_cast<int>(size), nullptr);
  if (s != NATS_OK) {
    counters_.dropped.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  counters_.published.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool FramePublisher::flush(double timeout_s) { return client_->wait_for_publishes(timeout_s); }

nlohmann::json FramePublisher::counters_json() const {
  const std::uint64_t published = counters_.published.load(), acked = counters_.acked.load(),
                      failed = counters_.failed.load();
  return {{"published", published},
          {"acked", acked},
          {"failed", failed},
          {"dropped", counters_.dropped.load()},
          {"pending", published - std::min(published, acked + failed)}};
}

}  // namespace gw::cluster
