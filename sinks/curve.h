// ZeroMQ CURVE security for gaitwatch's sockets (the alert publisher; the
// control interface uses the same pieces): key files, the server and client
// socket options, and a ZAP handler that admits only authorized client keys.
//
// Key files are text: a secret key file ("NAME.key", created 0600) holds
//   public: <40 Z85 characters>
//   secret: <40 Z85 characters>
// and a public key file ("NAME.pub") only the `public:` line. An authorized
// keys directory holds one .pub file per client allowed to connect.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include <zmq.hpp>

namespace gw::pipeline {

struct CurveKeyPair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;  // Z85, 40 characters; empty in a public key file
};

// A fresh key pair (libzmq built with libsodium). Throws gw::Error otherwise.
CurveKeyPair generate_curve_keypair();
// Writes PREFIX.key (0600, public + secret) and PREFIX.pub (0644, public).
// Throws gw::Error naming the file on failure.
void write_curve_keypair(const std::string& prefix, const CurveKeyPair& keys);
// Reads a .key or .pub file; throws gw::Error naming the file and the line
// when it is unreadable or a key is not 40 Z85 characters. `need_secret`:
// the file must hold a secret key.
CurveKeyPair read_curve_key_file(const std::string& path, bool need_secret);
// Public keys of every *.pub file in `dir`; throws gw::Error for a bad file.
std::set<std::string> read_authorized_keys(const std::string& dir);

// Socket options: a CURVE server with `keys` (before bind), or a client of
// the server with public key `server_public` (before connect).
void make_curve_server(zmq::socket_t& socket, const CurveKeyPair& keys);
void make_curve_client(zmq::socket_t& socket, const CurveKeyPair& client,
                       const std::string& server_public);

// A client's side of CURVE: its own key pair and the server's public key.
struct CurveClientKeys {
  CurveKeyPair client;
  std::string server_public;
};
// Reads the client's key files: `key_file` (NAME.key, with the secret) and
// `server_key_file` (the server's NAME.pub). Both empty: nullopt (plain TCP).
// Only one given, or a bad file: throws gw::Error saying which.
std::optional<CurveClientKeys> read_curve_client_keys(const std::string& server_key_file,
                                                      const std::string& key_file);
void make_curve_client(zmq::socket_t& socket, const CurveClientKeys& keys);

// The server side of one ZeroMQ context: a ZAP handler admitting the keys of
// `authorized_keys_dir` and the server options from `secret_key_file` on
// `socket`. Returns the handler (keep it alive as long as the socket); call
// before bind. Throws gw::Error for a bad key file or directory.
class CurveAuthenticator;
std::unique_ptr<CurveAuthenticator> secure_curve_server(zmq::context_t& context,
                                                        zmq::socket_t& socket,
                                                        const std::string& secret_key_file,
                                                        const std::string& authorized_keys_dir);

// The ZAP handler (RFC 27) of one ZeroMQ context: CURVE clients whose public
// key is in `authorized` are admitted, every other connection is refused.
// Runs a thread from construction to destruction; construct it before the
// server socket binds.
class CurveAuthenticator {
 public:
  CurveAuthenticator(zmq::context_t& context, std::set<std::string> authorized);
  ~CurveAuthenticator();
  CurveAuthenticator(const CurveAuthenticator&) = delete;
  CurveAuthenticator& operator=(const CurveAuthenticator&) = delete;
  std::uint64_t admitted() const { return admitted_; }
  std::uint64_t refused() const { return refused_; }

 private:
  void serve();
  zmq::socket_t handler_;
  std::set<std::string> authorized_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> admitted_{0}, refused_{0};
  std::thread thread_;
};

}  // namespace gw::pipeline
