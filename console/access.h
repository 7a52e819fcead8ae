// Who may use the console: users and roles in the store's SQLite file,
// passwords hashed with Argon2id (libsodium), in-memory sessions with a CSRF
// token each, and a limit on failed logins per client address.
//
// Roles are ordered: a viewer reads (board, alerts, health); a carer also
// acknowledges, resolves and marks alerts; an admin also manages wearers.
// Sessions live in memory: they end when the daemon restarts (a deliberate
// choice: nothing secret is written to disk but the password hashes).
//
// Thread safety: UserStore is one SQLite connection, used by one thread at a
// time. SessionTable and LoginLimiter are safe from any thread. Errors:
// UserStore throws AccessError for what a user did wrong (duplicate or
// unknown name, weak password, bad name) and gw::Error for the store.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace gw::pipeline {
class HitStore;
}

namespace gw::console {

enum class Role { kViewer, kCarer, kAdmin };  // in this order: each may do what the one before may
const char* name(Role role);                   // "viewer", "carer", "admin"
std::optional<Role> parse_role(std::string_view text);
bool allows(Role have, Role need);             // have >= need

struct User {
  std::string name;
  Role role = Role::kViewer;
  std::int64_t generation = 0;  // bumped by every password or role change
};

class AccessError : public gw::Error {
 public:
  enum class Reason { kDuplicateUser, kUnknownUser, kWeakPassword, kBadName };
  AccessError(Reason reason, const std::string& message) : gw::Error(message), reason_(reason) {}
  Reason reason() const { return reason_; }

 private:
  Reason reason_;
};

// Names: 1 to 64 of [A-Za-z0-9._-]. Passwords: at least this many bytes.
inline constexpr std::size_t kMinPasswordBytes = 10;

// Argon2id in libsodium's string form ("$argon2id$..."), with its
// INTERACTIVE cost; verification is constant-time in the password.
std::string hash_password(const std::string& password);
bool verify_password(const std::string& hash, const std::string& password);

// The users table of the hit store at `db_path` (created with the store's
// full schema when the file does not exist).
class UserStore {
 public:
  explicit UserStore(const std::string& db_path);
  ~UserStore();
  UserStore(const UserStore&) = delete;
  UserStore& operator=(const UserStore&) = delete;

  void add(const std::string& name, Role role, const std::string& password);
  void set_password(const std::string& name, const std::string& password);
  void set_role(const std::string& name, Role role);
  void remove(const std::string& name);
  std::vector<User> list() const;  // by name
  std::optional<User> find(const std::string& name) const;
  // The user when the password is theirs; nullopt for a wrong password or
  // an unknown name (which costs one verification too, so that timing does
  // not tell which names exist).
  std::optional<User> verify(const std::string& name, const std::string& password) const;

 private:
  std::unique_ptr<pipeline::HitStore> store_;
};

struct Session {
  std::string token;  // the cookie's value: 32 random bytes, hex
  std::string csrf;   // sent back in X-CSRF-Token by every change: 32 random bytes, hex
  User user;          // as it was at the login
  std::chrono::steady_clock::time_point created, last_seen;
};

class SessionTable {
 public:
  SessionTable(std::chrono::seconds idle_timeout, std::chrono::seconds max_age,
               std::size_t max_sessions);
  // Past max_sessions the least recently seen session ends (counted).
  Session create(const User& user, std::chrono::steady_clock::time_point now);
  // The session, its last_seen moved to now; nullopt (and forgotten) once
  // idle longer than idle_timeout or older than max_age.
  std::optional<Session> find(const std::string& token, std::chrono::steady_clock::time_point now);
  void remove(const std::string& token);
  std::size_t remove_user(const std::string& name);  // how many ended
  std::size_t size() const;
  std::uint64_t evicted() const;

 private:
  mutable std::mutex mu_;
  std::chrono::seconds idle_timeout_, max_age_;
  std::size_t max_sessions_;
  std::map<std::string, Session> sessions_;
  std::uint64_t evicted_ = 0;
};

// Whether `header` is the session's CSRF token (constant time; empty: no).
bool csrf_matches(const Session& session, std::string_view header);

// Failed logins per client address: after max_failures within `window` of
// the first one counted, that address is refused until the window ends. At
// most max_addresses are tracked (the oldest forgotten first).
class LoginLimiter {
 public:
  LoginLimiter(int max_failures, std::chrono::seconds window, std::size_t max_addresses);
  // How long the address must wait; nullopt when it may try.
  std::optional<std::chrono::seconds> blocked(const std::string& address,
                                              std::chrono::steady_clock::time_point now) const;
  void failed(const std::string& address, std::chrono::steady_clock::time_point now);
  void succeeded(const std::string& address);

 private:
  struct Failures {
    int count = 0;
    std::chrono::steady_clock::time_point first;
  };
  mutable std::mutex mu_;
  int max_failures_;
  std::chrono::seconds window_;
  std::size_t max_addresses_;
  std::map<std::string, Failures> failures_;
};

}  // namespace gw::console
