#include "cluster/alert_publisher.h"

#include <nats/nats.h>

#include <cmath>

#include "common/error.h"

namespace gw::cluster {

namespace {

void count_ack(jsCtx*, natsMsg* msg, jsPubAck* ack, jsPubAckErr* error, void* closure) {
  auto* counters = static_cast<AlertPublisherCounters*>(closure);
  if (ack && ack->Duplicate) counters->duplicates.fetch_add(1, std::memory_order_relaxed);
  else if (ack) counters->stored.fetch_add(1, std::memory_order_relaxed);
  else if (error) counters->failed.fetch_add(1, std::memory_order_relaxed);
  natsMsg_Destroy(msg);
}

}  // namespace

std::string alert_message_id(const nlohmann::json& alert, double id_bucket_s) {
  const auto bucket = static_cast<long long>(std::floor(alert.at("t_end").get<double>() / id_bucket_s));
  return std::to_string(alert.at("wearer").get<std::uint32_t>()) + "." + alert.at("pattern").get<std::string>() +
         "." + std::to_string(bucket);
}

AlertPublisher::AlertPublisher(const AlertPublisherOptions& options) : options_(options) {
  if (!(options_.id_bucket_s > 0)) throw Error("alert publisher: id_bucket_s must be positive");
  NatsClientOptions client_options;
  client_options.url = options_.url;
  client_options.max_pending_publishes = options_.max_pending;
  client_options.on_publish_ack = count_ack;
  client_options.on_publish_ack_closure = &counters_;
  client_ = std::make_unique<NatsClient>(client_options);
  StreamSpec spec;
  spec.name = options_.stream;
  spec.subjects = options_.subject + ".>";
  spec.max_age_s = options_.max_age_s;
  spec.duplicate_window_s = options_.duplicate_window_s;
  spec.replicas = options_.replicas;
  ensure_stream(*client_, spec);
}

AlertPublisher::~AlertPublisher() { flush(2.0); }

void AlertPublisher::offer(const std::string& topic, const std::string& body) {
  if (topic.rfind("alert.", 0) != 0) return;
  std::string id;
  std::string subject;
  try {
    const nlohmann::json alert = nlohmann::json::parse(body);
    id = alert_message_id(alert, options_.id_bucket_s);
    subject = options_.subject + "." + alert.at("severity").get<std::string>() + "." +
              std::to_string(alert.at("wearer").get<std::uint32_t>());
  } catch (const std::exception&) {
    counters_.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  jsPubOptions publish_options;
  jsPubOptions_Init(&publish_options);
  publish_options.MsgId = id.c_str();
  const natsStatus s = js_PublishAsync(client_->jetstream(), subject.c_str(), body.data(),
                                       static_cast<int>(body.size()), &publish_options);
  if (s != NATS_OK) {
    counters_.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  counters_.published.fetch_add(1, std::memory_order_relaxed);
}

bool AlertPublisher::flush(double timeout_s) { return client_->wait_for_publishes(timeout_s); }

nlohmann::json AlertPublisher::counters_json() const {
  const std::uint64_t published = counters_.published.load(), stored = counters_.stored.load(),
                      duplicates = counters_.duplicates.load(), failed = counters_.failed.load();
  return {{"published", published},
          {"stored", stored},
          {"duplicates", duplicates},
          {"failed", failed},
          {"dropped", counters_.dropped.load()},
          {"pending", published - std::min(published, stored + duplicates + failed)}};
}

}  // namespace gw::cluster
