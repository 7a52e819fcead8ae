#include "cluster/nats_client.h"

#include <nats/nats.h>

#include <cmath>

#include "common/error.h"

namespace gw::cluster {

std::string nats_error(int status) {
  std::string text = natsStatus_GetText(static_cast<natsStatus>(status));
  const char* last = nats_GetLastError(nullptr);
  if (last && *last && text.find(last) == std::string::npos) text += ": " + std::string(last);
  return text;
}

std::string jetstream_error(const std::string& what, int status, int jetstream_code) {
  return what + ": " + nats_error(status) +
         (jetstream_code ? " (JetStream error " + std::to_string(jetstream_code) + ")" : "");
}

NatsClient::NatsClient(const NatsClientOptions& options) : url_(options.url) {
  natsOptions* opts = nullptr;
  natsStatus s = natsOptions_Create(&opts);
  if (s == NATS_OK) s = natsOptions_SetURL(opts, url_.c_str());
  if (s == NATS_OK) s = natsOptions_SetTimeout(opts, static_cast<int64_t>(options.connect_timeout_s * 1000));
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts, -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(opts, 500);
  if (s == NATS_OK && options.shared_delivery) s = natsOptions_UseGlobalMessageDelivery(opts, true);
  if (s == NATS_OK) s = natsConnection_Connect(&connection_, opts);
  natsOptions_Destroy(opts);
  if (s != NATS_OK) throw Error("nats " + url_ + ": cannot connect: " + nats_error(s));
  jsOptions js_options;
  jsOptions_Init(&js_options);
  if (options.max_pending_publishes > 0) {
    js_options.PublishAsync.MaxPending = static_cast<int64_t>(options.max_pending_publishes);
    js_options.PublishAsync.AckHandler = options.on_publish_ack;
    js_options.PublishAsync.AckHandlerClosure = options.on_publish_ack_closure;
    js_options.PublishAsync.StallWait = 1;  // ms
  }
  s = natsConnection_JetStream(&js_, connection_, &js_options);
  if (s != NATS_OK) {
    natsConnection_Destroy(connection_);
    throw Error("nats " + url_ + ": no JetStream context: " + nats_error(s));
  }
}

void ensure_stream(const NatsClient& client, const StreamSpec& spec) {
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&info, client.jetstream(), spec.name.c_str(), nullptr, &code);
  if (s == NATS_NOT_FOUND) {
    const char* subject_list[] = {spec.subjects.c_str()};
    jsStreamConfig config;
    jsStreamConfig_Init(&config);
    config.Name = spec.name.c_str();
    config.Subjects = subject_list;
    config.SubjectsLen = 1;
    config.Storage = js_FileStorage;
    config.Retention = spec.work_queue ? js_WorkQueuePolicy : js_LimitsPolicy;
    config.MaxAge = static_cast<int64_t>(std::llround(spec.max_age_s * 1e9));
    if (spec.duplicate_window_s > 0)
      config.Duplicates = static_cast<int64_t>(std::llround(spec.duplicate_window_s * 1e9));
    config.Replicas = spec.replicas;
    code = static_cast<jsErrCode>(0);
    s = js_AddStream(&info, client.jetstream(), &config, nullptr, &code);
  }
  jsStreamInfo_Destroy(info);
  if (s != NATS_OK)
    throw Error(jetstream_error("nats " + client.url() + ": stream " + spec.name, s, static_cast<int>(code)));
}

bool NatsClient::wait_for_publishes(double timeout_s) const {
  jsPubOptions options;
  jsPubOptions_Init(&options);
  options.MaxWait = static_cast<int64_t>(std::llround(timeout_s * 1000));
  return js_PublishAsyncComplete(js_, &options) == NATS_OK;
}

NatsClient::~NatsClient() {
  jsCtx_Destroy(js_);
  natsConnection_Close(connection_);
  natsConnection_Destroy(connection_);
}

}  // namespace gw::cluster
