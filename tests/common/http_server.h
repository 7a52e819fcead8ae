// A real HTTP server on a loopback port for the webhook bridge's tests
// (Boost.Beast, synchronous, one connection at a time): answers each request
// with the next scripted status (200 once the script is used up) and records
// what came.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace gw::test {

struct Received {
  std::string target;
  std::string topic;
  std::string authorization;
  std::string content_type;
  std::string body;
};

// Answers each request with the next scripted status (200 once the script
// is used up) and records what came.
class HttpServer {
 public:
  explicit HttpServer(std::deque<int> statuses)
      : statuses_(std::move(statuses)),
        acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}),
        thread_([this] { serve(); }) {}

  ~HttpServer() {
    stopping_ = true;
    boost::system::error_code ignored;
    // Wakes the blocking accept.
    boost::asio::ip::tcp::socket poke(io_);
    poke.connect(acceptor_.local_endpoint(), ignored);
    thread_.join();
  }

  int port() const { return acceptor_.local_endpoint().port(); }

  std::vector<Received> received() {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }

  bool wait_for_count(std::size_t n, std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      if (received().size() >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return received().size() >= n;
  }

 private:
  void serve() {
    while (!stopping_) {
      boost::asio::ip::tcp::socket socket(io_);
      boost::system::error_code error;
      acceptor_.accept(socket, error);
      if (error || stopping_) continue;
      boost::beast::flat_buffer buffer;
      boost::beast::http::request<boost::beast::http::string_body> request;
      boost::beast::http::read(socket, buffer, request, error);
      if (error) continue;
      int status = 200;
      {
        std::lock_guard<std::mutex> lock(mu_);
        received_.push_back({std::string(request.target()), std::string(request["X-Gaitwatch-Topic"]),
                             std::string(request[boost::beast::http::field::authorization]),
                             std::string(request[boost::beast::http::field::content_type]), request.body()});
        if (!statuses_.empty()) {
          status = statuses_.front();
          statuses_.pop_front();
        }
      }
      boost::beast::http::response<boost::beast::http::string_body> response{static_cast<boost::beast::http::status>(status), 11};
      response.body() = "ok";
      response.prepare_payload();
      boost::beast::http::write(socket, response, error);
      socket.shutdown(boost::asio::ip::tcp::socket::shutdown_both, error);
    }
  }

  std::mutex mu_;
  std::deque<int> statuses_;
  std::vector<Received> received_;
  std::atomic<bool> stopping_{false};
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::thread thread_;
};

}  // namespace gw::test
