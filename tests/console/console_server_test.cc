// The console's server (console/server.h) on loopback with a real users
// table in SQLite and a scripted control interface: what is public, what
// needs a session, CSRF, roles, the rate limit, the live stream, TLS.
#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/common/temp_dir.h"
#include "console/access.h"
#include "console/server.h"
#include "tests/console/http_client.h"

using namespace gw::console;
using gw::test::HttpAnswer;
using gw::test::HttpRequest;
using nlohmann::json;

namespace {

// A control interface that records each request and answers from another
// thread, as the daemon's does: alert.get of seq 404 is unknown, everything
// else echoes its request.
struct ScriptedControl {
  std::mutex mu;
  std::vector<json> requests;
  std::vector<std::thread> threads;
  ~ScriptedControl() {
    for (auto& t : threads) t.join();
  }
  ControlCall call() {
    return [this](json request, std::function<void(const json&)> reply) {
      std::lock_guard<std::mutex> lock(mu);
      requests.push_back(request);
      threads.emplace_back([request, reply] {
        if (request["args"].value("seq", 0) == 404)
          reply({{"ok", false}, {"error", {{"code", "unknown_alert"}, {"message", "no alert 404"}}}});
        else
          reply({{"ok", true}, {"result", {{"echo", request}}}});
      });
    };
  }
  std::size_t count() {
    std::lock_guard<std::mutex> lock(mu);
    return requests.size();
  }
  json last() {
    std::lock_guard<std::mutex> lock(mu);
    return requests.back();
  }
};

struct ConsoleFixture {
  gw::test::TempDir dir{"gw_console"};
  ScriptedControl control;
  std::unique_ptr<ConsoleServer> server;
  int port = 0;

  explicit ConsoleFixture(ConsoleOptions options = {}) {
    options.static_dir = std::string(GW_SOURCE_DIR) + "/console/web";
    options.users_db = dir.file("hits.db");
    {
      UserStore users(options.users_db);
      users.add("carla", Role::kCarer, "carla-password-1");
      users.add("vic", Role::kViewer, "vic-password-12");
    }
    server = std::make_unique<ConsoleServer>(options, control.call());
    port = server->port();
  }
  HttpAnswer get(const std::string& target, const std::string& cookie = "") {
    HttpRequest r;
    r.target = target;
    if (!cookie.empty()) r.headers["Cookie"] = cookie;
    return gw::test::http_call(port, r);
  }
  HttpAnswer post(const std::string& target, const json& body, const std::string& cookie = "",
                  const std::string& csrf = "") {
    HttpRequest r;
    r.method = "POST";
    r.target = target;
    r.body = body.dump();
    if (!cookie.empty()) r.headers["Cookie"] = cookie;
    if (!csrf.empty()) r.headers["X-CSRF-Token"] = csrf;
    return gw::test::http_call(port, r);
  }
  // Logs in; returns {cookie, csrf}.
  std::pair<std::string, std::string> login(const std::string& user, const std::string& password) {
    const HttpAnswer a = post("/api/login", {{"user", user}, {"password", password}});
    REQUIRE(a.status == 200);
    return {gw::test::cookie_pair(a.header("set-cookie")), json::parse(a.body)["csrf"]};
  }
};

}  // namespace

TEST_CASE("without a session only the login page and its files are served", "[console]") {
  ConsoleFixture fx;
  const HttpAnswer login_page = fx.get("/login.html");
  CHECK(login_page.status == 200);
  CHECK(login_page.header("content-type").rfind("text/html", 0) == 0);
  CHECK(login_page.header("content-security-policy").find("default-src 'self'") != std::string::npos);
  CHECK(fx.get("/static/console.js").status == 200);
  CHECK(fx.get("/static/console.css").header("content-type").rfind("text/css", 0) == 0);

  const HttpAnswer index = fx.get("/");
  CHECK(index.status == 303);
  CHECK(index.header("location") == "/login.html");
  CHECK(fx.get("/index.html").status == 303);
  for (const char* target : {"/api/alerts", "/api/wearers", "/api/health", "/api/alerts/1",
                             "/api/alerts/1/signal", "/api/events", "/api/stream", "/api/session"}) {
    INFO(target);
    const HttpAnswer a = fx.get(target);
    CHECK(a.status == 401);
    CHECK(json::parse(a.body)["error"]["code"] == "no_session");
  }
  CHECK(fx.post("/api/alerts/1/ack", json::object()).status == 401);
  CHECK(fx.get("/api/alerts", "gw_session=0123456789abcdef").status == 401);
  CHECK(fx.control.count() == 0);
  // No way out of the pages' folder.
  CHECK(fx.get("/static/../index.html").status == 404);
  CHECK(fx.get("/static/.hidden").status == 404);
  CHECK(fx.get("/etc/passwd").status == 404);
}

TEST_CASE("a login makes an HttpOnly session and changes need its CSRF token", "[console]") {
  ConsoleFixture fx;
  CHECK(fx.post("/api/login", {{"user", "carla"}, {"password", "wrong-password"}}).status == 401);
  CHECK(fx.post("/api/login", {{"user", "nobody"}, {"password", "carla-password-1"}}).status == 401);
  CHECK(fx.post("/api/login", {{"user", "carla"}}).status == 400);

  const HttpAnswer ok = fx.post("/api/login", {{"user", "carla"}, {"password", "carla-password-1"}});
  REQUIRE(ok.status == 200);
  const std::string set_cookie = ok.header("set-cookie");
  CHECK(set_cookie.find("HttpOnly") != std::string::npos);
  CHECK(set_cookie.find("SameSite=Strict") != std::string::npos);
  CHECK(set_cookie.find("Secure") == std::string::npos);  // plain HTTP here
  const std::string cookie = gw::test::cookie_pair(set_cookie);
  const json session = json::parse(fx.get("/api/session", cookie).body);
  CHECK(session["user"] == "carla");
  CHECK(session["role"] == "carer");
  const std::string csrf = session["csrf"];
  CHECK(csrf.size() == 64);

  CHECK(fx.get("/", cookie).status == 200);
  const HttpAnswer list = fx.get("/api/alerts?limit=5", cookie);
  REQUIRE(list.status == 200);
  CHECK(json::parse(list.body)["echo"] == json{{"cmd", "alerts.open"}, {"args", {{"limit", 5}}}});
  CHECK(list.header("cache-control") == "no-store");

  const std::size_t before = fx.control.count();
  CHECK(fx.post("/api/alerts/3/ack", json::object(), cookie).status == 403);
  CHECK(fx.post("/api/alerts/3/ack", json::object(), cookie, std::string(64, '0')).status == 403);
  CHECK(fx.control.count() == before);  // refused before reaching the daemon

  const HttpAnswer ack = fx.post("/api/alerts/3/ack", {{"note", "there"}}, cookie, csrf);
  REQUIRE(ack.status == 200);
  CHECK(fx.control.last() ==
        json{{"cmd", "alert.ack"}, {"args", {{"seq", 3}, {"note", "there"}, {"by", "carla"}}}});
  const HttpAnswer unknown = fx.get("/api/alerts/404", cookie);
  CHECK(unknown.status == 404);
  CHECK(json::parse(unknown.body)["error"]["code"] == "unknown_alert");

  // Logged out: the cookie opens nothing any more.
  CHECK(fx.post("/api/logout", json::object(), cookie, csrf).status == 200);
  CHECK(fx.get("/api/alerts", cookie).status == 401);
}

TEST_CASE("a viewer may read but not change, and roles and sessions follow the users table", "[console]") {
  ConsoleFixture fx;
  const auto [cookie, csrf] = fx.login("vic", "vic-password-12");
  CHECK(fx.get("/api/alerts", cookie).status == 200);
  const std::size_t before = fx.control.count();
  const HttpAnswer ack = fx.post("/api/alerts/3/ack", json::object(), cookie, csrf);
  CHECK(ack.status == 403);
  CHECK(json::parse(ack.body)["error"]["code"] == "forbidden");
  CHECK(fx.post("/api/alerts/3/mark", {{"verdict", "false"}}, cookie, csrf).status == 403);
  CHECK(fx.post("/api/wearers", {{"id", 1}, {"display_name", "A"}}, cookie, csrf).status == 403);
  CHECK(fx.control.count() == before);

  // A carer whose role is changed, or who is removed, loses the session.
  const auto [carer_cookie, carer_csrf] = fx.login("carla", "carla-password-1");
  CHECK(fx.get("/api/health", carer_cookie).status == 200);
  UserStore(fx.dir.file("hits.db")).set_role("carla", Role::kViewer);
  CHECK(fx.get("/api/health", carer_cookie).status == 401);
  const auto [again, again_csrf] = fx.login("carla", "carla-password-1");
  CHECK(json::parse(fx.get("/api/session", again).body)["role"] == "viewer");
  UserStore(fx.dir.file("hits.db")).remove("carla");
  CHECK(fx.get("/api/health", again).status == 401);
  CHECK(fx.post("/api/login", {{"user", "carla"}, {"password", "carla-password-1"}}).status == 401);
}

TEST_CASE("repeated failed logins from one address are refused for a while", "[console]") {
  ConsoleOptions options;
  options.login_max_failures = 3;
  ConsoleFixture fx(options);
  for (int i = 0; i < 3; ++i)
    CHECK(fx.post("/api/login", {{"user", "carla"}, {"password", "guess-" + std::to_string(i)}}).status == 401);
  const HttpAnswer blocked = fx.post("/api/login", {{"user", "carla"}, {"password", "carla-password-1"}});
  CHECK(blocked.status == 429);
  CHECK(std::atoi(blocked.header("retry-after").c_str()) > 0);
  const json counters = fx.server->counters_json();
  CHECK(counters["logins_failed"] == 3);
  CHECK(counters["logins_blocked"] == 1);
  CHECK(counters["logins_ok"] == 0);
}

namespace {

// Opens /api/stream with the cookie and reads until `needle` arrives or the
// time is up; returns what was read.
std::string read_stream_until(int port, const std::string& cookie, const std::string& needle,
                              const std::function<void()>& once_open) {
  namespace net = boost::asio;
  net::io_context io;
  net::ip::tcp::socket socket(io);
  socket.connect({net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  const std::string request = "GET /api/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: " + cookie + "\r\n\r\n";
  net::write(socket, net::buffer(request));
  timeval timeout{0, 200000};
  ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  std::string text;
  bool opened = false;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end && text.find(needle) == std::string::npos) {
    char buffer[4096];
    const ssize_t n = ::recv(socket.native_handle(), buffer, sizeof buffer, 0);
    if (n > 0) text.append(buffer, static_cast<std::size_t>(n));
    if (n == 0) break;
    if (!opened && text.find("retry:") != std::string::npos) {
      opened = true;
      once_open();
    }
  }
  return text;
}

}  // namespace

TEST_CASE("the live stream carries committed alerts and events to a session", "[console]") {
  ConsoleFixture fx;
  const auto [cookie, csrf] = fx.login("vic", "vic-password-12");
  const std::string text = read_stream_until(fx.port, cookie, "\"seq\":42", [&] {
    fx.server->offer("event.alert_acknowledged.7.", R"({"type":"alert_acknowledged","alert_seq":41})");
    fx.server->offer("alert.critical.7.", R"({"seq":42,"kind":"fall"})");
  });
  CHECK(text.find("HTTP/1.1 200") == 0);
  CHECK(text.find("text/event-stream") != std::string::npos);
  const auto event_at = text.find("event: event\n");
  const auto alert_at = text.find("event: alert\n");
  REQUIRE(event_at != std::string::npos);
  REQUIRE(alert_at != std::string::npos);
  CHECK(event_at < alert_at);  // in the order committed
  CHECK(text.find("data: {\"seq\":42,\"kind\":\"fall\"}\n\n") != std::string::npos);
  CHECK(fx.server->counters_json()["streams_opened"] == 1);
}

TEST_CASE("with a certificate the console speaks HTTPS and the cookie is Secure", "[console]") {
  gw::test::TempDir keys("gw_console_tls");
  const std::string cert = keys.file("console.crt"), key = keys.file("console.key");
  const std::string command = "openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -days 1 -keyout " +
                              key + " -out " + cert + " > /dev/null 2>&1";
  if (std::system(command.c_str()) != 0) {
    WARN("openssl not found: skipped");
    return;
  }
  ConsoleOptions options;
  options.tls_certificate_file = cert;
  options.tls_private_key_file = key;
  ConsoleFixture fx(options);
  CHECK(fx.server->tls());
  HttpRequest page;
  page.target = "/login.html";
  CHECK(gw::test::https_call(fx.port, page).status == 200);
  HttpRequest login;
  login.method = "POST";
  login.target = "/api/login";
  login.body = json{{"user", "carla"}, {"password", "carla-password-1"}}.dump();
  const HttpAnswer a = gw::test::https_call(fx.port, login);
  CHECK(a.status == 200);
  CHECK(a.header("set-cookie").find("; Secure") != std::string::npos);
  // Plain HTTP to the TLS port gets nothing served.
  CHECK_THROWS(gw::test::http_call(fx.port, page));
}
