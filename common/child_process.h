// Running other programs: spawn with output captured to files, wait with a
// timeout, signal, and pick free loopback ports. The process tests and the
// end-to-end benchmark both drive the real daemon through it.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
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

// A loopback port that was free a moment ago (the OS picks it).
inline int free_port(bool udp) {
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
