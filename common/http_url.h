// The parts of an http:// URL (the webhook bridge's endpoint): host, port
// and request target. Checked once where the URL is configured and again
// where it is used.
#pragma once

#include <string>

namespace gw {

struct HttpUrl {
  std::string host;        // without brackets for an IPv6 address
  std::string port = "80";
  std::string target = "/";  // path and query
};

// Throws gw::Error naming what is wrong: not http:// (https:// gets advice),
// no host, a bad port.
HttpUrl parse_http_url(const std::string& url);

}  // namespace gw
