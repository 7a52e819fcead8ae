// A server the tests start as a child process on a loopback TCP port (a
// broker, a message server): started from its command line, ready once the
// port accepts connections, stopped with SIGTERM.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>

#include "common/child_process.h"

namespace gw::test {

class LoopbackServer {
 public:
  explicit LoopbackServer(std::string name) : name_(std::move(name)), port_(free_port(false)) {}
  ~LoopbackServer() { stop(); }
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;

  int port() const { return port_; }

  // Runs `argv` with its output in `dir` (<name>.out, <name>.err) and
  // returns once the port accepts connections; throws after 10 s.
  void start(const std::vector<std::string>& argv, const std::filesystem::path& dir) {
    process_ = std::make_unique<Process>(argv, dir / (name_ + ".out"), dir / (name_ + ".err"));
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      if (accepts()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    throw std::runtime_error(name_ + " did not start: " + process_->err());
  }

  void stop() {
    if (!process_) return;
    process_->signal(SIGTERM);
    process_->wait(std::chrono::seconds(5));
    process_.reset();
  }

 private:
  bool accepts() const {
    namespace asio = boost::asio;
    asio::io_context io;
    asio::ip::tcp::socket socket(io);
    boost::system::error_code error;
    socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)}, error);
    return !error;
  }

  std::string name_;
  int port_;
  std::unique_ptr<Process> process_;
};

}  // namespace gw::test
