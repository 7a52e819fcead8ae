#include "daemon/preflight.h"

#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include <boost/asio.hpp>
#include <zmq.hpp>

namespace gw::daemon {
namespace {

namespace fs = std::filesystem;
using config::ConfigIssue;

// Binds a socket of `Protocol` to `address` on an ephemeral port and closes
// it; the error text when that fails.
template <typename Protocol>
std::string try_bind(const std::string& address) {
  boost::system::error_code ec;
  const auto ip = boost::asio::ip::make_address(address, ec);
  if (ec) return "'" + address + "' is not an IP address";
  boost::asio::io_context io;
  typename Protocol::socket socket(io);
  socket.open(ip.is_v4() ? Protocol::v4() : Protocol::v6(), ec);
  if (!ec) socket.bind(typename Protocol::endpoint(ip, 0), ec);
  if (ec) return "cannot bind " + address + ": " + ec.message();
  return {};
}

// The directory that will hold `file` exists and this process may create
// files in it; the file, when it exists, may be written.
std::string check_writable_file(const std::string& file) {
  const fs::path path(file);
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return "directory " + dir.string() + " does not exist (create it, or change the path)";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return "directory " + dir.string() + " is not writable: " + std::strerror(errno);
  if (fs::exists(path, ec) && ::access(path.c_str(), W_OK) != 0)
    return path.string() + " is not writable: " + std::strerror(errno);
  return {};
}

// A ZeroMQ bind endpoint: tcp (bound here on an ephemeral port, then closed)
// or ipc (its directory checked; binding would replace a running daemon's
// socket file).
std::string check_zmq_endpoint(const std::string& endpoint) {
  const auto scheme_end = endpoint.find("://");
  const std::string transport = endpoint.substr(0, scheme_end);
  const std::string rest = scheme_end == std::string::npos ? "" : endpoint.substr(scheme_end + 3);
  if (transport == "ipc") {
    if (rest.empty()) return "an ipc endpoint needs a path (ipc:///run/gaitwatch/control.sock)";
    if (rest.size() >= sizeof(sockaddr_un::sun_path))
      return "the socket path is longer than " + std::to_string(sizeof(sockaddr_un::sun_path) - 1) +
             " bytes";
    // The daemon makes the socket's directory when its parent exists.
    const fs::path dir = fs::path(rest).parent_path();
    std::error_code ec;
    if (!dir.empty() && !fs::exists(dir, ec) && fs::is_directory(dir.parent_path(), ec) &&
        ::access(dir.parent_path().c_str(), W_OK | X_OK) == 0)
      return {};
    return check_writable_file(rest);
  }
  if (transport != "tcp")
    return "transport '" + transport + "' is not served; use tcp://ADDRESS:PORT or ipc://PATH";
  const auto colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size())
    return "expected tcp://ADDRESS:PORT, got '" + endpoint + "'";
  const std::string port = rest.substr(colon + 1);
  if (port != "*" && port.find_first_not_of("0123456789") != std::string::npos)
    return "port '" + port + "' is not a number";
  if (port != "*" && std::stol(port.substr(0, 6)) > 65535) return "port " + port + " is above 65535";
  try {
    zmq::context_t context;
    zmq::socket_t socket(context, zmq::socket_type::pub);
    socket.set(zmq::sockopt::linger, 0);
    socket.bind("tcp://" + rest.substr(0, colon) + ":*");
  } catch (const zmq::error_t& e) {
    return "cannot bind " + rest.substr(0, colon) + ": " + e.what();
  }
  return {};
}

}  // namespace

std::vector<ConfigIssue> preflight_checks(const config::Config& config, PreflightRole role) {
  std::vector<ConfigIssue> issues;
  const auto add = [&](const std::string& path, const std::string& message) {
    if (!message.empty()) issues.push_back({path, 0, message, {}});
  };
  if (config.ingest.udp.port != 0)
    add("ingest.udp.bind", try_bind<boost::asio::ip::udp>(config.ingest.udp.bind));
  if (config.ingest.tcp.port != 0)
    add("ingest.tcp.bind", try_bind<boost::asio::ip::tcp>(config.ingest.tcp.bind));
  if (role == PreflightRole::kGateway) return issues;
  if (config.metrics.port != 0)
    add("metrics.bind", try_bind<boost::asio::ip::tcp>(config.metrics.bind));
  add("publish.endpoint", check_zmq_endpoint(config.publish.endpoint));
  if (config.control.enabled) add("control.endpoint", check_zmq_endpoint(config.control.endpoint));
  add("storage.path", check_writable_file(config.storage.path));
  if (config.history.enabled) add("history.path", check_writable_file(config.history.path));
  return issues;
}

}  // namespace gw::daemon
