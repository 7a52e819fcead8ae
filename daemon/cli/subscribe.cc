// gaitwatch subscribe: prints every alert published by gaitwatchd, one JSON
// object per line, as it arrives.
#include <chrono>
#include <iostream>

#include <zmq.hpp>

#include "daemon/cli/cli.h"

namespace gw::cli {
namespace {

struct SubscribeOptions {
  std::string endpoint = "tcp://127.0.0.1:7710";
  std::vector<std::string> topics;
  long count = 0;
  double timeout_s = 0;
  bool with_topic = false;
};

int run(const SubscribeOptions& o) {
  zmq::context_t context;
  zmq::socket_t socket(context, zmq::socket_type::sub);
  socket.connect(o.endpoint);
  if (o.topics.empty()) socket.set(zmq::sockopt::subscribe, "alert.");
  for (const auto& topic : o.topics) socket.set(zmq::sockopt::subscribe, topic);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<long>(o.timeout_s * 1000));
  long received = 0;
  while (o.count == 0 || received < o.count) {
    int wait_ms = 200;
    if (o.timeout_s > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      wait_ms = static_cast<int>(std::min<long>(left.count(), 200));
    }
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(wait_ms));
    if (!(item.revents & ZMQ_POLLIN)) continue;
    zmq::message_t topic, body;
    if (!socket.recv(topic)) continue;
    if (!topic.more() || !socket.recv(body)) continue;
    if (o.with_topic) std::cout << topic.to_string() << ' ';
    std::cout << body.to_string() << std::endl;
    ++received;
  }
  return 0;
}

}  // namespace

void add_subscribe(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<SubscribeOptions>();
  auto* cmd = app.add_subcommand("subscribe", "print published alerts, one JSON object per line");
  cmd->add_option("--endpoint", options->endpoint, "publisher endpoint (default tcp://127.0.0.1:7710)");
  cmd->add_option("--topic", options->topics,
                  "topic prefix, repeatable (default alert.; stats. for the daemon's counters)");
  cmd->add_option("--count", options->count, "exit after this many messages (default: never)");
  cmd->add_option("--timeout", options->timeout_s, "exit after this many seconds (default: never)");
  cmd->add_flag("--with-topic", options->with_topic, "print the topic before each JSON object");
  cmd->callback([options, &exit_code] {
    try {
      exit_code = run(*options);
    } catch (const std::exception& e) {
      std::cerr << "gaitwatch subscribe: " << e.what() << "\n";
      exit_code = 1;
    }
  });
}

}  // namespace gw::cli
