// Integration: what `cmake --install` puts on a machine works there. The build
// directory is installed into a temp prefix; the installed daemon accepts the
// installed config, which names only files under the prefix (the pattern
// packs and their templates, not the source tree) and state paths under
// its var/lib/gaitwatch; the installed units (the daemon's, and the
// gateway's in a build with libnats) name the installed binary, config and
// documentation; the installed daemon and gateway start on the installed
// config under a stand-in for systemd's notification socket, say READY=1,
// ping the watchdog, say STOPPING=1 and exit within the unit's TimeoutStopSec.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/config.h"
#include "tests/common/nats_server.h"
#include "tests/common/notify_socket.h"
#include "tests/daemon/process.h"

namespace fs = std::filesystem;
using gw::test::run_process;

namespace {

// The build directory installed into a fresh temp prefix (stripped, as the
// documented `cmake --install build --strip`).
struct Installed {
  fs::path prefix;
  Installed() {
    static int counter = 0;
    prefix = fs::temp_directory_path() /
             ("gw_install_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(prefix);
    fs::create_directories(prefix);
    const auto r = run_process(
        {GW_CMAKE_COMMAND, "--install", GW_BINARY_DIR, "--prefix", prefix.string(), "--strip"},
        prefix, "install", std::chrono::seconds(120));
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
  }
  ~Installed() { fs::remove_all(prefix); }
  fs::path config() const { return prefix / "etc/gaitwatch/gaitwatch.yaml"; }
  fs::path daemon() const { return prefix / "bin/gaitwatchd"; }
  fs::path unit() const { return prefix / "lib/systemd/system/gaitwatchd.service"; }
  fs::path gateway_unit() const { return prefix / "lib/systemd/system/gaitwatch-gateway.service"; }
  bool under_prefix(const fs::path& path) const {
    const auto relative = fs::path(path).lexically_normal().lexically_relative(prefix);
    return !relative.empty() && *relative.begin() != "..";
  }
};

// The unit's "Key=value" lines for `key`, in order.
std::vector<std::string> unit_values(const std::string& unit, const std::string& key) {
  std::vector<std::string> values;
  std::istringstream in(unit);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + "=", 0) == 0) values.push_back(line.substr(key.size() + 1));
  return values;
}

// The installed config with temp state paths and loopback ports chosen now,
// written next to it as run.yaml (with `nats` added when given).
fs::path write_run_config(const Installed& installed, const std::string& nats_url = "") {
  YAML::Node config = YAML::LoadFile(installed.config().string());
  const fs::path state = installed.prefix / "state";
  fs::create_directories(state);
  config["storage"]["path"] = (state / "hits.db").string();
  config["history"]["path"] = (state / "history.db").string();
  config["ingest"]["udp"]["port"] = gw::test::free_port(true);
  config["ingest"]["tcp"]["port"] = gw::test::free_port(false);
  config["publish"]["endpoint"] = "tcp://127.0.0.1:" + std::to_string(gw::test::free_port(false));
  config["control"]["endpoint"] = "tcp://127.0.0.1:" + std::to_string(gw::test::free_port(false));
  config["metrics"]["port"] = gw::test::free_port(false);
  config["console"]["port"] = gw::test::free_port(false);
  config["search"]["threads"] = 2;
  if (!nats_url.empty()) config["nats"]["url"] = nats_url;
  const fs::path run_config = installed.prefix / "etc/gaitwatch/run.yaml";
  std::ofstream(run_config) << YAML::Dump(config) << "\n";
  return run_config;
}

// The installed unit at `path`, having checked that every placeholder was
// substituted and that it checks, then runs, the installed daemon on the
// installed config (with `options`, e.g. "--gateway ", before each).
std::string read_unit_running(const Installed& installed, const fs::path& path, const std::string& options) {
  const std::string unit = gw::test::read_file(path);
  REQUIRE_FALSE(unit.empty());
  CHECK(unit.find('@') == std::string::npos);
  const std::string daemon = installed.daemon().string() + " " + options;
  const std::string config = installed.config().string();
  CHECK(unit_values(unit, "ExecStart") == std::vector<std::string>{daemon + "--config " + config});
  CHECK(unit_values(unit, "ExecStartPre") == std::vector<std::string>{daemon + "--check-config " + config});
  return unit;
}

// systemd's own check of a unit where this machine has it (not every
// container does): every key known and valid, the commands executable.
void verify_unit(const Installed& installed, const fs::path& unit) {
  if (std::system("systemd-analyze --version >/dev/null 2>&1") != 0) {
    WARN("skipped systemd-analyze verify: not available");
    return;
  }
  const auto verify = run_process({"/usr/bin/env", "systemd-analyze", "verify", "--man=no", unit.string()},
                                  installed.prefix, "verify-" + unit.stem().string(), std::chrono::seconds(60));
  INFO(verify.out << verify.err);
  CHECK(verify.code == 0);
  CHECK_THAT(verify.err, !Catch::Contains("Unknown") && !Catch::Contains("ignoring") &&
                             !Catch::Contains("Invalid") && !Catch::Contains("not executable"));
}

// The unit's TimeoutStopSec, in seconds.
std::chrono::seconds stop_timeout(const fs::path& unit) {
  const auto values = unit_values(gw::test::read_file(unit), "TimeoutStopSec");
  REQUIRE(values.size() == 1);
  return std::chrono::seconds(std::stoi(values[0]));
}

// Runs `argv` as its unit would (a notification socket, WatchdogSec=1)
// until it says READY=1; checks that it pings the watchdog, then stops it
// with SIGTERM and checks STOPPING=1 and a clean exit within `stop_within`.
void run_as_notify_service(const Installed& installed, std::vector<std::string> argv,
                           const std::string& name, std::chrono::seconds stop_within) {
  gw::test::NotifySocket notify(installed.prefix / (name + ".notify"));
  std::optional<gw::Process> service;
  {
    const gw::test::ServiceEnvironment environment(notify, 1'000'000);
    service.emplace(std::move(argv), installed.prefix / (name + ".out"),
                    installed.prefix / (name + ".err"));
  }
  REQUIRE(gw::test::eventually([&] { return notify.find("READY=1") || !service->running(); },
                               std::chrono::seconds(60)));
  INFO(name << " stderr at READY: " << service->err());
  REQUIRE(service->running());
  REQUIRE(notify.find("READY=1"));
  // WatchdogSec=1: a ping every half second at most.
  CHECK(gw::test::eventually([&] { return notify.count("WATCHDOG=1") >= 3; },
                             std::chrono::seconds(5)));
  CHECK_FALSE(notify.find("STOPPING=1"));
  service->signal(SIGTERM);
  // Reading on while it stops, as systemd does: a socket left unread fills
  // up and would block the service's next sd_notify.
  const bool stopped = gw::test::eventually(
      [&] {
        notify.messages();
        return !service->running();
      },
      stop_within);
  INFO(name << " stderr at the stop: " << service->err());
  REQUIRE(stopped);
  CHECK(service->wait(std::chrono::milliseconds(0)) == 0);
  CHECK(notify.find("STOPPING=1"));
}

}  // namespace

TEST_CASE("the installed config validates and names only files under the prefix",
          "[integration]") {
  Installed installed;
  // Only the two programs are installed, no tests or benchmarks.
  std::set<std::string> programs;
  for (const auto& entry : fs::directory_iterator(installed.prefix / "bin"))
    programs.insert(entry.path().filename().string());
  CHECK(programs == std::set<std::string>{"gaitwatch", "gaitwatchd"});

  const auto check = run_process(
      {installed.daemon().string(), "--check-config", installed.config().string()},
      installed.prefix, "check", std::chrono::seconds(60));
  INFO(check.out << check.err);
  REQUIRE(check.code == 0);
  // Both shipped packs load from the installed prefix: fog 1, falls 1 and
  // its view.
  CHECK_THAT(check.out + check.err, Catch::Contains("3 patterns"));
  const std::string config_text = gw::test::read_file(installed.config());
  for (const char* pack : {"fog.yaml", "falls.yaml"}) {
    INFO(pack);
    CHECK(fs::is_regular_file(installed.prefix / "share/gaitwatch/patterns" / pack));
    CHECK_THAT(config_text,
               Catch::Contains("- include: " +
                               (installed.prefix / "share/gaitwatch/patterns" / pack).string()));
  }
  CHECK(fs::is_directory(installed.prefix / "share/gaitwatch/patterns/fog"));
  CHECK(fs::is_directory(installed.prefix / "share/gaitwatch/patterns/falls"));

  const gw::config::Config config = gw::config::load_config(installed.config().string());
  CHECK(config.storage.path == (installed.prefix / "var/lib/gaitwatch/hits.db").string());
  CHECK(config.history.path == (installed.prefix / "var/lib/gaitwatch/history.db").string());
  // The control socket lives in the unit's RuntimeDirectory.
  CHECK(config.control.endpoint == "ipc:///run/gaitwatch/control.sock");
  // The console's pages are installed with the programs.
  CHECK(config.console.static_dir == (installed.prefix / "share/gaitwatch/console").string());
  // The gait pack and its example strides are read from the installed prefix.
  CHECK(config.gait.enabled);
  CHECK(config.gait.pack == (installed.prefix / "share/gaitwatch/patterns/gait.yaml").string());
  CHECK(config.gait.examples_file ==
        (installed.prefix / "share/gaitwatch/patterns/gait/strides.csv").string());
  for (const char* page : {"index.html", "login.html", "static/console.js", "static/login.js",
                           "static/console.css"})
    CHECK(fs::is_regular_file(installed.prefix / "share/gaitwatch/console" / page));
  std::set<std::string> names;
  for (const auto& pattern : config.patterns) names.insert(pattern.name);
  CHECK(names ==
        std::set<std::string>{"fog_freeze_index", "fall_turn_impact", "fall_view_impact"});
  const std::string source_dir = fs::path(GW_SOURCE_DIR).lexically_normal().string();
  for (const auto& pattern : config.patterns) {
    for (const auto& example : pattern.examples) {
      INFO(pattern.name << ": " << example.describe());
      CHECK_FALSE(example.source.has_value());  // no recordings
      CHECK(installed.under_prefix(example.template_file));
      CHECK(example.template_file.find(source_dir) == std::string::npos);
      CHECK(fs::path(example.template_file).parent_path().parent_path() ==
            installed.prefix / "share/gaitwatch/patterns");
    }
  }
  // The attribution of the data the templates were cut from comes with them.
  CHECK(fs::exists(installed.prefix / "share/gaitwatch/patterns/README.md"));

}

TEST_CASE("the installed unit names the installed binary, config and documentation",
          "[integration]") {
  Installed installed;
  const std::string unit = read_unit_running(installed, installed.unit(), "");
  CHECK(unit_values(unit, "StateDirectory") == std::vector<std::string>{"gaitwatch"});
  CHECK(unit_values(unit, "RuntimeDirectory") == std::vector<std::string>{"gaitwatch"});
  CHECK(unit_values(unit, "RuntimeDirectoryMode") == std::vector<std::string>{"0750"});
  CHECK(unit_values(unit, "Group") == std::vector<std::string>{"gaitwatch"});
  CHECK(unit_values(unit, "LimitNOFILE") == std::vector<std::string>{"65536"});
  // The prefix's var is not /var: the unit lets the daemon write there.
  CHECK(unit_values(unit, "ReadWritePaths") ==
        std::vector<std::string>{(installed.prefix / "var/lib/gaitwatch").string()});

  // Every file the unit names exists: the binary and the config in
  // Exec*, the documentation's file:// and man: pages.
  const std::regex absolute_path(R"((?:^|[ =])(/[^ ]+))");
  std::vector<std::string> named;
  for (const char* key : {"ExecStart", "ExecStartPre"})
    for (const auto& value : unit_values(unit, key))
      for (std::sregex_iterator it(value.begin(), value.end(), absolute_path), end; it != end; ++it)
        named.push_back((*it)[1]);
  const auto documentation = unit_values(unit, "Documentation");
  REQUIRE(documentation.size() == 1);
  std::istringstream urls(documentation[0]);
  int files = 0, pages = 0;
  for (std::string url; urls >> url;) {
    if (url.rfind("file://", 0) == 0) {
      named.push_back(url.substr(7));
      ++files;
    }
    std::smatch page;
    if (std::regex_match(url, page, std::regex(R"(man:([a-z]+)\(([0-9])\))"))) {
      named.push_back((installed.prefix / "share/man" / ("man" + page[2].str()) /
                       (page[1].str() + "." + page[2].str()))
                          .string());
      ++pages;
    }
  }
  CHECK(files == 1);
  CHECK(pages == 2);
  CHECK(named.size() == 4 + 3);
  for (const auto& file : named) {
    INFO(file);
    CHECK(installed.under_prefix(file));
    CHECK(fs::is_regular_file(file));
  }

  const std::string sysusers =
      gw::test::read_file(installed.prefix / "lib/sysusers.d/gaitwatch.conf");
  CHECK_THAT(sysusers, Catch::Contains("u gaitwatch - \"gaitwatch daemon\" /var/lib/gaitwatch"));

  verify_unit(installed, installed.unit());
}

TEST_CASE("the installed daemon starts on the installed config and stops cleanly",
          "[integration]") {
  Installed installed;
  const fs::path run_config = write_run_config(installed);
  const fs::path state = installed.prefix / "state";

  gw::Process daemon({installed.daemon().string(), "--config", run_config.string()},
                     installed.prefix / "daemon.out", installed.prefix / "daemon.err");
  const bool ready = gw::test::eventually(
      [&] { return daemon.err().find("ready") != std::string::npos || !daemon.running(); },
      std::chrono::seconds(60));
  INFO(daemon.err());
  REQUIRE(ready);
  REQUIRE(daemon.running());
  // The console serves its installed pages.
  CHECK_THAT(daemon.err(), Catch::Contains("console: http://127.0.0.1:"));
  daemon.signal(SIGTERM);
  CHECK(daemon.wait(std::chrono::seconds(30)) == 0);
  CHECK(fs::exists(state / "hits.db"));
}

TEST_CASE("the installed daemon tells its unit READY, pings the watchdog and stops within "
          "TimeoutStopSec",
          "[integration]") {
  Installed installed;
  const fs::path run_config = write_run_config(installed);
  run_as_notify_service(installed, {installed.daemon().string(), "--config", run_config.string()},
                        "daemon", stop_timeout(installed.unit()));
}

TEST_CASE("the installed gateway unit runs the installed binary on the installed config, "
          "one role per host",
          "[integration]") {
  Installed installed;
#if !GW_HAVE_NATS
  // Built without libnats: no gateway, and no unit for one.
  CHECK_FALSE(fs::exists(installed.gateway_unit()));
  return;
#endif
  const std::string unit = read_unit_running(installed, installed.gateway_unit(), "--gateway ");
  const std::string daemon = installed.daemon().string();
  const std::string config = installed.config().string();
  CHECK(unit_values(unit, "Type") == std::vector<std::string>{"notify"});
  CHECK(unit_values(unit, "Conflicts") == std::vector<std::string>{"gaitwatchd.service"});
  CHECK(unit_values(unit, "User") == std::vector<std::string>{"gaitwatch"});
  // Started only once a conflicting daemon has stopped (its ports free).
  CHECK(unit_values(unit, "After") ==
        std::vector<std::string>{"network-online.target gaitwatchd.service"});
  // It writes nothing: no state or runtime directory, nothing writable.
  CHECK(unit_values(unit, "StateDirectory").empty());
  CHECK(unit_values(unit, "RuntimeDirectory").empty());
  CHECK(unit_values(unit, "ReadWritePaths").empty());
  CHECK(unit_values(unit, "Documentation") ==
        unit_values(gw::test::read_file(installed.unit()), "Documentation"));

  // The installed config leaves `nats:` commented out: the gateway's check
  // names what is missing, and passes once the section is there.
  const auto missing = run_process({daemon, "--gateway", "--check-config", config},
                                   installed.prefix, "gateway-check", std::chrono::seconds(60));
  CHECK(missing.code == 1);
  CHECK_THAT(missing.err, Catch::Contains(config + ": nats: missing"));
  std::ofstream(config, std::ios::app) << "nats:\n  url: nats://127.0.0.1:4222\n";
  const auto ok = run_process({daemon, "--gateway", "--check-config", config}, installed.prefix,
                              "gateway-check-ok", std::chrono::seconds(60));
  INFO(ok.out << ok.err);
  CHECK(ok.code == 0);
  CHECK_THAT(ok.out, Catch::Contains(config + ": ok"));
  CHECK(ok.err.find("detects nothing") == std::string::npos);
  // The gateway opens no control socket and writes no file, so its check
  // leaves out what only the daemon needs: a control socket's directory
  // that does not exist (the daemon's unit makes /run/gaitwatch; the
  // gateway's has none) fails the daemon's check, not the gateway's.
  {
    YAML::Node node = YAML::LoadFile(config);
    node["control"]["endpoint"] = "ipc://" + (installed.prefix / "no-such-dir/run/control.sock").string();
    node["storage"]["path"] = (installed.prefix / "no-such-dir/hits.db").string();
    const fs::path elsewhere = installed.prefix / "etc/gaitwatch/elsewhere.yaml";
    std::ofstream(elsewhere) << YAML::Dump(node) << "\n";
    const auto as_daemon = run_process({daemon, "--check-config", elsewhere.string()}, installed.prefix,
                                       "daemon-check-elsewhere", std::chrono::seconds(60));
    CHECK(as_daemon.code == 1);
    CHECK_THAT(as_daemon.err, Catch::Contains("control.endpoint") && Catch::Contains("storage.path"));
    const auto as_gateway = run_process({daemon, "--gateway", "--check-config", elsewhere.string()},
                                        installed.prefix, "gateway-check-elsewhere", std::chrono::seconds(60));
    INFO(as_gateway.err);
    CHECK(as_gateway.code == 0);
  }

  verify_unit(installed, installed.gateway_unit());
}

TEST_CASE("the installed gateway tells its unit READY, pings the watchdog and stops within "
          "TimeoutStopSec",
          "[integration]") {
#if !GW_HAVE_NATS
  WARN("nats-server not installed: this build has no gateway (libnats)");
  return;
#endif
  if (gw::test::nats_server_missing()) return;
  gw::test::TempNatsServer nats("gw_install_nats");
  Installed installed;
  const fs::path run_config = write_run_config(installed, nats.url());
  run_as_notify_service(installed,
                        {installed.daemon().string(), "--gateway", "--config", run_config.string()},
                        "gateway", stop_timeout(installed.gateway_unit()));
}
