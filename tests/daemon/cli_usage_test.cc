// Integration: the command-line conventions of gaitwatch and gaitwatchd as
// processes (daemon/cli/usage.h): usage errors exit 2 with one message,
// --help and --version exit 0, runtime errors exit 1; --format required
// unless the file name implies it.
#include <catch2/catch.hpp>

#include <boost/asio.hpp>

#include "tests/daemon/daemon_fixture.h"

namespace fs = std::filesystem;
using gw::test::DaemonFixture;
using gw::test::kDaemon;
using gw::test::kTool;
using gw::test::RunResult;
using gw::test::run_process;

namespace {

constexpr int kUsage = 2;

RunResult run(const DaemonFixture& fx, std::vector<std::string> argv, const std::string& tag) {
  return run_process(std::move(argv), fx.dir, tag, std::chrono::seconds(60));
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
  boost::asio::io_context io;
  boost::asio::ip::udp::socket receiver(
      io, boost::asio::ip::udp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  const std::string to = "udp://127.0.0.1:" + std::to_string(receiver.local_endpoint().port());
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
