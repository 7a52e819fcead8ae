// A real nats-server with JetStream on a loopback port, its store in a temp
// dir, for the tests of the JetStream frame path. available() is false where
// Debian's nats-server package is not installed; the tests then WARN
// "nats-server not installed" and CTest reports them skipped.
#pragma once

#include <filesystem>
#include <string>

#include "tests/common/loopback_server.h"
#include "tests/common/temp_dir.h"

namespace gw::test {

inline const char* const kNatsServerBinary = "/usr/sbin/nats-server";

class NatsServer {
 public:
  static bool available() { return std::filesystem::exists(kNatsServerBinary); }

  explicit NatsServer(std::filesystem::path dir) : dir_(std::move(dir)), server_("nats") {}

  int port() const { return server_.port(); }
  std::string url() const { return "nats://127.0.0.1:" + std::to_string(port()); }

  // Starts the server (JetStream on, its store under the dir).
  void start() {
    std::filesystem::create_directories(dir_ / "jetstream");
    server_.start({kNatsServerBinary, "-a", "127.0.0.1", "-p", std::to_string(port()), "-js", "-sd",
                   (dir_ / "jetstream").string()},
                  dir_);
  }
  void stop() { server_.stop(); }

 private:
  std::filesystem::path dir_;
  LoopbackServer server_;
};

// True, after a WARN that the tests' SKIP_REGEX reports as skipped, where
// nats-server is not installed: the test returns.
inline bool nats_server_missing() {
  if (NatsServer::available()) return false;
  WARN("nats-server not installed (Debian package nats-server)");
  return true;
}

// A started nats-server whose store lives in a temp dir of its own.
class TempNatsServer {
 public:
  explicit TempNatsServer(const std::string& prefix) : dir_(prefix), server_(dir_.path()) { server_.start(); }
  std::string url() const { return server_.url(); }

 private:
  TempDir dir_;
  NatsServer server_;
};

}  // namespace gw::test
