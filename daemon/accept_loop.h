// Accepting TCP connections without spinning when the process runs out of
// file descriptors (or the kernel out of memory for sockets).
//
// A listening socket with a connection waiting stays readable while accept()
// fails with EMFILE/ENFILE/ENOBUFS/ENOMEM, so accepting again at once spins
// a core and starves every other handler of the io_context. After such an
// error the loop waits (100 ms, doubling to 1 s while the errors go on)
// before the next accept; any other error is retried at once. And it keeps
// descriptors in reserve for the rest of the daemon (the control interface,
// the database, the history files): a connection accepted onto one of the
// last fd_headroom() descriptors below RLIMIT_NOFILE is closed at once, as
// one past a connection cap is.
//
// Thread safety: start(), stop(), stop_taking_waiting() and the handlers run
// on the acceptor's executor's thread (the owner's io_context).
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include <boost/asio.hpp>

namespace gw::daemon {

// Whether a failed accept means resources ran out (EMFILE, ENFILE, ENOBUFS,
// ENOMEM): the errors after which the next accept waits.
bool is_resource_error(const boost::system::error_code& ec);

// Descriptors kept free for the rest of the daemon: an eighth of the soft
// RLIMIT_NOFILE, at least 16 and at most 256 (read once).
int fd_headroom();
// Whether descriptor `fd` lies within fd_headroom() of the soft limit: a
// connection accepted there is to be closed (descriptors are handed out
// lowest first, so all below it are in use).
bool within_fd_headroom(int fd);

class AcceptLoop : public std::enable_shared_from_this<AcceptLoop> {
 public:
  using tcp = boost::asio::ip::tcp;
  struct Handlers {
    // The executor (io_context) the next accepted socket is to live on;
    // empty = the acceptor's.
    std::function<boost::asio::any_io_executor()> socket_executor;
    // A connection accepted (the owner decides whether to keep it).
    std::function<void(tcp::socket socket)> accepted;
    // An accept failed; the next one starts after `wait` (zero: at once).
    std::function<void(const boost::system::error_code& ec, std::chrono::milliseconds wait)> failed;
  };
  static constexpr std::chrono::milliseconds kFirstWait{100};
  static constexpr std::chrono::milliseconds kLongestWait{1000};

  // Starts accepting on `acceptor` (which must outlive the loop's handlers:
  // close it and call stop() before it goes). The loop ends when the
  // acceptor is closed.
  static std::shared_ptr<AcceptLoop> start(tcp::acceptor& acceptor, Handlers handlers);
  // Cancels a wait in progress (an accept in progress ends when the owner
  // closes the acceptor).
  void stop();
  // stop(), and hands every connection the kernel has already completed
  // (the listen backlog, and an accept that completed but whose handler has
  // not run yet) to `accepted`: a peer may have sent its data and gone
  // before it was accepted, and a graceful stop reads that too. The owner
  // closes the acceptor after.
  void stop_taking_waiting();

 private:
  AcceptLoop(tcp::acceptor& acceptor, Handlers handlers);
  void accept();
  void on_accept(const boost::system::error_code& ec, tcp::socket socket);

  tcp::acceptor& acceptor_;
  Handlers handlers_;
  boost::asio::steady_timer timer_;
  std::chrono::milliseconds next_wait_ = kFirstWait;
  bool stopped_ = false;
  bool take_completed_ = false;  // stop_taking_waiting(): completed accepts still go to `accepted`
};

}  // namespace gw::daemon
