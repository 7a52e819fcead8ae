// Running other programs: spawn with output captured to files, wait with a
// timeout, signal, and pick free loopback ports. The process tests and the
// end-to-end benchmark both drive the real daemon through it.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio.hpp>

extern char** environ;

namespace gw {

inline std::string read_text_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Process {
 public:
  Process(std::vector<std::string> argv, const std::filesystem::path& out_file,
          const std::filesystem::path& err_file)
      : out_(out_file), err_(err_file) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    const int rc = posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("cannot spawn " + argv[0]);
  }
  ~Process() {
    if (!exited_) {
      ::kill(pid_, SIGKILL);
      int status;
      ::waitpid(pid_, &status, 0);
    }
  }
  void signal(int signo) { ::kill(pid_, signo); }
  pid_t pid() const { return pid_; }
  bool running() {
    if (exited_) return false;
    int status;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    return !exited_;
  }
  // Exit code, or nullopt if still running after `timeout`.
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (running()) {
      if (std::chrono::steady_clock::now() > until) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return exit_code_;
  }
  std::string out() const { return read_text_file(out_); }
  std::string err() const { return read_text_file(err_); }

 private:
  pid_t pid_ = 0;
  bool exited_ = false;
  int exit_code_ = -1;
  std::filesystem::path out_, err_;
};

// Runs to completion; returns {exit code, stdout, stderr}.
struct RunResult {
  int code;
  std::string out, err;
};
inline RunResult run_process(std::vector<std::string> argv, const std::filesystem::path& dir,
                             const std::string& tag, std::chrono::seconds timeout) {
  Process p(std::move(argv), dir / (tag + ".out"), dir / (tag + ".err"));
  const auto code = p.wait(timeout);
  if (!code) throw std::runtime_error(tag + " did not finish in time");
  return {*code, p.out(), p.err()};
}

namespace detail {

// Below the kernel's ephemeral range, so that no outgoing connection (a
// client's local port) can take a port between its choice and its bind.
inline std::pair<int, int> test_port_range() {
  int ephemeral_low = 32768;
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  if (int low = 0; in >> low && low > 2048) ephemeral_low = low;
  return {std::max(1024, ephemeral_low - 12000), ephemeral_low};
}

inline bool loopback_port_bindable(int port) {
  namespace asio = boost::asio;
  asio::io_context io;
  const auto address = asio::ip::make_address("127.0.0.1");
  boost::system::error_code ec;
  asio::ip::tcp::acceptor tcp(io);
  tcp.open(asio::ip::tcp::v4(), ec);
  if (!ec) tcp.bind({address, static_cast<unsigned short>(port)}, ec);
  if (ec) return false;
  asio::ip::udp::socket udp(io);
  udp.open(asio::ip::udp::v4(), ec);
  if (!ec) udp.bind({address, static_cast<unsigned short>(port)}, ec);
  return !ec;
}

}  // namespace detail

// A loopback port, free for TCP and UDP a moment ago, that no other test
// process on this machine was handed recently: ports are dealt in turn from a
// counter file shared under a lock (tests/console/browser_test.py deals from
// the same file), so concurrent tests never pick the same one before the
// range wraps. Falls back to the OS's choice if the file cannot be used.
inline int free_port(bool udp) {
  const auto [low, high] = detail::test_port_range();
  const auto counter = std::filesystem::temp_directory_path() / "gaitwatch-test-ports";
  const int fd = ::open(counter.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd >= 0 && ::flock(fd, LOCK_EX) == 0) {
    char text[32] = {};
    const auto got = ::pread(fd, text, sizeof text - 1, 0);
    int last = got > 0 ? std::atoi(text) : low + static_cast<int>(::getpid()) % (high - low);
    int port = 0;
    for (int tries = 0; tries < high - low && port == 0; ++tries) {
      last = last + 1 < low || last + 1 >= high ? low : last + 1;
      if (detail::loopback_port_bindable(last)) port = last;
    }
    const std::string out = std::to_string(last) + "\n";
    const bool written = ::ftruncate(fd, 0) == 0 &&
                         ::pwrite(fd, out.data(), out.size(), 0) == static_cast<ssize_t>(out.size());
    ::flock(fd, LOCK_UN);
    ::close(fd);
    if (port != 0 && written) return port;
  } else if (fd >= 0) {
    ::close(fd);
  }
  namespace asio = boost::asio;
  asio::io_context io;
  if (udp) {
    asio::ip::udp::socket s(io, asio::ip::udp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    return s.local_endpoint().port();
  }
  asio::ip::tcp::acceptor a(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}

}  // namespace gw
