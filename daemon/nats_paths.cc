#include "daemon/nats_paths.h"

#include <spdlog/spdlog.h>

#include "cluster/alert_publisher.h"
#include "cluster/frame_consumer.h"
#include "cluster/nats_client.h"
#include "cluster/partition_leases.h"

namespace gw::daemon {

namespace {

class NatsFrameSource final : public StreamFrameSource {
 public:
  NatsFrameSource(const config::NatsConfig& nats, Ingest& ingest) {
    cluster::NatsClientOptions client_options;
    client_options.url = nats.url;
    client_ = std::make_unique<cluster::NatsClient>(client_options);
    // One id for the leases and the consumers' names.
    const std::string worker_id = nats.worker_id.empty() ? cluster::default_worker_id() : nats.worker_id;
    cluster::FrameConsumerOptions consumer_options;
    consumer_options.worker_id = worker_id;
    consumer_options.stream = nats.frames_stream;
    consumer_options.subject = nats.frames_subject;
    consumer_options.retain_s = nats.retain_s;
    consumer_ = std::make_unique<cluster::FrameConsumer>(
        *client_, consumer_options,
        [&ingest](std::uint32_t, const std::uint8_t* data, std::size_t size) { ingest.queue_stream_frame(data, size); });
    cluster::PartitionLeasesOptions lease_options;
    lease_options.bucket = nats.leases_bucket;
    lease_options.worker_id = worker_id;
    lease_options.partitions = static_cast<std::uint32_t>(nats.partitions);
    lease_options.ttl_s = nats.lease_ttl_s;
    lease_options.replicas = nats.replicas;
    leases_ = std::make_unique<cluster::PartitionLeases>(
        *client_, lease_options, [this](std::uint32_t p) { consumer_->start(p); },
        [this](std::uint32_t p) { consumer_->stop(p); });
    spdlog::info("ingest.nats: worker {} of {} ({} partitions of stream {}), holds {} now",
                 leases_->counters_json()["worker"].get<std::string>(), nats.url, nats.partitions,
                 nats.frames_stream, leases_->held().size());
  }
  ~NatsFrameSource() override { stop(); }

  void stop() override {
    leases_->stop();
    consumer_->stop_all();
  }

  nlohmann::json counters_json() const override {
    return {{"leases", leases_->counters_json()}, {"consumer", consumer_->counters_json()}};
  }

 private:
  std::unique_ptr<cluster::NatsClient> client_;
  std::unique_ptr<cluster::FrameConsumer> consumer_;  // before the leases: their callbacks use it
  std::unique_ptr<cluster::PartitionLeases> leases_;
};

class NatsAlertOutput final : public StreamAlertOutput {
 public:
  explicit NatsAlertOutput(const cluster::AlertPublisherOptions& options) : publisher_(options) {}
  void offer(const std::string& topic, const std::string& body) override { publisher_.offer(topic, body); }
  bool flush(double timeout_s) override { return publisher_.flush(timeout_s); }
  nlohmann::json counters_json() const override { return publisher_.counters_json(); }

 private:
  cluster::AlertPublisher publisher_;
};

}  // namespace

std::unique_ptr<StreamFrameSource> make_stream_frame_source(const config::NatsConfig& nats, Ingest& ingest) {
  return std::make_unique<NatsFrameSource>(nats, ingest);
}

std::unique_ptr<StreamAlertOutput> make_stream_alert_output(const config::NatsConfig& nats, double event_bucket_s) {
  if (!nats.enabled || nats.alerts_stream.empty()) return nullptr;
  cluster::AlertPublisherOptions options;
  options.url = nats.url;
  options.stream = nats.alerts_stream;
  options.subject = nats.alerts_subject;
  options.id_bucket_s = event_bucket_s;
  options.duplicate_window_s = nats.alert_dedup_window_s;
  options.replicas = nats.replicas;
  auto output = std::make_unique<NatsAlertOutput>(options);
  spdlog::info("alerts also to {} stream {} ({}.<severity>.<wearer>)", nats.url, nats.alerts_stream,
               nats.alerts_subject);
  return output;
}

}  // namespace gw::daemon
