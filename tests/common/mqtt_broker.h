// A real mosquitto broker on a loopback port, in a temp dir, for the MQTT
// bridge's tests, and a client that records what the broker delivers.
// available() is false where Debian's mosquitto package is not installed;
// the tests then WARN "mosquitto not installed" and CTest reports them
// skipped.
#pragma once

#include <mosquitto.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>

#include "common/child_process.h"
#include "tests/common/loopback_server.h"

namespace gw::test {

inline const char* const kMosquittoBinary = "/usr/sbin/mosquitto";

class MqttBroker {
 public:
  static bool available() { return std::filesystem::exists(kMosquittoBinary); }

  explicit MqttBroker(std::filesystem::path dir) : dir_(std::move(dir)), server_("mosquitto") {
    std::ofstream conf(dir_ / "mosquitto.conf");
    conf << "listener " << server_.port() << " 127.0.0.1\n"
         << "allow_anonymous true\n"
         << "persistence false\n"
         << "log_dest stderr\n";
  }

  int port() const { return server_.port(); }

  // Starts the broker and returns once it accepts connections.
  void start() { server_.start({kMosquittoBinary, "-c", (dir_ / "mosquitto.conf").string()}, dir_); }
  void stop() { server_.stop(); }

 private:
  std::filesystem::path dir_;
  LoopbackServer server_;
};

struct MqttMessage {
  std::string topic;
  std::string payload;
  bool retained = false;
};

// Subscribes to `filter` at QoS 1 and keeps every message, in arrival order.
class MqttRecorder {
 public:
  MqttRecorder(int port, const std::string& filter) : filter_(filter) {
    mosquitto_lib_init();
    client_ = mosquitto_new(nullptr, true, this);
    mosquitto_connect_callback_set(client_, [](mosquitto* m, void* self, int rc) {
      auto* recorder = static_cast<MqttRecorder*>(self);
      if (rc == 0) mosquitto_subscribe(m, nullptr, recorder->filter_.c_str(), 1);
    });
    mosquitto_subscribe_callback_set(client_, [](mosquitto*, void* self, int, int, const int*) {
      auto* recorder = static_cast<MqttRecorder*>(self);
      std::lock_guard<std::mutex> lock(recorder->mu_);
      recorder->subscribed_ = true;
      recorder->cv_.notify_all();
    });
    mosquitto_message_callback_set(
        client_, [](mosquitto*, void* self, const mosquitto_message* message) {
          auto* recorder = static_cast<MqttRecorder*>(self);
          std::lock_guard<std::mutex> lock(recorder->mu_);
          recorder->messages_.push_back(
              {message->topic,
               std::string(static_cast<const char*>(message->payload),
                           static_cast<std::size_t>(message->payloadlen)),
               message->retain});
          recorder->cv_.notify_all();
        });
    mosquitto_loop_start(client_);
    mosquitto_connect_async(client_, "127.0.0.1", port, 30);
  }

  ~MqttRecorder() {
    mosquitto_disconnect(client_);
    mosquitto_loop_stop(client_, false);
    mosquitto_destroy(client_);
  }

  bool wait_subscribed(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return subscribed_; });
  }

  // Waits until `pred(messages)` holds; returns whether it did.
  template <typename Pred>
  bool wait_until(Pred pred, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(messages_); });
  }

  std::vector<MqttMessage> messages() {
    std::lock_guard<std::mutex> lock(mu_);
    return messages_;
  }

 private:
  std::string filter_;
  mosquitto* client_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  bool subscribed_ = false;
  std::vector<MqttMessage> messages_;
};

}  // namespace gw::test
