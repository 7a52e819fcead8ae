// Tests of config/reload_rules.h: which changes a reload keeps at their
// running values, named by key path, and that the table covers every key of
// the shipped config.

#include "config/reload_rules.h"

#include <functional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "catch2/catch.hpp"

namespace {

using gw::config::Config;
using gw::config::ReloadEffect;
using gw::config::keep_restart_values;
using gw::config::parse_config;
using gw::config::reload_effect;
using gw::config::restart_only_differences;

const std::string kConfigDir = GW_CONFIG_DIR;

// Two devices with groups and a pattern whose magnitude dims follow the
// groups, so that a change of groups changes the pattern's dims.
const char* const kConfig = R"(
devices:
  - id: 1
    name: body
    kind: generic
    sample_rate_hz: 64
    channels: [ax, ay, az, bx, by, bz]
    groups:
      - {name: a, first: 0, last: 2}
      - {name: b, first: 3, last: 5}
  - id: 2
    name: wrist
    kind: accelerometer_3
patterns: []
)";

Config base() { return parse_config(kConfig, "reload.yaml", kConfigDir); }

}  // namespace

TEST_CASE("reload rules: changed device groups are applied, not kept", "[config][reload]") {
  const Config running = base();
  Config fresh = base();
  fresh.devices[0].groups = {{"all", 0, 5}};
  CHECK(restart_only_differences(running, fresh).empty());
  CHECK(keep_restart_values(running, fresh).empty());
  REQUIRE(fresh.devices[0].groups.size() == 1);
  CHECK(fresh.devices[0].groups[0].name == "all");
  CHECK(reload_effect("devices[0].groups") == ReloadEffect::kReload);
}

TEST_CASE("reload rules: restart-only changes are kept and named by key path",
          "[config][reload]") {
  const Config running = base();
  // Each change, the path it must be reported as, and whether the kept
  // value is the running one afterwards.
  struct Change {
    std::string path;
    std::function<void(Config&)> apply;
    std::function<bool(const Config&)> kept;
  };
  const std::vector<Change> changes = {
      {"daemon.stop_timeout_s", [](Config& c) { c.daemon.stop_timeout_s = 3; },
       [&](const Config& c) { return c.daemon.stop_timeout_s == running.daemon.stop_timeout_s; }},
      {"ingest.udp.port", [](Config& c) { c.ingest.udp.port = 1; },
       [&](const Config& c) { return c.ingest.udp.port == running.ingest.udp.port; }},
      {"ingest.queue_overflow",
       [](Config& c) { c.ingest.queue_overflow = gw::OverflowPolicy::kBlock; },
       [&](const Config& c) { return c.ingest.queue_overflow == running.ingest.queue_overflow; }},
      {"ingest.allowed_devices",
       [](Config& c) {
         c.ingest.restrict_devices = true;
         c.ingest.allowed_devices.push_back({});
       },
       [&](const Config& c) {
         return !c.ingest.restrict_devices && c.ingest.allowed_devices.empty();
       }},
      {"devices[1].sample_rate_hz", [](Config& c) { c.devices[1].sample_rate_hz = 50; },
       [&](const Config& c) {
         return c.devices[1].sample_rate_hz == running.devices[1].sample_rate_hz;
       }},
      {"devices[1].hotspots", [](Config& c) { c.devices[1].hotspots.threshold = 1; },
       [&](const Config& c) { return c.devices[1].hotspots == running.devices[1].hotspots; }},
      {"devices[0].status", [](Config& c) { c.devices[0].status.accel = {0, 1, 2}; },
       [&](const Config& c) { return c.devices[0].status == running.devices[0].status; }},
      {"search.backend", [](Config& c) { c.search.backend = gw::config::BackendKind::kCuda; },
       [&](const Config& c) { return c.search.backend == running.search.backend; }},
      {"storage.retention_days", [](Config& c) { c.storage.retention_days = 1; },
       [&](const Config& c) { return c.storage.retention_days == running.storage.retention_days; }},
      {"history.compression",
       [](Config& c) { c.history.compression = gw::config::HistoryCompression::kNone; },
       [&](const Config& c) { return c.history.compression == running.history.compression; }},
      {"publish.send_hwm", [](Config& c) { c.publish.send_hwm = 1; },
       [&](const Config& c) { return c.publish.send_hwm == running.publish.send_hwm; }},
      {"slots.clock", [](Config& c) { c.slots.clock = gw::config::SlotClock::kDevice; },
       [&](const Config& c) { return c.slots.clock == running.slots.clock; }},
      {"zones", [](Config& c) { c.zones.push_back({"A", 1, {"127.0.0.1"}, {}}); },
       [&](const Config& c) { return c.zones.empty(); }},
  };
  for (const Change& change : changes) {
    INFO(change.path);
    Config fresh = base();
    change.apply(fresh);
    CHECK(restart_only_differences(running, fresh) == std::vector<std::string>{change.path});
    CHECK(keep_restart_values(running, fresh) == std::vector<std::string>{change.path});
    CHECK(change.kept(fresh));
    CHECK(restart_only_differences(running, fresh).empty());
    CHECK(reload_effect(change.path) == ReloadEffect::kRestart);
  }
}

TEST_CASE("reload rules: a device that needs a restart keeps its groups with its channels",
          "[config][reload]") {
  const Config running = base();
  Config fresh = base();
  fresh.devices[0].channels = {"p", "q", "r", "s", "t", "u"};
  fresh.devices[0].groups = {{"all", 0, 5}};
  CHECK(keep_restart_values(running, fresh) ==
        std::vector<std::string>{"devices[0].channels", "devices[0].groups"});
  CHECK(fresh.devices[0].channels == running.devices[0].channels);
  CHECK(fresh.devices[0].groups == running.devices[0].groups);

  // Another number of devices: the running list stays as a whole.
  Config fewer = base();
  fewer.devices.pop_back();
  CHECK(keep_restart_values(running, fewer) == std::vector<std::string>{"devices"});
  CHECK(fewer.devices.size() == running.devices.size());
}

TEST_CASE("reload rules: reloadable changes are applied and not reported", "[config][reload]") {
  const Config running = base();
  Config fresh = base();
  fresh.daemon.log_level = "debug";
  fresh.search.tick_ms = 50;
  fresh.search.overload_policy = gw::config::OverloadPolicy::kShed;
  fresh.publish.stats_interval_s = 1;
  fresh.marks.max_examples_per_wearer = 3;
  CHECK(keep_restart_values(running, fresh).empty());
  CHECK(fresh.search.tick_ms == 50);
  CHECK(fresh.search.overload_policy == gw::config::OverloadPolicy::kShed);
  for (const char* path : {"daemon.log_level", "search.tick_ms", "patterns[3].threshold",
                           "publish.stats_interval_s", "marks.alert_windows",
                           "alerts.escalation_s", "alerts.max_escalations"})
    CHECK(reload_effect(path) == ReloadEffect::kReload);
  CHECK(reload_effect("site.time_zone") == ReloadEffect::kRestart);
  CHECK_FALSE(reload_effect("search.tick").has_value());
  CHECK_FALSE(reload_effect("nothing").has_value());
}

namespace {

// Every key path of a YAML tree, list items as "[]".
void collect_paths(const YAML::Node& node, const std::string& path,
                   std::vector<std::string>& out) {
  if (node.IsMap()) {
    for (const auto& entry : node) {
      const std::string key = entry.first.as<std::string>();
      collect_paths(entry.second, path.empty() ? key : path + "." + key, out);
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) collect_paths(item, path + "[]", out);
    if (node.size() == 0) out.push_back(path);
  } else {
    out.push_back(path);
  }
}

}  // namespace

TEST_CASE("reload rules: every key of the shipped config has a rule", "[config][reload]") {
  std::vector<std::string> paths;
  collect_paths(YAML::LoadFile(kConfigDir + "/gaitwatch.yaml"), "", paths);
  REQUIRE(paths.size() > 50);
  for (const std::string& path : paths) {
    INFO(path);
    CHECK(reload_effect(path).has_value());
  }
}
