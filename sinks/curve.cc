#include "sinks/curve.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "common/error.h"
#include "common/private_file.h"

namespace gw::pipeline {
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kZ85KeyLength = 40;

bool is_z85_key(const std::string& key) {
  static const std::string alphabet =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
  return key.size() == kZ85KeyLength && key.find_first_not_of(alphabet) == std::string::npos;
}

}  // namespace

CurveKeyPair generate_curve_keypair() {
  if (!zmq_has("curve")) throw Error("this libzmq has no CURVE support");
  char public_key[kZ85KeyLength + 1], secret_key[kZ85KeyLength + 1];
  if (zmq_curve_keypair(public_key, secret_key) != 0)
    throw Error(std::string("zmq_curve_keypair: ") + zmq_strerror(zmq_errno()));
  return {public_key, secret_key};
}

void write_curve_keypair(const std::string& prefix, const CurveKeyPair& keys) {
  write_private_file(prefix + ".key",
                     "public: " + keys.public_key + "\nsecret: " + keys.secret_key + "\n", 0600,
                     "key file");
  write_private_file(prefix + ".pub", "public: " + keys.public_key + "\n", 0644, "key file");
}

CurveKeyPair read_curve_key_file(const std::string& path, bool need_secret) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot read the key file");
  CurveKeyPair keys;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    const auto colon = line.find(':');
    const std::string name = line.substr(0, colon);
    std::string value = colon == std::string::npos ? "" : line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    value.erase(value.find_last_not_of(" \t\r") + 1);
    if (name != "public" && name != "secret")
      throw Error(path + ":" + std::to_string(number) + ": expected 'public: KEY' or 'secret: KEY'");
    if (!is_z85_key(value))
      throw Error(path + ":" + std::to_string(number) + ": the " + name +
                  " key is not 40 Z85 characters");
    (name == "public" ? keys.public_key : keys.secret_key) = value;
  }
  if (keys.public_key.empty()) throw Error(path + ": no 'public:' key");
  if (need_secret && keys.secret_key.empty()) throw Error(path + ": no 'secret:' key");
  return keys;
}

std::set<std::string> read_authorized_keys(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(dir + ": not a directory of .pub files");
  std::set<std::string> keys;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".pub")
      keys.insert(read_curve_key_file(entry.path().string(), false).public_key);
  return keys;
}

void make_curve_server(zmq::socket_t& socket, const CurveKeyPair& keys) {
  socket.set(zmq::sockopt::curve_server, true);
  socket.set(zmq::sockopt::curve_secretkey, keys.secret_key);
  socket.set(zmq::sockopt::zap_domain, "gaitwatch");
}

void make_curve_client(zmq::socket_t& socket, const CurveKeyPair& client,
                       const std::string& server_public) {
  socket.set(zmq::sockopt::curve_serverkey, server_public);
  socket.set(zmq::sockopt::curve_publickey, client.public_key);
  socket.set(zmq::sockopt::curve_secretkey, client.secret_key);
}

std::optional<CurveClientKeys> read_curve_client_keys(const std::string& server_key_file,
                                                      const std::string& key_file) {
  if (server_key_file.empty() && key_file.empty()) return std::nullopt;
  if (server_key_file.empty() || key_file.empty())
    throw Error("CURVE needs both the server's public key (--server-key) and this client's key "
                "(--key)");
  return CurveClientKeys{read_curve_key_file(key_file, true),
                         read_curve_key_file(server_key_file, false).public_key};
}

void make_curve_client(zmq::socket_t& socket, const CurveClientKeys& keys) {
  make_curve_client(socket, keys.client, keys.server_public);
}

std::unique_ptr<CurveAuthenticator> secure_curve_server(zmq::context_t& context,
                                                        zmq::socket_t& socket,
                                                        const std::string& secret_key_file,
                                                        const std::string& authorized_keys_dir) {
  const CurveKeyPair keys = read_curve_key_file(secret_key_file, true);
  auto authenticator =
      std::make_unique<CurveAuthenticator>(context, read_authorized_keys(authorized_keys_dir));
  make_curve_server(socket, keys);
  return authenticator;
}

CurveAuthenticator::CurveAuthenticator(zmq::context_t& context, std::set<std::string> authorized)
    : handler_(context, zmq::socket_type::rep), authorized_(std::move(authorized)) {
  handler_.set(zmq::sockopt::linger, 0);
  handler_.set(zmq::sockopt::rcvtimeo, 100);
  handler_.bind("inproc://zeromq.zap.01");
  thread_ = std::thread([this] { serve(); });
}

CurveAuthenticator::~CurveAuthenticator() {
  stop_ = true;
  thread_.join();
}

void CurveAuthenticator::serve() {
  while (!stop_) {
    std::vector<zmq::message_t> request;
    zmq::message_t part;
    try {
      if (!handler_.recv(part)) continue;  // timeout: check stop_
      request.push_back(std::move(part));
      while (request.back().more()) {
        zmq::message_t next;
        if (!handler_.recv(next)) break;
        request.push_back(std::move(next));
      }
    } catch (const zmq::error_t&) {
      return;  // context terminated
    }
    // version, request id, domain, address, identity, mechanism, credentials...
    const bool well_formed = request.size() >= 6 && request[0].to_string() == "1.0";
    bool admit = false;
    if (well_formed && request[5].to_string() == "CURVE" && request.size() >= 7 &&
        request[6].size() == 32) {
      char z85[kZ85KeyLength + 1];
      zmq_z85_encode(z85, static_cast<const std::uint8_t*>(request[6].data()), 32);
      admit = authorized_.count(z85) > 0;
    }
    (admit ? admitted_ : refused_) += 1;
    const std::string id = request.size() > 1 ? request[1].to_string() : "";
    try {
      handler_.send(zmq::str_buffer("1.0"), zmq::send_flags::sndmore);
      handler_.send(zmq::buffer(id), zmq::send_flags::sndmore);
      handler_.send(zmq::buffer(std::string(admit ? "200" : "400")), zmq::send_flags::sndmore);
      handler_.send(zmq::buffer(std::string(admit ? "OK" : "client key not authorized")),
                    zmq::send_flags::sndmore);
      handler_.send(zmq::str_buffer(""), zmq::send_flags::sndmore);  // user id
      handler_.send(zmq::str_buffer(""), zmq::send_flags::none);     // metadata
    } catch (const zmq::error_t&) {
      return;
    }
  }
}

}  // namespace gw::pipeline
