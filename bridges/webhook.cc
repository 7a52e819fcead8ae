#include "bridges/webhook.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

#include "bridges/outbox.h"
#include "common/error.h"

namespace gw::bridges {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

// Worth another try: the endpoint (or the way to it) may come back.
bool transient(int status) { return status == 0 || status == 408 || status == 429 || status >= 500; }

OutboxOptions outbox_options(const WebhookOptions& options) {
  OutboxOptions o;
  o.log_name = "webhook";
  o.thread_name = "gw-webhook";
  o.max_queued = options.max_queued;
  o.drop_hint = "is " + options.url + " reachable?";
  return o;
}

}  // namespace

struct WebhookBridge::Impl {
  Impl(WebhookOptions opts, HttpUrl parsed)
      : options(std::move(opts)),
        url(std::move(parsed)),
        outbox(outbox_options(options), [this](const OutboxMessage& m) { return deliver(m); }) {}

  // The HTTP status of one POST, or 0 when none came (`error` says why).
  int post(const OutboxMessage& message, std::string& error) {
    try {
      asio::io_context io;
      beast::tcp_stream stream(io);
      asio::ip::tcp::resolver resolver(io);
      const auto timeout = to_ms(options.timeout_s);
      stream.expires_after(timeout);
      stream.connect(resolver.resolve(url.host, url.port));
      http::request<http::string_body> request{http::verb::post, url.target, 11};
      request.set(http::field::host, url.host);
      request.set(http::field::user_agent, "gaitwatchd");
      request.set(http::field::content_type, "application/json");
      request.set("X-Gaitwatch-Topic", message.topic);
      if (!options.bearer_token.empty())
        request.set(http::field::authorization, "Bearer " + options.bearer_token);
      request.body() = message.body;
      request.prepare_payload();
      stream.expires_after(timeout);
      http::write(stream, request);
      beast::flat_buffer buffer;
      http::response<http::string_body> response;
      http::read(stream, buffer, response);
      beast::error_code ignored;
      stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
      return static_cast<int>(response.result_int());
    } catch (const std::exception& e) {
      error = e.what();
      return 0;
    }
  }

  // On the outbox's sender; a back-off ends early when the bridge stops.
  DeliveryOutcome deliver(const OutboxMessage& message) {
    auto pause = to_ms(options.retry_initial_s);
    for (int attempt = 1;; ++attempt) {
      std::string error;
      const int status = post(message, error);
      if (status >= 200 && status < 300) return DeliveryOutcome::kDelivered;
      const std::string why =
          status == 0 ? error : "HTTP " + std::to_string(status);
      if (!transient(status)) {
        spdlog::error("webhook: {} refused the {} message ({}); dropped", options.url,
                      message.topic, why);
        return DeliveryOutcome::kFailed;
      }
      if (attempt >= options.max_attempts) {
        spdlog::error("webhook: {} failed {} times for the {} message (last: {}); dropped",
                      options.url, attempt, message.topic, why);
        return DeliveryOutcome::kFailed;
      }
      if (attempt == 1)
        spdlog::warn("webhook: {} failed for the {} message ({}); retrying", options.url,
                     message.topic, why);
      if (!outbox.pause(pause)) return DeliveryOutcome::kAbandoned;
      pause = std::min(pause * 2, to_ms(options.retry_max_s));
      ++retries;
    }
  }

  const WebhookOptions options;
  const HttpUrl url;
  std::atomic<std::uint64_t> offered{0};
  std::atomic<std::uint64_t> retries{0};
  // Last: destroyed (its sender joined) before what the delivery uses.
  Outbox outbox;
};

WebhookBridge::WebhookBridge(WebhookOptions options) {
  HttpUrl url = parse_http_url(options.url);
  if (options.topics.empty()) throw Error("webhook: topics must name at least one prefix");
  for (const std::string& topic : options.topics)
    if (topic.rfind("alert.", 0) != 0 && topic.rfind("event.", 0) != 0)
      throw Error("webhook: topic '" + topic + "' must start with alert. or event.");
  if (!(options.timeout_s > 0)) throw Error("webhook: timeout_s must be > 0");
  if (!(options.retry_initial_s > 0) || options.retry_max_s < options.retry_initial_s)
    throw Error("webhook: retry_initial_s must be > 0 and <= retry_max_s");
  if (options.max_attempts < 1) throw Error("webhook: max_attempts must be >= 1");
  if (options.max_queued < 1) throw Error("webhook: max_queued must be >= 1");
  impl_ = std::make_unique<Impl>(std::move(options), std::move(url));
  impl_->outbox.start();
}

WebhookBridge::~WebhookBridge() { stop(); }

void WebhookBridge::offer(const std::string& publisher_topic, const std::string& body) {
  const auto& topics = impl_->options.topics;
  const bool wanted = std::any_of(topics.begin(), topics.end(), [&](const std::string& prefix) {
    return publisher_topic.rfind(prefix, 0) == 0;
  });
  if (!wanted) return;
  ++impl_->offered;
  impl_->outbox.push({publisher_topic, body});
}

WebhookCounters WebhookBridge::counters() const {
  WebhookCounters c;
  c.offered = impl_->offered.load();
  const OutboxCounters outbox = impl_->outbox.counters();
  c.delivered = outbox.delivered;
  c.retries = impl_->retries.load();
  c.failed = outbox.failed;
  c.dropped = outbox.dropped;
  c.queued = outbox.queued + outbox.in_hand;
  return c;
}

void WebhookBridge::stop(std::chrono::milliseconds flush) {
  if (impl_) impl_->outbox.stop(flush);
}

}  // namespace gw::bridges
