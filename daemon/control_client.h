// A client of the daemon's control interface (daemon/control.h,
// docs/interfaces.md): a ZeroMQ DEALER socket that sends JSON requests and
// reads the accepted / progress / result / error messages they cause. Used by
// the `gaitwatch` commands that talk to a running daemon, and by the tests.
//
// Threads: one thread at a time. Errors: gw::Error when nothing arrives
// within the reply timeout (daemon not running, control disabled, wrong
// endpoint); error replies are returned, not thrown.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "sinks/curve.h"

namespace gw::daemon {

class ControlClient {
 public:
  // Connects (ZeroMQ connects lazily: a missing daemon shows as a timeout).
  // `curve`: CURVE client keys for a daemon with control.curve_* set; a key
  // the daemon does not authorize also shows as a timeout (the server says
  // nothing to an unauthenticated peer).
  ControlClient(const std::string& endpoint, std::chrono::milliseconds reply_timeout,
                const std::optional<pipeline::CurveClientKeys>& curve = std::nullopt);
  ~ControlClient();
  ControlClient(const ControlClient&) = delete;
  ControlClient& operator=(const ControlClient&) = delete;

  // Sends {"id": N, "cmd": cmd, "args": args}; returns N.
  std::uint64_t send(const std::string& cmd, const nlohmann::json& args);
  // Sends `body` as it is (tests: malformed requests).
  void send_raw(const std::string& body);
  // The next message from the daemon, or nullopt after `timeout`.
  std::optional<nlohmann::json> receive(std::chrono::milliseconds timeout);

  // Sends a request and reads its messages until the final one (type result
  // or error), which it returns; `on_message` sees the others (accepted,
  // progress). Messages of other requests are skipped. When the request is a
  // job and `should_cancel` (polled about every 100 ms) returns true, sends
  // `cancel` for it once and goes on reading until the final message. Throws
  // gw::Error when the reply timeout passes without a message.
  nlohmann::json call(const std::string& cmd, const nlohmann::json& args,
                      const std::function<void(const nlohmann::json&)>& on_message = {},
                      const std::function<bool()>& should_cancel = {});

  // True for a final message (result or error).
  static bool is_final(const nlohmann::json& message);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gw::daemon
