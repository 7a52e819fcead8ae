// gaitwatch subscribe: prints every alert published by gaitwatchd, one JSON
// object per line, as it arrives.
#include <chrono>
#include <iostream>

#include <zmq.hpp>

#include "daemon/cli/cli.h"
#include "pipeline/curve.h"

namespace gw::cli {
namespace {

struct SubscribeOptions {
  std::string endpoint = "tcp://127.0.0.1:7710";
  std::vector<std::string> topics;
  long count = 0;
  double timeout_s = 0;
  bool with_topic = false;
  std::string server_key;  // the daemon's .pub file: CURVE on
  std::string key;         // this client's .key file (authorized on the daemon)
};

int run(const SubscribeOptions& o) {
  zmq::context_t context;
  zmq::socket_t socket(context, zmq::socket_type::sub);
  if (!o.server_key.empty() || !o.key.empty()) {
    if (o.server_key.empty() || o.key.empty())
      throw std::runtime_error("CURVE needs both --server-key and --key");
    pipeline::make_curve_client(socket, pipeline::read_curve_key_file(o.key, true),
                                pipeline::read_curve_key_file(o.server_key, false).public_key);
  }
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
  cmd->add_option("--server-key", options->server_key,
                  "the daemon's CURVE public key file (NAME.pub): encrypt and authenticate");
  cmd->add_option("--key", options->key,
                  "this subscriber's CURVE key file (NAME.key, from gaitwatch keygen); its .pub "
                  "must be in the daemon's publish.curve_authorized_keys directory");
  cmd->callback([options, &exit_code] {
    try {
      exit_code = run(*options);
    } catch (const std::exception& e) {
      std::cerr << "gaitwatch subscribe: " << e.what() << "\n";
      exit_code = 1;
    }
  });
}

void add_keygen(CLI::App& app, int& exit_code) {
  auto prefix = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "keygen", "create a ZeroMQ CURVE key pair: PREFIX.key (0600, secret) and PREFIX.pub");
  cmd->add_option("prefix", *prefix, "path prefix of the two files")->required();
  cmd->callback([prefix, &exit_code] {
    try {
      pipeline::write_curve_keypair(*prefix, pipeline::generate_curve_keypair());
      std::cout << *prefix << ".key\n" << *prefix << ".pub\n";
      exit_code = 0;
    } catch (const std::exception& e) {
      std::cerr << "gaitwatch keygen: " << e.what() << "\n";
      exit_code = 1;
    }
  });
}

}  // namespace gw::cli
