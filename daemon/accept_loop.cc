#include "daemon/accept_loop.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>

namespace gw::daemon {

namespace asio = boost::asio;

bool is_resource_error(const boost::system::error_code& ec) {
  if (ec.category() != boost::system::system_category()) return false;
  const int e = ec.value();
  return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM;
}

namespace {

int soft_fd_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 1 << 20;
  return static_cast<int>(std::min<rlim_t>(limit.rlim_cur, rlim_t{1} << 30));
}

}  // namespace

int fd_headroom() {
  static const int headroom = std::clamp(soft_fd_limit() / 8, 16, 256);
  return headroom;
}

bool within_fd_headroom(int fd) {
  static const int limit = soft_fd_limit();
  return fd >= limit - fd_headroom();
}

std::shared_ptr<AcceptLoop> AcceptLoop::start(tcp::acceptor& acceptor, Handlers handlers) {
  std::shared_ptr<AcceptLoop> loop(new AcceptLoop(acceptor, std::move(handlers)));
  loop->accept();
  return loop;
}

AcceptLoop::AcceptLoop(tcp::acceptor& acceptor, Handlers handlers)
    : acceptor_(acceptor), handlers_(std::move(handlers)), timer_(acceptor.get_executor()) {}

void AcceptLoop::stop() {
  stopped_ = true;
  timer_.cancel();
}

void AcceptLoop::stop_taking_waiting() {
  stop();
  take_completed_ = true;
  boost::system::error_code ec;
  acceptor_.non_blocking(true, ec);
  // At most a backlog's worth (a flood must not keep the stop here).
  for (int taken = 0; !ec && acceptor_.is_open() && taken < tcp::acceptor::max_listen_connections;
       ++taken) {
    tcp::socket socket = handlers_.socket_executor
                             ? acceptor_.accept(handlers_.socket_executor(), ec)
                             : acceptor_.accept(ec);
    if (!ec) {
      handlers_.accepted(std::move(socket));
    } else if (ec != asio::error::would_block && ec != asio::error::try_again &&
               !is_resource_error(ec)) {
      ec.clear();  // a peer gone before it was accepted: the ones behind it may be fine
    }
  }
}

void AcceptLoop::accept() {
  if (stopped_ || !acceptor_.is_open()) return;
  auto self = shared_from_this();
  auto handler = [self](const boost::system::error_code& ec, tcp::socket socket) {
    self->on_accept(ec, std::move(socket));
  };
  if (handlers_.socket_executor)
    acceptor_.async_accept(handlers_.socket_executor(), std::move(handler));
  else
    acceptor_.async_accept(std::move(handler));
}

void AcceptLoop::on_accept(const boost::system::error_code& ec, tcp::socket socket) {
  if (!ec && take_completed_) {
    handlers_.accepted(std::move(socket));
    return;
  }
  if (ec == asio::error::operation_aborted || stopped_ || !acceptor_.is_open()) return;
  if (!ec) {
    next_wait_ = kFirstWait;
    handlers_.accepted(std::move(socket));
    accept();
    return;
  }
  if (!is_resource_error(ec)) {
    // A connection reset before it was accepted and the like: the next one
    // may be fine.
    if (handlers_.failed) handlers_.failed(ec, std::chrono::milliseconds(0));
    accept();
    return;
  }
  const std::chrono::milliseconds wait = next_wait_;
  next_wait_ = std::min(kLongestWait, next_wait_ * 2);
  if (handlers_.failed) handlers_.failed(ec, wait);
  timer_.expires_after(wait);
  timer_.async_wait([self = shared_from_this()](const boost::system::error_code& waited) {
    if (!waited) self->accept();
  });
}

}  // namespace gw::daemon
