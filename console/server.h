// The ward console: gaitwatchd's web pages and their JSON API, served over
// HTTP (or HTTPS when a certificate is configured) by Boost.Beast on its own
// thread, so that a slow browser or a login's password hashing never delays
// frame ingest.
//
// What it serves (docs/console.md has the API with every route):
//   /login.html, /static/...        the login page and the pages' scripts and
//                                   styles: public, they hold no health data
//   /, /index.html                  the console (board, alerts, alert page,
//                                   health); without a session: 303 to the login
//   /api/login, /api/logout         a session (cookie gw_session: HttpOnly,
//                                   SameSite=Strict, Secure under TLS)
//   /api/...                        JSON: every call needs a session; every
//                                   change also the session's CSRF token in
//                                   X-CSRF-Token and a role that allows it
//   /api/stream                     server-sent events: each alert and event
//                                   the daemon commits, as published
// The API answers through the daemon's control commands (an in-process call
// per request: ControlServer::call), so the console can do nothing the
// control interface cannot, with the same checks. Users and roles come from
// the store's users table (console/access.h), read again on every request:
// a removed user or a changed password or role ends the sessions made before.
//
// Thread safety: offer() from any thread; the rest from the owner's thread.
// The server runs its own io_context on one thread, started by the
// constructor and joined by stop() (and the destructor).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace gw::console {

struct ConsoleOptions {
  std::string bind = "127.0.0.1";
  std::uint16_t port = 0;          // 0: an ephemeral port (see port())
  std::string static_dir;          // index.html, login.html and static/
  std::string users_db;            // the store's SQLite file (users table)
  // TLS when both are set (PEM files); plain HTTP otherwise.
  std::string tls_certificate_file;
  std::string tls_private_key_file;
  std::chrono::seconds session_idle{43200};
  std::chrono::seconds session_max_age{86400};
  std::size_t max_sessions = 256;
  int login_max_failures = 5;                  // per client address within login_window
  std::chrono::seconds login_window{300};
  std::size_t max_connections = 64;            // beyond: closed at once, counted
  std::size_t max_stream_clients = 32;         // open /api/stream responses
  std::size_t max_stream_backlog = 2000;       // messages waiting for one slow browser; beyond it, it is closed
  std::chrono::seconds stream_heartbeat{15};   // a comment line, and the session checked again
};

// The daemon's control interface as the console reaches it: `request` is
// {cmd, args}; `reply` gets the control message (result or error) once, on
// any thread.
using ControlCall =
    std::function<void(nlohmann::json request, std::function<void(const nlohmann::json&)> reply)>;

class ConsoleServer {
 public:
  // Binds and starts serving. Throws gw::Error when the address cannot be
  // bound, the static directory has no index.html, the certificate cannot be
  // loaded or the users' store cannot be opened.
  ConsoleServer(ConsoleOptions options, ControlCall control);
  ~ConsoleServer();
  ConsoleServer(const ConsoleServer&) = delete;
  ConsoleServer& operator=(const ConsoleServer&) = delete;

  std::uint16_t port() const;
  bool tls() const;
  // A committed alert or event (the publisher's topic and body) for the open
  // streams. Bounded: past a full backlog the oldest are dropped, counted.
  void offer(const std::string& topic, const std::string& body);
  // Closes the listener and every connection, joins the thread.
  void stop();
  // requests, responses by class, logins (ok, failed, blocked), refusals
  // (no session, forbidden, csrf), sessions, streams, dropped messages.
  nlohmann::json counters_json() const;

  struct Impl;  // defined in server.cc, with the connections that use it

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace gw::console
