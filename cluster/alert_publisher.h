// Alerts to a JetStream stream (docs/scale.md): every committed alert, as
// the ZeroMQ publisher sends it, also goes to the stream `stream`, subject
// "<subject>.<severity>.<wearer>", with the message id
// "<wearer>.<pattern>.<bucket>", bucket = floor(t_end / id_bucket_s) of the
// alert's device time (the daemon passes its event bucket, dedup.bucket_s:
// the key its own de-duplication uses). When a worker takes over a partition it reads the
// last retain_s of frames again (cluster/frame_consumer.h) and raises again
// the alerts its dead predecessor already sent; they carry the same id, and
// JetStream's duplicate window (`duplicate_window_s`) stores each once.
// Events (gait minutes, lifecycle) are not sent: they stay in each
// worker's store and on its ZeroMQ publisher.
//
// The stream is created when missing: subjects "<subject>.>", file
// storage, limits retention with max_age_s. Bounded like the frame
// publisher: at most max_pending publishes await their acknowledgement,
// beyond it an alert is dropped and counted (it is in the worker's SQLite
// store regardless).
//
// Thread safety: offer() from one thread (the sink's); counters from any.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cluster/nats_client.h"

namespace gw::cluster {

struct AlertPublisherOptions {
  std::string url = "nats://127.0.0.1:4222";
  std::string stream = "GW_ALERTS";
  std::string subject = "gw.alerts";
  double id_bucket_s = 5;
  double duplicate_window_s = 120;
  double max_age_s = 7 * 86400;
  int replicas = 1;
  std::size_t max_pending = 4096;
};

struct AlertPublisherCounters {
  std::atomic<std::uint64_t> published{0};   // handed to the client
  std::atomic<std::uint64_t> stored{0};      // acknowledged as new
  std::atomic<std::uint64_t> duplicates{0};  // acknowledged as a duplicate of an id already stored
  std::atomic<std::uint64_t> failed{0};      // refused by JetStream
  std::atomic<std::uint64_t> dropped{0};     // not published (pending full, the client refused, not an alert's JSON)
};

// The message id of an alert (its published JSON): "<wearer>.<pattern>.<bucket>".
std::string alert_message_id(const nlohmann::json& alert, double id_bucket_s);

class AlertPublisher {
 public:
  // Connects and makes sure the stream exists; throws gw::Error naming the
  // URL or the stream.
  explicit AlertPublisher(const AlertPublisherOptions& options);
  ~AlertPublisher();  // waits up to 2 s for pending acknowledgements
  AlertPublisher(const AlertPublisher&) = delete;
  AlertPublisher& operator=(const AlertPublisher&) = delete;

  // The sink's committed message: `topic` "alert.<severity>.<wearer>." and
  // the alert's JSON go to the stream; any other topic is ignored.
  void offer(const std::string& topic, const std::string& body);
  bool flush(double timeout_s);
  // {published, stored, duplicates, failed, dropped, pending}.
  nlohmann::json counters_json() const;

 private:
  AlertPublisherOptions options_;
  AlertPublisherCounters counters_;
  std::unique_ptr<NatsClient> client_;
};

}  // namespace gw::cluster
