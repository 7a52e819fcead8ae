// Integration: the command-line conventions of gaitwatch and gaitwatchd as
// processes (daemon/cli/usage.h): usage errors exit 2 with one message,
// --help and --version exit 0, runtime errors exit 1; --format required
// unless the file name implies it (a trailing .gz aside); a recording fitted
// to a device profile's channels and rate; detect's table and --json; client
// commands that find the daemon
// through --config, on the default unix control socket (mode 0660, a stale
// file from a crashed run replaced); the log line format outside and inside
// the journal.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <regex>

#include <boost/asio.hpp>
#include <zlib.h>

#include "tests/daemon/daemon_fixture.h"

namespace fs = std::filesystem;
using gw::test::DaemonFixture;
using gw::test::kDaemon;
using gw::test::kTool;
using gw::test::Process;
using gw::test::RunResult;
using gw::test::run_process;
using nlohmann::json;

namespace {

constexpr int kUsage = 2;

RunResult run(const DaemonFixture& fx, std::vector<std::string> argv, const std::string& tag) {
  return run_process(std::move(argv), fx.dir, tag, std::chrono::seconds(60));
}

// A unix socket file nobody listens on: what a crashed daemon leaves behind.
void make_stale_socket(const fs::path& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
  REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
  ::close(fd);
  REQUIRE(fs::is_socket(path));
}

// A UDP socket on loopback that replay can send to (and nobody reads).
struct UdpSink {
  boost::asio::io_context io;
  boost::asio::ip::udp::socket socket{
      io, boost::asio::ip::udp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0)};
  std::string url() const {
    return "udp://127.0.0.1:" + std::to_string(socket.local_endpoint().port());
  }
};

bool has_line(const std::string& text, const std::regex& pattern) {
  std::stringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (std::regex_match(line, pattern)) return true;
  return false;
}

}  // namespace

TEST_CASE("usage errors exit 2 with one message, help and version exit 0", "[integration]") {
  DaemonFixture fx;

  const auto typo = run(fx, {kTool, "replya"}, "typo");
  CHECK(typo.code == kUsage);
  CHECK(typo.err.find("unknown subcommand 'replya', did you mean 'replay'?") != std::string::npos);
  const auto nested = run(fx, {kTool, "history", "fiil"}, "nested");
  CHECK(nested.code == kUsage);
  CHECK(nested.err.find("unknown subcommand 'fiil', did you mean 'fill'?") != std::string::npos);
  const auto unrelated = run(fx, {kTool, "xyzzy"}, "unrelated");
  CHECK(unrelated.code == kUsage);
  CHECK(unrelated.err.find("unknown subcommand 'xyzzy' (one of: replay") != std::string::npos);

  const auto option = run(fx, {kTool, "status", "--bogus"}, "option");
  CHECK(option.code == kUsage);
  CHECK(option.err.find("--bogus") != std::string::npos);
  const auto required = run(fx, {kTool, "slots", "--endpoint", "ipc:///nowhere"}, "required");
  CHECK(required.code == kUsage);
  CHECK(required.err.find("--wearer is required") != std::string::npos);
  const auto value = run(fx, {kTool, "slots", "--wearer", "seven"}, "value");
  CHECK(value.code == kUsage);
  CHECK(value.err.find("--wearer") != std::string::npos);
  const auto combination = run(fx, {kTool, "search", "--file", gw::test::kRecording}, "combination");
  CHECK(combination.code == kUsage);
  CHECK(combination.err.find("--pattern FILE or --example") != std::string::npos);

  const auto help = run(fx, {kTool, "--help"}, "help");
  CHECK(help.code == 0);
  CHECK(help.out.find("replay") != std::string::npos);
  CHECK(run(fx, {kTool, "status", "--help"}, "sub_help").code == 0);
  const auto version = run(fx, {kTool, "--version"}, "version");
  CHECK(version.code == 0);
  CHECK(version.out.find("gaitwatch ") != std::string::npos);

  CHECK(run(fx, {kDaemon, "--help"}, "d_help").code == 0);
  CHECK(run(fx, {kDaemon, "--version"}, "d_version").code == 0);
  const auto d_option = run(fx, {kDaemon, "--bogus"}, "d_option");
  CHECK(d_option.code == kUsage);
  CHECK(d_option.err.find("--bogus") != std::string::npos);
  const auto d_none = run(fx, {kDaemon}, "d_none");
  CHECK(d_none.code == kUsage);
  CHECK(d_none.err.find("--config FILE or --check-config FILE is required") != std::string::npos);

  // Runtime errors: the command ran and failed.
  const auto missing = run(fx, {kTool, "hits", "--db", (fx.dir / "none/hits.db").string()}, "runtime");
  CHECK(missing.code == 1);
  CHECK(missing.err.find("gaitwatch hits: ") != std::string::npos);
  CHECK(run(fx, {kDaemon, "--config", (fx.dir / "absent.yaml").string()}, "d_runtime").code == 1);
}

TEST_CASE("the recording format is required unless the file name implies it", "[integration]") {
  DaemonFixture fx;
  const UdpSink sink;
  const std::string to = sink.url();
  auto replay = [&](const std::string& file, std::vector<std::string> extra, const std::string& tag) {
    std::vector<std::string> argv = {kTool, "replay", "--file", file, "--end", "50",
                                     "--speed", "0", "--to", to};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run(fx, argv, tag);
  };
  const fs::path values = fx.dir / "walk.txt";
  {
    std::ofstream out(values);
    for (int i = 0; i < 100; ++i) out << i % 7 << "\n";
  }
  const auto unnamed = replay(values.string(), {}, "unnamed");
  CHECK(unnamed.code == kUsage);
  CHECK(unnamed.err.find("--format is required for " + values.string()) != std::string::npos);
  CHECK(replay(values.string(), {"--format", "values"}, "given").code == 0);

  // The Daphnet name S02R01.txt implies daphnet, a .csv name csv.
  const auto daphnet = replay(gw::test::kRecording, {}, "daphnet");
  INFO(daphnet.err);
  CHECK(daphnet.code == 0);
  const fs::path csv = fx.dir / "walk.csv";
  {
    std::ofstream out(csv);
    out << "v\n";
    for (int i = 0; i < 100; ++i) out << i % 7 << "\n";
  }
  const auto by_extension = replay(csv.string(), {}, "csv");
  INFO(by_extension.err);
  CHECK(by_extension.code == 0);
}

TEST_CASE("a trailing .gz is set aside when the file name implies the format", "[integration]") {
  DaemonFixture fx;
  const UdpSink sink;
  const std::string to = sink.url();
  auto replay = [&](const std::string& file, const std::string& tag) {
    return run(fx, {kTool, "replay", "--file", file, "--end", "50", "--speed", "0", "--to", to},
               tag);
  };
  auto write_gzip = [](const fs::path& path, const std::string& text) {
    gzFile out = gzopen(path.c_str(), "wb");
    REQUIRE(out != nullptr);
    REQUIRE(gzwrite(out, text.data(), static_cast<unsigned>(text.size())) ==
            static_cast<int>(text.size()));
    REQUIRE(gzclose(out) == Z_OK);
  };

  // SisFall's own names: <D|F><NN>_<SA|SE><NN>_R<NN>.txt.gz.
  const auto sisfall = replay(std::string(GW_DATA_DIR) + "/sisfall/F01_SA01_R01.txt.gz", "sisfall");
  INFO(sisfall.err);
  CHECK(sisfall.code == 0);
  CHECK(sisfall.err.find("(50 samples x 9 channels)") != std::string::npos);

  std::string daphnet_lines;
  {
    std::ifstream in(gw::test::kRecording);
    std::string line;
    for (int i = 0; i < 100 && std::getline(in, line); ++i) daphnet_lines += line + "\n";
  }
  write_gzip(fx.dir / "S02R01.txt.gz", daphnet_lines);
  const auto daphnet = replay((fx.dir / "S02R01.txt.gz").string(), "daphnet_gz");
  INFO(daphnet.err);
  CHECK(daphnet.code == 0);
  CHECK(daphnet.err.find("(50 samples x 9 channels)") != std::string::npos);

  write_gzip(fx.dir / "walk.csv.GZ", "v\n1\n2\n3\n");
  const auto csv = run(fx, {kTool, "replay", "--file", (fx.dir / "walk.csv.GZ").string(),
                            "--speed", "0", "--to", to}, "csv_gz");
  INFO(csv.err);
  CHECK(csv.code == 0);
  CHECK(csv.err.find("(3 samples x 1 channels)") != std::string::npos);

  // A name that implies nothing once .gz is set aside still needs --format.
  write_gzip(fx.dir / "walk.txt.gz", "1\n2\n");
  const auto unnamed = replay((fx.dir / "walk.txt.gz").string(), "unnamed_gz");
  CHECK(unnamed.code == kUsage);
  CHECK(unnamed.err.find("--format is required for") != std::string::npos);
}

TEST_CASE("a SisFall trial fits the 100 Hz accelerometer profile: 3 channels, resampled",
          "[integration]") {
  DaemonFixture fx;
  const std::string trial = std::string(GW_DATA_DIR) + "/sisfall/F01_SA01_R01.txt.gz";
  const std::string config = std::string(GW_CONFIG_DIR) + "/gaitwatch.yaml";
  const std::string resampled = "resampled 200 Hz -> 100 Hz for device 'accelerometer'";
  auto detect_stats = [](const RunResult& r) {
    const std::string prefix = "detect: ";
    const auto at = r.err.find(prefix);
    REQUIRE(at != std::string::npos);
    return json::parse(r.err.substr(at + prefix.size(), r.err.find('\n', at) - at - prefix.size()));
  };

  const auto detect = run(fx, {kTool, "detect", "--config", config, "--device", "accelerometer",
                               "--file", trial, "--json", "--backend", "cpu"}, "detect");
  INFO(detect.err);
  REQUIRE(detect.code == 0);
  CHECK(detect.err.find(resampled) != std::string::npos);
  // 3000 samples at 200 Hz are 1500 at 100 Hz: 150 frames of 10, every one
  // matching the 3-channel profile.
  const json stats = detect_stats(detect);
  CHECK(stats["samples"] == 1500);
  CHECK(stats["frames_accepted"] == 150);
  CHECK(stats["frames_profile_mismatch"] == 0);
  for (const json& alert : gw::test::json_lines(detect.out)) CHECK(alert.is_object());

  // --columns wins over the default mapping (and two columns do not fit).
  const auto two = run(fx, {kTool, "detect", "--config", config, "--device", "accelerometer",
                            "--file", trial, "--columns", "mma_x,mma_y", "--backend", "cpu"},
                       "two_columns");
  CHECK(two.code == 1);
  CHECK(two.err.find("the recording has 2 channels, device 'accelerometer' has 3") !=
        std::string::npos);

  // replay with a profile sends its id and kind, at its rate.
  const UdpSink sink;
  const auto replay = run(fx, {kTool, "replay", "--config", config, "--device", "accelerometer",
                               "--file", trial, "--speed", "0", "--to", sink.url()},
                          "replay");
  INFO(replay.err);
  CHECK(replay.code == 0);
  CHECK(replay.err.find(resampled) != std::string::npos);
  CHECK(replay.err.find("replayed 150 frames (1500 samples x 3 channels)") != std::string::npos);
}

TEST_CASE("detect prints a table, or with --json one alert object per line", "[integration]") {
  DaemonFixture fx;
  const std::vector<json> alerts = gw::test::detect_offline(fx);
  REQUIRE_FALSE(alerts.empty());
  for (const json& a : alerts) {
    CHECK(a.contains("pattern"));
    CHECK(a.contains("t_start"));
  }
  const auto table = run(fx, {kTool, "detect", "--config", fx.config_path.string(), "--file",
                              gw::test::kRecording, "--start", std::to_string(gw::test::kStart),
                              "--end", std::to_string(gw::test::kEnd)},
                         "table");
  INFO(table.err);
  REQUIRE(table.code == 0);
  std::vector<std::string> lines;
  std::stringstream out(table.out);
  for (std::string line; std::getline(out, line);) lines.push_back(line);
  REQUIRE(lines.size() == alerts.size() + 1);
  CHECK(lines[0].find("pattern") != std::string::npos);
  CHECK(lines[1].find(alerts[0]["pattern"].get<std::string>()) != std::string::npos);
}

TEST_CASE("the default unix control socket is 0660, replaces a stale file, and clients find it "
          "through the config, and log lines carry time stamps",
          "[integration]") {
  DaemonFixture fx;
  // A relative ipc path: next to the config, as in the shipped config.
  fx.config["control"]["endpoint"] = "ipc://control.sock";
  fx.write_config(fx.config);
  const fs::path socket = fx.dir / "control.sock";
  make_stale_socket(socket);

  Process daemon = gw::test::start_daemon(fx);
  REQUIRE(gw::test::eventually(
      [&] { return daemon.err().find("gaitwatchd ready") != std::string::npos || !daemon.running(); },
      std::chrono::seconds(60)));
  INFO(daemon.err());
  REQUIRE(daemon.running());

  struct stat st {};
  REQUIRE(::stat(socket.c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  CHECK((st.st_mode & 07777) == 0660);
  CHECK(daemon.err().find("control socket " + socket.string() + ": mode 0660") != std::string::npos);

  // Found only through --config: the endpoint is the config's, resolved
  // against the config's directory, not the working directory.
  const auto status = run_process({kTool, "status", "--config", fx.config_path.string()},
                                  fs::temp_directory_path(), "status", std::chrono::seconds(30));
  INFO(status.err);
  REQUIRE(status.code == 0);
  CHECK(json::parse(status.out).contains("control"));
  // subscribe reads publish.endpoint from the same file (stats every 0.2 s).
  const auto subscribe = run(fx, {kTool, "subscribe", "--config", fx.config_path.string(),
                                  "--topic", "stats.", "--count", "1", "--timeout", "20"},
                             "subscribe");
  INFO(subscribe.err);
  CHECK(subscribe.code == 0);
  CHECK(subscribe.out.find("\"engine\"") != std::string::npos);
  // An explicit --endpoint wins over the config.
  const auto explicit_endpoint =
      run(fx, {kTool, "status", "--config", fx.config_path.string(), "--endpoint",
               "ipc://" + (fx.dir / "other.sock").string()},
          "explicit");
  CHECK(explicit_endpoint.code == 1);
  CHECK(explicit_endpoint.err.find("other.sock") != std::string::npos);

  // Outside the journal: ISO 8601 local time with offset, the level, no <N>.
  const std::string log = daemon.err();
  CHECK(has_line(log, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d INFO gaitwatchd ready .*)")));
  CHECK(log.find("<6>") == std::string::npos);

  daemon.signal(SIGTERM);
  const auto code = daemon.wait(std::chrono::seconds(20));
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  CHECK_FALSE(fs::exists(socket));
  // No daemon: a missing socket is a clear error at once, not a timeout.
  const auto gone = run(fx, {kTool, "status", "--config", fx.config_path.string()}, "gone");
  CHECK(gone.code == 1);
  CHECK(gone.err.find("no socket " + socket.string()) != std::string::npos);
}

TEST_CASE("with stderr on the journal ($JOURNAL_STREAM) the log keeps journald priorities",
          "[integration]") {
  DaemonFixture fx;
  // A start-up error after some info lines: the TCP ingest port is taken.
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor taken(
      io, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"),
                                         static_cast<unsigned short>(fx.tcp_port)));
  const fs::path err = fx.dir / "journal.err";
  std::ofstream(err).close();
  struct stat st {};
  REQUIRE(::stat(err.c_str(), &st) == 0);
  const std::string stream = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  ::setenv("JOURNAL_STREAM", stream.c_str(), 1);
  Process daemon({kDaemon, "--config", fx.config_path.string()}, fx.dir / "journal.out", err);
  ::unsetenv("JOURNAL_STREAM");
  const auto code = daemon.wait(std::chrono::seconds(60));
  REQUIRE(code.has_value());
  CHECK(*code == 1);
  const std::string log = daemon.err();
  INFO(log);
  CHECK(has_line(log, std::regex(R"(<6>search backend: .*)")));
  CHECK(has_line(log, std::regex(R"(<2>gaitwatchd: ingest.tcp: cannot bind .*)")));
  CHECK_FALSE(has_line(log, std::regex(R"(.*\d\d:\d\d:\d\d\.\d{3}.*)")));
}
