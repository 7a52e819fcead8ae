#include "cluster/frame_publisher.h"

#include <nats/nats.h>

#include <cmath>

#include "cluster/partition.h"
#include "common/error.h"

namespace gw::cluster {

namespace {

std::string nats_error(natsStatus status) {
  std::string text = natsStatus_GetText(status);
  const char* last = nats_GetLastError(nullptr);
  if (last && *last && text.find(last) == std::string::npos) text += ": " + std::string(last);
  return text;
}

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
  natsOptions* opts = nullptr;
  natsStatus s = natsOptions_Create(&opts);
  if (s == NATS_OK) s = natsOptions_SetURL(opts, options_.url.c_str());
  if (s == NATS_OK) s = natsOptions_SetTimeout(opts, static_cast<int64_t>(options_.connect_timeout_s * 1000));
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts, -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(opts, 500);
  if (s == NATS_OK) s = natsConnection_Connect(&connection_, opts);
  natsOptions_Destroy(opts);
  if (s != NATS_OK) throw Error("nats " + options_.url + ": cannot connect: " + nats_error(s));

  jsOptions js_options;
  jsOptions_Init(&js_options);
  js_options.PublishAsync.MaxPending = static_cast<int64_t>(options_.max_pending);
  js_options.PublishAsync.AckHandler = count_ack;
  js_options.PublishAsync.AckHandlerClosure = &counters_;
  js_options.PublishAsync.StallWait = 1;  // ms: a full window drops the frame rather than wait
  s = natsConnection_JetStream(&js_, connection_, &js_options);
  if (s != NATS_OK) {
    natsConnection_Destroy(connection_);
    throw Error("nats " + options_.url + ": no JetStream context: " + nats_error(s));
  }

  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  s = js_GetStreamInfo(&info, js_, options_.stream.c_str(), nullptr, &code);
  if (s == NATS_NOT_FOUND) {
    const std::string subjects = options_.subject + ".>";
    const char* subject_list[] = {subjects.c_str()};
    jsStreamConfig config;
    jsStreamConfig_Init(&config);
    config.Name = options_.stream.c_str();
    config.Subjects = subject_list;
    config.SubjectsLen = 1;
    config.Storage = js_FileStorage;
    config.Retention = js_WorkQueuePolicy;
    config.MaxAge = static_cast<int64_t>(std::llround(options_.max_age_s * 1e9));
    config.Replicas = options_.replicas;
    s = js_AddStream(&info, js_, &config, nullptr, &code);
  }
  jsStreamInfo_Destroy(info);
  if (s != NATS_OK) {
    jsCtx_Destroy(js_);
    natsConnection_Destroy(connection_);
    throw Error("nats " + options_.url + ": stream " + options_.stream + ": " + nats_error(s) +
                (code ? " (JetStream error " + std::to_string(static_cast<int>(code)) + ")" : ""));
  }
}

FramePublisher::~FramePublisher() {
  flush(2.0);
  jsCtx_Destroy(js_);
  natsConnection_Close(connection_);
  natsConnection_Destroy(connection_);
}

bool FramePublisher::publish(std::uint32_t wearer, const std::uint8_t* data, std::size_t size) {
  const std::string subject = frame_subject(options_.subject, partition_of(wearer, options_.partitions), wearer);
  const natsStatus s = js_PublishAsync(js_, subject.c_str(), data, static_cast<int>(size), nullptr);
  if (s != NATS_OK) {
    counters_.dropped.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  counters_.published.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool FramePublisher::flush(double timeout_s) {
  jsPubOptions options;
  jsPubOptions_Init(&options);
  options.MaxWait = static_cast<int64_t>(std::llround(timeout_s * 1000));
  return js_PublishAsyncComplete(js_, &options) == NATS_OK;
}

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
