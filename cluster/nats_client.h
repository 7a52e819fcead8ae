// One connection to a NATS server and its JetStream context, shared by the
// parts of the JetStream paths (cluster/): the frame publisher, the
// partition leases, the frame consumer and the alert publisher.
//
// The connection reconnects for ever (every 500 ms) once made; what each
// part does while it is down is that part's contract.
//
// Thread safety: the NATS C client's connection and context may be used from
// any thread; the object itself is not copied or moved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

struct __natsConnection;
struct __jsCtx;
struct __natsMsg;
struct jsPubAck;
struct jsPubAckErr;

namespace gw::cluster {

struct NatsClientOptions {
  std::string url = "nats://127.0.0.1:4222";
  double connect_timeout_s = 5;
  // Subscriptions' callbacks on the client's shared pool of delivery
  // threads rather than one thread each (a worker subscribes once per
  // partition it holds). Each subscription's messages stay in order.
  bool shared_delivery = false;
  // Asynchronous JetStream publishing (js_PublishAsync): at most
  // `max_pending_publishes` await their acknowledgement, and a publish beyond
  // them fails after about a millisecond (the caller drops and counts) rather
  // than wait; each outcome goes to `on_publish_ack` on the client's thread,
  // which owns the message. 0 = the client's defaults.
  std::size_t max_pending_publishes = 0;
  void (*on_publish_ack)(__jsCtx*, __natsMsg*, jsPubAck*, jsPubAckErr*, void* closure) = nullptr;
  void* on_publish_ack_closure = nullptr;
};

class NatsClient {
 public:
  // Connects and opens the JetStream context. Throws gw::Error naming the
  // URL and the client's reason.
  explicit NatsClient(const NatsClientOptions& options);
  ~NatsClient();  // closes the connection (pending publishes are the owner's to flush first)
  NatsClient(const NatsClient&) = delete;
  NatsClient& operator=(const NatsClient&) = delete;

  // Waits up to `timeout_s` for every asynchronous JetStream publish's
  // acknowledgement; true when none is pending.
  bool wait_for_publishes(double timeout_s) const;

  __natsConnection* connection() const { return connection_; }
  __jsCtx* jetstream() const { return js_; }
  const std::string& url() const { return url_; }

 private:
  std::string url_;
  __natsConnection* connection_ = nullptr;
  __jsCtx* js_ = nullptr;
};

// A JetStream stream as the JetStream paths create it: file storage.
struct StreamSpec {
  std::string name;
  std::string subjects;             // one subject filter, e.g. "gw.frames.>"
  bool work_queue = false;          // true: a message goes once a consumer acknowledges it
  double max_age_s = 0;             // 0 = no limit
  double duplicate_window_s = 0;    // 0 = the server's default (2 min)
  int replicas = 1;
};

// Creates the stream when the server has none of that name; an existing one
// is used as it is. Throws gw::Error naming the stream and the reason.
void ensure_stream(const NatsClient& client, const StreamSpec& spec);

// The client's text for `status` (a natsStatus), with the thread's last
// error detail when it adds something.
std::string nats_error(int status);

// A stream's or consumer's failure as "<what>: <reason> (JetStream error N)".
std::string jetstream_error(const std::string& what, int status, int jetstream_code);

}  // namespace gw::cluster
