// The webhook bridge: every committed alert (and, when asked, event) is
// POSTed as JSON to an HTTP endpoint the site runs (a nurse-call gateway, a
// ticketing system, a chat relay). Headers: Content-Type application/json,
// X-Gaitwatch-Topic (the publisher topic, e.g. alert.critical.17.) and, with
// a token, Authorization: Bearer.
//
// Delivery is in order, one request at a time: a 2xx response delivers; a
// network error, a timeout, 408, 429 or 5xx is retried with back-off
// (doubling from retry_initial_s up to retry_max_s) up to max_attempts, then
// the message is dropped, logged and counted; any other status (400, 404,
// ...) drops it at once, logged (the endpoint refuses it; retrying cannot
// help). The queue is bounded: when it is full the oldest message is
// dropped, counted and logged (at most every 10 s; bridges/outbox.h). Plain
// http:// only; put a TLS-terminating proxy on the same host in front of an
// https endpoint.
//
// Thread safety: offer() and counters() from any thread, never blocking on
// the network; stop() from one thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/http_url.h"

namespace gw::bridges {

struct WebhookOptions {
  std::string url;  // http://host[:port]/path
  // Publisher topic prefixes to send ("alert.", "alert.critical.", "event.").
  std::vector<std::string> topics = {"alert."};
  std::string bearer_token;  // empty = no Authorization header
  double timeout_s = 5;      // per request: connect, send, response
  double retry_initial_s = 1;
  double retry_max_s = 60;
  int max_attempts = 10;  // per message, >= 1
  std::size_t max_queued = 1000;
};

struct WebhookCounters {
  std::uint64_t offered = 0;    // matched a topic prefix and were queued
  std::uint64_t delivered = 0;  // answered 2xx
  std::uint64_t retries = 0;    // requests repeated after a failure
  std::uint64_t failed = 0;     // dropped: refused, or out of attempts
  std::uint64_t dropped = 0;    // oldest dropped from a full queue, or left at stop
  std::uint64_t queued = 0;     // waiting now (the one being sent included)
};

class WebhookBridge {
 public:
  // Checks the options (throws gw::Error naming the bad one) and starts the
  // sender thread.
  explicit WebhookBridge(WebhookOptions options);
  ~WebhookBridge();  // stop()
  WebhookBridge(const WebhookBridge&) = delete;
  WebhookBridge& operator=(const WebhookBridge&) = delete;

  // Queues [topic, body] when the topic matches; never blocks.
  void offer(const std::string& publisher_topic, const std::string& body);
  WebhookCounters counters() const;
  // Sends what is queued for at most `flush` (a message in back-off is not
  // waited for), then joins. What is left counts as dropped. Idempotent.
  void stop(std::chrono::milliseconds flush = std::chrono::milliseconds(1000));

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gw::bridges
