#include "cluster/frame_consumer.h"

#include <nats/nats.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <deque>
#include <vector>

#include "cluster/frame_batch.h"
#include "cluster/partition.h"
#include "common/error.h"

namespace gw::cluster {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

struct FrameConsumer::Partition {
  std::uint32_t id = 0;
  std::mutex mu;  // the subscription and `unacked`: fetch() and stop()
  natsSubscription* sub = nullptr;
  bool active = false;
  // Every frame not yet acknowledged: its receipt time and the subject its
  // acknowledgement goes to, oldest first.
  std::deque<std::pair<double, std::string>> unacked;
};

FrameConsumer::FrameConsumer(const NatsClient& client, const FrameConsumerOptions& options, FrameHandler on_frame)
    : client_(client), options_(options), on_frame_(std::move(on_frame)) {
  if (!is_plain_name(options_.worker_id))
    throw Error("frame consumer: worker id '" + options_.worker_id + "' must be letters, digits, '-' and '_'");
  thread_ = std::thread([this] { run(); });
}

FrameConsumer::~FrameConsumer() {
  stop_all();
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

std::string FrameConsumer::consumer_name(std::uint32_t partition) const {
  return partition_prefix(partition) + options_.worker_id;
}

std::string FrameConsumer::partition_prefix(std::uint32_t partition) const {
  return options_.stream + "_p" + std::to_string(partition) + "_";
}

void FrameConsumer::delete_partition_consumers(std::uint32_t partition) {
  jsConsumerNamesList* names = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_ConsumerNames(&names, client_.jetstream(), options_.stream.c_str(), nullptr, &code);
  if (s == NATS_NOT_FOUND) return;  // none at all
  if (s != NATS_OK) {
    ++counters_.errors;
    spdlog::warn("frame consumer: partition {}: {}", partition,
                 jetstream_error("listing the consumers of " + options_.stream, s, static_cast<int>(code)));
    return;
  }
  const std::string prefix = partition_prefix(partition);
  for (int i = 0; i < names->Count; ++i) {
    const std::string name = names->List[i];
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    code = static_cast<jsErrCode>(0);
    s = js_DeleteConsumer(client_.jetstream(), options_.stream.c_str(), name.c_str(), nullptr, &code);
    if (s != NATS_OK && s != NATS_NOT_FOUND) {
      ++counters_.errors;
      spdlog::warn("frame consumer: partition {}: {}", partition,
                   jetstream_error("deleting consumer " + name, s, static_cast<int>(code)));
    }
  }
  jsConsumerNamesList_Destroy(names);
}

void FrameConsumer::start(std::uint32_t partition) {
  const std::string name = consumer_name(partition);
  // A previous holder's consumer: its deliveries were never acknowledged,
  // and a fresh consumer reads them again, in order.
  delete_partition_consumers(partition);
  const std::string filter = options_.subject + "." + std::to_string(partition) + ".>";
  jsSubOptions sub_options;
  jsSubOptions_Init(&sub_options);
  sub_options.Stream = options_.stream.c_str();
  sub_options.Config.Durable = name.c_str();
  sub_options.Config.DeliverPolicy = js_DeliverAll;
  sub_options.Config.AckPolicy = js_AckExplicit;  // a work-queue stream takes no other
  // Redelivery would only repeat frames out of order: the acknowledgement
  // comes retain_s after receipt, so the wait is well above it.
  sub_options.Config.AckWait = static_cast<int64_t>(std::llround((4 * options_.retain_s + 60) * 1e9));
  sub_options.Config.MaxAckPending = options_.max_ack_pending;
  auto state = std::make_shared<Partition>();
  state->id = partition;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s = js_PullSubscribe(&state->sub, client_.jetstream(), filter.c_str(), name.c_str(), nullptr, &sub_options, &code);
  if (s != NATS_OK) {
    ++counters_.errors;
    spdlog::error("frame consumer: partition {}: {}", partition,
                  jetstream_error("creating consumer " + name, s, static_cast<int>(code)));
    return;
  }
  state->active = true;
  {
    std::lock_guard<std::mutex> lock(partitions_mu_);
    partitions_[partition] = state;
    counters_.partitions = static_cast<std::uint32_t>(partitions_.size());
  }
  ++counters_.started;
  spdlog::info("frame consumer: partition {} started", partition);
}

void FrameConsumer::stop(std::uint32_t partition) {
  std::shared_ptr<Partition> state;
  {
    std::lock_guard<std::mutex> lock(partitions_mu_);
    const auto it = partitions_.find(partition);
    if (it == partitions_.end()) return;
    state = it->second;
    partitions_.erase(it);
    counters_.partitions = static_cast<std::uint32_t>(partitions_.size());
  }
  std::lock_guard<std::mutex> lock(state->mu);
  state->active = false;
  state->unacked.clear();
  natsSubscription_Unsubscribe(state->sub);
  natsSubscription_Destroy(state->sub);
  state->sub = nullptr;
  const std::string name = consumer_name(partition);
  const natsStatus s = js_DeleteConsumer(client_.jetstream(), options_.stream.c_str(), name.c_str(), nullptr, nullptr);
  if (s != NATS_OK && s != NATS_NOT_FOUND) ++counters_.errors;
  ++counters_.stopped;
  spdlog::info("frame consumer: partition {} stopped", partition);
}

void FrameConsumer::stop_all() {
  std::vector<std::uint32_t> held;
  {
    std::lock_guard<std::mutex> lock(partitions_mu_);
    for (const auto& [partition, state] : partitions_) held.push_back(partition);
  }
  for (const std::uint32_t partition : held) stop(partition);
}

std::size_t FrameConsumer::fetch(Partition& partition) {
  std::lock_guard<std::mutex> lock(partition.mu);
  if (!partition.active) return 0;
  jsFetchRequest request;
  jsFetchRequest_Init(&request);
  request.Batch = options_.batch;
  request.NoWait = true;
  request.Expires = 500'000'000;  // ns: the request's lifetime at the server
  natsMsgList list{};
  const natsStatus s = natsSubscription_FetchRequest(&list, partition.sub, &request);
  if (s != NATS_OK && s != NATS_NOT_FOUND && s != NATS_TIMEOUT) {
    ++counters_.errors;
    natsMsgList_Destroy(&list);
    return 0;
  }
  const double received = now_s();
  const int count = list.Count;
  std::size_t frames = 0;
  for (int i = 0; i < count; ++i) {
    natsMsg* msg = list.Msgs[i];
    const auto* data = reinterpret_cast<const std::uint8_t*>(natsMsg_GetData(msg));
    const auto size = static_cast<std::size_t>(natsMsg_GetDataLength(msg));
    if (is_batch_subject(natsMsg_GetSubject(msg))) {
      bool malformed = false;
      frames += for_each_frame_record(
          data, size, [&](const std::uint8_t* frame, std::size_t bytes) { on_frame_(partition.id, frame, bytes); },
          malformed);
      if (malformed) counters_.malformed_batches.fetch_add(1, std::memory_order_relaxed);
    } else {
      on_frame_(partition.id, data, size);
      ++frames;
    }
    // A malformed batch is acknowledged too: reading it again would not mend it.
    if (const char* reply = natsMsg_GetReply(msg)) partition.unacked.emplace_back(received, reply);
  }
  counters_.frames.fetch_add(frames, std::memory_order_relaxed);
  counters_.messages.fetch_add(static_cast<std::uint64_t>(count), std::memory_order_relaxed);
  natsMsgList_Destroy(&list);
  ack_due(partition, received);
  return frames;
}

void FrameConsumer::ack_due(Partition& partition, double now) {
  std::uint64_t acked = 0;
  while (!partition.unacked.empty() && partition.unacked.front().first <= now - options_.retain_s) {
    // What natsMsg_Ack sends, without keeping the message: "+ACK" to its
    // reply subject.
    if (natsConnection_PublishString(client_.connection(), partition.unacked.front().second.c_str(), "+ACK") ==
        NATS_OK)
      ++acked;
    else
      ++counters_.errors;
    partition.unacked.pop_front();
  }
  counters_.acks.fetch_add(acked, std::memory_order_relaxed);
}

void FrameConsumer::run() {
  std::vector<std::shared_ptr<Partition>> sweep;
  while (!stopping_) {
    sweep.clear();
    {
      std::lock_guard<std::mutex> lock(partitions_mu_);
      for (const auto& [id, state] : partitions_) sweep.push_back(state);
    }
    std::size_t frames = 0;
    for (const auto& state : sweep) {
      frames += fetch(*state);
      if (stopping_) return;
    }
    if (frames == 0) {
      // Nothing anywhere: what is due is still acknowledged, then a short
      // pause before the next sweep.
      const double now = now_s();
      for (const auto& state : sweep) {
        std::lock_guard<std::mutex> lock(state->mu);
        if (state->active) ack_due(*state, now);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(sweep.empty() ? 50 : 2));
    }
  }
}

nlohmann::json FrameConsumer::counters_json() const {
  return {{"partitions", counters_.partitions.load()},
          {"frames", counters_.frames.load()},
          {"messages", counters_.messages.load()},
          {"malformed_batches", counters_.malformed_batches.load()},
          {"acks", counters_.acks.load()},
          {"started", counters_.started.load()},
          {"stopped", counters_.stopped.load()},
          {"errors", counters_.errors.load()}};
}

}  // namespace gw::cluster
