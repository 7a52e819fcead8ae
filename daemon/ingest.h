// Network ingest with Boost.Asio: UDP (one frame per datagram) and TCP (each
// frame preceded by its length as u32 little-endian). Every frame is decoded
// and checked against the configured device profiles here, on the I/O thread;
// what passes goes to the bounded frame queue, what fails is counted by reason.
// Each queued frame carries its receiving zone: the configured zone of the
// sender's address (UDP: the datagram's source; TCP: the connection's peer).
// With ingest.allowed_devices, only listed devices' frames pass (docs/design.md
// "Ingest admission"): the (wearer, device), the sender address and, where the
// entry has a key, the frame's MAC are checked before the profile, and every
// refusal is counted by reason.
//
// Threads: UDP, accepting and (by default) the TCP connections run on the
// io_context given to the constructor. With ingest.threads = N > 1 the TCP
// connections are spread over N threads of the Ingest's own, each connection
// on one (frames of one connection stay in order); they run from
// construction until stop() and are joined by the destructor.
// Thread safety: stop() from the thread that runs the given io_context or
// before it runs; counters() from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <boost/asio.hpp>
#include <nlohmann/json.hpp>

#include "common/bounded_queue.h"
#include "config/config.h"
#include "daemon/accept_loop.h"
#include "daemon/log.h"
#include "gait/hotspot_monitor.h"
#include "gait/monitor.h"
#include "jobs/slot_recorder.h"
#include "sensors/frame.h"

namespace gw::daemon {

struct ReceivedFrame {
  sensors::Frame frame;
  double arrival_s = 0;  // unix seconds at receipt
  int zone = 0;          // receiving zone of the sender's address (config zones; 0 = none)
  // The frame's inputs to the time-slot recorder, reduced on the ingest
  // thread (empty when slots are off or its device gives no status inputs).
  pipeline::SlotSampleInputs slot_inputs;
  // The feet's loads (gait::reduce_foot_loads), reduced on the ingest thread
  // too; empty when gait is off or the device carries no foot.
  std::vector<gait::FootLoad> foot_loads;
  // The feet's region pressures (gait::reduce_region_pressures) for the
  // hotspot monitor; empty unless the device's hotspots are watched.
  std::vector<float> region_pressures;
};
using FrameQueue = BoundedQueue<ReceivedFrame>;

struct IngestCounters {
  std::atomic<std::uint64_t> datagrams{0};
  std::atomic<std::uint64_t> tcp_frames{0};
  std::atomic<std::uint64_t> stream_frames{0};  // from the JetStream frame stream (ingest.nats)
  std::atomic<std::uint64_t> tcp_connections{0};
  std::atomic<std::uint64_t> tcp_bad_length{0};  // length prefix 0 or > max_frame_bytes: connection closed
  std::atomic<std::uint64_t> oversized{0};       // datagram larger than max_frame_bytes
  std::array<std::atomic<std::uint64_t>, sensors::kDecodeStatusCount> decode{};  // by DecodeStatus
  std::atomic<std::uint64_t> unknown_device{0};
  std::atomic<std::uint64_t> profile_mismatch{0};  // kind, channel count or rate differ from the profile
  // Admission (ingest.allowed_devices), by reason:
  std::atomic<std::uint64_t> not_allowed{0};     // (wearer, device) not listed
  std::atomic<std::uint64_t> wrong_source{0};    // listed, but from an address outside its sources
  std::atomic<std::uint64_t> missing_mac{0};     // its entry has a key; the frame carries no MAC
  std::atomic<std::uint64_t> bad_mac{0};         // the MAC does not verify under the device's key
  std::atomic<std::uint64_t> unexpected_mac{0};  // a MAC the daemon has no key for
  std::atomic<std::uint64_t> mac_verified{0};    // frames whose MAC verified (accepted so far)
  std::atomic<std::uint64_t> queued{0};
  // TCP limits (ingest.tcp.max_connections, idle_timeout_s) and accepts:
  std::atomic<std::uint64_t> tcp_open{0};         // connections open now (a gauge)
  std::atomic<std::uint64_t> tcp_refused{0};      // accepted and closed at once: at the cap or the fd reserve
  std::atomic<std::uint64_t> tcp_idle_closed{0};  // closed after idle_timeout_s without a byte
  // Connection buffers that a burst grew, given back their small size.
  std::atomic<std::uint64_t> tcp_buffers_shrunk{0};
  std::atomic<std::uint64_t> accept_errors{0};    // failed accepts (EMFILE... wait before the next)
  nlohmann::json to_json(const FrameQueue& queue) const;
};

class Ingest {
 public:
  // Binds the configured ports (port 0 = that transport is disabled) and
  // reads the allowed devices' MAC keys. Throws gw::Error if a port cannot be
  // bound or a key file is unreadable, malformed or not private.
  Ingest(boost::asio::io_context& io, const config::Config& config, FrameQueue& queue);
  ~Ingest();
  // Closes the UDP socket and the acceptor, first taking the connections
  // the kernel completed (their peers may have sent already and gone). Each
  // TCP connection reads on until its peer closes it, or briefly after its
  // last bytes (at most 3 s), and queues what it read before it
  // closes. The frames' consumer keeps taking from the queue until
  // reading() is false, then closes it (what a closed queue refuses is
  // counted as queue_refused_closed).
  void stop();
  // True while a TCP connection is open, and after stop() until the
  // connections accepted before it have been taken: while connections
  // finish reading. Any thread.
  bool reading() const { return taking_last_accepts_.load() || counters_.tcp_open.load() > 0; }
  // A frame from the JetStream frame stream (ingest.nats): decoded and
  // checked against the profiles like a received one, without admission
  // (the gateway that published it admitted it), zone 0, and queued,
  // waiting for room in the frame queue whatever its overflow policy (the
  // stream holds what waits). True when it was queued; refusals are
  // counted as for any frame. Any thread.
  bool queue_stream_frame(const std::uint8_t* data, std::size_t size);
  const IngestCounters& counters() const { return counters_; }
  std::uint16_t udp_port() const;
  std::uint16_t tcp_port() const;

 private:
  struct TcpSession;
  struct Worker;
  void receive_udp();
  // Keeps or refuses (ingest.tcp.max_connections, the fd reserve) an
  // accepted connection; on the accepting thread.
  void on_tcp_accepted(boost::asio::ip::tcp::socket socket);
  // The open sessions, taken from sessions_ (which is left empty).
  std::vector<std::shared_ptr<TcpSession>> take_sessions();
  using Address = std::array<std::uint8_t, 16>;  // config::AddressRange's form
  // Decodes, admits and validates against the profiles one frame from
  // `sender`, received in `zone`, into `received` (stamped with its
  // arrival); false when it is refused (counted by reason). Called from
  // every ingest thread; the caller queues what passes.
  bool accept_frame(const std::uint8_t* data, std::size_t size, const Address& sender, int zone,
                    ReceivedFrame& received);
  // Admission by ingest.allowed_devices; false = refused (counted).
  bool admit(const std::uint8_t* data, std::size_t size, const sensors::Frame& frame,
             const Address& sender);
  // The profile check and the reductions of a decoded, admitted frame;
  // false when it is refused (counted).
  bool check_and_reduce(ReceivedFrame& received);
  static Address address_bytes(const boost::asio::ip::address& sender);
  int zone_of(const Address& sender) const;

  struct Allowed {
    const config::AllowedDevice* entry;
    std::optional<sensors::FrameMacKey> key;
  };
  // By wearer << 17 | device, and wearer << 17 | 0x10000 for every device.
  std::unordered_map<std::uint64_t, Allowed> allowed_;
  // slots.* and devices[].status are restart-only (config/reload_rules.h), so
  // these stay the recorder's.
  std::map<std::uint16_t, pipeline::SlotSources> slot_sources_;  // empty: slots off
  // gait.* is restart-only: the monitor's feet from the start.
  std::map<std::uint16_t, std::vector<gait::FootSource>> gait_feet_;  // empty: gait off
  // devices[].hotspots is restart-only too.
  std::map<std::uint16_t, gait::HotspotSource> hotspot_sources_;  // empty: no hotspots watched

  boost::asio::io_context& io_;
  config::Config config_;
  FrameQueue& queue_;
  IngestCounters counters_;
  std::unique_ptr<boost::asio::ip::udp::socket> udp_;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
  std::shared_ptr<AcceptLoop> accept_loop_;
  bool stopped_ = false;  // stop() was called; the io_context's thread only
  // From stop() until the accepts completed before it have been handed over.
  std::atomic<bool> taking_last_accepts_{false};
  LogThrottle refused_log_, idle_log_, accept_error_log_;
  std::vector<std::uint8_t> udp_buffer_;
  boost::asio::ip::udp::endpoint udp_sender_;
  std::mutex sessions_mu_;  // sessions_: the accept handler and stop()
  std::vector<std::weak_ptr<TcpSession>> sessions_;
  std::vector<std::unique_ptr<Worker>> workers_;  // empty: sessions on io_
  std::size_t next_worker_ = 0;                   // accept handler only
};

}  // namespace gw::daemon
