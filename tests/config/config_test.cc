// Tests of config/: the shipped example config, and that every kind of mistake
// is reported with its exact key path and line, all at once.

#include "config/config.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "gait/hotspots.h"
#include "sensors/recording.h"
#include "tests/common/shipped_pack.h"

namespace {

namespace fs = std::filesystem;
using gw::config::Config;
using gw::config::ConfigError;
using gw::config::ConfigIssue;
using gw::config::load_config;
using gw::config::parse_config;

const std::string kConfigDir = GW_CONFIG_DIR;
const std::string kDataDir = GW_DATA_DIR;

// One YAML line per element, so that the element's 1-based position is its
// line number in the tests below.
std::string yaml(std::initializer_list<const char*> lines) {
  std::string text;
  for (const char* line : lines) {
    text += line;
    text += '\n';
  }
  return text;
}

// The issues parse_config reports; fails the test if it accepts the text.
// base_dir is the config dir, as for the shipped config.
std::vector<ConfigIssue> issues_of(const std::string& text) {
  try {
    parse_config(text, "test.yaml", kConfigDir);
  } catch (const ConfigError& error) {
    return error.issues();
  }
  FAIL("parse_config accepted:\n" << text);
  return {};
}

std::string describe(const std::vector<ConfigIssue>& issues) {
  std::string out;
  for (const ConfigIssue& issue : issues) out += issue.to_string("test.yaml") + "\n";
  return out;
}

// Expects exactly one issue, at `path` on `line`, whose message contains
// `message_part`.
void require_single_issue(const std::vector<ConfigIssue>& issues, const std::string& path, int line,
                          const std::string& message_part) {
  INFO(describe(issues));
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].path == path);
  CHECK(issues[0].line == line);
  CHECK_THAT(issues[0].message, Catch::Contains(message_part));
}

// A valid config: one generic device and one pattern from an example.
// Line numbers of its keys matter to the tests that edit it.
const char* const kDeviceLines[] = {
    "devices:",                                          // 1
    "  - id: 1",                                         // 2
    "    name: body",                                    // 3
    "    kind: generic",                                 // 4
    "    sample_rate_hz: 64",                            // 5
    "    channels: [ankle_fwd, ankle_vert, ankle_lat,",  // 6
    "               thigh_fwd, thigh_vert, thigh_lat]",  // 7
    "    groups:",                                       // 8
    "      - {name: ankle, first: 0, last: 2}",          // 9
    "      - {name: thigh, first: 3, last: 5}",          // 10
};

std::string with_devices(std::initializer_list<const char*> more_lines) {
  std::string text;
  for (const char* line : kDeviceLines) text += std::string(line) + "\n";
  for (const char* line : more_lines) text += std::string(line) + "\n";
  return text;
}

// Lines 11.. of a pattern on `body`, without its shape source.
#define GW_PATTERN_HEAD                                            \
  "patterns:",                                            /* 11 */ \
      "  - name: fog",                                    /* 12 */ \
      "    device: body",                                 /* 13 */ \
      "    channels: [ankle_fwd, ankle_vert, ankle_lat]", /* 14 */ \
      "    threshold: 8.0"                                /* 15 */

// A temporary directory, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("gw_config_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }
  void write(const std::string& relative, const std::string& text) const {
    fs::create_directories((path_ / relative).parent_path());
    std::ofstream(path_ / relative) << text;
  }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

std::string normal(const fs::path& path) { return path.lexically_normal().string(); }

}  // namespace

// ---------------------------------------------------------------------------
// The shipped config

TEST_CASE("shipped gaitwatch.yaml loads with the demo's values", "[config]") {
  const Config config = load_config(kConfigDir + "/gaitwatch.yaml");

  CHECK(fs::path(config.source_file).is_absolute());
  CHECK(config.daemon.log_level == "info");
  CHECK(config.daemon.watchdog_s == 0);
  CHECK(config.ingest.udp.bind == "127.0.0.1");
  CHECK(config.ingest.udp.port == 7700);
  CHECK(config.ingest.tcp.port == 7701);
  CHECK(config.ingest.max_frame_bytes == 65507);
  CHECK(config.ingest.queue_overflow == gw::OverflowPolicy::kDropNewest);
  CHECK(config.ingest.max_streams == 65536);
  CHECK(config.ingest.stream_idle_s == 600);
  CHECK(config.ingest.stream_stale_s == 5);
  CHECK(config.ingest.stream_offline_s == 60);
  CHECK(config.ingest.tcp.max_connections == 1024);
  CHECK(config.ingest.tcp.idle_timeout_s == 120);
  CHECK(config.publish.endpoint == "tcp://127.0.0.1:7710");
  CHECK(config.search.backend == gw::config::BackendKind::kAuto);
  CHECK(config.search.tick_ms == 100);
  CHECK(config.search.deadline_ms == 250);
  CHECK(config.search.max_matches_per_pair == 4096);

  REQUIRE(config.devices.size() == 6);
  const gw::config::DeviceProfile* body = config.device_by_name("daphnet_body");
  REQUIRE(body != nullptr);
  CHECK(body->id == 1);
  CHECK(body->kind == gw::sensors::DeviceKind::kGeneric);
  CHECK(body->sample_rate_hz == 64);
  CHECK(body->channels == std::vector<std::string>{"ankle_fwd", "ankle_vert", "ankle_lat",
                                                   "thigh_fwd", "thigh_vert", "thigh_lat",
                                                   "trunk_fwd", "trunk_vert", "trunk_lat"});
  REQUIRE(body->groups.size() == 3);
  CHECK(body->groups[0].name == "ankle");
  CHECK(body->groups[1].first == 3);
  CHECK(body->groups[1].last == 5);
  CHECK(body->groups[2].name == "trunk");
  CHECK(config.device_by_id(1) == body);

  const gw::config::DeviceProfile* left = config.device_by_id(2);
  REQUIRE(left != nullptr);
  CHECK(left->kind == gw::sensors::DeviceKind::kPressureInsoleLeft);
  REQUIRE(left->channels.size() == 99);
  CHECK(left->channels.front() == "p0");
  CHECK(left->channels.back() == "p98");
  REQUIRE(left->groups.size() == 1);
  CHECK(left->groups[0].first == 0);
  CHECK(left->groups[0].last == 98);
  REQUIRE(config.device_by_id(3) != nullptr);
  CHECK(config.device_by_id(3)->kind == gw::sensors::DeviceKind::kPressureInsoleRight);
  REQUIRE(config.device_by_id(4) != nullptr);
  CHECK(config.device_by_id(4)->kind == gw::sensors::DeviceKind::kAccelerometer3);
  CHECK(config.device_by_id(4)->channels == std::vector<std::string>{"x", "y", "z"});
  const gw::config::DeviceProfile* force = config.device_by_id(5);
  REQUIRE(force != nullptr);
  CHECK(force->kind == gw::sensors::DeviceKind::kForceInsole8);
  CHECK(force->sample_rate_hz == 100);
  REQUIRE(force->channels.size() == 8);
  CHECK(force->channels.front() == "s1");
  CHECK(force->channels.back() == "s8");
  const gw::config::DeviceProfile* pair = config.device_by_id(6);
  REQUIRE(pair != nullptr);
  CHECK(pair->name == "gaitpdb_insoles");
  CHECK(pair->channels.size() == 16);
  CHECK(config.device_by_id(7) == nullptr);
  CHECK(config.device_by_name("nobody") == nullptr);

  // The two shipped packs, in include order: fog's pattern, then falls'
  // pattern and its view.
  REQUIRE(config.patterns.size() == 3);
  const gw::config::PatternConfig& fog = config.patterns[0];
  CHECK(fog.name == "fog_freeze_index");
  CHECK(fog.kind == "freezing_of_gait");
  CHECK(fog.severity == "warning");
  CHECK(fog.device == "daphnet_body");
  CHECK(fog.channels.size() == 9);
  REQUIRE(fog.transforms.size() == 2);
  CHECK(fog.transforms[0].kind == gw::config::TransformStep::Kind::kMagnitude);
  CHECK(fog.transforms[1].kind == gw::config::TransformStep::Kind::kFreezeIndex);
  CHECK(fog.transforms[1].window_s == 3);
  CHECK(fog.transforms[1].power_floor == 3000);
  CHECK(fog.dim_count == 3);  // |ankle|, |thigh|, |trunk|
  CHECK(fog.length == 128);
  CHECK(fog.measure == gw::config::Measure::kDtw);
  CHECK(fog.band == Approx(0.1));
  CHECK_FALSE(fog.znorm);
  CHECK(fog.nr == 0);
  CHECK(fog.threshold == 12.0);
  CHECK(fog.min_dims == 2);
  CHECK(fog.margin == 0);
  CHECK(fog.hysteresis == 4);
  // Per wearer, relative to the first 30 s of activity.
  CHECK(fog.normalise.enabled);
  CHECK(fog.normalise.learn_s == 30);
  CHECK(fog.normalise.statistic == gw::config::NormaliseConfig::Statistic::kMedian);
  CHECK(fog.normalise.scale == gw::config::NormaliseConfig::Scale::kStd);
  CHECK(fog.normalise.active_above == 0.05);
  CHECK(fog.min_duration_s == 0.5);
  CHECK(fog.cooldown_s == 5);
  // One positive per annotated freeze of S02 and S03 (FOG_EPISODES.tsv), then
  // the negatives.
  const auto positives = std::count_if(fog.examples.begin(), fog.examples.end(),
                                       [](const auto& e) { return !e.negative; });
  CHECK(positives == 30);
  CHECK(fog.examples.size() == 30 + 85);
  // Templates, so that an installed config needs no recordings, resolved
  // against the pack's directory; the first holds the window 1 s after the
  // first freeze's onset (54488 + 64).
  CHECK_FALSE(fog.examples.at(0).source.has_value());
  CHECK(fog.examples.at(0).template_file ==
        normal(fs::absolute(kConfigDir + "/patterns/fog/positive_01_S02R01_54552.csv")));
  CHECK(std::all_of(fog.examples.begin(), fog.examples.end(),
                    [](const auto& e) { return !e.template_file.empty(); }));
  CHECK(fog.examples.at(0).lead_in == 3 * 64 - 1);
  CHECK(fog.examples.at(0).raw.size() == 9 * static_cast<std::size_t>(191 + 128));

  // The fall: the body turned (the orientation change, whichever way the
  // sensor is worn) after an impact, a view that must agree.
  const gw::config::PatternConfig& fall = config.patterns[1];
  CHECK(fall.name == "fall_turn_impact");
  CHECK(fall.kind == "fall");
  CHECK(fall.severity == "critical");
  CHECK(fall.device == "accelerometer");
  CHECK(fall.length == 300);
  CHECK(fall.dim_count == 1);
  REQUIRE(fall.transforms.size() == 1);
  CHECK(fall.transforms[0].kind == gw::config::TransformStep::Kind::kOrientationChange);
  CHECK(fall.examples.size() == 15);
  CHECK(fall.examples.at(0).template_file ==
        normal(fs::absolute(kConfigDir + "/patterns/falls/fall_turn_impact_F01_SA01_R01_712.csv")));
  // The template carries the orientation change's history: 3 s of lag and 1 s of window.
  CHECK(fall.examples.at(0).lead_in == 300 + 100 - 1);
  CHECK(fall.agree.within_s == 5);
  CHECK(fall.agree.with == std::vector<std::string>{"fall_view_impact"});
  const gw::config::PatternConfig& impact = config.patterns[2];
  CHECK(impact.name == "fall_view_impact");
  CHECK_FALSE(impact.publish);
  CHECK(impact.examples.size() == 15);
  CHECK(impact.length == 40);

  // Relative storage path: next to the config file.
  CHECK(config.storage.path == normal(fs::absolute(kConfigDir + "/gaitwatch-demo.db")));
  // The demo records the raw streams next to it.
  CHECK(config.history.enabled);
  CHECK(config.history.path == normal(fs::absolute(kConfigDir + "/gaitwatch-history-demo.db")));
  CHECK(config.history.retention_hours == 24);
  CHECK(config.history.chunk_s == 10);
}

TEST_CASE("the example's raw values are the recording's, lead-in first", "[config]") {
  const TempDir dir;
  const Config config = parse_config(gw::test::shipped_config_with_windows(dir.path()), "windows.yaml", kConfigDir);
  const gw::config::PatternConfig& fog = config.patterns.at(0);
  const gw::config::PatternExample& example = fog.examples.at(0);
  const gw::sensors::Recording recording =
      gw::sensors::read_daphnet(kDataDir + "/daphnet/S02R01.txt");
  const auto rows = static_cast<std::size_t>(example.lead_in + fog.length);
  const auto first = static_cast<std::size_t>(example.source->start - example.lead_in);
  REQUIRE(example.raw.size() == fog.channels.size() * rows);
  for (std::size_t d = 0; d < fog.channels.size(); ++d) {
    const std::size_t column = recording.channel_index(fog.channels[d]);
    for (std::size_t s = 0; s < rows; ++s) {
      INFO("dim " << d << " sample " << s);
      REQUIRE(example.raw[d * rows + s] == recording.at(first + s, column));
    }
  }
  // Independent of the reader: line 54489 of the file (the freeze onset in
  // FOG_EPISODES.tsv) is "851390 -383 892 297 ... 2"; it lies in the lead-in.
  const std::size_t onset = 54488 - first;
  CHECK(example.raw[onset] == -383);
  CHECK(example.raw[rows + onset] == 892);
  CHECK(example.raw[2 * rows + onset] == 297);
  CHECK(recording.labels.at(54488) == 2);
  CHECK(recording.labels.at(54487) == 1);
}

TEST_CASE("the shipped pattern's templates hold the recording windows they were exported from",
          "[config]") {
  const Config from_templates = load_config(kConfigDir + "/gaitwatch.yaml");
  const TempDir dir;
  const Config from_windows =
      parse_config(gw::test::shipped_config_with_windows(dir.path()), "windows.yaml", kConfigDir);
  REQUIRE(from_templates.patterns.size() == from_windows.patterns.size());
  // The fog pack's pattern comes first (the falls pack's templates were cut
  // from resampled SisFall recordings, not from Daphnet windows).
  for (std::size_t p = 0; p < 1; ++p) {
    const auto& templates = from_templates.patterns[p];
    const auto& windows = from_windows.patterns[p];
    REQUIRE(templates.name == "fog_freeze_index");
    CHECK(templates.length == windows.length);
    REQUIRE(templates.examples.size() == windows.examples.size());
    for (std::size_t e = 0; e < templates.examples.size(); ++e) {
      INFO(templates.examples[e].describe() << " vs " << windows.examples[e].describe());
      REQUIRE(windows.examples[e].source.has_value());
      CHECK(templates.examples[e].negative == windows.examples[e].negative);
      CHECK(templates.examples[e].lead_in == windows.examples[e].lead_in);
      CHECK(templates.examples[e].raw == windows.examples[e].raw);  // exact: alerts are unchanged
      // The pattern normalises per wearer: each template carries its
      // recording's baseline, each window learns it from its recording.
      CHECK(templates.examples[e].baseline.has_value());
      CHECK(windows.examples[e].baseline_rows != nullptr);
    }
  }
}

TEST_CASE("the template in config/patterns gives the same shape as its example window",
          "[config]") {
  const Config from_example = parse_config(
      with_devices({GW_PATTERN_HEAD,
                    "    example: {file: ../data/daphnet/S02R01.txt, format: daphnet, start: "
                    "54488, end: 54616}"}),
      "test.yaml", kConfigDir);
  const Config config = parse_config(
      with_devices({GW_PATTERN_HEAD, "    template: patterns/fog_ankle_S02R01_ep1.csv"}),
      "test.yaml", kConfigDir);
  REQUIRE(config.patterns.size() == 1);
  const gw::config::PatternConfig& pattern = config.patterns[0];
  CHECK(pattern.examples.at(0).template_file ==
        normal(fs::path(kConfigDir) / "patterns/fog_ankle_S02R01_ep1.csv"));
  CHECK_FALSE(pattern.examples.at(0).source.has_value());
  CHECK(pattern.length == 128);
  CHECK(pattern.examples.at(0).raw == from_example.patterns.at(0).examples.at(0).raw);
  CHECK(pattern.examples.at(0).raw[0] == -383);  // line 54489 of S02R01.txt
}

TEST_CASE("an empty document gives the defaults", "[config]") {
  const Config config = parse_config("", "empty.yaml", "/base");
  CHECK(config.source_file == "empty.yaml");
  CHECK(config.devices.empty());
  CHECK(config.patterns.empty());
  CHECK(config.ingest.udp.port == 7700);
  CHECK(config.ingest.queue_capacity == 8192);
  CHECK(config.ingest.threads == 1);
  CHECK(config.search.tick_ms == 100);
  CHECK(config.publish.send_hwm == 10000);
  CHECK(config.storage.path == "/base/gaitwatch.db");
  CHECK(config.storage.retention_days == 30);
  CHECK_FALSE(config.history.enabled);
  CHECK(config.history.path == "/base/gaitwatch-history.db");
  CHECK(config.history.retention_hours == 24);
  CHECK(config.history.chunk_s == 10);
  CHECK(config.history.compression == gw::config::HistoryCompression::kZlib);
  CHECK(config.history.queue_overflow == gw::OverflowPolicy::kDropNewest);
}

TEST_CASE("history keys: ranges, choices, and a file apart from the hit store", "[config]") {
  const Config config =
      parse_config(yaml({"history:", "  enabled: true", "  path: h.db", "  retention_hours: 0.5",
                         "  chunk_s: 2", "  compression: none", "  queue_chunks: 16",
                         "  queue_overflow: block", "  commit_interval_ms: 0"}),
                   "h.yaml", "/base");
  CHECK(config.history.enabled);
  CHECK(config.history.path == "/base/h.db");
  CHECK(config.history.retention_hours == 0.5);
  CHECK(config.history.chunk_s == 2);
  CHECK(config.history.compression == gw::config::HistoryCompression::kNone);
  CHECK(config.history.queue_chunks == 16);
  CHECK(config.history.queue_overflow == gw::OverflowPolicy::kBlock);
  CHECK(config.history.commit_interval_ms == 0);

  require_single_issue(issues_of(yaml({"history:", "  chunk_s: 0"})), "history.chunk_s", 2,
                       "must be in [0.1, 600], got 0");
  require_single_issue(issues_of(yaml({"history:", "  compression: lz4"})), "history.compression",
                       2, "must be one of zlib | none");
  require_single_issue(issues_of(yaml({"history:", "  retention_hours: -1"})),
                       "history.retention_hours", 2, "must be >= 0");
  require_single_issue(
      issues_of(yaml({"storage:", "  path: same.db", "history:", "  path: same.db"})),
      "history.path", 4, "must differ from storage.path");
}

TEST_CASE("stop and store-trouble keys: defaults, values and ranges", "[config]") {
  const Config defaults = parse_config(yaml({"daemon:", "  log_level: info"}), "d.yaml", "/base");
  CHECK(defaults.daemon.stop_timeout_s == 20);
  CHECK(defaults.storage.max_pending_alerts == 100000);
  CHECK(defaults.storage.max_size_mb == 0);
  const Config config =
      parse_config(yaml({"daemon:", "  stop_timeout_s: 2.5", "storage:",
                         "  max_pending_alerts: 500", "  max_size_mb: 0.25"}),
                   "s.yaml", "/base");
  CHECK(config.daemon.stop_timeout_s == 2.5);
  CHECK(config.storage.max_pending_alerts == 500);
  CHECK(config.storage.max_size_mb == 0.25);

  require_single_issue(issues_of(yaml({"daemon:", "  stop_timeout_s: 0"})),
                       "daemon.stop_timeout_s", 2, "must be in [0.1, 3600], got 0");
  require_single_issue(issues_of(yaml({"storage:", "  max_pending_alerts: 0"})),
                       "storage.max_pending_alerts", 2, "must be in 1..100000000, got 0");
  require_single_issue(issues_of(yaml({"storage:", "  max_size_mb: -1"})), "storage.max_size_mb",
                       2, "must be >= 0");
}

TEST_CASE("search.devices lists distinct GPUs, absent means every visible one", "[config]") {
  CHECK(parse_config(yaml({"search:", "  backend: cpu"}), "s.yaml", "/base").search.devices.empty());
  const Config config = parse_config(yaml({"search:", "  devices: [1, 0, 3]"}), "s.yaml", "/base");
  CHECK(config.search.devices == std::vector<int>{1, 0, 3});
  require_single_issue(issues_of(yaml({"search:", "  devices: [0, -1]"})), "search.devices[1]", 2,
                       "must be in 0..1023, got -1");
  require_single_issue(issues_of(yaml({"search:", "  devices: [0, 1, 0]"})), "search.devices[2]", 2,
                       "GPU 0 is listed twice");
  require_single_issue(issues_of(yaml({"search:", "  devices: [first]"})), "search.devices[0]", 2,
                       "first");
  require_single_issue(issues_of(yaml({"search:", "  devices: 1"})), "search.devices", 2,
                       "expected a list");
}

TEST_CASE("a pattern's kind and severity default to other and warning, end may come from length",
          "[config]") {
  const Config config =
      parse_config(with_devices({GW_PATTERN_HEAD, "    length: 64",
                                 "    example:", "      file: ../data/daphnet/S02R01.txt",
                                 "      format: daphnet", "      start: 100"}),
                   "test.yaml", kConfigDir);
  const gw::config::PatternConfig& pattern = config.patterns.at(0);
  CHECK(pattern.kind == "other");
  CHECK(pattern.severity == "warning");
  CHECK(pattern.examples.at(0).source->end == 164);
  CHECK(pattern.length == 64);
  CHECK(pattern.examples.at(0).raw.size() == 3 * 64);
}

// ---------------------------------------------------------------------------
// Each kind of mistake: path and line

TEST_CASE("an unknown key inside a list item names its path and suggests the key", "[config]") {
  const auto issues = issues_of(with_devices({
      "patterns:",                                        // 11
      "  - name: fog",                                    // 12
      "    device: body",                                 // 13
      "    channels: [ankle_fwd]",                        // 14
      "    threshold: 8.0",                               // 15
      "    template: patterns/fog_ankle_S02R01_ep1.csv",  // 16
      "  - name: fog2",                                   // 17
      "    device: body",                                 // 18
      "    channels: [ankle_fwd]",                        // 19
      "    treshold: 8.0",                                // 20
      "    threshold: 8.0",                               // 21
      "    template: patterns/fog_ankle_S02R01_ep1.csv",  // 22
  }));
  require_single_issue(issues, "patterns[1].treshold", 20,
                       "unknown key (did you mean 'threshold'?)");
}

TEST_CASE("unknown keys at the top level and in nested maps", "[config]") {
  const auto issues = issues_of(yaml({
      "serach:",         // 1
      "  tick_ms: 10",   // 2
      "ingest:",         // 3
      "  udp:",          // 4
      "    prot: 7700",  // 5
  }));
  INFO(describe(issues));
  REQUIRE(issues.size() == 2);
  CHECK(issues[0].path == "serach");
  CHECK(issues[0].line == 1);
  CHECK(issues[0].message == "unknown key (did you mean 'search'?)");
  CHECK(issues[1].path == "ingest.udp.prot");
  CHECK(issues[1].line == 5);
  CHECK(issues[1].message == "unknown key (did you mean 'port'?)");
}

TEST_CASE("a wrong type names the path, the expected type and the value", "[config]") {
  SECTION("integer") {
    const auto issues = issues_of(yaml({"search:", "  backend: cpu", "  tick_ms: fast"}));
    require_single_issue(issues, "search.tick_ms", 3, "");
    CHECK(issues[0].message == "expected an integer, got 'fast'");
  }
  SECTION("a fraction is not an integer") {
    require_single_issue(issues_of(yaml({"ingest:", "  udp: {port: 77.5}"})), "ingest.udp.port", 2,
                         "expected an integer, got '77.5'");
  }
  SECTION("number") {
    require_single_issue(issues_of(yaml({"daemon:", "  watchdog_s: soon"})), "daemon.watchdog_s", 2,
                         "expected a number, got 'soon'");
  }
  SECTION("a list where a map belongs") {
    require_single_issue(issues_of(yaml({"storage:", "  - path: x.db"})), "storage", 2,
                         "expected a map, got a list");
  }
  SECTION("a map where a list belongs") {
    require_single_issue(issues_of(yaml({"devices:", "  id: 1"})), "devices", 2,
                         "expected a list, got a map");
  }
  SECTION("boolean in a list item") {
    const auto issues = issues_of(with_devices(
        {GW_PATTERN_HEAD, "    znorm: maybe", "    template: patterns/fog_ankle_S02R01_ep1.csv"}));
    require_single_issue(issues, "patterns[0].znorm", 16, "expected true or false, got 'maybe'");
  }
  SECTION("enumeration") {
    const auto issues =
        issues_of(yaml({"daemon:", "  log_level: verbose", "search:", "  backend: gpu"}));
    INFO(describe(issues));
    REQUIRE(issues.size() == 2);
    CHECK(issues[0].path == "daemon.log_level");
    CHECK(issues[0].line == 2);
    CHECK_THAT(issues[0].message, Catch::Contains("trace | debug | info | warn | error"));
    CHECK(issues[1].path == "search.backend");
    CHECK(issues[1].line == 4);
  }
}

TEST_CASE("out-of-range values name the path, the range and the value", "[config]") {
  SECTION("tick_ms") {
    require_single_issue(issues_of(yaml({"search:", "  tick_ms: 0"})), "search.tick_ms", 2,
                         "must be in 1..10000, got 0");
  }
  SECTION("device id") {
    const auto issues =
        issues_of(yaml({"devices:", "  - id: 70000", "    name: a", "    kind: accelerometer_3"}));
    require_single_issue(issues, "devices[0].id", 2, "must be in 1..65535, got 70000");
  }
  SECTION("port") {
    require_single_issue(issues_of(yaml({"ingest:", "  tcp:", "    port: -1"})), "ingest.tcp.port",
                         3, "must be in 0..65535, got -1");
  }
  SECTION("ingest threads") {
    require_single_issue(issues_of(yaml({"ingest:", "  threads: 0"})), "ingest.threads", 2,
                         "must be in 1..64, got 0");
  }
  SECTION("pattern band, threshold and alpha") {
    const auto issues = issues_of(with_devices({
        "patterns:",                                         // 11
        "  - name: fog",                                     // 12
        "    device: body",                                  // 13
        "    channels: [ankle_fwd, ankle_vert, ankle_lat]",  // 14
        "    threshold: 0",                                  // 15
        "    band: 1.5",                                     // 16
        "    alpha: 0.5",                                    // 17
        "    min_dims: 4",                                   // 18
        "    template: patterns/fog_ankle_S02R01_ep1.csv",   // 19
    }));
    INFO(describe(issues));
    REQUIRE(issues.size() == 4);
    CHECK(issues[0].path == "patterns[0].threshold");
    CHECK(issues[0].line == 15);
    CHECK(issues[0].message == "must be > 0, got 0");
    CHECK(issues[1].path == "patterns[0].band");
    CHECK(issues[1].line == 16);
    CHECK(issues[1].message == "must be in [0, 1], got 1.5");
    CHECK(issues[2].path == "patterns[0].alpha");
    CHECK(issues[2].line == 17);
    CHECK(issues[3].path == "patterns[0].min_dims");
    CHECK(issues[3].line == 18);
    CHECK_THAT(issues[3].message, Catch::Contains("3 channels"));
  }
  SECTION("deadline shorter than a tick") {
    require_single_issue(issues_of(yaml({"search:", "  tick_ms: 500", "  deadline_ms: 250"})),
                         "search.deadline_ms", 3, "must be at least tick_ms (500)");
  }
}

TEST_CASE("a missing required key is reported at the item that lacks it", "[config]") {
  SECTION("pattern threshold") {
    const auto issues = issues_of(with_devices({
        "patterns:",                                        // 11
        "  - name: fog",                                    // 12
        "    device: body",                                 // 13
        "    channels: [ankle_fwd]",                        // 14
        "    template: patterns/fog_ankle_S02R01_ep1.csv",  // 15
    }));
    require_single_issue(issues, "patterns[0].threshold", 12, "missing required key");
  }
  SECTION("device kind, and channels of a generic device") {
    const auto issues = issues_of(yaml({
        "devices:",           // 1
        "  - id: 1",          // 2
        "    name: a",        // 3
        "  - id: 2",          // 4
        "    name: b",        // 5
        "    kind: generic",  // 6
    }));
    INFO(describe(issues));
    REQUIRE(issues.size() == 2);
    CHECK(issues[0].path == "devices[0].kind");
    CHECK(issues[0].line == 2);
    CHECK(issues[1].path == "devices[1].channels");
    CHECK(issues[1].line == 4);
    CHECK_THAT(issues[1].message, Catch::Contains("generic"));
  }
  SECTION("neither example nor template") {
    const auto issues = issues_of(with_devices({GW_PATTERN_HEAD}));
    require_single_issue(issues, "patterns[0]", 12, "missing 'example' or 'template'");
  }
}

TEST_CASE("duplicate device ids and names are reported at the later one", "[config]") {
  const auto issues = issues_of(yaml({
      "devices:",                   // 1
      "  - id: 3",                  // 2
      "    name: a",                // 3
      "    kind: accelerometer_3",  // 4
      "  - id: 3",                  // 5
      "    name: a",                // 6
      "    kind: force_insole_8",   // 7
  }));
  INFO(describe(issues));
  REQUIRE(issues.size() == 2);
  CHECK(issues[0].path == "devices[1].id");
  CHECK(issues[0].line == 5);
  CHECK(issues[0].message == "duplicate device id 3 (also devices[0])");
  CHECK(issues[1].path == "devices[1].name");
  CHECK(issues[1].line == 6);
}

TEST_CASE("duplicate pattern names and duplicate YAML keys", "[config]") {
  const auto issues = issues_of(with_devices({
      "patterns:",                                        // 11
      "  - name: fog",                                    // 12
      "    device: body",                                 // 13
      "    channels: [ankle_fwd]",                        // 14
      "    threshold: 8.0",                               // 15
      "    template: patterns/fog_ankle_S02R01_ep1.csv",  // 16
      "  - name: fog",                                    // 17
      "    device: body",                                 // 18
      "    channels: [ankle_vert]",                       // 19
      "    threshold: 8.0",                               // 20
      "    threshold: 9.0",                               // 21
      "    template: patterns/fog_ankle_S02R01_ep1.csv",  // 22
  }));
  INFO(describe(issues));
  REQUIRE(issues.size() == 2);
  CHECK(issues[0].path == "patterns[1].name");
  CHECK(issues[0].line == 17);
  CHECK(issues[0].message == "duplicate pattern name 'fog' (also patterns[0])");
  CHECK(issues[1].path == "patterns[1].threshold");
  CHECK(issues[1].line == 21);
  CHECK(issues[1].message == "duplicate key (first given at line 20)");
}

TEST_CASE("a pattern naming an unknown device or channel", "[config]") {
  SECTION("device") {
    const auto issues = issues_of(with_devices({
        "patterns:",                                        // 11
        "  - name: fog",                                    // 12
        "    device: bodi",                                 // 13
        "    channels: [ankle_fwd]",                        // 14
        "    threshold: 8.0",                               // 15
        "    template: patterns/fog_ankle_S02R01_ep1.csv",  // 16
    }));
    require_single_issue(issues, "patterns[0].device", 13,
                         "no device named 'bodi' (did you mean 'body'?)");
  }
  SECTION("channel") {
    const auto issues = issues_of(with_devices({
        "patterns:",                                        // 11
        "  - name: fog",                                    // 12
        "    device: body",                                 // 13
        "    channels:",                                    // 14
        "      - ankle_fwd",                                // 15
        "      - ankle_vrt",                                // 16
        "      - trunk_fwd",                                // 17
        "    threshold: 8.0",                               // 18
        "    template: patterns/fog_ankle_S02R01_ep1.csv",  // 19
    }));
    INFO(describe(issues));
    REQUIRE(issues.size() == 2);
    CHECK(issues[0].path == "patterns[0].channels[1]");
    CHECK(issues[0].line == 16);
    CHECK(issues[0].message ==
          "device 'body' has no channel 'ankle_vrt' (did you mean 'ankle_vert'?)");
    CHECK(issues[1].path == "patterns[0].channels[2]");
    CHECK(issues[1].line == 17);
  }
  SECTION("a channel of the device that the template lacks") {
    const auto issues = issues_of(with_devices({
        "patterns:",                                        // 11
        "  - name: fog",                                    // 12
        "    device: body",                                 // 13
        "    channels: [thigh_fwd]",                        // 14
        "    threshold: 8.0",                               // 15
        "    template: patterns/fog_ankle_S02R01_ep1.csv",  // 16
    }));
    require_single_issue(issues, "patterns[0].template", 16, "has no channel 'thigh_fwd'");
  }
}

TEST_CASE("an example range past the end of the recording", "[config]") {
  const auto issues = issues_of(with_devices({
      GW_PATTERN_HEAD,
      "    example:",                            // 16
      "      file: ../data/daphnet/S02R01.txt",  // 17
      "      format: daphnet",                   // 18
      "      start: 72500",                      // 19
      "      end: 72600",                        // 20
  }));
  require_single_issue(issues, "patterns[0].example.end", 20,
                       "end 72600 is past the end of the recording (72561 samples)");
}

TEST_CASE("example length and range mistakes", "[config]") {
  SECTION("length disagrees with end - start") {
    const auto issues = issues_of(with_devices({
        GW_PATTERN_HEAD,
        "    length: 100",                         // 16
        "    example:",                            // 17
        "      file: ../data/daphnet/S02R01.txt",  // 18
        "      format: daphnet",                   // 19
        "      start: 0",                          // 20
        "      end: 128",                          // 21
    }));
    require_single_issue(issues, "patterns[0].length", 16,
                         "length 100 does not match example end - start = 128");
  }
  SECTION("end before start") {
    const auto issues = issues_of(with_devices({
        GW_PATTERN_HEAD,
        "    example: {file: ../data/daphnet/S02R01.txt, format: daphnet, start: 10, end: 5}",
    }));
    require_single_issue(issues, "patterns[0].example.end", 16, "must be after start");
  }
  SECTION("too long") {
    const auto issues = issues_of(with_devices({
        GW_PATTERN_HEAD,
        "    example: {file: ../data/daphnet/S02R01.txt, format: daphnet, start: 0, end: 5000}",
    }));
    require_single_issue(issues, "patterns[0].example.end", 16, "patterns must be 2..4096");
  }
  SECTION("a file that does not exist") {
    const auto issues = issues_of(with_devices({
        GW_PATTERN_HEAD,
        "    example:",                            // 16
        "      file: ../data/daphnet/S99R99.txt",  // 17
        "      format: daphnet",                   // 18
        "      start: 0",                          // 19
        "      end: 128",                          // 20
    }));
    require_single_issue(issues, "patterns[0].example.file", 17, "S99R99.txt");
  }
  SECTION("a recording at another rate than the device") {
    const auto issues = issues_of(yaml({
        "devices:",                                                    // 1
        "  - {id: 1, name: foot, kind: generic, channels: [L1, L2]}",  // 2
        "patterns:",                                                   // 3
        "  - name: step",                                              // 4
        "    device: foot",                                            // 5
        "    channels: [L1, L2]",                                      // 6
        "    threshold: 1",                                            // 7
        "    example:",                                                // 8
        "      file: ../data/daphnet/S02R01.txt",                      // 9
        "      format: daphnet",                                       // 10
        "      start: 0",                                              // 11
        "      end: 100",                                              // 12
    }));
    INFO(describe(issues));
    // Daphnet has no L1: the rate check comes first and stops there.
    require_single_issue(issues, "patterns[0].example.format", 10, "sampled at 64 Hz");
  }
}

TEST_CASE("a template whose rows disagree with length", "[config]") {
  const auto issues = issues_of(with_devices({
      GW_PATTERN_HEAD,
      "    length: 64",                                   // 16
      "    template: patterns/fog_ankle_S02R01_ep1.csv",  // 17
  }));
  require_single_issue(issues, "patterns[0].length", 16,
                       "length 64 does not match the template's 128 rows");
}

TEST_CASE("a pattern with both an example and a template", "[config]") {
  const auto issues = issues_of(with_devices({
      GW_PATTERN_HEAD,
      "    example: {file: ../data/daphnet/S02R01.txt, format: daphnet, start: 0, end: 128}",
      "    template: patterns/fog_ankle_S02R01_ep1.csv",  // 17
  }));
  require_single_issue(issues, "patterns[0].template", 17,
                       "give either 'example' or 'template', not both (example is at line 16)");
}

TEST_CASE("a YAML syntax error is one issue with its line", "[config]") {
  const std::string text = yaml({
      "search:",          // 1
      "  tick_ms: 100",   // 2
      "  backend: [cpu",  // 3
      "storage:",         // 4
      "  path: x.db",     // 5
  });
  const auto issues = issues_of(text);
  INFO(describe(issues));
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].path.empty());
  CHECK(issues[0].line >= 3);
  CHECK(issues[0].line <= 5);
  CHECK_THAT(issues[0].message, Catch::StartsWith("YAML syntax error"));

  const auto bad_indent = issues_of(yaml({"daemon:", "  log_level: info", " watchdog_s: 1"}));
  REQUIRE(bad_indent.size() == 1);
  CHECK(bad_indent[0].line == 3);
}

TEST_CASE("device channels and groups are validated", "[config]") {
  SECTION("a fixed kind with the wrong channel count") {
    require_single_issue(issues_of(yaml({"devices:", "  - id: 1", "    name: a",
                                         "    kind: accelerometer_3", "    channels: [x, y]"})),
                         "devices[0].channels", 5,
                         "accelerometer_3 device has 3 channels, 2 names given");
  }
  SECTION("a group past the channels") {
    require_single_issue(
        issues_of(yaml({"devices:", "  - id: 1", "    name: a", "    kind: accelerometer_3",
                        "    groups:", "      - {name: g, first: 0, last: 3}"})),
        "devices[0].groups[0].last", 6, "past the device's 3 channels");
  }
  SECTION("overlapping groups") {
    require_single_issue(
        issues_of(yaml({"devices:", "  - id: 1", "    name: a", "    kind: force_insole_8",
                        "    groups:", "      - {name: g, first: 0, last: 4}",
                        "      - {name: h, first: 4, last: 7}"})),
        "devices[0].groups[1].first", 7, "overlap group 'g' (0..4)");
  }
  SECTION("groups that leave channels out") {
    require_single_issue(
        issues_of(yaml({"devices:", "  - id: 1", "    name: a", "    kind: force_insole_8",
                        "    groups:", "      - {name: g, first: 2, last: 4}"})),
        "devices[0].groups", 6, "channels 0..1, 5..7 are in no group");
  }
  SECTION("nr wider than the pattern's groups") {
    const auto issues = issues_of(with_devices(
        {GW_PATTERN_HEAD, "    nr: 3", "    template: patterns/fog_ankle_S02R01_ep1.csv"}));
    require_single_issue(issues, "patterns[0].nr", 16, "nr <= 2");
  }
}

TEST_CASE("the ring must hold the longest pattern plus a tick", "[config]") {
  const auto issues = issues_of(with_devices({
      GW_PATTERN_HEAD,
      "    template: patterns/fog_ankle_S02R01_ep1.csv",  // 16
      "ingest:",                                          // 17
      "  ring_capacity_samples: 130",                     // 18
  }));
  // 128 samples + ceil(64 Hz * 0.1 s) = 135.
  require_single_issue(issues, "ingest.ring_capacity_samples", 18, "= 135, is 130");
}

TEST_CASE("several mistakes are all reported, sorted by line, in what()", "[config]") {
  const std::string text = yaml({
      "daemon:",                    // 1
      "  log_level: loud",          // 2
      "devices:",                   // 3
      "  - id: 1",                  // 4
      "    name: a",                // 5
      "    kind: accelerometer_3",  // 6
      "    colour: red",            // 7
      "search:",                    // 8
      "  tick_ms: fast",            // 9
      "patterns:",                  // 10
      "  - name: p",                // 11
      "    device: a",              // 12
      "    channels: [x, w]",       // 13
      "    threshold: -1",          // 14
      "    template: nowhere.csv",  // 15
      "publish:",                   // 16
      "  endpoint: localhost",      // 17
  });
  try {
    parse_config(text, "several.yaml", kConfigDir);
    FAIL("accepted");
  } catch (const ConfigError& error) {
    const auto& issues = error.issues();
    INFO(describe(issues));
    REQUIRE(issues.size() == 6);
    const std::vector<std::string> expected_paths = {
        "daemon.log_level",        "devices[0].colour",     "search.tick_ms",
        "patterns[0].channels[1]", "patterns[0].threshold", "publish.endpoint"};
    const std::vector<int> expected_lines = {2, 7, 9, 13, 14, 17};
    for (std::size_t i = 0; i < issues.size(); ++i) {
      CHECK(issues[i].path == expected_paths[i]);
      CHECK(issues[i].line == expected_lines[i]);
    }
    const std::string what = error.what();
    CHECK_THAT(what, Catch::StartsWith("several.yaml:2: daemon.log_level: must be one of"));
    CHECK_THAT(what, Catch::Contains(
                         "\nseveral.yaml:9: search.tick_ms: expected an integer, got 'fast'\n"));
    CHECK_THAT(what, Catch::Contains("\nseveral.yaml:17: publish.endpoint: "));
    CHECK(std::count(what.begin(), what.end(), '\n') == 5);
  }
}

TEST_CASE("relative paths resolve against the config file's directory", "[config]") {
  TempDir dir;
  dir.write("etc/templates/step.csv", "a,b\n1,2\n3,4\n5,6\n");
  dir.write("etc/gw.yaml", yaml({
                               "devices:",
                               "  - {id: 7, name: d, kind: generic, channels: [a, b]}",
                               "patterns:",
                               "  - name: step",
                               "    device: d",
                               "    channels: [b, a]",
                               "    threshold: 1",
                               "    template: templates/step.csv",
                               "storage:",
                               "  path: ../var/gw.db",
                           }));
  // Load through a relative path from another working directory.
  const fs::path previous = fs::current_path();
  fs::current_path(dir.path());
  Config config;
  try {
    config = load_config("etc/gw.yaml");
  } catch (...) {
    fs::current_path(previous);
    throw;
  }
  fs::current_path(previous);
  const fs::path root = fs::canonical(dir.path());
  CHECK(fs::canonical(config.source_file) == root / "etc/gw.yaml");
  REQUIRE(config.patterns.size() == 1);
  CHECK(fs::path(config.patterns[0].examples.at(0).template_file).is_absolute());
  CHECK(fs::canonical(config.patterns[0].examples.at(0).template_file) ==
        root / "etc/templates/step.csv");
  CHECK(fs::path(config.storage.path).is_absolute());
  CHECK(fs::weakly_canonical(config.storage.path) == root / "var/gw.db");
  // Dim-major, in the pattern's channel order (b then a).
  CHECK(config.patterns[0].length == 3);
  CHECK(config.patterns[0].examples.at(0).raw == std::vector<float>{2, 4, 6, 1, 3, 5});
  // Absolute paths stay as they are.
  const Config absolute = parse_config("storage: {path: /var/lib/gaitwatch/gw.db}", "x", "/etc");
  CHECK(absolute.storage.path == "/var/lib/gaitwatch/gw.db");
}

TEST_CASE("load_config of a missing file throws ConfigError naming it", "[config]") {
  try {
    load_config("/nonexistent/gaitwatch.yaml");
    FAIL("accepted");
  } catch (const ConfigError& error) {
    REQUIRE(error.issues().size() == 1);
    CHECK_THAT(error.what(), Catch::StartsWith("/nonexistent/gaitwatch.yaml: cannot open"));
  }
}

TEST_CASE("load_config requires a file to name its patterns, parse_config fragments do not",
          "[config]") {
  TempDir dir;
  const auto issues_of_file = [&](const std::string& text) -> std::vector<ConfigIssue> {
    const std::string path = (dir.path() / "c.yaml").string();
    std::ofstream(path, std::ios::trunc) << text;
    try {
      load_config(path);
    } catch (const ConfigError& error) {
      return error.issues();
    }
    return {};
  };
  auto empty = issues_of_file("");
  REQUIRE(empty.size() == 1);
  CHECK(empty[0].path.empty());
  CHECK_THAT(empty[0].message, Catch::StartsWith("the file is empty"));
  auto comments_only = issues_of_file("# nothing yet\n");
  REQUIRE(comments_only.size() == 1);
  CHECK_THAT(comments_only[0].message, Catch::StartsWith("the file is empty"));
  auto cut = issues_of_file("search:\n  tick_ms: 100\n");
  REQUIRE(cut.size() == 1);
  CHECK(cut[0].path == "patterns");
  CHECK_THAT(cut[0].message, Catch::StartsWith("missing"));
  auto null_list = issues_of_file("search:\n  tick_ms: 100\npatterns:\n");
  REQUIRE(null_list.size() == 1);
  CHECK(null_list[0].path == "patterns");
  CHECK(null_list[0].line == 3);
  CHECK(issues_of_file("patterns: []\n").empty());
  // Fragments keep their defaults.
  CHECK(parse_config("search: {tick_ms: 100}", "x", "/etc").patterns.empty());
}

TEST_CASE("ConfigIssue::to_string formats with and without line and path", "[config]") {
  CHECK(ConfigIssue{"search.tick_ms", 12, "bad", {}}.to_string("a.yaml") ==
        "a.yaml:12: search.tick_ms: bad");
  CHECK(ConfigIssue{"search.tick_ms", 0, "bad", {}}.to_string("a.yaml") ==
        "a.yaml: search.tick_ms: bad");
  CHECK(ConfigIssue{"", 3, "syntax", {}}.to_string("a.yaml") == "a.yaml:3: syntax");
  const ConfigError error("f.yaml", {{"a", 1, "x", {}}, {"b", 2, "y", {}}});
  CHECK(std::string(error.what()) == "f.yaml:1: a: x\nf.yaml:2: b: y");
  const gw::Error& as_base = error;
  CHECK(std::string(as_base.what()) == error.what());
}

// ---------------------------------------------------------------------------
// Detection-quality keys: examples, negatives, transforms, measure, gating

TEST_CASE("several positive examples and negatives, each cut with its transforms' lead-in",
          "[config]") {
  const Config config = parse_config(
      with_devices(
          {GW_PATTERN_HEAD, "    transforms: [magnitude, {kind: freeze_index, window_s: 2}]",
           "    znorm: false", "    margin: 1.5", "    hysteresis: 0.5", "    min_duration_s: 2",
           "    examples:",
           "      - {file: ../data/daphnet/S02R01.txt, format: daphnet, start: 54488, end: 54520}",
           "      - {file: ../data/daphnet/S02R01.txt, format: daphnet, start: 55777}",
           "    negatives:",
           "      - {file: ../data/daphnet/S03R03.txt, format: daphnet, start: 50000, end: "
           "50032}"}),
      "test.yaml", kConfigDir);
  const gw::config::PatternConfig& p = config.patterns.at(0);
  CHECK(p.length == 32);    // from the first example; the second takes it
  CHECK(p.dim_count == 1);  // one magnitude of the ankle group
  REQUIRE(p.transforms.size() == 2);
  CHECK(p.transforms[0].kind == gw::config::TransformStep::Kind::kMagnitude);
  CHECK(p.transforms[1].window_s == 2);
  CHECK(p.margin == 1.5);
  CHECK(p.hysteresis == 0.5);
  CHECK(p.min_duration_s == 2);
  REQUIRE(p.examples.size() == 3);
  CHECK_FALSE(p.examples[1].negative);
  CHECK(p.examples[1].source->end == 55777 + 32);
  CHECK(p.examples[2].negative);
  CHECK(p.has_negatives());
  // 2 s at 64 Hz = 128 samples of window: 127 samples of history before each window.
  const gw::sensors::Recording recording =
      gw::sensors::read_daphnet(kDataDir + "/daphnet/S02R01.txt");
  for (const auto& e : p.examples) {
    CHECK(e.lead_in == 127);
    REQUIRE(e.raw.size() == 3 * static_cast<std::size_t>(127 + 32));
  }
  // dim-major, the lead-in first: raw[0] is the ankle_fwd sample 127 before the start.
  CHECK(p.examples[0].raw[0] == recording.at(54488 - 127, 0));
  CHECK(p.examples[0].raw[127] == recording.at(54488, 0));
}

TEST_CASE("an orientation change reads its own window and lag", "[config]") {
  const Config config = parse_config(
      with_devices({GW_PATTERN_HEAD,
                    "    transforms: [{kind: orientation_change, window_s: 0.5, lag_s: 2}]",
                    "    znorm: false", "    examples:",
                    "      - {file: ../data/daphnet/S02R01.txt, format: daphnet, start: 54488, "
                    "end: 54520}"}),
      "test.yaml", kConfigDir);
  const gw::config::PatternConfig& p = config.patterns.at(0);
  CHECK(p.dim_count == 1);  // the ankle group's three axes turn as one
  REQUIRE(p.transforms.size() == 1);
  CHECK(p.transforms[0].kind == gw::config::TransformStep::Kind::kOrientationChange);
  CHECK(p.transforms[0].window_s == 0.5);
  CHECK(p.transforms[0].lag_s == 2);
  // 2 s of lag and 0.5 s of window at 64 Hz: 128 + 32 - 1 samples before each window.
  CHECK(p.examples.at(0).lead_in == 159);
  // Without options: a 1 s window against the one 3 s earlier.
  const Config defaults = parse_config(
      with_devices({GW_PATTERN_HEAD, "    transforms: [orientation_change]", "    znorm: false",
                    "    examples:",
                    "      - {file: ../data/daphnet/S02R01.txt, format: daphnet, start: 54488, "
                    "end: 54520}"}),
      "test.yaml", kConfigDir);
  CHECK(defaults.patterns.at(0).transforms.at(0).window_s == 1);
  CHECK(defaults.patterns.at(0).transforms.at(0).lag_s == 3);
}

TEST_CASE("transform mistakes name the step", "[config]") {
  SECTION("unknown kind, with a suggestion") {
    require_single_issue(
        issues_of(with_devices({GW_PATTERN_HEAD, "    transforms: [magnitud]",
                                "    template: patterns/fog_ankle_S02R01_ep1.csv"})),
        "patterns[0].transforms[0]", 16, "did you mean 'magnitude'?");
  }
  SECTION("an option of another kind") {
    require_single_issue(
        issues_of(with_devices({GW_PATTERN_HEAD,
                                "    transforms:", "      - {kind: derivative, cutoff_hz: 5}",
                                "    template: patterns/fog_ankle_S02R01_ep1.csv"})),
        "patterns[0].transforms[0].cutoff_hz", 17, "applies to lowpass only");
  }
  SECTION("magnitude after another step") {
    require_single_issue(
        issues_of(with_devices({GW_PATTERN_HEAD, "    transforms: [derivative, magnitude]",
                                "    template: patterns/fog_ankle_S02R01_ep1.csv"})),
        "patterns[0].transforms[1]", 16, "magnitude must be the first transform");
  }
  SECTION("an orientation change's lag on a lowpass, and after another step") {
    const auto issues = issues_of(with_devices(
        {GW_PATTERN_HEAD, "    transforms:", "      - {kind: lowpass, cutoff_hz: 2, lag_s: 3}",
         "      - {kind: orientation_change, window_s: 0.5, lag_s: 2}",
         "    template: patterns/fog_ankle_S02R01_ep1.csv"}));
    INFO(describe(issues));
    REQUIRE(issues.size() == 2);
    CHECK(issues[0].path == "patterns[0].transforms[0].lag_s");
    CHECK(issues[0].message.find("applies to orientation_change only") != std::string::npos);
    CHECK(issues[1].path == "patterns[0].transforms[1]");
    CHECK(issues[1].message.find("orientation_change must be the first transform") !=
          std::string::npos);
  }
  SECTION("an orientation change of one axis") {
    const auto issues = issues_of(with_devices(
        {"patterns:", "  - name: fog", "    device: body", "    channels: [ankle_fwd]",
         "    threshold: 8.0", "    transforms: [orientation_change]",
         "    template: patterns/fog_ankle_S02R01_ep1.csv"}));
    INFO(describe(issues));
    REQUIRE_FALSE(issues.empty());
    CHECK(issues[0].path == "patterns[0].channels");
    CHECK(issues[0].message.find("orientation_change reads 2 or 3 axes of one device group; "
                                 "turn(ankle) has 1") != std::string::npos);
  }
  SECTION("lowpass without cutoff, and a reversed band") {
    const auto issues =
        issues_of(with_devices({GW_PATTERN_HEAD, "    transforms:", "      - {kind: lowpass}",
                                "      - {kind: freeze_index, freeze_band_hz: [8, 3]}",
                                "    template: patterns/fog_ankle_S02R01_ep1.csv"}));
    INFO(describe(issues));
    REQUIRE(issues.size() == 2);
    CHECK(issues[0].path == "patterns[0].transforms[0].cutoff_hz");
    CHECK(issues[1].path == "patterns[0].transforms[1].freeze_band_hz");
  }
  SECTION("min_dims counts the dimensions after the transforms") {
    require_single_issue(
        issues_of(with_devices({GW_PATTERN_HEAD, "    transforms: [magnitude]", "    min_dims: 2",
                                "    template: patterns/fog_ankle_S02R01_ep1.csv"})),
        "patterns[0].min_dims", 17, "at most the pattern's 1 dimensions (after the transforms)");
  }
  SECTION("an example too early for the transforms' history") {
    require_single_issue(issues_of(with_devices({GW_PATTERN_HEAD, "    transforms: [derivative]",
                                                 "    example: {file: ../data/daphnet/S02R01.txt, "
                                                 "format: daphnet, start: 0, end: 64}"})),
                         "patterns[0].example.start", 17, "start must be >= 1");
  }
}

TEST_CASE("example lists: lengths agree, items are windows or templates", "[config]") {
  SECTION("a second example of another length") {
    require_single_issue(
        issues_of(with_devices(
            {GW_PATTERN_HEAD, "    examples:",
             "      - {file: ../data/daphnet/S02R01.txt, format: daphnet, start: 0, end: 128}",
             "      - {file: ../data/daphnet/S02R01.txt, format: daphnet, start: 500, end: 600}"})),
        "patterns[0].examples[1].end", 18, "differs from the pattern's length 128");
  }
  SECTION("a template and a window in one item") {
    require_single_issue(
        issues_of(with_devices(
            {GW_PATTERN_HEAD,
             "    examples:", "      - {template: patterns/fog_ankle_S02R01_ep1.csv, start: 3}"})),
        "patterns[0].examples[0].start", 17, "either a template or file/format/start/end");
  }
  SECTION("a template item, and a negative template") {
    const Config config = parse_config(
        with_devices({GW_PATTERN_HEAD, "    examples:",
                      "      - {template: patterns/fog_ankle_S02R01_ep1.csv}", "    negatives:",
                      "      - {file: ../data/daphnet/S03R03.txt, format: daphnet, start: 100}"}),
        "test.yaml", kConfigDir);
    const auto& p = config.patterns.at(0);
    CHECK(p.length == 128);
    REQUIRE(p.examples.size() == 2);
    CHECK(p.examples[1].source->end == 228);
  }
}

TEST_CASE("the Euclidean baseline allows no band, no neighbours and no streaming", "[config]") {
  const auto issues =
      issues_of(with_devices({GW_PATTERN_HEAD, "    measure: euclidean", "    band: 0.1",
                              "    nr: 1", "    template: patterns/fog_ankle_S02R01_ep1.csv"}));
  INFO(describe(issues));
  REQUIRE(issues.size() == 2);
  CHECK(issues[0].path == "patterns[0].band");
  CHECK(issues[1].path == "patterns[0].nr");
  const Config ok = parse_config(with_devices({GW_PATTERN_HEAD, "    measure: euclidean",
                                               "    template: patterns/fog_ankle_S02R01_ep1.csv"}),
                                 "test.yaml", kConfigDir);
  CHECK(ok.patterns.at(0).band == 0);
  CHECK(ok.patterns.at(0).measure == gw::config::Measure::kEuclidean);
  CHECK(ok.patterns.at(0).mode == gw::config::PatternMode::kWindow);
  require_single_issue(
      issues_of(with_devices({GW_PATTERN_HEAD, "    measure: euclidean", "    mode: streaming",
                              "    template: patterns/fog_ankle_S02R01_ep1.csv"})),
      "patterns[0].mode", 17, "measure euclidean needs mode window");
}

TEST_CASE("the ring must also hold the transforms' history", "[config]") {
  const auto issues = issues_of(with_devices({
      GW_PATTERN_HEAD,
      "    transforms: [{kind: freeze_index, window_s: 2}]",  // 16: 127 samples of history
      "    example: {file: ../data/daphnet/S02R01.txt, format: daphnet, start: 200, end: 264}",
      "ingest:",                       // 18
      "  ring_capacity_samples: 150",  // 19
  }));
  // 64 samples + 127 of history + ceil(64 Hz * 0.1 s) = 198.
  require_single_issue(issues, "ingest.ring_capacity_samples", 19, "= 198, is 150");
}

namespace {

// Each word of a choice parses to a value whose name is the word again, the
// values are distinct, and a word of no value parses to nothing.
template <typename E>
void check_choice_words(const std::vector<std::string>& expected) {
  CHECK(gw::config::choice_words<E>() == expected);
  std::vector<E> values;
  for (const std::string& word : expected) {
    INFO(word);
    const std::optional<E> value = gw::config::parse_choice<E>(word);
    REQUIRE(value.has_value());
    CHECK(std::string(gw::config::name(*value)) == word);
    CHECK(std::find(values.begin(), values.end(), *value) == values.end());
    values.push_back(*value);
  }
  CHECK_FALSE(gw::config::parse_choice<E>("").has_value());
  CHECK_FALSE(gw::config::parse_choice<E>(expected.front() + "x").has_value());
}

}  // namespace

TEST_CASE("config choices parse their words to enums and name them back", "[config]") {
  check_choice_words<gw::config::PatternMode>({"window", "streaming"});
  check_choice_words<gw::config::Measure>({"dtw", "euclidean"});
  check_choice_words<gw::config::BackendKind>({"auto", "cpu", "cuda"});
  check_choice_words<gw::config::OverloadPolicy>({"none", "defer", "shed", "drop_patterns"});
  check_choice_words<gw::config::HistoryCompression>({"zlib", "none"});
  check_choice_words<gw::OverflowPolicy>({"block", "drop_oldest", "drop_newest"});
  check_choice_words<gw::config::SlotClock>({"anchored", "device"});
  CHECK(gw::config::choice_list<gw::config::BackendKind>() == "auto | cpu | cuda");

  // Each read from the file under its key, an unknown word reported with the
  // key path and the words allowed.
  const Config config = parse_config(
      yaml({"ingest:", "  queue_overflow: block", "search:", "  backend: cpu",
            "  overload_policy: drop_patterns", "history:", "  compression: none",
            "  queue_overflow: drop_oldest", "hashtable:", "  backend: cuda", "slots:",
            "  clock: device"}),
      "choices.yaml", "/base");
  CHECK(config.ingest.queue_overflow == gw::OverflowPolicy::kBlock);
  CHECK(config.search.backend == gw::config::BackendKind::kCpu);
  CHECK(config.search.overload_policy == gw::config::OverloadPolicy::kDropPatterns);
  CHECK(config.history.compression == gw::config::HistoryCompression::kNone);
  CHECK(config.history.queue_overflow == gw::OverflowPolicy::kDropOldest);
  CHECK(config.hashtable.backend == gw::config::BackendKind::kCuda);
  CHECK(config.slots.clock == gw::config::SlotClock::kDevice);
  require_single_issue(issues_of(yaml({"ingest:", "  queue_overflow: spill"})),
                       "ingest.queue_overflow", 2,
                       "must be one of block | drop_oldest | drop_newest, got 'spill'");
}

TEST_CASE("soft-deadline, metrics and CURVE keys are read and checked with their key paths",
          "[config]") {
  const auto ok = parse_config(yaml({"search:", "  overload_policy: shed", "  deadline_safety_ms: 40",
                                     "metrics: {bind: 0.0.0.0, port: 0}"}),
                               "ok.yaml", "/base");
  CHECK(ok.search.overload_policy == gw::config::OverloadPolicy::kShed);
  CHECK(ok.search.deadline_safety_ms == 40);
  CHECK(ok.metrics.port == 0);
  CHECK(ok.metrics.bind == "0.0.0.0");
  require_single_issue(issues_of(yaml({"search:", "  overload_policy: panic"})),
                       "search.overload_policy", 2, "panic");
  require_single_issue(issues_of(yaml({"metrics:", "  port: 70000"})), "metrics.port", 2, "70000");
  // CURVE: the files must exist, and both keys come together.
  const auto missing = issues_of(yaml({"publish:", "  curve_secret_key: /nonexistent/server.key",
                                       "  curve_authorized_keys: /nonexistent/subscribers"}));
  REQUIRE(missing.size() == 2);
  CHECK(missing[0].path == "publish.curve_secret_key");
  CHECK(missing[1].path == "publish.curve_authorized_keys");
  TempDir dir;
  dir.write("keys/server.key", "public: x\n");
  const auto half =
      issues_of("publish:\n  curve_secret_key: " + (dir.path() / "keys/server.key").string() + "\n");
  require_single_issue(half, "publish.curve_authorized_keys", 2, "both");
}

TEST_CASE("ingest.allowed_devices and control CURVE keys are read and checked with key paths",
          "[config]") {
  CHECK_FALSE(parse_config(yaml({"ingest: {}"}), "none.yaml", "/base").ingest.restrict_devices);
  const auto empty = parse_config(yaml({"ingest:", "  allowed_devices: []"}), "e.yaml", "/base");
  CHECK(empty.ingest.restrict_devices);  // present but empty: nothing may send
  CHECK(empty.ingest.allowed_devices.empty());
  TempDir dir;
  dir.write("keys/dev.mackey", "mac-key: 00\n");
  fs::permissions(dir.path() / "keys/dev.mackey", fs::perms::owner_read | fs::perms::owner_write);
  dir.write("keys/open.mackey", "mac-key: 00\n");
  fs::permissions(dir.path() / "keys/open.mackey", fs::perms::owner_read | fs::perms::others_read);
  dir.write("keys/server.key", "x\n");
  fs::create_directories(dir.path() / "keys/operators");
  const auto ok = parse_config(
      yaml({"ingest:", "  allowed_devices:",
            "    - {wearer: 17, device: 1, sources: [10.0.2.0/24], mac_key: keys/dev.mackey}",
            "    - {wearer: 18}", "control:", "  curve_secret_key: keys/server.key",
            "  curve_authorized_keys: keys/operators"}),
      "ok.yaml", dir.path().string());
  REQUIRE(ok.ingest.allowed_devices.size() == 2);
  const auto& first = ok.ingest.allowed_devices[0];
  CHECK(first.wearer == 17);
  CHECK(first.device == 1);
  CHECK(first.sources == std::vector<std::string>{"10.0.2.0/24"});
  CHECK(first.mac_key == normal(dir.path() / "keys/dev.mackey"));
  CHECK_FALSE(ok.ingest.allowed_devices[1].device.has_value());
  CHECK(ok.ingest.allowed_devices[1].mac_key.empty());
  CHECK(ok.control.curve_secret_key == normal(dir.path() / "keys/server.key"));
  CHECK(ok.control.curve_authorized_keys == normal(dir.path() / "keys/operators"));

  require_single_issue(issues_of(yaml({"ingest:", "  allowed_devices:", "    - {device: 1}"})),
                       "ingest.allowed_devices[0].wearer", 3, "required");
  require_single_issue(
      issues_of(yaml({"ingest:", "  allowed_devices:", "    - {wearer: 1, sources: [ward]}"})),
      "ingest.allowed_devices[0].sources[0]", 3, "not an IPv4 or IPv6 address");
  require_single_issue(
      issues_of(yaml({"ingest:", "  allowed_devices:", "    - {wearer: 1, sources: []}"})),
      "ingest.allowed_devices[0].sources", 3, "at least one");
  require_single_issue(issues_of(yaml({"ingest:", "  allowed_devices:", "    - {wearer: 1}",
                                       "    - {wearer: 1}"})),
                       "ingest.allowed_devices[1].wearer", 4, "listed twice");
  require_single_issue(
      issues_of(yaml({"ingest:", "  allowed_devices:", "    - {wearer: 1, mac_key: /nonexistent}"})),
      "ingest.allowed_devices[0].mac_key", 3, "no such file");
  const std::string open_key = (dir.path() / "keys/open.mackey").string();
  require_single_issue(issues_of("ingest:\n  allowed_devices:\n    - {wearer: 1, mac_key: " +
                                 open_key + "}\n"),
                       "ingest.allowed_devices[0].mac_key", 3, "0600");
  require_single_issue(issues_of("control:\n  curve_secret_key: " +
                                 (dir.path() / "keys/server.key").string() +
                                 "\n  curve_authorized_keys: /nonexistent\n"),
                       "control.curve_authorized_keys", 3, "no such directory");
  require_single_issue(issues_of("control:\n  curve_secret_key: " +
                                 (dir.path() / "keys/server.key").string() + "\n"),
                       "control.curve_authorized_keys", 2, "both");
}

// ---------------------------------------------------------------------------
// The daemon's control interface, hash-table jobs and zones

TEST_CASE("control, hashtable, dedup, slots and zones have documented defaults", "[config]") {
  const Config config = parse_config("", "empty.yaml", "/base");
  CHECK(config.control.enabled);
  CHECK(config.control.endpoint == "ipc:///run/gaitwatch/control.sock");
  CHECK(config.control.max_jobs == 4);
  CHECK(config.hashtable.backend == gw::config::BackendKind::kAuto);
  CHECK(config.dedup.enabled);
  CHECK(config.dedup.bucket_s == 5);
  CHECK(config.dedup.retention_s == 600);
  CHECK(config.slots.enabled);
  CHECK(config.slots.clock == gw::config::SlotClock::kAnchored);
  CHECK(config.slots.retention_s == 86400);
  CHECK(config.zones.empty());
  CHECK(config.zone_name(0) == "none");
  CHECK(config.zone_id("none") == 0);
  CHECK_FALSE(config.zone_id("B").has_value());
}

TEST_CASE("zones map sender addresses and networks to ids in list order", "[config]") {
  const Config config = parse_config(
      yaml({"zones:", "  - {name: A, sources: [127.0.0.1]}",
            "  - {name: B, sources: [127.0.0.2, 10.0.2.0/24, 'fd00::/8']}",
            "  - {name: ward, sources: [10.0.0.0/8]}"}),
      "zones.yaml", "/base");
  REQUIRE(config.zones.size() == 3);
  auto zone_of = [&](const std::string& text) {
    std::string error;
    const auto range = gw::config::AddressRange::parse(text, error);
    REQUIRE(range.has_value());
    return config.zone_of(range->bytes);
  };
  CHECK(zone_of("127.0.0.1") == 1);
  CHECK(zone_of("127.0.0.2") == 2);
  CHECK(zone_of("127.0.0.3") == 0);
  CHECK(zone_of("10.0.2.77") == 2);  // the first zone that holds it
  CHECK(zone_of("10.0.3.1") == 3);
  CHECK(zone_of("fd12::1") == 2);
  CHECK(zone_of("::1") == 0);
  CHECK(config.zone_id("B") == 2);
  CHECK(config.zone_id("2") == 2);
  CHECK(config.zone_id("ward") == 3);
  CHECK_FALSE(config.zone_id("4").has_value());
  CHECK(config.zone_name(3) == "ward");
  CHECK(config.zone_name(4).empty());
}

TEST_CASE("a relative ipc endpoint is resolved against the config's directory", "[config]") {
  const Config config = parse_config(yaml({"publish:", "  endpoint: ipc://run/pub.sock",
                                           "control:", "  endpoint: ipc://control.sock"}),
                                     "c.yaml", "/etc/gaitwatch");
  CHECK(config.publish.endpoint == "ipc:///etc/gaitwatch/run/pub.sock");
  CHECK(config.control.endpoint == "ipc:///etc/gaitwatch/control.sock");
  // Absolute paths, the abstract namespace and tcp stay as written.
  const Config kept = parse_config(yaml({"publish:", "  endpoint: ipc://@gaitwatch-pub",
                                         "control:", "  endpoint: ipc:///run/x/../gw.sock"}),
                                   "c.yaml", "/etc/gaitwatch");
  CHECK(kept.publish.endpoint == "ipc://@gaitwatch-pub");
  CHECK(kept.control.endpoint == "ipc:///run/gw.sock");

  const std::string long_name(120, 's');
  require_single_issue(issues_of("control:\n  endpoint: ipc://" + long_name + "\n"),
                       "control.endpoint", 2, "longer than 107 bytes");
  require_single_issue(issues_of(yaml({"control:", "  endpoint: ipc://"})), "control.endpoint",
                       2, "needs a socket path");
  // Two spellings of one socket are one endpoint.
  require_single_issue(issues_of(yaml({"publish:", "  endpoint: ipc://a.sock", "control:",
                                       "  endpoint: ipc://./a.sock"})),
                       "control.endpoint", 4, "must differ from publish.endpoint");
}

TEST_CASE("load_endpoints reads publish and control alone, resolved like load_config",
          "[config]") {
  TempDir dir;
  dir.write("keys/server.key", "public: x\n");
  fs::create_directories(dir.path() / "keys/clients");
  // Patterns naming files that do not exist: load_config fails, the
  // endpoints still load.
  dir.write("gw.yaml", yaml({"publish:", "  endpoint: tcp://127.0.0.1:9",
                             "control:", "  endpoint: ipc://sock/control.sock",
                             "  curve_secret_key: keys/server.key",
                             "  curve_authorized_keys: keys/clients",
                             "patterns:", "  - {name: p, example: {file: nowhere.txt}}"}));
  const std::string path = (dir.path() / "gw.yaml").string();
  CHECK_THROWS_AS(load_config(path), ConfigError);
  const gw::config::ClientEndpoints endpoints = gw::config::load_endpoints(path);
  CHECK(endpoints.publish.endpoint == "tcp://127.0.0.1:9");
  CHECK(endpoints.control.endpoint == "ipc://" + normal(dir.path() / "sock/control.sock"));
  CHECK(endpoints.control.curve_secret_key == normal(dir.path() / "keys/server.key"));

  // The same validation: mistakes in these sections name their key.
  dir.write("bad.yaml", yaml({"control:", "  endpont: ipc://x.sock"}));
  try {
    gw::config::load_endpoints((dir.path() / "bad.yaml").string());
    FAIL("load_endpoints accepted a misspelt key");
  } catch (const ConfigError& error) {
    require_single_issue(error.issues(), "control.endpont", 2, "did you mean 'endpoint'");
  }
  CHECK_THROWS_AS(gw::config::load_endpoints((dir.path() / "absent.yaml").string()), ConfigError);
}

TEST_CASE("zone, control and slot mistakes name their key", "[config]") {
  require_single_issue(issues_of(yaml({"zones:", "  - {name: A, sources: [10.0.0.0/33]}"})),
                       "zones[0].sources[0]", 2, "prefix length '33' must be 0..32");
  require_single_issue(issues_of(yaml({"zones:", "  - {name: A, sources: [ward-7]}"})),
                       "zones[0].sources[0]", 2, "not an IPv4 or IPv6 address");
  require_single_issue(
      issues_of(yaml({"zones:", "  - {name: A, sources: [127.0.0.1]}",
                      "  - {name: A, sources: [127.0.0.2]}"})),
      "zones[1].name", 3, "duplicate zone name 'A'");
  require_single_issue(issues_of(yaml({"zones:", "  - {name: '12', sources: [127.0.0.1]}"})),
                       "zones[0].name", 2, "reserved");
  require_single_issue(issues_of(yaml({"control:", "  endpoint: tcp://127.0.0.1:7710"})),
                       "control.endpoint", 2, "must differ from publish.endpoint");
  require_single_issue(issues_of(yaml({"slots:", "  clock: wall"})), "slots.clock", 2,
                       "anchored | device");
  require_single_issue(issues_of(yaml({"dedup:", "  bucket_s: 0"})), "dedup.bucket_s", 2, "> 0");
  require_single_issue(issues_of(yaml({"hashtable:", "  backend: gpu"})), "hashtable.backend", 2,
                       "auto | cpu | cuda");
  require_single_issue(issues_of(yaml({"slots:", "  still_max_std_g: 0.5"})),
                       "slots.light_max_std_g", 2, "must grow");
  require_single_issue(issues_of(yaml({"marks:", "  max_examples_per_wearer: 0"})),
                       "marks.max_examples_per_wearer", 2, "1");
  require_single_issue(issues_of(yaml({"marks:", "  max_examples: 5"})), "marks.max_examples", 2,
                       "unknown");
  require_single_issue(issues_of(yaml({"marks:", "  window_budget_mb_per_s: -1"})),
                       "marks.window_budget_mb_per_s", 2, "");
}

TEST_CASE("marks.max_examples_per_wearer: default, shipped value, and a value given", "[config]") {
  CHECK(gw::config::parse_config("{}", "t.yaml", ".").marks.max_examples_per_wearer == 50);
  CHECK(gw::config::parse_config("marks: {max_examples_per_wearer: 7}", "t.yaml", ".")
            .marks.max_examples_per_wearer == 7);
  CHECK(gw::config::load_config(kConfigDir + "/gaitwatch.yaml").marks.max_examples_per_wearer == 50);
  CHECK(gw::config::parse_config("{}", "t.yaml", ".").marks.alert_windows);
  CHECK_FALSE(
      gw::config::parse_config("marks: {alert_windows: false}", "t.yaml", ".").marks.alert_windows);
  CHECK(gw::config::parse_config("{}", "t.yaml", ".").marks.window_budget_mb_per_s == 16);
  CHECK(gw::config::load_config(kConfigDir + "/gaitwatch.yaml").marks.window_budget_mb_per_s == 16);
  CHECK(gw::config::parse_config("marks: {window_budget_mb_per_s: 0}", "t.yaml", ".")
            .marks.window_budget_mb_per_s == 0);
}

TEST_CASE("a device's status inputs: defaults by kind, names resolved, mistakes reported",
          "[config]") {
  const Config config = parse_config(
      yaml({"devices:", "  - {id: 1, name: acc, kind: accelerometer_3}",
            "  - {id: 2, name: left, kind: pressure_insole_left}",
            "  - {id: 3, name: force, kind: force_insole_8}",
            "  - id: 4", "    name: body", "    kind: generic",
            "    channels: [a_fwd, a_vert, a_lat, l1, l2, r1]",
            "    status: {accel: [a_lat, a_fwd, a_vert], vertical: a_vert, gravity: 9.81,",
            "             left_load: [l1, l2], right_load: [r1]}"}),
      "status.yaml", "/base");
  REQUIRE(config.devices.size() == 4);
  CHECK(config.devices[0].status.accel == std::vector<int>{0, 1, 2});
  CHECK(config.devices[0].status.vertical_axis == 1);
  CHECK(config.devices[1].status.left_load.size() == 99);
  CHECK(config.devices[1].status.right_load.empty());
  CHECK(config.devices[2].status.accel.empty());
  CHECK(config.devices[2].status.left_load.empty());
  const gw::config::StatusChannels& body = config.devices[3].status;
  CHECK(body.accel == std::vector<int>{2, 0, 1});
  CHECK(body.vertical_axis == 2);
  CHECK(body.gravity == 9.81);
  CHECK(body.left_load == std::vector<int>{3, 4});
  CHECK(body.right_load == std::vector<int>{5});

  require_single_issue(
      issues_of(yaml({"devices:", "  - id: 1", "    name: a", "    kind: accelerometer_3",
                      "    status: {accel: [x, y]}"})),
      "devices[0].status.accel", 5, "must name 3 channels");
  require_single_issue(
      issues_of(yaml({"devices:", "  - id: 1", "    name: a", "    kind: accelerometer_3",
                      "    status:", "      left_load: [x, q]"})),
      "devices[0].status.left_load[1]", 6, "has no channel 'q'");
  require_single_issue(
      issues_of(yaml({"devices:", "  - id: 1", "    name: a", "    kind: accelerometer_3",
                      "    status: {vertical: w}"})),
      "devices[0].status.vertical", 5, "not one of the accel channels");
}

TEST_CASE("query segmentation and search exhausting are validated with their key paths",
          "[config]") {
  SECTION("off by default") {
    const Config config = parse_config(
        with_devices({GW_PATTERN_HEAD, "    template: patterns/fog_ankle_S02R01_ep1.csv"}),
        "test.yaml", kConfigDir);
    CHECK(config.patterns.at(0).segments == 0);
    CHECK(config.patterns.at(0).exhaust_factor == 0);
  }
  SECTION("one segment is not segmentation") {
    require_single_issue(
        issues_of(with_devices({GW_PATTERN_HEAD, "    segments: 1",
                                "    template: patterns/fog_ankle_S02R01_ep1.csv"})),
        "patterns[0].segments", 16, "0 (off) or >= 2");
  }
  SECTION("parts shorter than 8 samples") {
    require_single_issue(
        issues_of(with_devices({GW_PATTERN_HEAD, "    segments: 20",
                                "    template: patterns/fog_ankle_S02R01_ep1.csv"})),
        "patterns[0].segments", 16, "20 parts of 128 samples are shorter than 8 samples");
  }
  SECTION("a factor below 1 is not looser") {
    require_single_issue(
        issues_of(with_devices({GW_PATTERN_HEAD, "    exhaust_factor: 0.5",
                                "    template: patterns/fog_ankle_S02R01_ep1.csv"})),
        "patterns[0].exhaust_factor", 16, "0 (off) or >= 1");
  }
  SECTION("exhaust_band needs exhausting, and must not be narrower than band") {
    require_single_issue(
        issues_of(with_devices({GW_PATTERN_HEAD, "    exhaust_band: 0.2",
                                "    template: patterns/fog_ankle_S02R01_ep1.csv"})),
        "patterns[0].exhaust_band", 16, "needs exhaust_factor");
    require_single_issue(
        issues_of(with_devices({GW_PATTERN_HEAD, "    exhaust_factor: 1.5", "    exhaust_band: 0.05",
                                "    template: patterns/fog_ankle_S02R01_ep1.csv"})),
        "patterns[0].exhaust_band", 17, "must be >= band");
  }
  SECTION("factor 1 at the same band searches nothing looser") {
    require_single_issue(
        issues_of(with_devices({GW_PATTERN_HEAD, "    exhaust_factor: 1",
                                "    template: patterns/fog_ankle_S02R01_ep1.csv"})),
        "patterns[0].exhaust_factor", 16, "searches nothing looser");
    const Config wider = parse_config(
        with_devices({GW_PATTERN_HEAD, "    exhaust_factor: 1", "    exhaust_band: 0.3",
                      "    template: patterns/fog_ankle_S02R01_ep1.csv"}),
        "test.yaml", kConfigDir);
    CHECK(wider.patterns.at(0).exhaust_band == 0.3);
  }
}

TEST_CASE("ingest stream and connection limits are read and checked with their key paths",
          "[config]") {
  const auto ok = parse_config(
      yaml({"ingest:", "  max_streams: 500", "  stream_idle_s: 30", "  stream_stale_s: 2",
            "  stream_offline_s: 10", "  tcp: {port: 0, max_connections: 8, idle_timeout_s: 0}"}),
      "ok.yaml", "/base");
  CHECK(ok.ingest.max_streams == 500);
  CHECK(ok.ingest.stream_idle_s == 30);
  CHECK(ok.ingest.stream_stale_s == 2);
  CHECK(ok.ingest.stream_offline_s == 10);
  CHECK(ok.ingest.tcp.port == 0);
  CHECK(ok.ingest.tcp.max_connections == 8);
  CHECK(ok.ingest.tcp.idle_timeout_s == 0);
  const Config defaults = parse_config("", "empty.yaml", "/base");
  CHECK(defaults.ingest.max_streams == 65536);
  CHECK(defaults.ingest.tcp.max_connections == 1024);
  CHECK(defaults.ingest.tcp.idle_timeout_s == 120);
  require_single_issue(issues_of(yaml({"ingest:", "  max_streams: 0"})), "ingest.max_streams", 2,
                       "got 0");
  require_single_issue(issues_of(yaml({"ingest:", "  stream_idle_s: -1"})),
                       "ingest.stream_idle_s", 2, "-1");
  require_single_issue(issues_of(yaml({"ingest:", "  stream_stale_s: 0"})),
                       "ingest.stream_stale_s", 2, "> 0");
  require_single_issue(issues_of(yaml({"ingest:", "  stream_offline_s: 5"})),
                       "ingest.stream_offline_s", 2, "must exceed stream_stale_s");
  require_single_issue(issues_of(yaml({"ingest:", "  stream_stale_s: 90"})),
                       "ingest.stream_stale_s", 2, "must exceed stream_stale_s");
  require_single_issue(issues_of(yaml({"ingest:", "  tcp:", "    max_connections: 0"})),
                       "ingest.tcp.max_connections", 3, "got 0");
  require_single_issue(issues_of(yaml({"ingest:", "  tcp:", "    idle_timeout_s: -2"})),
                       "ingest.tcp.idle_timeout_s", 3, "-2");
  require_single_issue(issues_of(yaml({"ingest:", "  tcp:", "    max_conections: 9"})),
                       "ingest.tcp.max_conections", 3, "max_connections");
}

TEST_CASE("wearers: liveness thresholds, offline alerts and their severity", "[config]") {
  const Config defaults = parse_config("", "empty.yaml", "/base");
  CHECK(defaults.wearers.stale_after_s == 5);
  CHECK(defaults.wearers.offline_after_s == 30);
  CHECK(defaults.wearers.offline_alerts);
  CHECK(defaults.wearers.offline_severity == gw::config::AlertSeverity::kWarning);
  const Config ok = parse_config(yaml({"wearers:", "  stale_after_s: 0.3", "  offline_after_s: 1",
                                       "  offline_alerts: false", "  offline_severity: critical"}),
                                 "ok.yaml", "/base");
  CHECK(ok.wearers.stale_after_s == 0.3);
  CHECK(ok.wearers.offline_after_s == 1);
  CHECK_FALSE(ok.wearers.offline_alerts);
  CHECK(ok.wearers.offline_severity == gw::config::AlertSeverity::kCritical);
  require_single_issue(issues_of(yaml({"wearers:", "  stale_after_s: 0"})), "wearers.stale_after_s",
                       2, "> 0");
  require_single_issue(issues_of(yaml({"wearers:", "  offline_after_s: 5"})),
                       "wearers.offline_after_s", 2, "must exceed stale_after_s");
  require_single_issue(issues_of(yaml({"wearers:", "  stale_after_s: 60"})),
                       "wearers.stale_after_s", 2, "must exceed stale_after_s");
  require_single_issue(issues_of(yaml({"wearers:", "  offline_severity: urgent"})),
                       "wearers.offline_severity", 2, "info | warning | critical");
  require_single_issue(issues_of(yaml({"wearers:", "  offline_alert: true"})),
                       "wearers.offline_alert", 2, "offline_alerts");
}

// ---------------------------------------------------------------------------
// Pattern packs (`- include: FILE` in patterns)

namespace {

// A pack with one pattern on `body` whose template path is relative to the
// pack: the template is copied next to it.
std::string pack_with_pattern(const std::string& name, const std::string& threshold = "8.0") {
  return yaml({"description: a test pack",                             // 1
               "built_by: hand",                                       // 2
               "evaluation: {recall: 1.0, notes: [any, yaml]}",        // 3
               "patterns:"}) +                                         // 4
         "  - name: " + name + "\n" +                                  // 5
         yaml({"    device: body",                                     // 6
               "    channels: [ankle_fwd, ankle_vert, ankle_lat]"}) +  // 7
         "    threshold: " + threshold + "\n" +                        // 8
         "    template: templates/ep1.csv\n";                          // 9
}

void write_pack_dir(const TempDir& dir, const std::string& pack_file, const std::string& text) {
  dir.write(pack_file, text);
  const fs::path templates = (dir.path() / pack_file).parent_path() / "templates";
  fs::create_directories(templates);
  fs::copy_file(kConfigDir + "/patterns/fog_ankle_S02R01_ep1.csv", templates / "ep1.csv",
                fs::copy_options::overwrite_existing);
}

std::vector<ConfigIssue> load_issues(const std::string& path) {
  try {
    load_config(path);
  } catch (const ConfigError& error) {
    return error.issues();
  }
  FAIL("load_config accepted " << path);
  return {};
}

}  // namespace

TEST_CASE("an include reads a pack's patterns with paths relative to the pack", "[config][pack]") {
  const TempDir dir;
  write_pack_dir(dir, "packs/a.yaml", pack_with_pattern("from_a"));
  write_pack_dir(dir, "other/b.yaml", pack_with_pattern("from_b"));
  dir.write("main.yaml", with_devices({"patterns:",                 // 11
                                       "  - include: packs/a.yaml",  // 12
                                       "  - name: own",              // 13
                                       "    device: body",
                                       "    channels: [ankle_fwd, ankle_vert, ankle_lat]",
                                       "    threshold: 8.0",
                                       "    template: packs/templates/ep1.csv",
                                       "  - {include: other/b.yaml}"}));
  const Config config = load_config((dir.path() / "main.yaml").string());
  REQUIRE(config.patterns.size() == 3);
  CHECK(config.patterns[0].name == "from_a");
  CHECK(config.patterns[1].name == "own");
  CHECK(config.patterns[2].name == "from_b");
  CHECK(config.patterns[0].examples.at(0).template_file ==
        normal(dir.path() / "packs/templates/ep1.csv"));
  CHECK(config.patterns[2].examples.at(0).template_file ==
        normal(dir.path() / "other/templates/ep1.csv"));
  CHECK(config.patterns[0].examples.at(0).raw == config.patterns[1].examples.at(0).raw);
}

TEST_CASE("issues in a pack name the pack's file, line and key path, and the include",
          "[config][pack]") {
  const TempDir dir;
  std::string pack = pack_with_pattern("bad", "-1");
  pack.insert(0, "unexpected: 1\n");  // line 1; the pack's other lines move down by one
  write_pack_dir(dir, "packs/bad.yaml", pack);
  dir.write("main.yaml", with_devices({"patterns:", "  - include: packs/bad.yaml"}));  // 12
  const std::string main_path = (dir.path() / "main.yaml").string();
  const std::vector<ConfigIssue> issues = load_issues(main_path);
  INFO(describe(issues));
  REQUIRE(issues.size() == 2);
  const std::string pack_name = normal(dir.path() / "packs/bad.yaml");
  CHECK(issues[0].file == pack_name);
  CHECK(issues[0].line == 1);
  CHECK(issues[0].path == "unexpected");
  CHECK_THAT(issues[0].message, Catch::Contains("unknown key"));
  CHECK(issues[1].file == pack_name);
  CHECK(issues[1].line == 9);
  CHECK(issues[1].path == "patterns[0].threshold");
  CHECK_THAT(issues[1].message,
             Catch::Contains("included by patterns[0].include at " + main_path + ":12"));
  CHECK_THAT(issues[1].to_string(main_path),
             Catch::StartsWith(pack_name + ":9: patterns[0].threshold: "));
}

TEST_CASE("a missing pack is reported at its include", "[config][pack]") {
  const TempDir dir;
  dir.write("main.yaml", with_devices({"patterns:", "  - include: packs/none.yaml"}));
  const std::vector<ConfigIssue> issues = load_issues((dir.path() / "main.yaml").string());
  INFO(describe(issues));
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].file.empty());
  CHECK(issues[0].path == "patterns[0].include");
  CHECK(issues[0].line == 12);
  CHECK_THAT(issues[0].message, Catch::Contains("cannot read pattern pack"));
}

TEST_CASE("a pack cannot include packs, needs patterns and takes no other keys",
          "[config][pack]") {
  const TempDir dir;
  write_pack_dir(dir, "inner.yaml", pack_with_pattern("inner"));
  dir.write("nested.yaml", yaml({"patterns:", "  - include: inner.yaml"}));
  dir.write("empty.yaml", yaml({"description: nothing else"}));
  dir.write("main.yaml", with_devices({"patterns:", "  - include: nested.yaml",
                                       "  - include: empty.yaml",
                                       "  - {include: inner.yaml, name: extra}"}));
  const std::vector<ConfigIssue> issues = load_issues((dir.path() / "main.yaml").string());
  INFO(describe(issues));
  REQUIRE(issues.size() == 3);
  // The config's own issue first, then the packs' in include order.
  CHECK(issues[0].path == "patterns[2].name");
  CHECK(issues[0].line == 14);
  CHECK_THAT(issues[0].message, Catch::Contains("unknown key"));
  CHECK(issues[1].file == normal(dir.path() / "nested.yaml"));
  CHECK(issues[1].path == "patterns[0].include");
  CHECK(issues[1].line == 2);
  CHECK_THAT(issues[1].message, Catch::Contains("cannot include other packs"));
  CHECK(issues[2].file == normal(dir.path() / "empty.yaml"));
  CHECK(issues[2].path == "patterns");
  CHECK_THAT(issues[2].message, Catch::Contains("missing required key"));
}

TEST_CASE("pattern names are unique across packs", "[config][pack]") {
  const TempDir dir;
  write_pack_dir(dir, "a.yaml", pack_with_pattern("same"));
  write_pack_dir(dir, "b/b.yaml", pack_with_pattern("same"));
  dir.write("main.yaml", with_devices({"patterns:", "  - include: a.yaml", "  - include: b/b.yaml"}));
  const std::vector<ConfigIssue> issues = load_issues((dir.path() / "main.yaml").string());
  INFO(describe(issues));
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].file == normal(dir.path() / "b/b.yaml"));
  CHECK(issues[0].path == "patterns[0].name");
  CHECK(issues[0].line == 5);
  CHECK_THAT(issues[0].message, Catch::Contains("duplicate pattern name 'same'"));
}

TEST_CASE("a learned decision is read from the file the pattern names, relative to the pack",
          "[config][pack][learned]") {
  const TempDir dir;
  write_pack_dir(dir, "packs/a.yaml",
                 pack_with_pattern("learned") + "    decision: {learned: a_decision.yaml}\n" +
                     "    margin: -1.5\n");
  dir.write("packs/a_decision.yaml",
            yaml({"rule: logistic", "bias: 0.5",
                  "weights: {nearest_positive: -4, vote5: 2.5}",
                  "trained: {files: [x.txt], positives: 3}", "command: gaitwatch train"}));
  dir.write("main.yaml", with_devices({"patterns:", "  - include: packs/a.yaml"}));
  const Config config = load_config((dir.path() / "main.yaml").string());
  REQUIRE(config.patterns.size() == 1);
  const auto& d = config.patterns[0].learned_decision;
  REQUIRE(d.has_value());
  CHECK(d->file == normal(dir.path() / "packs/a_decision.yaml"));
  CHECK(d->bias == 0.5);
  CHECK(d->weights[0] == -4);  // nearest_positive
  CHECK(d->weights[1] == 0);   // not given
  CHECK(d->weights[5] == 2.5);  // vote5
  // With a learned decision the margin is a log-odds and may be negative.
  CHECK(config.patterns[0].margin == -1.5);
}

TEST_CASE("a bad learned decision is reported at decision.learned with the file's own line",
          "[config][learned]") {
  const TempDir dir;
  write_pack_dir(dir, "p.yaml", pack_with_pattern("learned") +
                                    "    decision: {learned: d.yaml}\n");
  dir.write("d.yaml", yaml({"bias: 0.5", "weights: {nearest_positiv: -4}"}));
  dir.write("main.yaml", with_devices({"patterns:", "  - include: p.yaml"}));
  std::vector<ConfigIssue> issues = load_issues((dir.path() / "main.yaml").string());
  INFO(describe(issues));
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].path == "patterns[0].decision.learned");
  CHECK(issues[0].line == 10);
  CHECK_THAT(issues[0].message, Catch::Contains("d.yaml:2: weights.nearest_positiv: unknown key"));
  CHECK_THAT(issues[0].message, Catch::Contains("did you mean 'nearest_positive'"));

  // A missing file, a vote beside it, a negative margin without it.
  write_pack_dir(dir, "p.yaml", pack_with_pattern("learned") +
                                    "    decision: {learned: none.yaml}\n");
  issues = load_issues((dir.path() / "main.yaml").string());
  REQUIRE(issues.size() == 1);
  CHECK_THAT(issues[0].message, Catch::Contains("cannot read decision file"));
  dir.write("d.yaml", yaml({"bias: 0", "weights: {}"}));
  write_pack_dir(dir, "p.yaml", pack_with_pattern("learned") +
                                    "    neighbours: 3\n    decision: {learned: d.yaml}\n");
  issues = load_issues((dir.path() / "main.yaml").string());
  REQUIRE(issues.size() == 1);
  CHECK_THAT(issues[0].message, Catch::Contains("set neighbours to 0"));
  write_pack_dir(dir, "p.yaml", pack_with_pattern("learned") + "    margin: -1\n");
  issues = load_issues((dir.path() / "main.yaml").string());
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].path == "patterns[0].margin");
}

// ---------------------------------------------------------------------------
// Per-wearer normalisation: `normalise:` and examples' `baseline:`

TEST_CASE("normalise and example baselines: values, and each mistake at its key path",
          "[config][baseline]") {
  // Lines 16..: the magnitude's freeze index (a transformed view), then the
  // item under test.
  const auto pattern = [](std::initializer_list<const char*> lines) {
    std::vector<const char*> all = {
        "    transforms: [magnitude, {kind: freeze_index, window_s: 1}]",  // 16
        "    length: 64",                                                 // 17
    };
    all.insert(all.end(), lines);
    std::string text = with_devices({GW_PATTERN_HEAD});
    for (const char* line : all) text += std::string(line) + "\n";
    return text;
  };
  const char* const window = "      - {file: ../data/daphnet/S02R01.txt, format: daphnet, start: 9000}";
  SECTION("read, and a window of a recording gets its recording's first rows") {
    const Config config = parse_config(
        pattern({"    normalise: {learn_s: 30, statistic: mean, scale: mad}",  // 18
                 "    examples:",                                           // 19
                 window, window}),
        "test.yaml", kConfigDir);
    const auto& p = config.patterns.at(0);
    CHECK(p.normalise.enabled);
    CHECK(p.normalise.learn_s == 30);
    CHECK(p.normalise.statistic == gw::config::NormaliseConfig::Statistic::kMean);
    CHECK(p.normalise.scale == gw::config::NormaliseConfig::Scale::kMad);
    const auto& rows = p.examples.at(0).baseline_rows;
    REQUIRE(rows);
    // The freeze index's lead-in (64 + 2 rows at 64 Hz) and 30 s, 3 channels.
    CHECK(rows->size() == static_cast<std::size_t>((p.examples[0].lead_in + 30 * 64) * 3));
    CHECK(p.examples.at(1).baseline_rows == rows);  // one recording: shared
    CHECK_FALSE(p.examples[0].baseline);
    CHECK(p.normalise.active_above == 0);
  }
  SECTION("learning from active samples keeps the whole recording for the examples' baselines") {
    const Config config = parse_config(
        pattern({"    normalise: {learn_s: 30, active_above: 0.05}",  // 18
                 "    examples:",                                     // 19
                 window}),
        "test.yaml", kConfigDir);
    const auto& p = config.patterns.at(0);
    CHECK(p.normalise.active_above == 0.05);
    CHECK(p.normalise.gated());
    const auto& rows = p.examples.at(0).baseline_rows;
    REQUIRE(rows);
    // S02R01.txt: every row of the recording, 3 channels.
    const auto recording = gw::sensors::read_daphnet(kDataDir + "/daphnet/S02R01.txt");
    CHECK(rows->size() == recording.samples() * 3);
    // A template exported before the pattern learned from active samples
    // (its baseline says nothing of active_above) no longer fits.
    const auto issues = issues_of(pattern(
        {"    normalise: {learn_s: 30, active_above: 0.05}",  // 18
         "    examples:",                                     // 19
         "      - {file: ../data/daphnet/S02R01.txt, format: daphnet, start: 9000,",
         "         baseline: {learn_s: 30, statistic: median, scale: none, center: [-0.5]}}"}));
    require_single_issue(issues, "patterns[0].examples[0].baseline.active_above", 21,  // its map
                         "learned from samples above 0, the pattern's normalise.active_above is 0.05");
  }
  SECTION("a baseline given in YAML") {
    const Config config = parse_config(
        pattern({"    normalise: {learn_s: 30}",  // 18
                 "    examples:",                 // 19
                 "      - {file: ../data/daphnet/S02R01.txt, format: daphnet, start: 9000,",
                 "         baseline: {learn_s: 30, statistic: median, scale: none, center: [-0.5]}}"}),
        "test.yaml", kConfigDir);
    const auto& example = config.patterns.at(0).examples.at(0);
    REQUIRE(example.baseline);
    CHECK(example.baseline->center == std::vector<float>{-0.5f});
    CHECK(example.baseline->spread == std::vector<float>{1.0f});
    CHECK_FALSE(example.baseline_rows);
  }
  SECTION("an unknown normalise key, a bad statistic, learn_s out of range") {
    auto issues = issues_of(pattern({"    normalise: {learn_s: 30, center: median}",  // 18
                                     "    examples:", window}));
    require_single_issue(issues, "patterns[0].normalise.center", 18, "unknown key");
    issues = issues_of(pattern({"    normalise: {statistic: mode}", "    examples:", window}));
    require_single_issue(issues, "patterns[0].normalise.statistic", 18,
                         "must be one of median | mean, got 'mode'");
    issues = issues_of(pattern({"    normalise: {learn_s: 0}", "    examples:", window}));
    require_single_issue(issues, "patterns[0].normalise.learn_s", 18, "must be in [1, 3600]");
    issues = issues_of(pattern({"    normalise: {scale: iqr}", "    examples:", window}));
    require_single_issue(issues, "patterns[0].normalise.scale", 18,
                         "must be one of none | mad | std");
    issues = issues_of(pattern({"    normalise: {active_above: -1}", "    examples:", window}));
    require_single_issue(issues, "patterns[0].normalise.active_above", 18, "must be >= 0");
    // A reload that changes only active_above is another view: it learns again.
    gw::config::NormaliseConfig a, b;
    b.active_above = 0.05;
    CHECK(a != b);
  }
  SECTION("normalise on the raw channels") {
    const auto issues = issues_of(with_devices({GW_PATTERN_HEAD, "    length: 64",
                                                "    normalise: {learn_s: 30}",  // 17
                                                "    examples:", window}));
    require_single_issue(issues, "patterns[0].normalise", 17, "needs transforms");
  }
  SECTION("a template without its wearer's baseline") {
    // The freeze index's lead-in (window 64 at 64 Hz: 63 rows) and 64 rows.
    TempDir dir;
    std::string csv = "ankle_fwd,ankle_vert,ankle_lat\n";
    for (int row = 0; row < 63 + 64; ++row) csv += "1,2,3\n";
    dir.write("t.csv", csv);
    const std::string item = "      - {template: " + (dir.path() / "t.csv").string() + "}";  // 20
    const auto issues = issues_of(pattern({"    normalise: {learn_s: 30}",  // 18
                                           "    examples:",                 // 19
                                           item.c_str()}));
    require_single_issue(issues, "patterns[0].examples[0].template", 20,
                         "needs its wearer's 'baseline'");
  }
  SECTION("a baseline of the wrong size, settings or values") {
    const auto one = [&](const char* baseline) {
      const std::string item = std::string("      - {file: ../data/daphnet/S02R01.txt, format: "
                                           "daphnet, start: 9000, baseline: ") +
                               baseline + "}";  // 20
      return issues_of(pattern({"    normalise: {learn_s: 30, scale: std}",  // 18
                                "    examples:",                             // 19
                                item.c_str()}));
    };
    require_single_issue(
        one("{learn_s: 30, statistic: median, scale: std, center: [0, 1], spread: [1]}"),
        "patterns[0].examples[0].baseline.center", 20, "one value per pattern dim (1 after");
    require_single_issue(one("{learn_s: 60, statistic: median, scale: std, center: [0], spread: [1]}"),
                         "patterns[0].examples[0].baseline.learn_s", 20,
                         "the pattern's normalise.learn_s is 30");
    require_single_issue(one("{learn_s: 30, statistic: mean, scale: std, center: [0], spread: [1]}"),
                         "patterns[0].examples[0].baseline.statistic", 20,
                         "the pattern's normalise.statistic is median");
    require_single_issue(one("{learn_s: 30, statistic: median, scale: std, active_above: 0.1, "
                             "center: [0], spread: [1]}"),
                         "patterns[0].examples[0].baseline.active_above", 20,
                         "learned from samples above 0.1, the pattern's normalise.active_above is 0");
    require_single_issue(one("{learn_s: 30, statistic: median, scale: std, center: [0], spread: [0]}"),
                         "patterns[0].examples[0].baseline.spread[0]", 20, "must be > 0");
    require_single_issue(one("{learn_s: 30, statistic: median, scale: std, center: [0]}"),
                         "patterns[0].examples[0].baseline.spread", 20, "missing required key");
  }
  SECTION("a baseline on a pattern that does not normalise") {
    const auto issues = issues_of(pattern(
        {"    examples:",  // 18
         "      - {file: ../data/daphnet/S02R01.txt, format: daphnet, start: 9000, baseline: {}}"}));
    require_single_issue(issues, "patterns[0].examples[0].baseline", 19, "has no 'normalise'");
  }
}
// ---------------------------------------------------------------------------
// Views that must agree (`publish`, `agree`)

namespace {

// Lines 11.. : a pattern `main` on `body` (its agree at line 17) and a view
// `lying` (its line 19 onwards), plus what the test adds.
std::string with_agreement(const char* agree_line, std::initializer_list<const char*> more) {
  std::string text = with_devices({
      "patterns:",                                        // 11
      "  - name: main",                                   // 12
      "    device: body",                                 // 13
      "    channels: [ankle_fwd, ankle_vert, ankle_lat]", // 14
      "    threshold: 8.0",                               // 15
      "    template: patterns/fog_ankle_S02R01_ep1.csv",  // 16
  });
  text += std::string(agree_line) + "\n";                 // 17
  text += yaml({"  - name: lying",                        // 18
                "    publish: false",                     // 19
                "    device: body",                       // 20
                "    channels: [ankle_fwd, ankle_vert, ankle_lat]",
                "    threshold: 8.0",
                "    template: patterns/fog_ankle_S02R01_ep1.csv"});  // 23
  for (const char* line : more) text += std::string(line) + "\n";
  return text;
}

}  // namespace

TEST_CASE("publish and agree are read, and default to publishing and agreeing with none",
          "[config][agree]") {
  const Config config = parse_config(
      with_agreement("    agree: {with: [lying], within_s: 2.5}", {}), "test.yaml", kConfigDir);
  REQUIRE(config.patterns.size() == 2);
  CHECK(config.patterns[0].publish);
  CHECK(config.patterns[0].agree.with == std::vector<std::string>{"lying"});
  CHECK(config.patterns[0].agree.within_s == 2.5);
  CHECK_FALSE(config.patterns[1].publish);
  CHECK(config.patterns[1].agree.with.empty());
}

TEST_CASE("agree: each problem is reported at its key path", "[config][agree]") {
  SECTION("a name that is no pattern") {
    require_single_issue(
        issues_of(with_agreement("    agree: {with: [lyin], within_s: 2}", {})),
        "patterns[0].agree.with[0]", 17, "no pattern 'lyin' (did you mean 'lying'?)");
  }
  SECTION("itself") {
    require_single_issue(issues_of(with_agreement("    agree: {with: [main], within_s: 2}", {})),
                         "patterns[0].agree.with[0]", 17, "cannot agree with itself");
  }
  SECTION("a name given twice") {
    require_single_issue(
        issues_of(with_agreement("    agree: {with: [lying, lying], within_s: 2}", {})),
        "patterns[0].agree.with[1]", 17, "named twice");
  }
  SECTION("within_s not above 0, or missing") {
    require_single_issue(issues_of(with_agreement("    agree: {with: [lying], within_s: 0}", {})),
                         "patterns[0].agree.within_s", 17, "must be > 0");
    require_single_issue(issues_of(with_agreement("    agree: {with: [lying]}", {})),
                         "patterns[0].agree.within_s", 17, "missing required key");
  }
  SECTION("an empty list, and an unknown key") {
    require_single_issue(issues_of(with_agreement("    agree: {with: [], within_s: 1}", {})),
                         "patterns[0].agree.with", 17, "at least one pattern name");
    require_single_issue(
        issues_of(with_agreement("    agree: {with: [lying], within_s: 1, whithin: 2}", {})),
        "patterns[0].agree.whithin", 17, "unknown key");
  }
  SECTION("publish is a boolean") {
    std::string text = with_agreement("    agree: {with: [lying], within_s: 1}", {});
    text.replace(text.find("publish: false"), 14, "publish: nope");
    require_single_issue(issues_of(text), "patterns[1].publish", 19, "");
  }
  SECTION("a view on another device") {
    std::string text = with_agreement("    agree: {with: [lying], within_s: 1}", {});
    // A second device with the same channel names, so the view's template fits it.
    text.insert(text.find("patterns:"),
                "  - {id: 2, name: wrist, kind: generic, sample_rate_hz: 64,"
                " channels: [ankle_fwd, ankle_vert, ankle_lat]}\n");
    text.replace(text.find("device: body", text.find("name: lying")), 12, "device: wrist");
    // The pattern's lines moved down by one with the inserted device.
    require_single_issue(issues_of(text), "patterns[0].agree.with[0]", 18,
                         "pattern 'lying' watches device 'wrist', this one 'body'");
  }
  SECTION("a cycle through a view") {
    const auto issues = issues_of(
        with_agreement("    agree: {with: [lying], within_s: 1}",
                       {"    agree:",                 // 24
                        "      within_s: 1",          // 25
                        "      with: [main]"}));      // 26
    require_single_issue(issues, "patterns[1].agree.with[0]", 26,
                         "agreement cycle main -> lying -> main");
  }
}

TEST_CASE("agree problems in a pack name the pack's file and the include", "[config][agree]") {
  const TempDir dir;
  std::string pack = pack_with_pattern("in_pack");
  pack += "    agree: {with: [absent_view], within_s: 1}\n";  // 10
  write_pack_dir(dir, "packs/p.yaml", pack);
  dir.write("main.yaml", with_devices({"patterns:", "  - include: packs/p.yaml"}));  // 12
  const std::string main_path = (dir.path() / "main.yaml").string();
  const std::vector<ConfigIssue> issues = load_issues(main_path);
  INFO(describe(issues));
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].file == normal(dir.path() / "packs/p.yaml"));
  CHECK(issues[0].line == 10);
  CHECK(issues[0].path == "patterns[0].agree.with[0]");
  CHECK_THAT(issues[0].message, Catch::Contains("no pattern 'absent_view'"));
  CHECK_THAT(issues[0].message,
             Catch::Contains("included by patterns[0].include at " + main_path + ":12"));
}

TEST_CASE("bridges.mqtt: defaults off, values read, errors with their key paths", "[config]") {
  const auto defaults = parse_config(yaml({"search:", "  threads: 1"}), "ok.yaml", "/base");
  CHECK_FALSE(defaults.bridges.mqtt.enabled);
  CHECK(defaults.bridges.mqtt.qos == 1);
  TempDir dir;
  dir.write("mqtt-password", "s3cret\n");
  dir.write("ca.pem", "not checked here\n");
  const auto ok = parse_config(yaml({"bridges:", "  mqtt:", "    enabled: true",
                                     "    host: broker.ward", "    port: 8883",
                                     "    topic_prefix: site/ward3", "    username: gw",
                                     "    password_file: mqtt-password", "    tls:",
                                     "      ca_file: ca.pem", "    qos: 2"}),
                               "ok.yaml", dir.path().string());
  CHECK(ok.bridges.mqtt.enabled);
  CHECK(ok.bridges.mqtt.host == "broker.ward");
  CHECK(ok.bridges.mqtt.port == 8883);
  CHECK(ok.bridges.mqtt.topic_prefix == "site/ward3");
  CHECK(ok.bridges.mqtt.password_file == (dir.path() / "mqtt-password").string());
  CHECK(ok.bridges.mqtt.tls_ca_file == (dir.path() / "ca.pem").string());
  CHECK(ok.bridges.mqtt.qos == 2);
  require_single_issue(issues_of(yaml({"bridges:", "  mqtt:", "    qos: 3"})), "bridges.mqtt.qos",
                       3, "3");
  require_single_issue(issues_of(yaml({"bridges:", "  mqtt:", "    topic_prefix: \"a/+\""})),
                       "bridges.mqtt.topic_prefix", 3, "'+'");
  require_single_issue(issues_of(yaml({"bridges:", "  mqtt:", "    password_file: /nonexistent/pw",
                                       "    username: gw"})),
                       "bridges.mqtt.password_file", 3, "no such file");
  require_single_issue(issues_of(yaml({"bridges:", "  mqtt:", "    tlss: {}"})), "bridges.mqtt.tlss",
                       3, "tls");
}

TEST_CASE("bridges.webhook: defaults off, values read, errors with their key paths", "[config]") {
  const auto defaults = parse_config(yaml({"search:", "  threads: 1"}), "ok.yaml", "/base");
  CHECK_FALSE(defaults.bridges.webhook.enabled);
  CHECK(defaults.bridges.webhook.topics == std::vector<std::string>{"alert."});
  const auto ok = parse_config(yaml({"bridges:", "  webhook:", "    enabled: true",
                                     "    url: http://10.0.0.5:9000/in",
                                     "    topics: [alert.critical., event.]",
                                     "    max_attempts: 3"}),
                               "ok.yaml", "/base");
  CHECK(ok.bridges.webhook.url == "http://10.0.0.5:9000/in");
  CHECK(ok.bridges.webhook.topics == std::vector<std::string>{"alert.critical.", "event."});
  CHECK(ok.bridges.webhook.max_attempts == 3);
  require_single_issue(issues_of(yaml({"bridges:", "  webhook:", "    url: https://x/"})),
                       "bridges.webhook.url", 3, "https");
  require_single_issue(issues_of(yaml({"bridges:", "  webhook:", "    topics: [stats.]"})),
                       "bridges.webhook.topics", 3, "stats.");
  require_single_issue(
      issues_of(yaml({"bridges:", "  webhook:", "    retry_initial_s: 10", "    retry_max_s: 5"})),
      "bridges.webhook.retry_max_s", 4, "retry_initial_s");
}

TEST_CASE("alerts.* and site.time_zone: defaults, values given, mistakes with their key path",
          "[config]") {
  const Config defaults = gw::config::parse_config("{}", "t.yaml", ".");
  CHECK(defaults.alerts.escalation_s == 120);
  CHECK(defaults.alerts.max_escalations == 3);
  CHECK(defaults.site.time_zone.empty());
  const Config given = gw::config::parse_config(
      "alerts: {escalation_s: 0, max_escalations: 5}\nsite: {time_zone: Europe/Vienna}\n",
      "t.yaml", ".");
  CHECK(given.alerts.escalation_s == 0);
  CHECK(given.alerts.max_escalations == 5);
  CHECK(given.site.time_zone == "Europe/Vienna");
  require_single_issue(issues_of(yaml({"alerts:", "  escalation_s: -1"})), "alerts.escalation_s",
                       2, "0");
  require_single_issue(issues_of(yaml({"alerts:", "  max_escalations: 0"})),
                       "alerts.max_escalations", 2, "1");
  require_single_issue(issues_of(yaml({"site:", "  time_zone: Europe/Atlantis"})),
                       "site.time_zone", 2, "Europe/Atlantis");
  require_single_issue(issues_of(yaml({"site:", "  zone: UTC"})), "site.zone", 2, "unknown");
}

TEST_CASE("console: off without the section, pages, TLS pair and control checked with key paths",
          "[config]") {
  const auto defaults = parse_config(yaml({"search:", "  threads: 1"}), "ok.yaml", "/base");
  CHECK(defaults.console.port == 0);
  const std::string pages = std::string(kConfigDir) + "/../console/web";
  TempDir dir;
  dir.write("c.crt", "not checked here\n");
  dir.write("c.key", "not checked here\n");
  const auto ok = parse_config(yaml({"console:", "  port: 9999", ("  static_dir: " + pages).c_str(),
                                     "  tls:", "    certificate_file: c.crt",
                                     "    private_key_file: c.key", "  session_idle_s: 600"}),
                               "ok.yaml", dir.path().string());
  CHECK(ok.console.port == 9999);
  CHECK(ok.console.static_dir == std::filesystem::path(pages).lexically_normal().string());
  CHECK(ok.console.tls_certificate_file == (dir.path() / "c.crt").string());
  CHECK(ok.console.session_idle_s == 600);
  // The shipped config turns it on with its pages beside the config.
  const Config shipped = load_config(std::string(kConfigDir) + "/gaitwatch.yaml");
  CHECK(shipped.console.port == 9720);
  CHECK(std::filesystem::is_regular_file(shipped.console.static_dir + "/index.html"));

  require_single_issue(issues_of(yaml({"console:", "  port: 9999", "  static_dir: /nonexistent"})),
                       "console.static_dir", 3, "no index.html");
  require_single_issue(issues_of(yaml({"console:", "  port: 9999"})), "console.static_dir", 2,
                       "pages");
  require_single_issue(
      issues_of(yaml({"control:", "  enabled: false", "console:", "  port: 9999",
                      ("  static_dir: " + pages).c_str()})),
      "console.port", 4, "control");
  require_single_issue(issues_of(yaml({"console:", "  tls:", "    certificate_file: /etc/hostname"})),
                       "console.tls.certificate_file", 3, "both");
  require_single_issue(issues_of(yaml({"console:", "  port: 70000"})), "console.port", 2, "70000");
}

TEST_CASE("nats: off without the section, keys read, bad values by key path", "[config]") {
  const auto defaults = parse_config(yaml({"search:", "  threads: 1"}), "ok.yaml", "/base");
  CHECK_FALSE(defaults.nats.enabled);
  const auto ok = parse_config(yaml({"nats:", "  url: nats://10.0.0.5:4222", "  frames_stream: WARD_A",
                                     "  frames_subject: ward-a.frames", "  partitions: 256", "  max_pending: 1000",
                                     "  frames_max_age_s: 60", "  replicas: 3", "  frames_per_message: 16"}),
                               "ok.yaml", "/base");
  CHECK(ok.nats.enabled);
  CHECK(ok.nats.url == "nats://10.0.0.5:4222");
  CHECK(ok.nats.frames_stream == "WARD_A");
  CHECK(ok.nats.frames_subject == "ward-a.frames");
  CHECK(ok.nats.partitions == 256);
  CHECK(ok.nats.max_pending == 1000);
  CHECK(ok.nats.frames_max_age_s == 60);
  CHECK(ok.nats.replicas == 3);
  CHECK(ok.nats.frames_per_message == 16);
  CHECK(ok.nats != defaults.nats);
  require_single_issue(issues_of(yaml({"nats:", "  url: http://x:4222"})), "nats.url", 2, "nats://");
  require_single_issue(issues_of(yaml({"nats:", "  frames_stream: a.b"})), "nats.frames_stream", 2, "stream name");
  require_single_issue(issues_of(yaml({"nats:", "  frames_subject: gw.*"})), "nats.frames_subject", 2,
                       "plain tokens");
  require_single_issue(issues_of(yaml({"nats:", "  frames_subject: gw..frames"})), "nats.frames_subject", 2,
                       "plain tokens");
  require_single_issue(issues_of(yaml({"nats:", "  partitions: 0"})), "nats.partitions", 2, "must be in 1..");
  require_single_issue(issues_of(yaml({"nats:", "  replicas: 7"})), "nats.replicas", 2, "must be in 1..5");
  require_single_issue(issues_of(yaml({"nats:", "  frames_per_message: 0"})), "nats.frames_per_message", 2,
                       "must be in 1..4096");
  require_single_issue(issues_of(yaml({"nats:", "  frames_per_message: 4097"})), "nats.frames_per_message", 2,
                       "must be in 1..4096");
  require_single_issue(issues_of(yaml({"nats:", "  subjects: x"})), "nats.subjects", 2, "unknown key");
}

TEST_CASE("nats workers: ingest.nats needs the section, worker keys read, retain_s and the lease fit in the "
          "frames' max age",
          "[config]") {
  const auto defaults = parse_config(yaml({"search:", "  threads: 1"}), "ok.yaml", "/base");
  CHECK_FALSE(defaults.ingest.nats);
  CHECK(defaults.nats.alerts_stream == "GW_ALERTS");
  const auto worker = parse_config(yaml({"ingest:", "  nats: true", "nats:", "  worker_id: ward-a_1",
                                         "  leases_bucket: WARD_LEASES", "  lease_ttl_s: 3", "  retain_s: 20",
                                         "  alerts_stream: ''", "  alerts_subject: ward.alerts",
                                         "  alert_dedup_window_s: 600"}),
                                   "ok.yaml", "/base");
  CHECK(worker.ingest.nats);
  CHECK(worker.nats.worker_id == "ward-a_1");
  CHECK(worker.nats.leases_bucket == "WARD_LEASES");
  CHECK(worker.nats.lease_ttl_s == 3);
  CHECK(worker.nats.retain_s == 20);
  CHECK(worker.nats.alerts_stream.empty());
  CHECK(worker.nats.alerts_subject == "ward.alerts");
  CHECK(worker.nats.alert_dedup_window_s == 600);
  require_single_issue(issues_of(yaml({"ingest:", "  nats: true"})), "ingest.nats", 2, "needs the nats: section");
  require_single_issue(issues_of(yaml({"nats:", "  worker_id: a.b"})), "nats.worker_id", 2, "letters, digits");
  require_single_issue(issues_of(yaml({"nats:", "  leases_bucket: ''"})), "nats.leases_bucket", 2, "must not be empty");
  require_single_issue(issues_of(yaml({"nats:", "  lease_ttl_s: 0.1"})), "nats.lease_ttl_s", 2, "must be");
  // 25 + 2 * 5 >= 30: a takeover would find its frames expired.
  require_single_issue(issues_of(yaml({"nats:", "  retain_s: 25"})), "nats.retain_s", 2, "frames_max_age_s (30)");
  require_single_issue(issues_of(yaml({"nats:", "  frames_max_age_s: 20"})), "nats.frames_max_age_s", 2,
                       "must stay below frames_max_age_s (20)");
  require_single_issue(issues_of(yaml({"nats:", "  alerts_stream: a b"})), "nats.alerts_stream", 2, "stream name");
}

// A gait pack's example file (gait/examples.h): one normal and one
// abnormal stride.
std::string two_class_stride_examples() {
  std::string text = "label,subject";
  for (int i = 0; i < 128; ++i) text += ",c" + std::to_string(i);
  text += "\nnormal,A";
  for (int i = 0; i < 128; ++i) text += ",0.5";
  text += "\nabnormal,B";
  for (int i = 0; i < 128; ++i) text += ",0.25";
  return text + "\n";
}

// The issues of a config in `dir` (main.yaml) whose gait section names `pack`.
std::vector<ConfigIssue> gait_pack_issues(const TempDir& dir, const std::string& pack) {
  try {
    parse_config(yaml({"gait:", ("  pack: " + pack).c_str()}), "main.yaml", dir.path().string());
  } catch (const ConfigError& error) {
    return error.issues();
  }
  return {};
}

TEST_CASE("gait: off without the section, the pack's rule and examples read, its issues with its file",
          "[config][gait]") {
  const auto defaults = parse_config(yaml({"search:", "  threads: 1"}), "ok.yaml", "/base");
  CHECK_FALSE(defaults.gait.enabled);
  CHECK(defaults.gait.examples_file.empty());

  // The shipped config: on, with the shipped pack and its examples.
  const Config shipped = load_config(std::string(kConfigDir) + "/gaitwatch.yaml");
  CHECK(shipped.gait.enabled);
  CHECK(shipped.gait.name == "abnormal_gait");
  CHECK(shipped.gait.severity == "info");
  CHECK(shipped.gait.k == 15);
  CHECK(shipped.gait.bout_strides == 20);
  CHECK(fs::is_regular_file(shipped.gait.examples_file));
  CHECK(shipped.gait.examples_digest != 0);
  CHECK(shipped.device_by_name("gaitpdb_insoles") != nullptr);

  TempDir dir;
  const std::string good = two_class_stride_examples();
  dir.write("packs/strides.csv", good);
  dir.write("packs/gait.yaml", yaml({"description: test",                  // 1
                                     "abnormal_gait:",                     // 2
                                     "  severity: warning",                // 3
                                     "  examples: strides.csv",            // 4
                                     "  k: 3",                             // 5
                                     "  bout_strides: 8"}));               // 6
  const auto ok = parse_config(yaml({"gait:", "  pack: packs/gait.yaml", "  minute_s: 30"}), "ok.yaml",
                               dir.path().string());
  CHECK(ok.gait.enabled);
  CHECK(ok.gait.minute_s == 30);
  CHECK(ok.gait.severity == "warning");
  CHECK(ok.gait.k == 3);
  CHECK(ok.gait.bout_strides == 8);
  CHECK(ok.gait.examples_file == normal(dir.path() / "packs/strides.csv"));

  // The pack's own issues carry its file and the include's key path.
  dir.write("packs/bad.yaml", yaml({"abnormal_gait:", "  examples: missing.csv", "  k: 0"}));
  const std::vector<ConfigIssue> issues = gait_pack_issues(dir, "packs/bad.yaml");
  INFO(describe(issues));
  REQUIRE(issues.size() == 2);
  for (const ConfigIssue& issue : issues) {
    CHECK(issue.file == "packs/bad.yaml");
    CHECK_THAT(issue.message, Catch::Contains("gait pack named by gait.pack at main.yaml:2"));
  }
  CHECK(issues[0].path == "abnormal_gait.examples");
  CHECK_THAT(issues[0].message, Catch::Contains("cannot read stride examples"));
  CHECK(issues[1].path == "abnormal_gait.k");

  // Examples of one class only cannot decide.
  dir.write("packs/one.csv", good.substr(0, good.find("\nabnormal")) + "\n");
  dir.write("packs/one.yaml", yaml({"abnormal_gait:", "  examples: one.csv"}));
  try {
    parse_config(yaml({"gait:", "  pack: packs/one.yaml"}), "main.yaml", dir.path().string());
    FAIL("accepted a pack with normal examples only");
  } catch (const ConfigError& error) {
    REQUIRE(error.issues().size() == 1);
    CHECK_THAT(error.issues()[0].message, Catch::Contains("both normal and abnormal"));
  }

  require_single_issue(issues_of(yaml({"gait:", "  pack: nowhere.yaml"})), "gait.pack", 2, "cannot read");
  require_single_issue(issues_of(yaml({"gait:", "  minute_s: 0"})), "gait.minute_s", 2, "must be in [1");
  require_single_issue(issues_of(yaml({"gait:", "  pace: 1"})), "gait.pace", 2, "unknown key");
}

TEST_CASE("gait: the pack's gait_change rule read, off without it, its issues by key path", "[config][gait]") {
  const Config shipped = load_config(std::string(kConfigDir) + "/gaitwatch.yaml");
  CHECK(shipped.gait.change);
  CHECK(shipped.gait.change_name == "gait_change");
  CHECK(shipped.gait.change_k < shipped.gait.change_strides);

  TempDir dir;
  const std::string good = two_class_stride_examples();
  dir.write("packs/strides.csv", good);
  dir.write("packs/without.yaml", yaml({"abnormal_gait:", "  examples: strides.csv"}));
  const auto without = parse_config(yaml({"gait:", "  pack: packs/without.yaml"}), "ok.yaml", dir.path().string());
  CHECK_FALSE(without.gait.change);

  dir.write("packs/with.yaml", yaml({"abnormal_gait:", "  examples: strides.csv", "gait_change:",
                                     "  severity: warning", "  learn_walking_s: 90", "  strides: 16", "  k: 4",
                                     "  threshold: 2.5"}));
  const auto with = parse_config(yaml({"gait:", "  pack: packs/with.yaml"}), "ok.yaml", dir.path().string());
  CHECK(with.gait.change);
  CHECK(with.gait.change_name == "gait_change");
  CHECK(with.gait.change_severity == "warning");
  CHECK(with.gait.change_learn_walking_s == 90);
  CHECK(with.gait.change_strides == 16);
  CHECK(with.gait.change_k == 4);
  CHECK(with.gait.change_threshold == 2.5);
  CHECK(with.gait != without.gait);

  dir.write("packs/bad.yaml", yaml({"abnormal_gait:",          // 1
                                    "  examples: strides.csv",  // 2
                                    "gait_change:",             // 3
                                    "  name: abnormal_gait",    // 4
                                    "  strides: 4",             // 5
                                    "  k: 4",                   // 6
                                    "  threshold: 0",           // 7
                                    "  window: 3"}));           // 8
  const std::vector<ConfigIssue> issues = gait_pack_issues(dir, "packs/bad.yaml");
  INFO(describe(issues));
  std::vector<std::string> paths;
  for (const ConfigIssue& issue : issues) {
    CHECK(issue.file == "packs/bad.yaml");
    paths.push_back(issue.path);
  }
  std::sort(paths.begin(), paths.end());
  CHECK(paths == std::vector<std::string>{"gait_change.k", "gait_change.name", "gait_change.threshold",
                                          "gait_change.window"});
}

TEST_CASE("devices[].hotspots: defaults by the device's insole, keys read, bad values by key path",
          "[config][gait]") {
  // The shipped config: the 99-cell insoles and the gaitpdb pair watched at
  // the tracker's defaults for their insole; the other devices carry no foot.
  const Config shipped = load_config(std::string(kConfigDir) + "/gaitwatch.yaml");
  const auto& pair = shipped.device_by_name("gaitpdb_insoles")->hotspots;
  const gw::gait::HotspotParams force = gw::gait::hotspot_defaults_force_insole();
  CHECK(pair.enabled);
  CHECK(pair.threshold == force.threshold);
  CHECK(pair.min_duration_s == force.min_duration_s);
  CHECK(pair.cooldown_s == force.cooldown_s);
  CHECK(pair.peak_window_s == force.peak_window_s);
  CHECK(pair.integral_window_s == force.integral_window_s);
  CHECK(pair.min_foot_load == force.min_foot_load);
  CHECK(pair.severity == gw::config::AlertSeverity::kWarning);
  const auto& grid = shipped.device_by_name("insole_left")->hotspots;
  CHECK(grid.enabled);
  CHECK(grid.min_foot_load == gw::gait::hotspot_defaults_pressure_insole().min_foot_load);
  CHECK(grid.min_foot_load != force.min_foot_load);
  CHECK_FALSE(shipped.device_by_name("daphnet_body")->hotspots.enabled);

  const std::vector<const char*> insole = {
      "devices:",                        // 1
      "  - id: 7",                       // 2
      "    name: left",                  // 3
      "    kind: pressure_insole_left",  // 4
      "    hotspots:",                   // 5
  };
  const auto config_with = [&](std::initializer_list<const char*> keys) {
    std::string text;
    for (const char* line : insole) text += std::string(line) + "\n";
    for (const char* line : keys) text += std::string(line) + "\n";
    return text;
  };
  const Config set = parse_config(config_with({"      threshold: 350",           // 6
                                               "      min_duration_s: 20",       // 7
                                               "      cooldown_s: 0",            // 8
                                               "      peak_window_s: 3",         // 9
                                               "      integral_window_s: 5",     // 10
                                               "      min_foot_load: 1000",      // 11
                                               "      severity: critical"}),     // 12
                                  "ok.yaml", kConfigDir);
  const auto& h = set.devices[0].hotspots;
  CHECK(h.enabled);
  CHECK(h.threshold == 350);
  CHECK(h.min_duration_s == 20);
  CHECK(h.cooldown_s == 0);
  CHECK(h.peak_window_s == 3);
  CHECK(h.integral_window_s == 5);
  CHECK(h.min_foot_load == 1000);
  CHECK(h.severity == gw::config::AlertSeverity::kCritical);
  CHECK_FALSE(parse_config(config_with({"      enabled: false"}), "ok.yaml", kConfigDir).devices[0].hotspots.enabled);

  require_single_issue(issues_of(config_with({"      threshold: 0"})), "devices[0].hotspots.threshold", 6,
                       "must be > 0");
  require_single_issue(issues_of(config_with({"      min_duration_s: -1"})), "devices[0].hotspots.min_duration_s",
                       6, "must be > 0");
  require_single_issue(issues_of(config_with({"      cooldown_s: -1"})), "devices[0].hotspots.cooldown_s", 6,
                       "must be >= 0");
  require_single_issue(issues_of(config_with({"      peak_window_s: 0"})), "devices[0].hotspots.peak_window_s", 6,
                       "must be > 0");
  require_single_issue(issues_of(config_with({"      min_foot_load: -5"})), "devices[0].hotspots.min_foot_load",
                       6, "must be >= 0");
  require_single_issue(issues_of(config_with({"      severity: loud"})), "devices[0].hotspots.severity", 6,
                       "info | warning | critical");
  require_single_issue(issues_of(config_with({"      threshold_n: 400"})), "devices[0].hotspots.threshold_n", 6,
                       "");

  // A device that carries no foot takes no hotspots.
  require_single_issue(issues_of(yaml({"devices:",                     // 1
                                       "  - id: 4",                    // 2
                                       "    name: wrist",              // 3
                                       "    kind: accelerometer_3",    // 4
                                       "    hotspots:",                // 5
                                       "      threshold: 100"})),      // 6
                       "devices[0].hotspots", 6, "carries no foot");
}
