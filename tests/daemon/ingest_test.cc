// The daemon's network ingest in one process: gw::daemon::Ingest on a real
// loopback TCP port, fed by real client sockets, read back from its frame
// queue. Frames must arrive whole, in order per connection and counted,
// however the bytes are split by the sender, on the I/O thread or spread
// over ingest threads.
#include "daemon/ingest.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <future>
#include <thread>
#include <vector>

#include "config/config.h"
#include "sensors/frame.h"
#include "tests/daemon/process.h"

namespace asio = boost::asio;
using gw::daemon::FrameQueue;
using gw::daemon::Ingest;
using gw::daemon::ReceivedFrame;

namespace {

// A generic device of `channels` channels at 100 Hz; TCP on `port`, no UDP.
// `status` (a YAML map, or empty) is the device's status inputs for the
// time-slot index.
gw::config::Config ingest_config(int port, int threads, int channels,
                                 const std::string& status = "", bool slots = true) {
  std::string names;
  for (int c = 0; c < channels; ++c) names += (c ? ", c" : "c") + std::to_string(c);
  const std::string yaml =
      "ingest:\n  udp: {port: 0}\n  tcp: {bind: 127.0.0.1, port: " + std::to_string(port) +
      "}\n  threads: " + std::to_string(threads) +
      "\ndevices:\n  - {id: 1, name: d, kind: generic, sample_rate_hz: 100, "
      "channels: [" +
      names + "]" + (status.empty() ? "" : ", status: " + status) + "}\n" +
      (slots ? "" : "slots: {enabled: false}\n");
  return gw::config::parse_config(yaml, "ingest_test.yaml", ".");
}

gw::sensors::Frame frame_of(std::uint32_t wearer, std::uint32_t sequence, int channels,
                            int samples) {
  gw::sensors::Frame f;
  f.kind = gw::sensors::DeviceKind::kGeneric;
  f.wearer_id = wearer;
  f.device_id = 1;
  f.channels = static_cast<std::uint16_t>(channels);
  f.samples = static_cast<std::uint16_t>(samples);
  f.sample_rate_hz = 100;
  f.sequence = sequence;
  f.device_time_us = 1000ull * sequence;
  for (int i = 0; i < channels * samples; ++i)
    f.values.push_back(static_cast<float>(wearer * 1000 + sequence) +
                       0.25f * static_cast<float>(i));
  return f;
}

// The length prefix and the encoded frame, as a TCP sender puts them.
std::vector<std::uint8_t> prefixed(const gw::sensors::Frame& frame) {
  const std::vector<std::uint8_t> body = gw::sensors::encode_frame(frame);
  const auto n = static_cast<std::uint32_t>(body.size());
  std::vector<std::uint8_t> out = {static_cast<std::uint8_t>(n), static_cast<std::uint8_t>(n >> 8),
                                   static_cast<std::uint8_t>(n >> 16),
                                   static_cast<std::uint8_t>(n >> 24)};
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

// Ingest on its own I/O thread, as in the daemon.
struct Running {
  asio::io_context io;
  FrameQueue queue{1 << 16, gw::OverflowPolicy::kBlock};
  gw::config::Config config;
  std::unique_ptr<Ingest> ingest;
  std::thread thread;
  Running(int threads, int channels, const std::string& status = "", bool slots = true)
      : Running(ingest_config(gw::test::free_port(false), threads, channels, status, slots)) {}
  explicit Running(gw::config::Config config_to_run) : config(std::move(config_to_run)) {
    ingest = std::make_unique<Ingest>(io, config, queue);
    thread = std::thread([this] { io.run(); });
  }
  ~Running() {
    asio::post(io, [this] { ingest->stop(); });
    thread.join();
    ingest.reset();
  }
  // Pops until `count` frames came or 10 s passed.
  std::vector<ReceivedFrame> take(std::size_t count) {
    std::vector<ReceivedFrame> out;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (out.size() < count && std::chrono::steady_clock::now() < until)
      if (auto f = queue.pop_for(std::chrono::milliseconds(50))) out.push_back(std::move(*f));
    return out;
  }
};

// A connected client socket on the ingest's TCP port.
asio::ip::tcp::socket connect_to(asio::io_context& io, const Running& run) {
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"),
                  static_cast<unsigned short>(run.config.ingest.tcp.port)});
  return socket;
}

// Frames first .. first+count-1 of `wearer`, length-prefixed one after another.
std::vector<std::uint8_t> prefixed_frames(std::uint32_t wearer, std::uint32_t first,
                                          std::uint32_t count, int channels, int samples) {
  std::vector<std::uint8_t> bytes;
  for (std::uint32_t k = first; k < first + count; ++k) {
    const auto one = prefixed(frame_of(wearer, k, channels, samples));
    bytes.insert(bytes.end(), one.begin(), one.end());
  }
  return bytes;
}

// Writes `bytes` to `socket` in pieces of random sizes up to `max_piece`.
void send_in_pieces(asio::ip::tcp::socket& socket, const std::vector<std::uint8_t>& bytes,
                    std::size_t max_piece, std::mt19937& rng) {
  std::uniform_int_distribution<std::size_t> piece(1, max_piece);
  for (std::size_t at = 0; at < bytes.size();) {
    const std::size_t n = std::min(bytes.size() - at, piece(rng));
    asio::write(socket, asio::buffer(bytes.data() + at, n));
    at += n;
  }
}

}  // namespace

TEST_CASE("TCP frames arrive whole and in order per connection however the bytes are split",
          "[daemon][ingest]") {
  // Four connections at once: bytes dribbled in pieces of 1..7, pieces up
  // to 3 KB, every frame of a connection in one write, and frames larger
  // than a session's first buffer (16 KB). On the I/O thread, and spread
  // over three ingest threads.
  const int threads = GENERATE(1, 3);
  INFO("ingest threads " << threads);
  constexpr int kChannels = 201;
  Running run(threads, kChannels);
  const std::vector<std::pair<std::size_t, int>> senders = {
      {7, 10}, {3000, 10}, {1 << 30, 10}, {5000, 30}};  // (largest piece, samples per frame)
  constexpr std::uint32_t kFrames = 120;
  std::vector<std::thread> clients;
  for (std::size_t c = 0; c < senders.size(); ++c)
    clients.emplace_back([&, c] {
      std::mt19937 rng(static_cast<std::uint32_t>(c) + 1);
      asio::io_context io;
      auto socket = connect_to(io, run);
      const auto bytes = prefixed_frames(static_cast<std::uint32_t>(c + 1), 0, kFrames, kChannels,
                                         senders[c].second);
      send_in_pieces(socket, bytes, senders[c].first, rng);
    });
  for (auto& t : clients) t.join();
  const auto frames = run.take(senders.size() * kFrames);
  REQUIRE(frames.size() == senders.size() * kFrames);
  std::map<std::uint32_t, std::uint32_t> next_sequence;
  for (const ReceivedFrame& r : frames) {
    const std::uint32_t wearer = r.frame.wearer_id;
    REQUIRE(wearer >= 1);
    REQUIRE(wearer <= senders.size());
    CHECK(r.frame.sequence == next_sequence[wearer]++);
    const auto expected = frame_of(wearer, r.frame.sequence, kChannels, senders[wearer - 1].second);
    CHECK(r.frame.values == expected.values);
  }
  const auto& c = run.ingest->counters();
  CHECK(c.tcp_frames == senders.size() * kFrames);
  // A frame is counted as queued just after the push that made it visible
  // to the taker.
  CHECK(gw::test::eventually([&] { return c.queued == senders.size() * kFrames; },
                             std::chrono::seconds(5)));
  CHECK(c.queued == senders.size() * kFrames);
  CHECK(c.tcp_connections == senders.size());
  CHECK(c.tcp_bad_length == 0);
}

TEST_CASE("frames after a burst and a quiet spell arrive whole while the buffer shrinks",
          "[daemon][ingest]") {
  // A burst grows the session's buffer; once the connection is quiet, the
  // session gives the buffer back its small size while its next read waits
  // on the socket. That read must land in the buffer the session keeps. On
  // the I/O thread, and on an ingest thread.
  const int threads = GENERATE(1, 2);
  INFO("ingest threads " << threads);
  constexpr int kChannels = 201;
  Running run(threads, kChannels);
  const auto& c = run.ingest->counters();
  asio::io_context io;
  auto socket = connect_to(io, run);
  constexpr std::uint32_t kBurst = 200;  // ~1.6 MB in one write: reads fill the buffer
  asio::write(socket, asio::buffer(prefixed_frames(1, 0, kBurst, kChannels, 10)));
  REQUIRE(run.take(kBurst).size() == kBurst);
  CHECK(c.tcp_buffers_shrunk == 0);
  // Quiet: the session's timer (every 2 s) finds the buffer unfilled for the
  // shrink delay (1 s) and has it shrunk while the next read waits.
  REQUIRE(gw::test::eventually([&] { return c.tcp_buffers_shrunk == 1; }, std::chrono::seconds(10)));
  constexpr std::uint32_t kAfter = 20;
  for (std::uint32_t k = kBurst; k < kBurst + kAfter; ++k)
    asio::write(socket, asio::buffer(prefixed(frame_of(1, k, kChannels, 10))));
  const auto after = run.take(kAfter);
  CHECK(c.tcp_bad_length == 0);
  REQUIRE(after.size() == kAfter);
  for (std::uint32_t i = 0; i < kAfter; ++i) {
    CHECK(after[i].frame.sequence == kBurst + i);
    CHECK(after[i].frame.values == frame_of(1, kBurst + i, kChannels, 10).values);
  }
}

TEST_CASE("a bad length closes only its connection, a corrupt frame is counted and skipped",
          "[daemon][ingest]") {
  const int threads = GENERATE(1, 2);
  INFO("ingest threads " << threads);
  Running run(threads, 3);
  asio::io_context io;
  const asio::ip::tcp::endpoint at{asio::ip::make_address("127.0.0.1"),
                                   static_cast<unsigned short>(run.config.ingest.tcp.port)};
  asio::ip::tcp::socket good(io), bad(io);
  good.connect(at);
  bad.connect(at);
  std::vector<std::uint8_t> corrupt = prefixed(frame_of(9, 1, 3, 4));
  corrupt[20] ^= 0x40;  // inside the header: the CRC no longer matches
  std::vector<std::uint8_t> bytes = prefixed(frame_of(8, 0, 3, 4));
  bytes.insert(bytes.end(), corrupt.begin(), corrupt.end());
  const auto last = prefixed(frame_of(8, 2, 3, 4));
  bytes.insert(bytes.end(), last.begin(), last.end());
  asio::write(good, asio::buffer(bytes));
  // Length 0 cannot be resynchronised: the daemon closes that connection,
  // after queueing the good frames that came in the same read before it.
  std::vector<std::uint8_t> then_bad = prefixed(frame_of(9, 0, 3, 4));
  const auto second = prefixed(frame_of(9, 1, 3, 4));
  then_bad.insert(then_bad.end(), second.begin(), second.end());
  then_bad.insert(then_bad.end(), {0, 0, 0, 0});
  asio::write(bad, asio::buffer(then_bad));
  auto frames = run.take(4);
  REQUIRE(frames.size() == 4);
  std::stable_sort(frames.begin(), frames.end(), [](const auto& a, const auto& b) {
    return a.frame.wearer_id < b.frame.wearer_id;
  });
  CHECK(frames[0].frame.sequence == 0);
  CHECK(frames[1].frame.sequence == 2);
  CHECK(frames[2].frame.wearer_id == 9);
  CHECK(frames[2].frame.sequence == 0);
  CHECK(frames[3].frame.sequence == 1);
  const auto& c = run.ingest->counters();
  CHECK(gw::test::eventually([&] { return c.tcp_bad_length == 1; }, std::chrono::seconds(5)));
  std::uint64_t decode_errors = 0;
  for (const auto& n : c.decode) decode_errors += n;
  CHECK(decode_errors == 1);
  // The closed connection reads end-of-file; the good one still delivers.
  std::uint8_t byte = 0;
  boost::system::error_code ec;
  bad.read_some(asio::buffer(&byte, 1), ec);
  CHECK(ec == asio::error::eof);
  asio::write(good, asio::buffer(prefixed(frame_of(8, 3, 3, 4))));
  const auto more = run.take(1);
  REQUIRE(more.size() == 1);
  CHECK(more[0].frame.sequence == 3);
}

TEST_CASE("frames carry their time-slot inputs, reduced on the ingest thread", "[daemon][ingest]") {
  // A W1-like body: accelerometer on c0..c2, the left foot c3..c101, the
  // right c102..c200.
  constexpr int kChannels = 201;
  std::string left, right;
  for (int c = 3; c < 102; ++c) left += (c > 3 ? ", c" : "c") + std::to_string(c);
  for (int c = 102; c < 201; ++c) right += (c > 102 ? ", c" : "c") + std::to_string(c);
  const std::string status =
      "{accel: [c0, c1, c2], left_load: [" + left + "], right_load: [" + right + "]}";
  const bool slots = GENERATE(true, false);
  INFO("slots enabled " << slots);
  Running run(2, kChannels, status, slots);
  {
    asio::io_context io;
    asio::ip::tcp::socket socket(io);
    socket.connect({asio::ip::make_address("127.0.0.1"),
                    static_cast<unsigned short>(run.config.ingest.tcp.port)});
    std::vector<std::uint8_t> bytes;
    for (std::uint32_t k = 0; k < 5; ++k) {
      const auto one = prefixed(frame_of(4, k, kChannels, 10));
      bytes.insert(bytes.end(), one.begin(), one.end());
    }
    asio::write(socket, asio::buffer(bytes));
  }
  const auto frames = run.take(5);
  REQUIRE(frames.size() == 5);
  for (const ReceivedFrame& r : frames) {
    if (!slots) {
      CHECK(r.slot_inputs.values.empty());
      continue;
    }
    // Per sample: x, y, z, then each foot's cells summed in order.
    REQUIRE(r.slot_inputs.values.size() == 10 * 5);
    for (int s = 0; s < 10; ++s) {
      const float* row = r.frame.values.data() + s * kChannels;
      float l = 0, rt = 0;
      for (int c = 3; c < 102; ++c) l += row[c];
      for (int c = 102; c < 201; ++c) rt += row[c];
      const float* in = r.slot_inputs.values.data() + s * 5;
      CHECK(in[0] == row[0]);
      CHECK(in[1] == row[1]);
      CHECK(in[2] == row[2]);
      CHECK(in[3] == l);
      CHECK(in[4] == rt);
    }
  }
}

namespace {

// Whether the daemon closed `socket` (a read ends) within `timeout`.
bool closed_by_peer(asio::ip::tcp::socket& socket, std::chrono::milliseconds timeout) {
  timeval tv{static_cast<time_t>(timeout.count() / 1000),
             static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char byte;
  const ssize_t n = ::recv(socket.native_handle(), &byte, 1, 0);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

}  // namespace

using namespace std::chrono_literals;

TEST_CASE("connections past ingest.tcp.max_connections are closed at once and counted",
          "[daemon][ingest][limits]") {
  auto config = ingest_config(gw::test::free_port(false), 1, 2);
  config.ingest.tcp.max_connections = 2;
  Running run(config);
  const auto& c = run.ingest->counters();
  asio::io_context io;
  auto first = connect_to(io, run);
  auto second = connect_to(io, run);
  REQUIRE(gw::test::eventually([&] { return c.tcp_open == 2; }, 5000ms));
  auto third = connect_to(io, run);
  CHECK(closed_by_peer(third, 5000ms));
  CHECK(c.tcp_refused == 1);
  CHECK(c.tcp_open == 2);
  // The kept ones still carry frames; a freed place takes a new connection.
  asio::write(second, asio::buffer(prefixed(frame_of(2, 0, 2, 5))));
  CHECK(run.take(1).size() == 1);
  first.close();
  REQUIRE(gw::test::eventually([&] { return c.tcp_open == 1; }, 5000ms));
  auto fourth = connect_to(io, run);
  asio::write(fourth, asio::buffer(prefixed(frame_of(4, 0, 2, 5))));
  const auto frames = run.take(1);
  REQUIRE(frames.size() == 1);
  CHECK(frames[0].frame.wearer_id == 4);
  CHECK(c.tcp_refused == 1);
}

TEST_CASE("a connection silent for ingest.tcp.idle_timeout_s is closed and counted",
          "[daemon][ingest][limits]") {
  auto config = ingest_config(gw::test::free_port(false), 1, 2);
  config.ingest.tcp.idle_timeout_s = 0.5;
  Running run(config);
  const auto& c = run.ingest->counters();
  asio::io_context io;
  auto silent = connect_to(io, run);
  auto talking = connect_to(io, run);
  // One sends a frame every 100 ms for 1.2 s: it stays; the other is closed.
  const auto started = std::chrono::steady_clock::now();
  for (std::uint32_t k = 0; k < 12; ++k) {
    asio::write(talking, asio::buffer(prefixed(frame_of(1, k, 2, 5))));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(run.take(12).size() == 12);
  CHECK(closed_by_peer(silent, 3000ms));
  const double closed_after =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  CHECK(closed_after >= 0.5);
  CHECK(c.tcp_idle_closed == 1);
  CHECK(c.tcp_open == 1);
  // Then silent itself: closed in turn.
  CHECK(closed_by_peer(talking, 3000ms));
  CHECK(c.tcp_idle_closed == 2);
}

TEST_CASE("out of descriptors, accepts wait instead of spinning and resume when some are free",
          "[daemon][ingest][limits]") {
  Running run(ingest_config(gw::test::free_port(false), 1, 2));
  const auto& c = run.ingest->counters();
  asio::io_context io;
  asio::ip::tcp::socket client(io);
  client.open(asio::ip::tcp::v4());  // its descriptor before they run out
  // Take every free descriptor of this process (the ingest's too).
  rlimit saved{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
  rlimit low = saved;
  low.rlim_cur = std::min<rlim_t>(saved.rlim_cur, 256);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
  const int null_fd = ::open("/dev/null", O_RDONLY);
  REQUIRE(null_fd >= 0);
  std::vector<int> taken = {null_fd};
  for (int fd; (fd = ::dup(null_fd)) >= 0;) taken.push_back(fd);
  REQUIRE(errno == EMFILE);
  client.connect({asio::ip::make_address("127.0.0.1"),
                  static_cast<unsigned short>(run.config.ingest.tcp.port)});
  // Over 1.5 s the waits (100, 200, 400, 800 ms) allow a handful of tries;
  // a loop retrying at once would make millions.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const std::uint64_t errors = c.accept_errors;
  // The I/O thread still serves other work.
  std::promise<void> served;
  asio::post(run.io, [&] { served.set_value(); });
  const bool answered =
      served.get_future().wait_for(std::chrono::milliseconds(500)) == std::future_status::ready;
  // Read before the descriptors are given back: from then on the next try
  // may take the connection at any moment.
  const std::uint64_t connections_while_out = c.tcp_connections;
  for (int fd : taken) ::close(fd);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &saved) == 0);
  CHECK(answered);
  CHECK(errors >= 2);
  CHECK(errors <= 8);
  CHECK(connections_while_out == 0);
  // With descriptors free again, the waiting connection is taken.
  asio::write(client, asio::buffer(prefixed(frame_of(9, 0, 2, 5))));
  const auto frames = run.take(1);
  REQUIRE(frames.size() == 1);
  CHECK(frames[0].frame.wearer_id == 9);
  CHECK(c.tcp_connections == 1);
}
