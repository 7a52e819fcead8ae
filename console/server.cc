#include "console/server.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <spdlog/spdlog.h>

#include "common/error.h"
#include "common/thread_name.h"
#include "console/access.h"
#include "console/routes.h"

namespace gw::console {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = beast::http;
using net::ip::tcp;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::chrono::seconds kIdleTimeout{30};     // between requests on one connection
constexpr std::size_t kMaxRequestBody = 64 * 1024;  // the API's bodies are small JSON objects
constexpr std::size_t kMaxPendingOffers = 4096;      // committed messages not yet handed to streams
constexpr const char* kSessionCookie = "gw_session";

// Headers every answer carries: the pages load nothing from elsewhere and
// may not be framed; API answers are not cached.
template <class Body>
void common_headers(http::response<Body>& res, bool no_store) {
  res.set(http::field::server, "gaitwatchd");
  res.set("Content-Security-Policy",
          "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'");
  res.set("X-Content-Type-Options", "nosniff");
  res.set("X-Frame-Options", "DENY");
  res.set("Referrer-Policy", "no-referrer");
  if (no_store) res.set(http::field::cache_control, "no-store");
}

std::string content_type_of(const std::string& name) {
  const auto dot = name.rfind('.');
  const std::string ext = dot == std::string::npos ? "" : name.substr(dot + 1);
  if (ext == "html") return "text/html; charset=utf-8";
  if (ext == "js") return "text/javascript; charset=utf-8";
  if (ext == "css") return "text/css; charset=utf-8";
  if (ext == "svg") return "image/svg+xml";
  if (ext == "png") return "image/png";
  if (ext == "ico") return "image/x-icon";
  return "application/octet-stream";
}

// A static file's name: letters, digits, '.', '_' and '-', not starting
// with a dot (so neither ".." nor hidden files).
bool safe_file_name(const std::string& name) {
  if (name.empty() || name.front() == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string cookie_value(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    const auto semi = header.find(';');
    std::string_view item = header.substr(0, semi);
    header = semi == std::string_view::npos ? std::string_view() : header.substr(semi + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    if (item.size() > name.size() && item.substr(0, name.size()) == name && item[name.size()] == '=')
      return std::string(item.substr(name.size() + 1));
  }
  return {};
}

}  // namespace

// One answer-to-be: what a request handler needs from its connection.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual void send(http::response<http::string_body> response) = 0;
  // Turns the connection into an event stream for this session.
  virtual void begin_stream(std::string session_token) = 0;
  virtual const std::string& remote() const = 0;
};

// An open /api/stream response, as the server hands it messages.
class StreamClient {
 public:
  virtual ~StreamClient() = default;
  virtual void push(std::shared_ptr<const std::string> message) = 0;
  virtual void close() = 0;
};

struct ConsoleServer::Impl : std::enable_shared_from_this<ConsoleServer::Impl> {
  Impl(ConsoleOptions o, ControlCall c)
      : options(std::move(o)),
        control(std::move(c)),
        acceptor(io),
        users(options.users_db),
        sessions(options.session_idle, options.session_max_age, options.max_sessions),
        limiter(options.login_max_failures, options.login_window, 4096) {}

  ConsoleOptions options;
  ControlCall control;
  net::io_context io;
  std::optional<ssl::context> tls;
  tcp::acceptor acceptor;
  std::thread thread;
  UserStore users;
  SessionTable sessions;
  LoginLimiter limiter;

  // The connections open now (weak: each owns itself) and how to close
  // each, for stop() and the connection limit.
  std::vector<std::pair<std::weak_ptr<void>, std::function<void()>>> connections;
  std::vector<std::weak_ptr<StreamClient>> streams;

  std::atomic<bool> stopped{false};  // offers after stop() are dropped
  // streams.size() as of the I/O thread's last change: with no browser
  // listening, offers are not even queued.
  std::atomic<std::size_t> stream_count{0};
  std::mutex offers_mu;
  std::deque<std::shared_ptr<const std::string>> offers;
  std::uint64_t next_event_id = 1;

  struct Counters {
    std::atomic<std::uint64_t> requests{0}, connections_refused{0}, logins_ok{0},
        logins_failed{0}, logins_blocked{0}, no_session{0}, forbidden{0}, csrf_refused{0},
        streams_opened{0}, streams_refused{0}, streams_dropped{0}, offers_dropped{0},
        responses_2xx{0}, responses_3xx{0}, responses_4xx{0}, responses_5xx{0};
  } counters;

  void open();
  void accept();
  template <class C>
  void start_connection(std::shared_ptr<C> connection) {
    connections.emplace_back(connection, [weak = std::weak_ptr<C>(connection)] {
      if (const auto c = weak.lock()) c->close();
    });
    connection->start();
  }
  void handle(const std::shared_ptr<Exchange>& x, http::request<http::string_body> req);
  void login(const std::shared_ptr<Exchange>& x, const http::request<http::string_body>& req);
  void drain_offers();
  void close_all();
  std::optional<Session> session_of(const http::request<http::string_body>& req);
  bool session_still_valid(const std::string& token);

  http::response<http::string_body> json_response(const http::request<http::string_body>& req,
                                                   http::status status, const json& body) {
    http::response<http::string_body> res(status, req.version());
    common_headers(res, true);
    res.set(http::field::content_type, "application/json");
    res.body() = body.dump();
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    return res;
  }
  http::response<http::string_body> error_response(const http::request<http::string_body>& req,
                                                   http::status status, const std::string& code,
                                                   const std::string& message) {
    return json_response(req, status, {{"error", {{"code", code}, {"message", message}}}});
  }
  void count_response(http::status status) {
    const unsigned klass = static_cast<unsigned>(status) / 100;
    if (klass == 2) ++counters.responses_2xx;
    else if (klass == 3) ++counters.responses_3xx;
    else if (klass == 4) ++counters.responses_4xx;
    else ++counters.responses_5xx;
  }
};

// ---------------------------------------------------------------------------
// Connections: one template for plain TCP and TLS streams.

template <class Stream>
class Connection final : public Exchange,
                         public StreamClient,
                         public std::enable_shared_from_this<Connection<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  Connection(ConsoleServer::Impl& server, tcp::socket socket, std::string remote)
      : server_(server), stream_(make_stream(server, std::move(socket))),
        remote_(std::move(remote)), heartbeat_(server.io) {}

  void start() {
    if constexpr (kTls) {
      beast::get_lowest_layer(stream_).expires_after(kIdleTimeout);
      stream_.async_handshake(ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (!ec) self->read();
                              });
    } else {
      read();
    }
  }

  void send(http::response<http::string_body> response) override {
    server_.count_response(response.result());
    auto res = std::make_shared<http::response<http::string_body>>(std::move(response));
    http::async_write(stream_, *res,
                      [self = this->shared_from_this(), res](beast::error_code ec, std::size_t) {
                        if (ec) return self->close();
                        if (res->keep_alive()) return self->read();
                        self->close();
                      });
  }

  void begin_stream(std::string session_token) override {
    session_token_ = std::move(session_token);
    auto header = std::make_shared<http::response<http::empty_body>>(http::status::ok, 11);
    common_headers(*header, true);
    header->set(http::field::content_type, "text/event-stream");
    header->keep_alive(false);  // the body runs until either side closes
    auto serializer = std::make_shared<http::response_serializer<http::empty_body>>(*header);
    beast::get_lowest_layer(stream_).expires_never();
    server_.count_response(http::status::ok);
    http::async_write_header(
        stream_, *serializer,
        [self = this->shared_from_this(), header, serializer](beast::error_code ec, std::size_t) {
          if (ec) return self->close();
          self->streaming_ = true;
          self->push(std::make_shared<const std::string>("retry: 2000\n\n"));
          self->beat();
        });
    server_.streams.push_back(this->shared_from_this());
    server_.stream_count.store(server_.streams.size());
  }

  const std::string& remote() const override { return remote_; }

  void push(std::shared_ptr<const std::string> message) override {
    if (closed_) return;
    if (backlog_.size() >= server_.options.max_stream_backlog) {
      ++server_.counters.streams_dropped;
      spdlog::warn("console: closing the event stream of {}: {} messages behind", remote_,
                   backlog_.size());
      return close();
    }
    backlog_.push_back(std::move(message));
    if (!writing_ && streaming_) write_next();
  }

  void close() override {
    if (closed_) return;
    closed_ = true;
    heartbeat_.cancel();
    beast::get_lowest_layer(stream_).close();
  }

 private:
  static Stream make_stream(ConsoleServer::Impl& server, tcp::socket socket) {
    if constexpr (kTls)
      return Stream(std::move(socket), *server.tls);
    else
      return Stream(std::move(socket));
  }

  void read() {
    parser_.emplace();
    parser_->body_limit(kMaxRequestBody);
    parser_->header_limit(16 * 1024);
    beast::get_lowest_layer(stream_).expires_after(kIdleTimeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                       if (ec == http::error::body_limit) {
                         http::request<http::string_body> req = self->parser_->release();
                         req.keep_alive(false);
                         return self->send(self->server_.error_response(
                             req, http::status::payload_too_large, "too_large",
                             "the request body exceeds 64 KiB"));
                       }
                       if (ec) return self->close();
                       self->server_.handle(self, self->parser_->release());
                     });
  }

  void write_next() {
    if (backlog_.empty() || closed_) {
      writing_ = false;
      return;
    }
    writing_ = true;
    auto message = backlog_.front();
    net::async_write(stream_, net::buffer(*message),
                     [self = this->shared_from_this(), message](beast::error_code ec, std::size_t) {
                       if (ec) return self->close();
                       self->backlog_.pop_front();
                       self->write_next();
                     });
  }

  // Keeps proxies from timing the stream out, and ends it once its session
  // has (logout, expiry, the user removed or changed).
  void beat() {
    heartbeat_.expires_after(server_.options.stream_heartbeat);
    heartbeat_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (ec || self->closed_) return;
      if (!self->server_.session_still_valid(self->session_token_)) return self->close();
      self->push(std::make_shared<const std::string>(": ping\n\n"));
      self->beat();
    });
  }

  ConsoleServer::Impl& server_;
  Stream stream_;
  std::string remote_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  net::steady_timer heartbeat_;
  std::string session_token_;
  std::deque<std::shared_ptr<const std::string>> backlog_;
  bool streaming_ = false;
  bool writing_ = false;
  bool closed_ = false;
};

// ---------------------------------------------------------------------------

void ConsoleServer::Impl::open() {
  if (!read_file(options.static_dir + "/index.html"))
    throw Error("console.static_dir: no index.html in " + options.static_dir);
  if (!options.tls_certificate_file.empty()) {
    tls.emplace(ssl::context::tls_server);
    tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                     ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    try {
      tls->use_certificate_chain_file(options.tls_certificate_file);
      tls->use_private_key_file(options.tls_private_key_file, ssl::context::pem);
    } catch (const std::exception& e) {
      throw Error("console.tls: cannot load the certificate or key: " + std::string(e.what()));
    }
  }
  try {
    const tcp::endpoint endpoint(net::ip::make_address(options.bind), options.port);
    acceptor.open(endpoint.protocol());
    acceptor.set_option(net::socket_base::reuse_address(true));
    acceptor.bind(endpoint);
    acceptor.listen();
  } catch (const std::exception& e) {
    throw Error("console: cannot listen on " + options.bind + ":" + std::to_string(options.port) +
                ": " + e.what());
  }
  accept();
}

void ConsoleServer::Impl::accept() {
  acceptor.async_accept([self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
    if (!self->acceptor.is_open()) return;
    if (ec) {
      // Out of descriptors and the like: wait a moment rather than spin.
      spdlog::warn("console: accept failed: {}", ec.message());
      auto timer = std::make_shared<net::steady_timer>(self->io, std::chrono::milliseconds(100));
      timer->async_wait([self, timer](beast::error_code) { self->accept(); });
      return;
    }
    self->connections.erase(std::remove_if(self->connections.begin(), self->connections.end(),
                                           [](const auto& entry) { return entry.first.expired(); }),
                            self->connections.end());
    if (self->connections.size() >= self->options.max_connections) {
      ++self->counters.connections_refused;
      beast::error_code ignored;
      socket.close(ignored);
    } else {
      beast::error_code remote_ec;
      const auto peer = socket.remote_endpoint(remote_ec);
      const std::string remote = remote_ec ? "?" : peer.address().to_string();
      if (self->tls)
        self->start_connection(std::make_shared<Connection<ssl::stream<beast::tcp_stream>>>(
            *self, std::move(socket), remote));
      else
        self->start_connection(
            std::make_shared<Connection<beast::tcp_stream>>(*self, std::move(socket), remote));
    }
    self->accept();
  });
}

std::optional<Session> ConsoleServer::Impl::session_of(const http::request<http::string_body>& req) {
  const auto cookie = req.find(http::field::cookie);
  if (cookie == req.end()) return std::nullopt;
  const std::string token = cookie_value(std::string_view(cookie->value().data(), cookie->value().size()), kSessionCookie);
  if (token.empty()) return std::nullopt;
  std::optional<Session> session = sessions.find(token, Clock::now());
  if (!session) return std::nullopt;
  // The user as the store has it now: removed, or changed (password, role)
  // since the login, ends the session.
  std::optional<User> now;
  try {
    now = users.find(session->user.name);
  } catch (const std::exception& e) {
    spdlog::warn("console: cannot read the users table: {}", e.what());
    return std::nullopt;
  }
  if (!now || now->generation != session->user.generation) {
    sessions.remove(token);
    return std::nullopt;
  }
  session->user = *now;
  return session;
}

bool ConsoleServer::Impl::session_still_valid(const std::string& token) {
  http::request<http::string_body> probe;
  probe.set(http::field::cookie, std::string(kSessionCookie) + "=" + token);
  return session_of(probe).has_value();
}

void ConsoleServer::Impl::login(const std::shared_ptr<Exchange>& x,
                                const http::request<http::string_body>& req) {
  const auto now = Clock::now();
  if (const auto wait = limiter.blocked(x->remote(), now)) {
    ++counters.logins_blocked;
    auto res = error_response(req, http::status::too_many_requests, "rate_limited",
                              "too many failed logins from this address; try again in " +
                                  std::to_string(wait->count()) + " s");
    res.set(http::field::retry_after, std::to_string(wait->count()));
    return x->send(std::move(res));
  }
  const json body = json::parse(req.body(), nullptr, false);
  if (!body.is_object() || !body.contains("user") || !body["user"].is_string() ||
      !body.contains("password") || !body["password"].is_string())
    return x->send(error_response(req, http::status::bad_request, "bad_request",
                                  "send {\"user\": NAME, \"password\": TEXT}"));
  const std::string login_name = body["user"].get<std::string>();
  std::optional<User> user;
  try {
    user = users.verify(login_name, body["password"].get<std::string>());
  } catch (const std::exception& e) {
    spdlog::error("console: login: cannot read the users table: {}", e.what());
    return x->send(error_response(req, http::status::service_unavailable, "unavailable",
                                  "the users table cannot be read"));
  }
  if (!user) {
    ++counters.logins_failed;
    limiter.failed(x->remote(), now);
    spdlog::warn("console: failed login as '{}' from {}", login_name, x->remote());
    return x->send(error_response(req, http::status::unauthorized, "bad_login",
                                  "wrong user name or password"));
  }
  limiter.succeeded(x->remote());
  ++counters.logins_ok;
  const Session session = sessions.create(*user, now);
  spdlog::info("console: {} ({}) logged in from {}", user->name, name(user->role), x->remote());
  auto res = json_response(req, http::status::ok,
                           {{"user", user->name}, {"role", name(user->role)},
                            {"csrf", session.csrf}});
  res.set(http::field::set_cookie, std::string(kSessionCookie) + "=" + session.token +
                                       "; Path=/; HttpOnly; SameSite=Strict" +
                                       (tls ? "; Secure" : ""));
  x->send(std::move(res));
}

void ConsoleServer::Impl::handle(const std::shared_ptr<Exchange>& x,
                                 http::request<http::string_body> req) {
  ++counters.requests;
  const std::string target(req.target());
  const auto question = target.find('?');
  const std::string path = target.substr(0, question);
  const std::string query = question == std::string::npos ? "" : target.substr(question + 1);
  const bool get = req.method() == http::verb::get;
  const bool post = req.method() == http::verb::post;

  if (path == "/api/login") {
    if (!post)
      return x->send(error_response(req, http::status::method_not_allowed, "method", "POST only"));
    return login(x, req);
  }

  if (path.rfind("/api/", 0) == 0) {
    const std::optional<Session> session = session_of(req);
    if (!session) {
      ++counters.no_session;
      return x->send(error_response(req, http::status::unauthorized, "no_session",
                                    "log in first (POST /api/login)"));
    }
    if (!get && !post)
      return x->send(
          error_response(req, http::status::method_not_allowed, "method", "GET or POST only"));
    if (post) {
      const auto header = req.find("X-CSRF-Token");
      if (header == req.end() || !csrf_matches(*session, std::string_view(header->value().data(), header->value().size()))) {
        ++counters.csrf_refused;
        return x->send(error_response(req, http::status::forbidden, "csrf",
                                      "a change needs the session's X-CSRF-Token header"));
      }
    }
    if (path == "/api/session") {
      if (post) return x->send(error_response(req, http::status::method_not_allowed, "method", "GET"));
      return x->send(json_response(req, http::status::ok,
                                   {{"user", session->user.name},
                                    {"role", name(session->user.role)},
                                    {"csrf", session->csrf}}));
    }
    if (path == "/api/logout") {
      if (!post) return x->send(error_response(req, http::status::method_not_allowed, "method", "POST"));
      sessions.remove(session->token);
      auto res = json_response(req, http::status::ok, json::object());
      res.set(http::field::set_cookie, std::string(kSessionCookie) +
                                           "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0" +
                                           (tls ? "; Secure" : ""));
      return x->send(std::move(res));
    }
    if (path == "/api/stream") {
      if (!get) return x->send(error_response(req, http::status::method_not_allowed, "method", "GET"));
      streams.erase(std::remove_if(streams.begin(), streams.end(),
                                   [](const auto& weak) { return weak.expired(); }),
                    streams.end());
      if (streams.size() >= options.max_stream_clients) {
        ++counters.streams_refused;
        return x->send(error_response(req, http::status::service_unavailable, "busy",
                                      "too many open event streams (console.max_stream_clients)"));
      }
      ++counters.streams_opened;
      return x->begin_stream(session->token);
    }

    // Everything else is a control command.
    const json body = post ? json::parse(req.body().empty() ? "{}" : req.body(), nullptr, false)
                           : json::object();
    if (!body.is_object())
      return x->send(error_response(req, http::status::bad_request, "bad_json",
                                    "the body must be a JSON object"));
    const RouteMatch route = match_route(req.method() == http::verb::post, path, query, body,
                                         session->user.name);
    if (route.status != 200)
      return x->send(error_response(req, static_cast<http::status>(route.status), route.error_code,
                                    route.error_message));
    if (!allows(session->user.role, route.needs)) {
      ++counters.forbidden;
      return x->send(error_response(req, http::status::forbidden, "forbidden",
                                    std::string("this needs the role ") + name(route.needs)));
    }
    const unsigned version = req.version();
    const bool keep_alive = req.keep_alive();
    std::weak_ptr<Impl> weak = shared_from_this();
    control(route.request, [weak, x, version, keep_alive](const json& message) {
      const auto self = weak.lock();
      if (!self) return;
      net::post(self->io, [self, x, version, keep_alive, message] {
        http::request<http::string_body> req;
        req.version(version);
        req.keep_alive(keep_alive);
        if (message.value("ok", false))
          return x->send(self->json_response(req, http::status::ok, message["result"]));
        const json& error = message["error"];
        const std::string code = error.value("code", "failed");
        x->send(self->error_response(req, static_cast<http::status>(http_status_of(code)), code,
                                     error.value("message", "")));
      });
    });
    return;
  }

  // Pages and their files.
  if (!get)
    return x->send(error_response(req, http::status::method_not_allowed, "method", "GET only"));
  std::string file;
  bool needs_session = false;
  if (path == "/" || path == "/index.html") {
    file = "index.html";
    needs_session = true;
  } else if (path == "/login.html") {
    file = "login.html";
  } else if (path.rfind("/static/", 0) == 0 && safe_file_name(path.substr(8))) {
    file = "static/" + path.substr(8);
  }
  if (needs_session && !session_of(req)) {
    ++counters.no_session;
    http::response<http::string_body> res(http::status::see_other, req.version());
    common_headers(res, true);
    res.set(http::field::location, "/login.html");
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    return x->send(std::move(res));
  }
  std::optional<std::string> content;
  if (!file.empty()) content = read_file(options.static_dir + "/" + file);
  if (!content) {
    http::response<http::string_body> res(http::status::not_found, req.version());
    common_headers(res, false);
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    res.body() = "not found\n";
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    return x->send(std::move(res));
  }
  http::response<http::string_body> res(http::status::ok, req.version());
  common_headers(res, needs_session);
  res.set(http::field::content_type, content_type_of(file));
  res.body() = std::move(*content);
  res.keep_alive(req.keep_alive());
  res.prepare_payload();
  x->send(std::move(res));
}

void ConsoleServer::Impl::drain_offers() {
  std::deque<std::shared_ptr<const std::string>> batch;
  {
    std::lock_guard<std::mutex> lock(offers_mu);
    batch.swap(offers);
  }
  streams.erase(std::remove_if(streams.begin(), streams.end(),
                               [](const auto& weak) { return weak.expired(); }),
                streams.end());
  stream_count.store(streams.size());
  for (const auto& message : batch)
    for (const auto& weak : streams)
      if (const auto client = weak.lock()) client->push(message);
}

void ConsoleServer::Impl::close_all() {
  beast::error_code ignored;
  acceptor.close(ignored);
  for (const auto& entry : connections) entry.second();
  connections.clear();
  streams.clear();
}

// ---------------------------------------------------------------------------

ConsoleServer::ConsoleServer(ConsoleOptions options, ControlCall control)
    : impl_(std::make_shared<Impl>(std::move(options), std::move(control))) {
  impl_->open();
  impl_->thread = std::thread([impl = impl_] {
    set_thread_name("gw-console");
    impl->io.run();
  });
}

ConsoleServer::~ConsoleServer() { stop(); }

std::uint16_t ConsoleServer::port() const {
  beast::error_code ec;
  const auto endpoint = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : endpoint.port();
}

bool ConsoleServer::tls() const { return impl_->tls.has_value(); }

void ConsoleServer::offer(const std::string& topic, const std::string& body) {
  if (impl_->stopped.load() || impl_->stream_count.load() == 0) return;
  const std::string event = topic.rfind("alert.", 0) == 0 ? "alert" : "event";
  bool was_empty;
  {
    std::lock_guard<std::mutex> lock(impl_->offers_mu);
    was_empty = impl_->offers.empty();
    if (impl_->offers.size() >= kMaxPendingOffers) {
      impl_->offers.pop_front();
      ++impl_->counters.offers_dropped;
    }
    impl_->offers.push_back(std::make_shared<const std::string>(
        "event: " + event + "\nid: " + std::to_string(impl_->next_event_id++) + "\ndata: " + body +
        "\n\n"));
  }
  if (was_empty) net::post(impl_->io, [impl = impl_] { impl->drain_offers(); });
}

void ConsoleServer::stop() {
  if (!impl_->thread.joinable()) return;
  impl_->stopped.store(true);
  // Closing every socket ends every handler: run() returns. Whatever was
  // posted after that (a late control reply) runs here, so that no handler
  // is left holding the server.
  net::post(impl_->io, [impl = impl_] { impl->close_all(); });
  impl_->thread.join();
  impl_->io.restart();
  impl_->io.poll();
}

json ConsoleServer::counters_json() const {
  const Impl::Counters& c = impl_->counters;
  return {{"requests", c.requests.load()},
          {"responses", {{"2xx", c.responses_2xx.load()},
                         {"3xx", c.responses_3xx.load()},
                         {"4xx", c.responses_4xx.load()},
                         {"5xx", c.responses_5xx.load()}}},
          {"connections_refused", c.connections_refused.load()},
          {"logins_ok", c.logins_ok.load()},
          {"logins_failed", c.logins_failed.load()},
          {"logins_blocked", c.logins_blocked.load()},
          {"no_session", c.no_session.load()},
          {"forbidden", c.forbidden.load()},
          {"csrf_refused", c.csrf_refused.load()},
          {"sessions", impl_->sessions.size()},
          {"streams_opened", c.streams_opened.load()},
          {"streams_refused", c.streams_refused.load()},
          {"streams_dropped", c.streams_dropped.load()},
          {"offers_dropped", c.offers_dropped.load()}};
}

}  // namespace gw::console
