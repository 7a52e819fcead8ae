// A small synchronous HTTP(S) client for the console's tests (Boost.Beast):
// one request per connection, the answer's status, headers and body.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace gw::test {

struct HttpAnswer {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string header(const std::string& name) const {
    const auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

struct HttpRequest {
  std::string method = "GET";
  std::string target = "/";
  std::string body;
  std::map<std::string, std::string> headers;
};

namespace detail {
namespace http = boost::beast::http;

inline http::request<http::string_body> make_request(const HttpRequest& r) {
  http::request<http::string_body> req(http::string_to_verb(r.method), r.target, 11);
  req.set(http::field::host, "127.0.0.1");
  for (const auto& [name, value] : r.headers) req.set(name, value);
  if (!r.body.empty()) {
    req.set(http::field::content_type, "application/json");
    req.body() = r.body;
  }
  req.prepare_payload();
  return req;
}

inline HttpAnswer answer_of(const http::response<http::string_body>& res) {
  HttpAnswer a;
  a.status = static_cast<int>(res.result_int());
  for (const auto& field : res) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    a.headers[name] = std::string(field.value());
  }
  a.body = res.body();
  return a;
}
}  // namespace detail

inline HttpAnswer http_call(int port, const HttpRequest& r) {
  namespace beast = boost::beast;
  boost::asio::io_context io;
  beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::seconds(20));
  stream.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  auto req = detail::make_request(r);
  beast::http::write(stream, req);
  beast::flat_buffer buffer;
  beast::http::response<beast::http::string_body> res;
  beast::http::read(stream, buffer, res);
  beast::error_code ignored;
  stream.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
  return detail::answer_of(res);
}

// Over TLS, without checking the certificate (the tests make a self-signed one).
inline HttpAnswer https_call(int port, const HttpRequest& r) {
  namespace beast = boost::beast;
  namespace ssl = boost::asio::ssl;
  boost::asio::io_context io;
  ssl::context context(ssl::context::tls_client);
  context.set_verify_mode(ssl::verify_none);
  beast::ssl_stream<beast::tcp_stream> stream(io, context);
  beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(20));
  beast::get_lowest_layer(stream).connect(
      {boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  stream.handshake(ssl::stream_base::client);
  auto req = detail::make_request(r);
  beast::http::write(stream, req);
  beast::flat_buffer buffer;
  beast::http::response<beast::http::string_body> res;
  beast::http::read(stream, buffer, res);
  return detail::answer_of(res);
}

// The value of a Set-Cookie header's first pair ("gw_session=abc; ..." -> "gw_session=abc").
inline std::string cookie_pair(const std::string& set_cookie) {
  return set_cookie.substr(0, set_cookie.find(';'));
}

}  // namespace gw::test
