// What systemd gives a Type=notify service, for a test that runs the real
// binary: a unix datagram socket that collects the service's sd_notify(3)
// messages, and $NOTIFY_SOCKET (and $WATCHDOG_USEC) set in this process's
// environment while a ServiceEnvironment lives, so that a child spawned then
// inherits them. Not the unit's user or sandbox.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace gw::test {

class NotifySocket {
 public:
  // Binds a datagram socket at `path` (at most 107 bytes; a stale file is
  // removed first).
  explicit NotifySocket(std::filesystem::path path) : path_(std::move(path)) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (path_.string().size() >= sizeof(address.sun_path))
      throw std::runtime_error("notify socket path too long: " + path_.string());
    std::strncpy(address.sun_path, path_.c_str(), sizeof(address.sun_path) - 1);
    std::filesystem::remove(path_);
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0)
      throw std::runtime_error("cannot bind notify socket " + path_.string());
  }
  ~NotifySocket() {
    if (fd_ >= 0) ::close(fd_);
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Every message received so far, in order; reads what waits without
  // blocking.
  const std::vector<std::string>& messages() {
    char buffer[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n < 0) break;
      messages_.emplace_back(buffer, static_cast<std::size_t>(n));
    }
    return messages_;
  }

  // The index of the first message from `from` on that holds the line
  // `line` (e.g. "READY=1"), if any.
  std::optional<std::size_t> find(const std::string& line, std::size_t from = 0) {
    const auto& all = messages();
    for (std::size_t i = from; i < all.size(); ++i) {
      std::istringstream lines(all[i]);
      for (std::string l; std::getline(lines, l);)
        if (l == line) return i;
    }
    return std::nullopt;
  }

  std::size_t count(const std::string& line) {
    std::size_t n = 0;
    std::size_t from = 0;
    while (const auto found = find(line, from)) {
      ++n;
      from = *found + 1;
    }
    return n;
  }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::vector<std::string> messages_;
};

// Sets NOTIFY_SOCKET (and WATCHDOG_USEC when watchdog_usec > 0) for the
// children spawned while it lives; puts back what was there before (or
// nothing) after. Not thread-safe: the environment is the process's.
class ServiceEnvironment {
 public:
  ServiceEnvironment(const NotifySocket& socket, unsigned long long watchdog_usec)
      : notify_socket_(get("NOTIFY_SOCKET")), watchdog_usec_(get("WATCHDOG_USEC")) {
    ::setenv("NOTIFY_SOCKET", socket.path().c_str(), 1);
    if (watchdog_usec > 0) ::setenv("WATCHDOG_USEC", std::to_string(watchdog_usec).c_str(), 1);
  }
  ~ServiceEnvironment() {
    put("NOTIFY_SOCKET", notify_socket_);
    put("WATCHDOG_USEC", watchdog_usec_);
  }
  ServiceEnvironment(const ServiceEnvironment&) = delete;
  ServiceEnvironment& operator=(const ServiceEnvironment&) = delete;

 private:
  static std::optional<std::string> get(const char* name) {
    const char* value = std::getenv(name);
    return value ? std::optional<std::string>(value) : std::nullopt;
  }
  static void put(const char* name, const std::optional<std::string>& value) {
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
  std::optional<std::string> notify_socket_, watchdog_usec_;
};

}  // namespace gw::test
