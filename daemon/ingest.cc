#include "daemon/ingest.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "common/thread_name.h"
#include "daemon/gait_job.h"
#include "jobs/daemon_jobs.h"

namespace gw::daemon {

namespace asio = boost::asio;
using asio::ip::tcp;
using asio::ip::udp;

namespace {

// Key of Ingest::allowed_: one wearer's device, or (no device) all of them.
std::uint64_t allowed_key(std::uint32_t wearer, std::optional<std::uint32_t> device) {
  return std::uint64_t{wearer} << 17 | (device ? *device : 0x10000u);
}

// A TCP record's length prefix: u32, little-endian.
std::uint32_t length_prefix(const std::uint8_t* p) {
  return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 |
         std::uint32_t(p[3]) << 24;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

nlohmann::json IngestCounters::to_json(const FrameQueue& queue) const {
  nlohmann::json decode_errors = nlohmann::json::object();
  for (int s = 1; s < sensors::kDecodeStatusCount; ++s)
    decode_errors[sensors::to_string(static_cast<sensors::DecodeStatus>(s))] = decode[s].load();
  return {{"datagrams", datagrams.load()},
          {"tcp_frames", tcp_frames.load()},
          {"stream_frames", stream_frames.load()},
          {"tcp_connections", tcp_connections.load()},
          {"tcp_bad_length", tcp_bad_length.load()},
          {"oversized", oversized.load()},
          {"decode_errors", decode_errors},
          {"unknown_device", unknown_device.load()},
          {"profile_mismatch", profile_mismatch.load()},
          {"admission", {{"not_allowed", not_allowed.load()},
                         {"wrong_source", wrong_source.load()},
                         {"missing_mac", missing_mac.load()},
                         {"bad_mac", bad_mac.load()},
                         {"unexpected_mac", unexpected_mac.load()},
                         {"mac_verified", mac_verified.load()}}},
          {"queued", queued.load()},
          {"tcp_open", tcp_open.load()},
          {"tcp_refused", tcp_refused.load()},
          {"tcp_idle_closed", tcp_idle_closed.load()},
          {"tcp_buffers_shrunk", tcp_buffers_shrunk.load()},
          {"accept_errors", accept_errors.load()},
          {"queue_dropped", queue.dropped()},
          {"queue_refused_closed", queue.refused_closed()},
          {"queue_depth", queue.size()},
          {"queue_high_water", queue.high_water()}};
}

// One TCP connection: length-prefixed frames (u32 little-endian length, then
// that many bytes), read in as large pieces as the socket has ready and
// taken apart in place, so that a busy connection costs one read per many
// frames rather than two per frame. All of a session's handlers run on its
// socket's io_context (the owner's, or one ingest thread's). A timer closes
// the connection after ingest.tcp.idle_timeout_s without a byte, and has a
// buffer that a burst grew given back its small size once the burst is over.
struct Ingest::TcpSession : std::enable_shared_from_this<TcpSession> {
  using Clock = std::chrono::steady_clock;
  // The buffer starts small (thousands of devices may each hold a
  // connection), grows to hold a whole frame when one is larger, and
  // doubles up to kBusyBytes while reads keep filling it; kShrinkAfter
  // after the last read that filled it (or needed a larger frame), a read
  // that does not fill it (or, on a connection quiet for kShrinkAfter, the
  // timer) gives it back kInitialBytes when what it holds fits there.
  static constexpr std::size_t kInitialBytes = 16 * 1024;
  static constexpr std::size_t kBusyBytes = 256 * 1024;
  static constexpr Clock::duration kShrinkAfter = std::chrono::seconds(1);
  // The timer looks at the connection at least this often.
  static constexpr Clock::duration kCheckEvery = std::chrono::seconds(2);
  // After Ingest::stop() a connection reads on until its peer closes, or
  // until nothing came for kFinishQuiet and nothing waits in the socket, or
  // kFinishLimit after the stop: what a peer sent before the stop (a sender
  // that has already exited leaves its last frames in the socket buffers)
  // is queued, not lost, and a peer that keeps sending cannot hold the stop
  // up. (A session whose thread served another connection's wait for queue
  // room has not read meanwhile: what waits in its socket says it is not
  // quiet.)
  static constexpr Clock::duration kFinishQuiet = std::chrono::milliseconds(100);
  static constexpr Clock::duration kFinishLimit = std::chrono::seconds(3);
  static constexpr Clock::duration kFinishCheck = std::chrono::milliseconds(20);

  TcpSession(Ingest& owner, tcp::socket socket, const Address& sender, int zone)
      : owner(owner), socket(std::move(socket)), sender(sender), zone(zone),
        buffer(kInitialBytes), timer(this->socket.get_executor()) {
    ++owner.counters_.tcp_open;
  }
  ~TcpSession() { --owner.counters_.tcp_open; }

  void start() {
    last_read = last_grown = Clock::now();
    watch();
    read();
  }

  // The read in flight writes into the buffer it was given: the buffer is
  // changed only in the read's handler, never while a read waits (the
  // timer asks for a smaller one by cancelling the read, see on_timer).
  void read() {
    auto self = shared_from_this();
    socket.async_read_some(asio::buffer(buffer.data() + filled, buffer.size() - filled),
                           [self](const boost::system::error_code& ec, std::size_t n) {
                             const bool shrink_asked = self->shrink_asked;
                             self->shrink_asked = false;
                             if (ec == asio::error::operation_aborted && shrink_asked &&
                                 self->socket.is_open()) {
                               // Cancelled by the timer before it read a byte:
                               // what the peer sends waits in the socket.
                               self->filled += n;
                               self->shrink_if_quiet();
                               self->read();
                               return;
                             }
                             if (ec) return;
                             const bool was_full = self->filled + n == self->buffer.size();
                             self->filled += n;
                             if (!self->take_frames()) return;  // closed: bad length
                             // After the frames are queued: a wait for room in
                             // a full queue is not idleness.
                             self->last_read = Clock::now();
                             if (was_full) {
                               if (self->buffer.size() < kBusyBytes)
                                 self->buffer.resize(
                                     std::min(kBusyBytes, self->buffer.size() * 2));
                               self->last_grown = self->last_read;
                             } else {
                               self->shrink_if_quiet();
                             }
                             self->read();
                           });
  }

  // The timer holds the session weakly: the read in progress keeps it, and
  // a session whose read has ended (peer gone, stop()) goes at once.
  void watch() {
    const double idle_s = owner.config_.ingest.tcp.idle_timeout_s;
    Clock::duration next = finishing ? kFinishCheck : kCheckEvery;
    if (idle_s > 0) {
      const auto idle_limit = std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(idle_s));
      next = std::min(next, last_read + idle_limit - Clock::now());
      next = std::max(next, Clock::duration(std::chrono::milliseconds(10)));
    }
    timer.expires_after(next);
    timer.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
      auto self = weak.lock();
      if (ec || !self || !self->socket.is_open()) return;
      self->on_timer();
    });
  }

  // Ingest::stop(): read on until the peer closes or kFinish* says done.
  void finish() {
    if (finishing) return;
    finishing = true;
    finish_by = Clock::now() + kFinishLimit;
    watch();  // sooner: the wait in progress ends with operation_aborted
  }

  void on_timer() {
    const double idle_s = owner.config_.ingest.tcp.idle_timeout_s;
    const auto now = Clock::now();
    boost::system::error_code available_error;
    const bool waiting = finishing && socket.available(available_error) > 0 && !available_error;
    if (finishing && ((now - last_read >= kFinishQuiet && !waiting) || now >= finish_by)) {
      boost::system::error_code ignored;
      socket.close(ignored);  // the read ends with an error and lets the session go
      return;
    }
    if (idle_s > 0 && now - last_read >= std::chrono::duration<double>(idle_s)) {
      const std::uint64_t total = ++owner.counters_.tcp_idle_closed;
      if (const auto since = owner.idle_log_.due(total))
        spdlog::info("tcp ingest: closed {} connection(s) idle for {} s (the last from {}; {} in all)",
                     *since, idle_s, peer(), total);
      boost::system::error_code ignored;
      socket.close(ignored);  // the read ends with an error and lets the session go
      return;
    }
    if (now - last_read >= kShrinkAfter && may_shrink()) {
      // A read waiting on a quiet connection holds the large buffer: cancel
      // it; if it is still waiting, its handler shrinks the buffer and reads
      // again (a busy connection's reads shrink it themselves).
      shrink_asked = true;
      boost::system::error_code ignored;
      socket.cancel(ignored);
    }
    watch();
  }

  // The buffer is larger than it starts, no read filled it (nor did it grow)
  // for kShrinkAfter, and what it holds fits in the small size: no frame
  // larger than that has begun (such a frame keeps the room it needs).
  bool may_shrink() const {
    if (buffer.size() <= kInitialBytes || filled > kInitialBytes ||
        Clock::now() - last_grown < kShrinkAfter)
      return false;
    return filled < 4 || 4 + std::size_t{length_prefix(buffer.data())} <= kInitialBytes;
  }

  // Only between reads (the read's handler): a read in flight writes into
  // the buffer it was given.
  void shrink_if_quiet() {
    if (!may_shrink()) return;
    std::vector<std::uint8_t> small(kInitialBytes);
    std::copy_n(buffer.begin(), filled, small.begin());
    buffer.swap(small);
    ++owner.counters_.tcp_buffers_shrunk;
  }

  // Hands every complete frame in the buffer to the owner and keeps the
  // incomplete rest at its start. False when the connection was closed.
  bool take_frames() {
    std::size_t at = 0;
    while (filled - at >= 4) {
      const std::uint8_t* p = buffer.data() + at;
      const std::uint32_t length = length_prefix(p);
      if (length == 0 || length > owner.config_.ingest.max_frame_bytes) {
        // The stream cannot be resynchronised after a bad length: close it,
        // after queueing the good frames read before it.
        if (!decoded.empty()) owner.counters_.queued += owner.queue_.push_all(decoded);
        ++owner.counters_.tcp_bad_length;
        spdlog::warn("tcp ingest: bad frame length {} from {}; closing", length, peer());
        boost::system::error_code ignored;
        socket.close(ignored);
        return false;
      }
      if (filled - at - 4 < length) {
        if (4 + std::size_t{length} > buffer.size()) {
          buffer.resize(4 + std::size_t{length});
          last_grown = Clock::now();
        }
        break;
      }
      ++owner.counters_.tcp_frames;
      ReceivedFrame received;
      if (owner.accept_frame(p + 4, length, sender, zone, received))
        decoded.push_back(std::move(received));
      at += 4 + std::size_t{length};
    }
    // The read's frames go to the queue together: one lock, not one per frame.
    if (!decoded.empty()) owner.counters_.queued += owner.queue_.push_all(decoded);
    if (at > 0) {
      std::memmove(buffer.data(), buffer.data() + at, filled - at);
      filled -= at;
    }
    return true;
  }

  std::string peer() const {
    boost::system::error_code ec;
    auto ep = socket.remote_endpoint(ec);
    return ec ? std::string("?") : ep.address().to_string() + ":" + std::to_string(ep.port());
  }

  Ingest& owner;
  tcp::socket socket;
  Address sender;
  int zone;
  std::vector<std::uint8_t> buffer;
  std::size_t filled = 0;  // bytes of buffer holding data not taken yet
  std::vector<ReceivedFrame> decoded;  // of one read, on their way to the queue
  asio::steady_timer timer;
  Clock::time_point last_read;   // the last read that brought bytes (or the start)
  Clock::time_point last_grown;  // the buffer's last growth, or the last read that filled it
  bool shrink_asked = false;     // the timer cancelled the read to shrink the buffer
  bool finishing = false;        // Ingest::stop() was called
  Clock::time_point finish_by;   // closed by then at the latest, once finishing
};

// An ingest thread of its own (ingest.threads > 1): an io_context kept
// running until stop(), for the TCP sessions given to it.
struct Ingest::Worker {
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> guard{io.get_executor()};
  std::thread thread{[this] {
    set_thread_name("gw-ingest");
    io.run();
  }};
  // ~Ingest joins after stop(); this is for a constructor that throws.
  ~Worker() {
    guard.reset();
    if (thread.joinable()) {
      io.stop();
      thread.join();
    }
  }
};

Ingest::Ingest(asio::io_context& io, const config::Config& config, FrameQueue& queue)
    : io_(io), config_(config), queue_(queue), udp_buffer_(config.ingest.max_frame_bytes + 1) {
  if (config_.slots.enabled) slot_sources_ = pipeline::slot_sources(config_);
  gait_feet_ = gait_devices(config_);
  hotspot_sources_ = hotspot_devices(config_);
  for (const config::AllowedDevice& entry : config_.ingest.allowed_devices) {
    Allowed allowed{&entry, std::nullopt};
    if (!entry.mac_key.empty()) {
      try {
        allowed.key = sensors::read_frame_mac_key(entry.mac_key);
      } catch (const std::exception& e) {
        throw Error(std::string("ingest.allowed_devices: ") + e.what());
      }
    }
    allowed_.emplace(allowed_key(entry.wearer, entry.device), std::move(allowed));
  }
  // A bind failure names the key whose address or port it is.
  const auto bind_error = [](const char* key, const config::ListenConfig& listen,
                             const std::exception& e) {
    return Error(std::string(key) + ": cannot bind " + listen.bind + ":" +
                 std::to_string(listen.port) + ": " + e.what());
  };
  if (config.ingest.udp.port > 0) {
    try {
      udp::endpoint ep(asio::ip::make_address(config.ingest.udp.bind),
                       static_cast<unsigned short>(config.ingest.udp.port));
      udp_ = std::make_unique<udp::socket>(io_, ep);
      udp_->set_option(asio::socket_base::receive_buffer_size(8 << 20));
    } catch (const boost::system::system_error& e) {
      throw bind_error("ingest.udp", config.ingest.udp, e);
    }
    receive_udp();
  }
  if (config.ingest.tcp.port > 0) {
    try {
      tcp::endpoint ep(asio::ip::make_address(config.ingest.tcp.bind),
                       static_cast<unsigned short>(config.ingest.tcp.port));
      acceptor_ = std::make_unique<tcp::acceptor>(io_, ep, /*reuse_address=*/true);
    } catch (const boost::system::system_error& e) {
      throw bind_error("ingest.tcp", config.ingest.tcp, e);
    }
    for (int t = 0; config.ingest.threads > 1 && t < config.ingest.threads; ++t)
      workers_.push_back(std::make_unique<Worker>());
    AcceptLoop::Handlers handlers;
    if (!workers_.empty())  // connections go to the ingest threads in turn
      handlers.socket_executor = [this]() -> asio::any_io_executor {
        return workers_[next_worker_++ % workers_.size()]->io.get_executor();
      };
    handlers.accepted = [this](tcp::socket socket) { on_tcp_accepted(std::move(socket)); };
    handlers.failed = [this](const boost::system::error_code& ec, std::chrono::milliseconds wait) {
      const std::uint64_t total = ++counters_.accept_errors;
      if (const auto since = accept_error_log_.due(total))
        spdlog::warn("tcp ingest: accept failed: {} ({} time(s) since the last line, {} in all); "
                     "next accept in {} ms; {} connections open",
                     ec.message(), *since, total, wait.count(), counters_.tcp_open.load());
    };
    accept_loop_ = AcceptLoop::start(*acceptor_, std::move(handlers));
  }
}

Ingest::~Ingest() {
  if (!stopped_) {
    // Never stopped (an owner that failed): close at once, nothing taken
    // from the backlog, nothing finished.
    boost::system::error_code ignored;
    if (udp_) udp_->close(ignored);
    if (accept_loop_) accept_loop_->stop();
    if (acceptor_) acceptor_->close(ignored);
    for (auto& session : take_sessions())
      asio::post(session->socket.get_executor(), [session] {
        boost::system::error_code ignored_there;
        session->socket.close(ignored_there);
      });
  }
  for (auto& worker : workers_) worker->guard.reset();
  for (auto& worker : workers_) worker->thread.join();
}

std::vector<std::shared_ptr<Ingest::TcpSession>> Ingest::take_sessions() {
  std::vector<std::weak_ptr<TcpSession>> weak;
  {
    std::lock_guard<std::mutex> lock(sessions_mu_);
    weak.swap(sessions_);
  }
  std::vector<std::shared_ptr<TcpSession>> live;
  for (auto& w : weak)
    if (auto session = w.lock()) live.push_back(std::move(session));
  return live;
}

void Ingest::stop() {
  if (stopped_) return;
  boost::system::error_code ignored;
  stopped_ = true;
  taking_last_accepts_ = true;
  if (udp_) udp_->close(ignored);
  // Connections the kernel completed before the stop are read as well.
  if (accept_loop_) accept_loop_->stop_taking_waiting();
  if (acceptor_) acceptor_->close(ignored);
  // A session finishes on its own io_context's thread (asio sockets are not
  // thread-safe); a worker's run() then returns once its sessions are gone.
  for (auto& session : take_sessions())
    asio::post(session->socket.get_executor(), [session] { session->finish(); });
  // An accept that completed before the stop may still wait in this
  // io_context's queue: it runs before this, and its session must find its
  // worker running. Until then reading() stays true.
  asio::post(io_, [this] {
    for (auto& worker : workers_) worker->guard.reset();
    taking_last_accepts_ = false;
  });
}

std::uint16_t Ingest::udp_port() const { return udp_ ? udp_->local_endpoint().port() : 0; }
std::uint16_t Ingest::tcp_port() const {
  return acceptor_ ? acceptor_->local_endpoint().port() : 0;
}

void Ingest::receive_udp() {
  udp_->async_receive_from(asio::buffer(udp_buffer_), udp_sender_,
                           [this](const boost::system::error_code& ec, std::size_t size) {
                             if (ec == asio::error::operation_aborted || !udp_->is_open()) return;
                             if (!ec) {
                               ++counters_.datagrams;
                               if (size > config_.ingest.max_frame_bytes)
                                 ++counters_.oversized;
                               else
                               {
                                 const Address sender = address_bytes(udp_sender_.address());
                                 ReceivedFrame received;
                                 if (accept_frame(udp_buffer_.data(), size, sender,
                                                  zone_of(sender), received) &&
                                     queue_.push(std::move(received)))
                                   ++counters_.queued;
                               }
                             }
                             receive_udp();
                           });
}

void Ingest::on_tcp_accepted(tcp::socket socket) {
  ++counters_.tcp_connections;
  const bool at_cap = counters_.tcp_open.load() >=
                      static_cast<std::uint64_t>(config_.ingest.tcp.max_connections);
  if (at_cap || within_fd_headroom(socket.native_handle())) {
    // Closed at once: the peer sees the refusal rather than a connection
    // nobody reads, and the descriptor is free again.
    const std::uint64_t total = ++counters_.tcp_refused;
    if (const auto since = refused_log_.due(total))
      spdlog::warn("tcp ingest: refused {} connection(s) ({} in all): {} ({} open, "
                   "ingest.tcp.max_connections {}, {} descriptors kept free)",
                   *since, total, at_cap ? "connection cap" : "near the open-file limit",
                   counters_.tcp_open.load(), config_.ingest.tcp.max_connections, fd_headroom());
    boost::system::error_code ignored;
    socket.close(ignored);
    return;
  }
  boost::system::error_code peer_error;
  const tcp::endpoint peer = socket.remote_endpoint(peer_error);
  // An unknown peer matches no sources (the unspecified address ::).
  const Address sender = peer_error ? Address{} : address_bytes(peer.address());
  const int zone = peer_error ? 0 : zone_of(sender);
  auto session = std::make_shared<TcpSession>(*this, std::move(socket), sender, zone);
  {
    std::lock_guard<std::mutex> lock(sessions_mu_);
    sessions_.erase(std::remove_if(sessions_.begin(), sessions_.end(),
                                   [](const auto& w) { return w.expired(); }),
                    sessions_.end());
    sessions_.push_back(session);
  }
  // Its first read starts on its own thread; one accepted at or after the
  // stop reads what its peer sent and finishes.
  asio::post(session->socket.get_executor(), [session, finish = stopped_] {
    session->start();
    if (finish) session->finish();
  });
}

Ingest::Address Ingest::address_bytes(const asio::ip::address& sender) {
  const asio::ip::address_v6 v6 =
      sender.is_v4() ? asio::ip::make_address_v6(asio::ip::v4_mapped, sender.to_v4())
                     : sender.to_v6();
  return v6.to_bytes();
}

int Ingest::zone_of(const Address& sender) const {
  return config_.zones.empty() ? 0 : config_.zone_of(sender);
}

bool Ingest::admit(const std::uint8_t* data, std::size_t size, const sensors::Frame& frame,
                   const Address& sender) {
  // The key to verify a MAC with: none without a list.
  const sensors::FrameMacKey* key = nullptr;
  if (config_.ingest.restrict_devices) {
    auto it = allowed_.find(allowed_key(frame.wearer_id, frame.device_id));
    if (it == allowed_.end()) it = allowed_.find(allowed_key(frame.wearer_id, std::nullopt));
    if (it == allowed_.end()) {
      ++counters_.not_allowed;
      return false;
    }
    const Allowed& allowed = it->second;
    const auto& ranges = allowed.entry->ranges;
    if (!ranges.empty() && std::none_of(ranges.begin(), ranges.end(), [&](const auto& range) {
          return range.contains(sender);
        })) {
      ++counters_.wrong_source;
      return false;
    }
    if (allowed.key) key = &*allowed.key;
  }
  if (!key) {
    // Nothing to verify a MAC with: counted and dropped rather than accepted
    // unchecked, so that a sender expecting authentication notices.
    if (frame.has_mac) {
      ++counters_.unexpected_mac;
      return false;
    }
    return true;
  }
  if (!frame.has_mac) {
    ++counters_.missing_mac;
    return false;
  }
  if (!sensors::verify_frame_mac(data, size, *key)) {
    ++counters_.bad_mac;
    return false;
  }
  ++counters_.mac_verified;
  return true;
}

bool Ingest::accept_frame(const std::uint8_t* data, std::size_t size, const Address& sender,
                          int zone, ReceivedFrame& received) {
  received.arrival_s = unix_now();
  received.zone = zone;
  const sensors::DecodeStatus status = sensors::decode_frame(data, size, received.frame);
  if (status != sensors::DecodeStatus::kOk) {
    ++counters_.decode[static_cast<int>(status)];
    return false;
  }
  if (!admit(data, size, received.frame, sender)) return false;
  return check_and_reduce(received);
}

bool Ingest::queue_stream_frame(const std::uint8_t* data, std::size_t size) {
  ++counters_.stream_frames;
  ReceivedFrame received;
  received.arrival_s = unix_now();
  received.zone = 0;
  const sensors::DecodeStatus status = sensors::decode_frame(data, size, received.frame);
  if (status != sensors::DecodeStatus::kOk) {
    ++counters_.decode[static_cast<int>(status)];
    return false;
  }
  if (!check_and_reduce(received) || !queue_.push_waiting(std::move(received))) return false;
  ++counters_.queued;
  return true;
}

bool Ingest::check_and_reduce(ReceivedFrame& received) {
  const sensors::Frame& f = received.frame;
  const config::DeviceProfile* profile = config_.device_by_id(f.device_id);
  if (!profile) {
    ++counters_.unknown_device;
    return false;
  }
  if (profile->kind != f.kind || profile->channels.size() != f.channels ||
      std::fabs(profile->sample_rate_hz - f.sample_rate_hz) > 1e-3 * profile->sample_rate_hz) {
    ++counters_.profile_mismatch;
    return false;
  }
  if (const auto source = slot_sources_.find(f.device_id); source != slot_sources_.end())
    pipeline::reduce_slot_inputs(source->second, f, received.slot_inputs);
  else
    received.slot_inputs.values.clear();
  if (const auto feet = gait_feet_.find(f.device_id); feet != gait_feet_.end())
    gait::reduce_foot_loads(feet->second, f, received.foot_loads);
  else
    received.foot_loads.clear();
  if (const auto source = hotspot_sources_.find(f.device_id); source != hotspot_sources_.end())
    gait::reduce_region_pressures(source->second.feet, f, received.region_pressures);
  else
    received.region_pressures.clear();
  return true;
}

}  // namespace gw::daemon
