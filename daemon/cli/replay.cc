// gaitwatch replay: sends a recording to a daemon as wire frames, paced in
// real time (or --speed times faster; 0 = as fast as possible). With
// --config and --device the frames carry that profile's id and kind, and the
// recording is read as the device takes it (RecordingSource::read_for: its
// channels, resampled to its rate).
#include <chrono>
#include <iostream>
#include <optional>
#include <random>
#include <thread>

#include <boost/asio.hpp>

#include "common/error.h"
#include "daemon/cli/cli.h"

namespace gw::cli {
namespace {

namespace asio = boost::asio;

struct ReplayOptions {
  RecordingSource source;
  std::uint32_t wearer = 1;
  std::uint16_t device = 1;
  std::string kind = "generic";
  std::string to;
  std::string from;
  double speed = 1.0;
  int frame_samples = 0;
  std::int64_t start = 0;
  std::int64_t end = -1;
  bool int16 = false;
  int garbage_every = 0;
  std::uint64_t seed = 1;
  std::string mac_key;  // key file: send authenticated (version 2) frames
  std::string config_path;     // with device_profile: the config holding it
  std::string device_profile;  // a device profile's name: its id, kind, channels and rate
};

// Sends frames over UDP (one per datagram) or TCP (u32 LE length prefix).
class Sender {
 public:
  // `from`: the local address to send from ("" = the system's choice); the
  // daemon's zones are by sender address.
  Sender(const std::string& url, const std::string& from) {
    const auto scheme_end = url.find("://");
    const auto colon = url.rfind(':');
    if (scheme_end == std::string::npos || colon == std::string::npos || colon < scheme_end + 3)
      throw Error("--to must look like udp://HOST:PORT or tcp://HOST:PORT, got '" + url + "'");
    const std::string scheme = url.substr(0, scheme_end);
    const std::string host = url.substr(scheme_end + 3, colon - scheme_end - 3);
    const std::string port = url.substr(colon + 1);
    boost::system::error_code bad_from;
    const asio::ip::address local =
        from.empty() ? asio::ip::address() : asio::ip::make_address(from, bad_from);
    if (bad_from) throw Error("--from: '" + from + "' is not an IP address");
    if (scheme == "udp") {
      asio::ip::udp::resolver resolver(io_);
      udp_target_ = *resolver.resolve(asio::ip::udp::v4(), host, port).begin();
      udp_ = std::make_unique<asio::ip::udp::socket>(io_);
      udp_->open(asio::ip::udp::v4());
      if (!from.empty()) udp_->bind(asio::ip::udp::endpoint(local, 0));
    } else if (scheme == "tcp") {
      asio::ip::tcp::resolver resolver(io_);
      const auto targets = resolver.resolve(host, port);
      tcp_ = std::make_unique<asio::ip::tcp::socket>(io_);
      if (from.empty()) {
        asio::connect(*tcp_, targets);
      } else {
        const asio::ip::tcp::endpoint target = *targets.begin();
        tcp_->open(target.protocol());
        tcp_->bind(asio::ip::tcp::endpoint(local, 0));
        tcp_->connect(target);
      }
      tcp_->set_option(asio::ip::tcp::no_delay(true));
    } else {
      throw Error("--to: unknown scheme '" + scheme + "' (udp, tcp)");
    }
  }

  void send(const std::vector<std::uint8_t>& bytes) {
    if (udp_) {
      udp_->send_to(asio::buffer(bytes), udp_target_);
      return;
    }
    const auto n = static_cast<std::uint32_t>(bytes.size());
    const std::uint8_t prefix[4] = {static_cast<std::uint8_t>(n), static_cast<std::uint8_t>(n >> 8),
                                    static_cast<std::uint8_t>(n >> 16),
                                    static_cast<std::uint8_t>(n >> 24)};
    std::array<asio::const_buffer, 2> buffers = {asio::buffer(prefix), asio::buffer(bytes)};
    asio::write(*tcp_, buffers);
  }

  void close() {
    boost::system::error_code ignored;
    if (tcp_) {
      tcp_->shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
      tcp_->close(ignored);
    }
  }

 private:
  asio::io_context io_;
  std::unique_ptr<asio::ip::udp::socket> udp_;
  asio::ip::udp::endpoint udp_target_;
  std::unique_ptr<asio::ip::tcp::socket> tcp_;
};

// A malformed frame for robustness tests: a valid frame with one byte flipped
// (bad CRC), cut short (truncated), or random bytes; cycles through the three.
std::vector<std::uint8_t> make_garbage(const std::vector<std::uint8_t>& valid, int which,
                                       std::mt19937_64& rng) {
  std::vector<std::uint8_t> out = valid;
  switch (which % 3) {
    case 0:
      out[sensors::kFrameHeaderBytes + rng() % (out.size() - sensors::kFrameHeaderBytes -
                                                 sensors::kFrameCrcBytes)] ^= 0x5a;
      break;
    case 1:
      out.resize(1 + rng() % (out.size() - 1));
      break;
    default:
      out.resize(8 + rng() % 256);
      for (auto& b : out) b = static_cast<std::uint8_t>(rng());
      out[0] = 0;  // never the magic: random bytes must not pass as a frame
      break;
  }
  return out;
}

int run(const ReplayOptions& o) {
  sensors::Recording rec;
  std::uint16_t device_id = o.device;
  sensors::DeviceKind kind = parse_device_kind(o.kind);
  if (!o.device_profile.empty()) {
    const config::Config cfg = config::load_config(o.config_path);
    const config::DeviceProfile* profile = cfg.device_by_name(o.device_profile);
    if (!profile) throw Error("no device '" + o.device_profile + "' in " + cfg.source_file);
    rec = o.source.read_for(*profile);
    device_id = profile->id;
    kind = profile->kind;
  } else {
    rec = o.source.read();
  }
  const std::size_t end = o.end < 0 ? rec.samples() : static_cast<std::size_t>(o.end);
  if (o.start < 0 || static_cast<std::size_t>(o.start) >= std::min(end, rec.samples()))
    throw Error("--start/--end select no samples of " + o.source.file);
  const int frame_samples =
      o.frame_samples > 0 ? o.frame_samples : default_frame_samples(rec.sample_rate_hz);
  const auto frames = frames_from_recording(rec, o.wearer, device_id, kind, frame_samples, static_cast<std::size_t>(o.start), end,
                                            o.int16);
  std::optional<sensors::FrameMacKey> mac_key;
  if (!o.mac_key.empty()) mac_key = sensors::read_frame_mac_key(o.mac_key);
  Sender sender(o.to, o.from);
  std::mt19937_64 rng(o.seed);
  const auto wall0 = std::chrono::steady_clock::now();
  const double device0 = rec.time_s[static_cast<std::size_t>(o.start)];
  std::uint64_t garbage = 0;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const auto& f = frames[i];
    if (o.speed > 0) {
      // A frame leaves when its last sample has been "measured".
      const double due = (static_cast<double>(f.device_time_us) * 1e-6 - device0 +
                          f.samples / rec.sample_rate_hz) / o.speed;
      std::this_thread::sleep_until(wall0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                std::chrono::duration<double>(due)));
    }
    const auto bytes = sensors::encode_frame(f, mac_key ? &*mac_key : nullptr);
    sender.send(bytes);
    if (o.garbage_every > 0 && (i + 1) % static_cast<std::size_t>(o.garbage_every) == 0)
      sender.send(make_garbage(bytes, static_cast<int>(garbage++), rng));
  }
  sender.close();
  std::cerr << "replayed " << frames.size() << " frames (" << end - static_cast<std::size_t>(o.start)
            << " samples x " << rec.channels() << " channels) and " << garbage
            << " malformed frames to " << o.to << "\n";
  std::cout << "{\"frames\":" << frames.size() << ",\"garbage\":" << garbage << "}\n";
  return 0;
}

}  // namespace

void add_replay(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<ReplayOptions>();
  auto* cmd = app.add_subcommand("replay", "send a recording to gaitwatchd as wire frames");
  options->source.add_flags(*cmd);
  cmd->add_option("--to", options->to, "udp://HOST:PORT or tcp://HOST:PORT")->required();
  cmd->add_option("--from", options->from,
                  "local address to send from, e.g. 127.0.0.2 (the daemon's zones go by it)");
  cmd->add_option("--wearer", options->wearer, "wearer id (default 1)");
  auto* device_id = cmd->add_option("--device-id", options->device,
                                    "device id, as in the daemon's devices (default 1)");
  auto* kind = cmd->add_option("--kind", options->kind, "device kind (default generic)");
  auto* config = cmd->add_option("--config", options->config_path,
                                 "daemon config file holding --device");
  auto* profile = cmd->add_option("--device", options->device_profile,
                                  "device profile name of --config: its id and kind, the "
                                  "recording mapped to its channels and resampled to its rate");
  profile->needs(config)->excludes(device_id)->excludes(kind);
  config->needs(profile);
  cmd->add_option("--speed", options->speed, "replay speed; 0 = as fast as possible (default 1)");
  cmd->add_option("--frame-samples", options->frame_samples, "samples per frame (default rate/10)");
  cmd->add_option("--start", options->start, "first sample index (default 0)");
  cmd->add_option("--end", options->end, "end sample index, exclusive (default: all)");
  cmd->add_flag("--int16", options->int16, "send int16 samples with per-channel scales");
  cmd->add_option("--inject-garbage", options->garbage_every,
                  "test aid: after every N frames send one malformed frame");
  cmd->add_option("--seed", options->seed, "seed of --inject-garbage");
  cmd->add_option("--mac-key", options->mac_key,
                  "MAC key file (gaitwatch keygen --mac): send authenticated frames "
                  "(docs/protocol.md); the daemon's ingest.allowed_devices entry holds the same key");
  on_run(*cmd, exit_code, [options] { return run(*options); });
}

}  // namespace gw::cli
