// The daemon's side of the JetStream paths (docs/scale.md), made from the
// config's `nats:` section:
//   - StreamFrameSource (ingest.nats): this daemon as one of the workers
//     that share the frame stream's partitions: leases
//     (cluster/partition_leases.h), one consumer per partition held
//     (cluster/frame_consumer.h), every frame through
//     Ingest::queue_stream_frame into the same frame queue as UDP and TCP.
//   - StreamAlertOutput (nats.alerts_stream set): every committed alert to
//     the alert stream with its message id (cluster/alert_publisher.h).
// A build without libnats has neither: the factories throw gw::Error when
// the config asks for them.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "daemon/ingest.h"

namespace gw::daemon {

class StreamFrameSource {
 public:
  virtual ~StreamFrameSource() = default;
  // Releases every partition (its next holder reads its unacknowledged
  // frames again) and stops consuming. Idempotent; any thread.
  virtual void stop() = 0;
  // {leases: {...}, consumer: {...}}.
  virtual nlohmann::json counters_json() const = 0;
};

// Connects, creates the lease bucket when missing and takes this worker's
// share of the partitions before it returns. Throws gw::Error (NATS not
// reachable, no libnats).
std::unique_ptr<StreamFrameSource> make_stream_frame_source(const config::NatsConfig& nats, Ingest& ingest);

class StreamAlertOutput {
 public:
  virtual ~StreamAlertOutput() = default;
  // The sink's committed message (topic, JSON); alerts only. Never blocks.
  virtual void offer(const std::string& topic, const std::string& body) = 0;
  // Waits up to `timeout_s` for pending acknowledgements; true when none is left.
  virtual bool flush(double timeout_s) = 0;
  // {published, stored, duplicates, failed, dropped, pending}.
  virtual nlohmann::json counters_json() const = 0;
};

// Null when nats is absent or alerts_stream is empty. The message id's
// bucket is the daemon's event bucket (dedup.bucket_s), so the stream keeps
// one alert per event key as each daemon's own dedup does. Throws gw::Error
// (NATS or the stream not reachable, no libnats).
std::unique_ptr<StreamAlertOutput> make_stream_alert_output(const config::NatsConfig& nats, double event_bucket_s);

}  // namespace gw::daemon
