#include "common/http_url.h"

#include <algorithm>

#include "common/error.h"

namespace gw {

HttpUrl parse_http_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind("https://", 0) == 0)
    throw Error("URL '" + url +
                "': https is not supported; put a TLS-terminating proxy on this host in front of "
                "the endpoint and give its http:// address");
  if (url.rfind(scheme, 0) != 0) throw Error("URL '" + url + "' must start with http://");
  HttpUrl parsed;
  const std::string rest = url.substr(scheme.size());
  const std::size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) parsed.target = rest.substr(slash);
  if (authority.empty()) throw Error("URL '" + url + "' has no host");
  const std::size_t colon = authority.rfind(':');
  const bool bracketed = authority.front() == '[';
  if (colon != std::string::npos && (!bracketed || authority[colon - 1] == ']')) {
    parsed.host = authority.substr(0, colon);
    parsed.port = authority.substr(colon + 1);
    const bool digits = !parsed.port.empty() &&
                        std::all_of(parsed.port.begin(), parsed.port.end(),
                                    [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || parsed.port.size() > 5 || std::stoi(parsed.port) < 1 ||
        std::stoi(parsed.port) > 65535)
      throw Error("URL '" + url + "' has a bad port '" + parsed.port + "'");
  } else {
    parsed.host = authority;
  }
  if (bracketed && parsed.host.size() >= 2) parsed.host = parsed.host.substr(1, parsed.host.size() - 2);
  if (parsed.host.empty()) throw Error("URL '" + url + "' has no host");
  return parsed;
}

}  // namespace gw
