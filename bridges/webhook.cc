#include "bridges/webhook.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

#include "common/bounded_queue.h"
#include "common/error.h"
#include "common/thread_name.h"

namespace gw::bridges {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;

constexpr auto kSenderPoll = std::chrono::milliseconds(100);

struct Message {
  std::string topic;
  std::string body;
};

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

// Worth another try: the endpoint (or the way to it) may come back.
bool transient(int status) { return status == 0 || status == 408 || status == 429 || status >= 500; }

}  // namespace

struct WebhookBridge::Impl {
  Impl(WebhookOptions opts, HttpUrl parsed)
      : options(std::move(opts)),
        url(std::move(parsed)),
        queue(options.max_queued, OverflowPolicy::kDropOldest) {}

  // The HTTP status of one POST, or 0 when none came (`error` says why).
  int post(const Message& message, std::string& error) {
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

  // Waits `pause`, or less when stop() is called; false when the stop's
  // deadline has passed.
  bool back_off(std::chrono::milliseconds pause) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, pause, [&] { return stopping; });
    return !(stopping && Clock::now() >= stop_deadline);
  }

  bool past_stop_deadline() {
    std::lock_guard<std::mutex> lock(mu);
    return stopping && Clock::now() >= stop_deadline;
  }

  void send_until_stopped() {
    while (true) {
      std::optional<Message> message = queue.pop_for(kSenderPoll);
      if (!message) {
        if (queue_closed.load()) return;
        continue;
      }
      sending = true;
      deliver(*message);
      sending = false;
      if (past_stop_deadline()) return;
    }
  }

  void deliver(const Message& message) {
    auto pause = to_ms(options.retry_initial_s);
    for (int attempt = 1;; ++attempt) {
      std::string error;
      const int status = post(message, error);
      if (status >= 200 && status < 300) {
        ++delivered;
        return;
      }
      const std::string why =
          status == 0 ? error : "HTTP " + std::to_string(status);
      if (!transient(status)) {
        ++failed;
        spdlog::error("webhook: {} refused the {} message ({}); dropped", options.url,
                      message.topic, why);
        return;
      }
      if (attempt >= options.max_attempts) {
        ++failed;
        spdlog::error("webhook: {} failed {} times for the {} message (last: {}); dropped",
                      options.url, attempt, message.topic, why);
        return;
      }
      if (attempt == 1)
        spdlog::warn("webhook: {} failed for the {} message ({}); retrying", options.url,
                     message.topic, why);
      if (!back_off(pause)) {
        ++dropped;
        return;
      }
      pause = std::min(pause * 2, to_ms(options.retry_max_s));
      ++retries;
    }
  }

  const WebhookOptions options;
  const HttpUrl url;
  BoundedQueue<Message> queue;
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;  // guarded by mu
  Clock::time_point stop_deadline = Clock::time_point::max();  // guarded by mu
  std::atomic<bool> queue_closed{false};
  std::atomic<bool> sending{false};
  std::atomic<std::uint64_t> offered{0};
  std::atomic<std::uint64_t> delivered{0};
  std::atomic<std::uint64_t> retries{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<std::uint64_t> dropped{0};  // besides the queue's own count
  std::mutex stop_mu;
  bool stopped = false;  // guarded by stop_mu
  std::thread sender;
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
  impl_->sender = std::thread([impl = impl_.get()] {
    set_thread_name("gw-webhook");
    impl->send_until_stopped();
  });
}

WebhookBridge::~WebhookBridge() { stop(); }

void WebhookBridge::offer(const std::string& publisher_topic, const std::string& body) {
  const auto& topics = impl_->options.topics;
  const bool wanted = std::any_of(topics.begin(), topics.end(), [&](const std::string& prefix) {
    return publisher_topic.rfind(prefix, 0) == 0;
  });
  if (!wanted) return;
  ++impl_->offered;
  impl_->queue.push({publisher_topic, body});
}

WebhookCounters WebhookBridge::counters() const {
  WebhookCounters c;
  c.offered = impl_->offered.load();
  c.delivered = impl_->delivered.load();
  c.retries = impl_->retries.load();
  c.failed = impl_->failed.load();
  c.dropped = impl_->dropped.load() + impl_->queue.dropped();
  c.queued = impl_->queue.size() + (impl_->sending.load() ? 1 : 0);
  return c;
}

void WebhookBridge::stop(std::chrono::milliseconds flush) {
  if (!impl_) return;
  Impl& impl = *impl_;
  std::lock_guard<std::mutex> stop_lock(impl.stop_mu);
  if (impl.stopped) return;
  impl.stopped = true;
  {
    std::lock_guard<std::mutex> lock(impl.mu);
    impl.stopping = true;
    impl.stop_deadline = Clock::now() + flush;
  }
  impl.queue.close();
  impl.queue_closed = true;
  impl.cv.notify_all();
  if (impl.sender.joinable()) impl.sender.join();
  std::vector<Message> left;
  impl.queue.drain(left);
  impl.dropped += left.size();
}

}  // namespace gw::bridges
