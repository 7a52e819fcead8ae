#include "console/access.h"

#include <sodium.h>

#include <algorithm>
#include <chrono>

#include "sinks/store.h"

namespace gw::console {

namespace {

constexpr std::pair<Role, const char*> kRoleNames[] = {
    {Role::kViewer, "viewer"}, {Role::kCarer, "carer"}, {Role::kAdmin, "admin"}};

void init_sodium() {
  static const int result = sodium_init();  // thread-safe once; 1 = already done
  if (result < 0) throw Error("libsodium cannot be initialised");
}

std::string random_hex(std::size_t bytes) {
  init_sodium();
  std::vector<unsigned char> raw(bytes);
  randombytes_buf(raw.data(), raw.size());
  std::string hex(bytes * 2 + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), raw.data(), raw.size());
  hex.pop_back();
  return hex;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void check_name(const std::string& name) {
  const bool ok = !name.empty() && name.size() <= 64 &&
                  std::all_of(name.begin(), name.end(), [](char c) {
                    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
                           c == '-';
                  });
  if (!ok)
    throw AccessError(AccessError::Reason::kBadName,
                      "a user name is 1 to 64 letters, digits, '.', '_' or '-': '" + name + "'");
}

void check_password(const std::string& password) {
  if (password.size() < kMinPasswordBytes)
    throw AccessError(AccessError::Reason::kWeakPassword,
                      "a password needs at least " + std::to_string(kMinPasswordBytes) +
                          " characters");
}

AccessError unknown_user(const std::string& name) {
  return AccessError(AccessError::Reason::kUnknownUser, "no user '" + name + "'");
}

User user_of(const pipeline::UserRecord& record) {
  return {record.name, parse_role(record.role).value_or(Role::kViewer), record.generation};
}

}  // namespace

const char* name(Role role) {
  for (const auto& [value, word] : kRoleNames)
    if (value == role) return word;
  return "?";
}

std::optional<Role> parse_role(std::string_view text) {
  for (const auto& [value, word] : kRoleNames)
    if (text == word) return value;
  return std::nullopt;
}

bool allows(Role have, Role need) { return static_cast<int>(have) >= static_cast<int>(need); }

std::string hash_password(const std::string& password) {
  init_sodium();
  char out[crypto_pwhash_STRBYTES];
  if (crypto_pwhash_str_alg(out, password.data(), password.size(),
                            crypto_pwhash_OPSLIMIT_INTERACTIVE, crypto_pwhash_MEMLIMIT_INTERACTIVE,
                            crypto_pwhash_ALG_ARGON2ID13) != 0)
    throw Error("password hashing ran out of memory");
  return out;
}

bool verify_password(const std::string& hash, const std::string& password) {
  init_sodium();
  return crypto_pwhash_str_verify(hash.c_str(), password.data(), password.size()) == 0;
}

UserStore::UserStore(const std::string& db_path)
    : store_(std::make_unique<pipeline::HitStore>(db_path, /*read_only=*/false)) {}

UserStore::~UserStore() = default;

void UserStore::add(const std::string& user, Role role, const std::string& password) {
  check_name(user);
  check_password(password);
  const double now = unix_now();
  if (!store_->add_user({user, name(role), hash_password(password), 1, now, now}))
    throw AccessError(AccessError::Reason::kDuplicateUser, "user '" + user + "' exists");
}

void UserStore::set_password(const std::string& user, const std::string& password) {
  check_password(password);
  if (!store_->set_user_password(user, hash_password(password), unix_now())) throw unknown_user(user);
}

void UserStore::set_role(const std::string& user, Role role) {
  if (!store_->set_user_role(user, name(role), unix_now())) throw unknown_user(user);
}

void UserStore::remove(const std::string& user) {
  if (!store_->remove_user(user)) throw unknown_user(user);
}

std::vector<User> UserStore::list() const {
  std::vector<User> out;
  for (const pipeline::UserRecord& record : store_->users()) out.push_back(user_of(record));
  return out;
}

std::optional<User> UserStore::find(const std::string& user) const {
  const auto record = store_->user(user);
  if (!record) return std::nullopt;
  return user_of(*record);
}

std::optional<User> UserStore::verify(const std::string& user, const std::string& password) const {
  const auto record = store_->user(user);
  if (!record) {
    // The same work as for a real user, so that timing does not tell.
    static const std::string decoy = hash_password("decoy password, never valid");
    verify_password(decoy, password);
    return std::nullopt;
  }
  if (!verify_password(record->password_hash, password)) return std::nullopt;
  return user_of(*record);
}

// ---------------------------------------------------------------------------

SessionTable::SessionTable(std::chrono::seconds idle_timeout, std::chrono::seconds max_age,
                           std::size_t max_sessions)
    : idle_timeout_(idle_timeout), max_age_(max_age), max_sessions_(std::max<std::size_t>(1, max_sessions)) {}

Session SessionTable::create(const User& user, std::chrono::steady_clock::time_point now) {
  Session session{random_hex(32), random_hex(32), user, now, now};
  std::lock_guard<std::mutex> lock(mu_);
  while (sessions_.size() >= max_sessions_) {
    const auto oldest = std::min_element(sessions_.begin(), sessions_.end(), [](const auto& a, const auto& b) {
      return a.second.last_seen < b.second.last_seen;
    });
    sessions_.erase(oldest);
    ++evicted_;
  }
  sessions_.emplace(session.token, session);
  return session;
}

std::optional<Session> SessionTable::find(const std::string& token,
                                          std::chrono::steady_clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = sessions_.find(token);
  if (it == sessions_.end()) return std::nullopt;
  if (now - it->second.last_seen > idle_timeout_ || now - it->second.created > max_age_) {
    sessions_.erase(it);
    return std::nullopt;
  }
  it->second.last_seen = now;
  return it->second;
}

void SessionTable::remove(const std::string& token) {
  std::lock_guard<std::mutex> lock(mu_);
  sessions_.erase(token);
}

std::size_t SessionTable::remove_user(const std::string& user) {
  std::lock_guard<std::mutex> lock(mu_);
  std::size_t removed = 0;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (it->second.user.name == user) {
      it = sessions_.erase(it);
      ++removed;
    } else {
      ++it;
    }
  }
  return removed;
}

std::size_t SessionTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

std::uint64_t SessionTable::evicted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return evicted_;
}

bool csrf_matches(const Session& session, std::string_view header) {
  if (header.empty() || header.size() != session.csrf.size()) return false;
  return sodium_memcmp(header.data(), session.csrf.data(), header.size()) == 0;
}

// ---------------------------------------------------------------------------

LoginLimiter::LoginLimiter(int max_failures, std::chrono::seconds window, std::size_t max_addresses)
    : max_failures_(std::max(1, max_failures)), window_(window),
      max_addresses_(std::max<std::size_t>(1, max_addresses)) {}

std::optional<std::chrono::seconds> LoginLimiter::blocked(
    const std::string& address, std::chrono::steady_clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = failures_.find(address);
  if (it == failures_.end() || it->second.count < max_failures_) return std::nullopt;
  const auto ends = it->second.first + window_;
  if (now >= ends) return std::nullopt;
  return std::chrono::ceil<std::chrono::seconds>(ends - now);
}

void LoginLimiter::failed(const std::string& address, std::chrono::steady_clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = failures_.find(address);
  if (it != failures_.end() && now - it->second.first >= window_) {
    failures_.erase(it);
    it = failures_.end();
  }
  if (it == failures_.end()) {
    while (failures_.size() >= max_addresses_) {
      const auto oldest = std::min_element(failures_.begin(), failures_.end(), [](const auto& a, const auto& b) {
        return a.second.first < b.second.first;
      });
      failures_.erase(oldest);
    }
    it = failures_.emplace(address, Failures{0, now}).first;
  }
  ++it->second.count;
}

void LoginLimiter::succeeded(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  failures_.erase(address);
}

}  // namespace gw::console
