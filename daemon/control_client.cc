#include "daemon/control_client.h"

#include <zmq.hpp>

#include "common/error.h"

namespace gw::daemon {

using nlohmann::json;

struct ControlClient::Impl {
  zmq::context_t context;
  zmq::socket_t socket{context, zmq::socket_type::dealer};
  std::string endpoint;
  std::chrono::milliseconds timeout;
  std::uint64_t next_id = 1;
};

ControlClient::ControlClient(const std::string& endpoint, std::chrono::milliseconds reply_timeout,
                             const std::optional<pipeline::CurveClientKeys>& curve)
    : impl_(std::make_unique<Impl>()) {
  impl_->endpoint = endpoint;
  impl_->timeout = reply_timeout;
  impl_->socket.set(zmq::sockopt::linger, 0);
  if (curve) pipeline::make_curve_client(impl_->socket, *curve);
  try {
    impl_->socket.connect(endpoint);
  } catch (const zmq::error_t& e) {
    throw Error("control: cannot connect to " + endpoint + ": " + e.what());
  }
}

ControlClient::~ControlClient() = default;

std::uint64_t ControlClient::send(const std::string& cmd, const json& args) {
  const std::uint64_t id = impl_->next_id++;
  send_raw(json{{"id", id}, {"cmd", cmd}, {"args", args}}.dump());
  return id;
}

void ControlClient::send_raw(const std::string& body) {
  impl_->socket.send(zmq::buffer(body), zmq::send_flags::none);
}

std::optional<json> ControlClient::receive(std::chrono::milliseconds timeout) {
  zmq::pollitem_t item{impl_->socket.handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(&item, 1, timeout);
  if (!(item.revents & ZMQ_POLLIN)) return std::nullopt;
  zmq::message_t body;
  // The daemon echoes any routing frames; the JSON is the last frame.
  do {
    if (!impl_->socket.recv(body, zmq::recv_flags::dontwait)) return std::nullopt;
  } while (body.more());
  json message = json::parse(body.to_string(), nullptr, false);
  if (message.is_discarded()) throw Error("control: the daemon sent a message that is not JSON");
  return message;
}

bool ControlClient::is_final(const json& message) {
  const std::string type = message.value("type", "");
  return type == "result" || type == "error";
}

json ControlClient::call(const std::string& cmd, const json& args,
                         const std::function<void(const json&)>& on_message,
                         const std::function<bool()>& should_cancel) {
  const std::uint64_t id = send(cmd, args);
  const auto slice = std::chrono::milliseconds(100);
  std::optional<std::uint64_t> job;
  bool cancel_sent = false;
  std::chrono::milliseconds quiet(0);
  for (;;) {
    if (job && !cancel_sent && should_cancel && should_cancel()) {
      send("cancel", {{"job", *job}});
      cancel_sent = true;
    }
    std::optional<json> message = receive(slice);
    if (!message) {
      quiet += slice;
      if (quiet >= impl_->timeout)
        throw Error("control: no reply from " + impl_->endpoint + " within " +
                    std::to_string(impl_->timeout.count()) +
                    " ms (is gaitwatchd running with control.enabled and this control.endpoint? "
                    "with control.curve_* set it answers only clients whose key it authorizes)");
      continue;
    }
    quiet = std::chrono::milliseconds(0);
    if (!message->contains("id") || (*message)["id"] != id) continue;  // e.g. the cancel's reply
    if (message->value("type", "") == "accepted" && message->contains("job"))
      job = (*message)["job"].get<std::uint64_t>();
    if (is_final(*message)) return *message;
    if (on_message) on_message(*message);
  }
}

}  // namespace gw::daemon
