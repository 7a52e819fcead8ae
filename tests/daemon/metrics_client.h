// The integration tests' side of /metrics: a plain HTTP GET (Boost.Beast)
// and the value of one sample of the Prometheus text.
#pragma once

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cmath>
#include <sstream>
#include <string>
#include <utility>

namespace gw::test {

// GET http://127.0.0.1:port/target -> (status, body).
inline std::pair<int, std::string> http_get(int port, const std::string& target) {
  namespace http = boost::beast::http;
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket(io);
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  http::request<http::empty_body> request{http::verb::get, target, 11};
  request.set(http::field::host, "127.0.0.1");
  request.keep_alive(false);
  http::write(socket, request);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> response;
  http::read(socket, buffer, response);
  return {response.result_int(), response.body()};
}

// The value of the Prometheus sample `name` (with its labels, if any, as
// the daemon writes them); NaN if absent.
inline double metric(const std::string& text, const std::string& name) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  return std::nan("");
}

}  // namespace gw::test
