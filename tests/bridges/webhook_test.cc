// The webhook bridge against a real HTTP server on loopback (Boost.Beast, in
// the test): in-order delivery, retries with back-off through 503s, a
// refused message dropped at once, a dead endpoint given up after
// max_attempts, a full queue dropping the oldest.
#include "bridges/webhook.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "common/child_process.h"
#include "tests/common/http_server.h"
#include "common/error.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using gw::parse_http_url;
using gw::bridges::WebhookBridge;
using gw::bridges::WebhookOptions;
using gw::test::HttpServer;
using gw::test::Received;
using namespace std::chrono_literals;

WebhookOptions options_for(int port) {
  WebhookOptions options;
  options.url = "http://127.0.0.1:" + std::to_string(port) + "/hooks/gaitwatch";
  options.retry_initial_s = 0.02;
  options.retry_max_s = 0.1;
  options.timeout_s = 2;
  return options;
}

}  // namespace

TEST_CASE("parse_http_url: host, port and target, with https and junk refused", "[bridges]") {
  auto url = parse_http_url("http://127.0.0.1:8080/hooks/a?b=1");
  CHECK(url.host == "127.0.0.1");
  CHECK(url.port == "8080");
  CHECK(url.target == "/hooks/a?b=1");
  url = parse_http_url("http://nurse-call.local");
  CHECK(url.port == "80");
  CHECK(url.target == "/");
  url = parse_http_url("http://[::1]:9000/x");
  CHECK(url.host == "::1");
  CHECK(url.port == "9000");
  CHECK_THROWS_WITH(parse_http_url("https://x/"), Catch::Contains("proxy"));
  CHECK_THROWS_WITH(parse_http_url("ftp://x/"), Catch::Contains("http://"));
  CHECK_THROWS_WITH(parse_http_url("http://x:99999/"), Catch::Contains("port"));
  CHECK_THROWS_WITH(parse_http_url("http:///a"), Catch::Contains("host"));
}

TEST_CASE("WebhookBridge: in order through failures, with retries, topic and token", "[bridges]") {
  // The first two requests fail (503, then 500), then everything succeeds.
  HttpServer server({503, 500});
  WebhookOptions options = options_for(server.port());
  options.topics = {"alert.critical.", "event."};
  options.bearer_token = "t0ken";
  WebhookBridge bridge(options);
  bridge.offer("alert.critical.4.", "{\"seq\":1}");
  bridge.offer("alert.warning.4.", "{\"seq\":2}");  // not a wanted topic
  bridge.offer("event.alert_acknowledged.4.", "{\"id\":7}");
  bridge.offer("alert.critical.5.", "{\"seq\":3}");
  REQUIRE(server.wait_for_count(5, 10s));  // 2 failed tries + 3 deliveries
  bridge.stop();
  const auto got = server.received();
  REQUIRE(got.size() == 5);
  CHECK(got[0].body == "{\"seq\":1}");
  CHECK(got[1].body == "{\"seq\":1}");
  CHECK(got[2].body == "{\"seq\":1}");
  CHECK(got[3].body == "{\"id\":7}");
  CHECK(got[3].topic == "event.alert_acknowledged.4.");
  CHECK(got[4].body == "{\"seq\":3}");
  for (const Received& r : got) {
    CHECK(r.target == "/hooks/gaitwatch");
    CHECK(r.authorization == "Bearer t0ken");
    CHECK(r.content_type == "application/json");
  }
  const auto c = bridge.counters();
  CHECK(c.offered == 3);
  CHECK(c.delivered == 3);
  CHECK(c.retries == 2);
  CHECK(c.failed == 0);
  CHECK(c.dropped == 0);
}

TEST_CASE("WebhookBridge: a refused message is dropped at once, the next goes on", "[bridges]") {
  HttpServer server({400});
  WebhookBridge bridge(options_for(server.port()));
  bridge.offer("alert.info.1.", "{\"seq\":1}");
  bridge.offer("alert.info.1.", "{\"seq\":2}");
  REQUIRE(server.wait_for_count(2, 10s));
  bridge.stop();
  const auto c = bridge.counters();
  CHECK(c.failed == 1);
  CHECK(c.delivered == 1);
  CHECK(c.retries == 0);
  CHECK(server.received()[1].body == "{\"seq\":2}");
}

TEST_CASE("WebhookBridge: a dead endpoint is given up after max_attempts, a full queue drops the "
          "oldest",
          "[bridges]") {
  WebhookOptions options = options_for(gw::free_port(false));  // nothing listens there
  options.max_attempts = 3;
  options.max_queued = 2;
  WebhookBridge bridge(options);
  for (int i = 1; i <= 6; ++i) bridge.offer("alert.critical.1.", "{\"seq\":" + std::to_string(i) + "}");
  const auto start = std::chrono::steady_clock::now();
  while (bridge.counters().queued > 0 && std::chrono::steady_clock::now() - start < 10s)
    std::this_thread::sleep_for(10ms);
  bridge.stop(100ms);
  const auto c = bridge.counters();
  CHECK(c.offered == 6);
  CHECK(c.delivered == 0);
  // Every message is accounted for: failed after its attempts, or dropped.
  CHECK(c.failed + c.dropped == 6);
  // The queue held 2 (and the sender perhaps one more): those failed after
  // their attempts, the oldest of the burst were dropped.
  CHECK(c.failed >= 2);
  CHECK(c.dropped >= 3);
  CHECK(c.retries == 2 * c.failed);  // max_attempts 3: two repeats each
  CHECK(c.queued == 0);
}

TEST_CASE("WebhookBridge: invalid options are refused with the option named", "[bridges]") {
  WebhookOptions options = options_for(80);
  options.max_attempts = 0;
  CHECK_THROWS_WITH(WebhookBridge(options), Catch::Contains("max_attempts"));
  options = options_for(80);
  options.topics = {"stats."};
  CHECK_THROWS_WITH(WebhookBridge(options), Catch::Contains("stats."));
  options = options_for(80);
  options.url = "https://example.org/";
  CHECK_THROWS_WITH(WebhookBridge(options), Catch::Contains("https"));
}
