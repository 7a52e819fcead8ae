// Parsing and validation of the YAML configuration (config/gaitwatch.yaml
// documents every key).
//
// The validator never stops at the first problem: every section is read with
// its own defaults, each problem becomes a ConfigIssue (key path + line), and
// only at the end is one ConfigError thrown with all of them, sorted by line.
// Later checks that depend on an earlier value (a pattern's device, its
// channels) are skipped when that value is already wrong, so one mistake is
// reported once rather than as a cascade.

#include "config/config.h"

#include <yaml-cpp/yaml.h>

#include <boost/asio/ip/address.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "cluster/partition.h"
#include "common/http_url.h"
#include "common/spelling.h"
#include "common/time_text.h"
#include "config/patterns_reader.h"
#include "config/yaml_reader.h"
#include "gait/cycles.h"
#include "gait/examples.h"
#include "gait/hotspots.h"
#include "gait/monitor.h"
#include "sensors/recording.h"

namespace gw::config {

using namespace detail;

std::string ConfigIssue::to_string(const std::string& config_file) const {
  std::string out = file.empty() ? config_file : file;
  if (line > 0) out += ":" + std::to_string(line);
  out += ": ";
  if (!path.empty()) out += path + ": ";
  out += message;
  return out;
}

namespace {

std::string join_issues(const std::string& file, const std::vector<ConfigIssue>& issues) {
  std::string out;
  for (const ConfigIssue& issue : issues) {
    if (!out.empty()) out += '\n';
    out += issue.to_string(file);
  }
  return out;
}

}  // namespace

ConfigError::ConfigError(std::string file, std::vector<ConfigIssue> issues)
    : gw::Error(join_issues(file, issues)), issues_(std::move(issues)) {}

const DeviceProfile* Config::device_by_id(std::uint16_t id) const {
  for (const DeviceProfile& device : devices) {
    if (device.id == id) return &device;
  }
  return nullptr;
}

const DeviceProfile* Config::device_by_name(const std::string& name) const {
  for (const DeviceProfile& device : devices) {
    if (device.name == name) return &device;
  }
  return nullptr;
}

bool AddressRange::contains(const std::array<std::uint8_t, 16>& address) const {
  int bits = prefix_bits;
  for (std::size_t i = 0; i < 16 && bits > 0; ++i, bits -= 8) {
    const std::uint8_t mask = bits >= 8 ? 0xff : static_cast<std::uint8_t>(0xff << (8 - bits));
    if ((address[i] & mask) != (bytes[i] & mask)) return false;
  }
  return true;
}

std::optional<AddressRange> AddressRange::parse(const std::string& text, std::string& error) {
  const std::size_t slash = text.find('/');
  const std::string host = text.substr(0, slash);
  boost::system::error_code ec;
  const boost::asio::ip::address address = boost::asio::ip::make_address(host, ec);
  if (ec) {
    error = "'" + host + "' is not an IPv4 or IPv6 address";
    return std::nullopt;
  }
  const bool v4 = address.is_v4();
  const int family_bits = v4 ? 32 : 128;
  int bits = family_bits;
  if (slash != std::string::npos) {
    const std::string digits = text.substr(slash + 1);
    char* end = nullptr;
    const long value = std::strtol(digits.c_str(), &end, 10);
    if (digits.empty() || *end != '\0' || value < 0 || value > family_bits) {
      error = "prefix length '" + digits + "' must be 0.." + std::to_string(family_bits);
      return std::nullopt;
    }
    bits = static_cast<int>(value);
  }
  AddressRange range;
  range.bytes = v4 ? boost::asio::ip::make_address_v6(boost::asio::ip::v4_mapped, address.to_v4())
                         .to_bytes()
                   : address.to_v6().to_bytes();
  range.prefix_bits = v4 ? 96 + bits : bits;
  return range;
}

int Config::zone_of(const std::array<std::uint8_t, 16>& address) const {
  for (const ZoneConfig& zone : zones)
    for (const AddressRange& range : zone.ranges)
      if (range.contains(address)) return zone.id;
  return 0;
}

std::string Config::zone_name(int id) const {
  if (id == 0) return kNoZoneName;
  if (id < 0 || id > static_cast<int>(zones.size())) return "";
  return zones[static_cast<std::size_t>(id - 1)].name;
}

std::optional<int> Config::zone_id(const std::string& name_or_id) const {
  if (name_or_id == kNoZoneName) return 0;
  for (const ZoneConfig& zone : zones)
    if (zone.name == name_or_id) return zone.id;
  if (!name_or_id.empty() &&
      std::all_of(name_or_id.begin(), name_or_id.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
      name_or_id.size() <= 2) {
    const int id = std::stoi(name_or_id);
    if (id <= static_cast<int>(zones.size())) return id;
  }
  return std::nullopt;
}

int TransformStep::lowpass_taps(double rate_hz) const {
  const int half = std::max(1, static_cast<int>(std::lround(rate_hz / cutoff_hz)));
  return 2 * half + 1;
}

int TransformStep::window_samples(double rate_hz) const {
  return std::max(2, static_cast<int>(std::lround(window_s * rate_hz)));
}

int TransformStep::lag_samples(double rate_hz) const {
  return std::max(1, static_cast<int>(std::lround(lag_s * rate_hz)));
}

int TransformStep::history_samples(double rate_hz) const {
  switch (kind) {
    case Kind::kRaw:
    case Kind::kMagnitude:
      return 0;
    case Kind::kDerivative:
      return 1;
    case Kind::kLowpass:
      return lowpass_taps(rate_hz) - 1;
    case Kind::kFreezeIndex:
      return window_samples(rate_hz) - 1;
    case Kind::kOrientationChange:
      return lag_samples(rate_hz) + window_samples(rate_hz) - 1;
  }
  return 0;
}

const char* TransformStep::name(Kind kind) {
  switch (kind) {
    case Kind::kRaw:
      return "raw";
    case Kind::kMagnitude:
      return "magnitude";
    case Kind::kLowpass:
      return "lowpass";
    case Kind::kDerivative:
      return "derivative";
    case Kind::kFreezeIndex:
      return "freeze_index";
    case Kind::kOrientationChange:
      return "orientation_change";
  }
  return "?";
}

int transform_history(const std::vector<TransformStep>& steps, double rate_hz) {
  int history = 0;
  for (const TransformStep& step : steps) history += step.history_samples(rate_hz);
  return history;
}

bool uses_raw_channels(const std::vector<TransformStep>& steps) {
  return std::all_of(steps.begin(), steps.end(),
                     [](const TransformStep& s) { return s.kind == TransformStep::Kind::kRaw; });
}

std::vector<DerivedChannel> derived_channels(const DeviceProfile& device,
                                             const std::vector<int>& channels,
                                             const std::vector<TransformStep>& steps) {
  auto group_index = [&](int channel) {
    for (std::size_t g = 0; g < device.groups.size(); ++g)
      if (channel >= device.groups[g].first && channel <= device.groups[g].last)
        return static_cast<int>(g);
    return 0;
  };
  std::vector<DerivedChannel> out;
  const bool combined = !steps.empty() && steps[0].combines_group();
  if (!combined) {
    for (const int channel : channels)
      out.push_back(
          {device.channels[static_cast<std::size_t>(channel)], {channel}, group_index(channel)});
    return out;
  }
  std::vector<int> groups_seen;
  for (const int channel : channels) {
    const int g = group_index(channel);
    const auto it = std::find(groups_seen.begin(), groups_seen.end(), g);
    if (it != groups_seen.end()) {
      out[static_cast<std::size_t>(it - groups_seen.begin())].inputs.push_back(channel);
      continue;
    }
    groups_seen.push_back(g);
    const std::string name =
        device.groups.empty() ? "all" : device.groups[static_cast<std::size_t>(g)].name;
    out.push_back({steps[0].kind == TransformStep::Kind::kMagnitude ? "|" + name + "|"
                                                                    : "turn(" + name + ")",
                   {channel},
                   0});
  }
  return out;
}

std::string PatternExample::describe() const {
  if (source)
    return source->file + ":" + std::to_string(source->start) + ":" + std::to_string(source->end);
  if (template_file.empty() && wearer) return "a marked alert window of wearer " + std::to_string(*wearer);
  return template_file;
}

int NormaliseConfig::learn_samples(double rate_hz) const {
  return std::max(1, static_cast<int>(std::lround(learn_s * rate_hz)));
}

const char* NormaliseConfig::name(Statistic statistic) {
  return statistic == Statistic::kMean ? "mean" : "median";
}

const char* NormaliseConfig::name(Scale scale) {
  switch (scale) {
    case Scale::kMad:
      return "mad";
    case Scale::kStd:
      return "std";
    case Scale::kNone:
      break;
  }
  return "none";
}

bool NormaliseConfig::operator==(const NormaliseConfig& other) const {
  return enabled == other.enabled && learn_s == other.learn_s && statistic == other.statistic &&
         scale == other.scale && active_above == other.active_above;
}

bool AllowedDevice::operator==(const AllowedDevice& other) const {
  return wearer == other.wearer && device == other.device && sources == other.sources &&
         mac_key == other.mac_key;
}

bool ChannelGroup::operator==(const ChannelGroup& other) const {
  return name == other.name && first == other.first && last == other.last;
}

bool StatusChannels::operator==(const StatusChannels& other) const {
  return accel == other.accel && vertical_axis == other.vertical_axis && gravity == other.gravity &&
         left_load == other.left_load && right_load == other.right_load;
}

bool ZoneConfig::operator==(const ZoneConfig& other) const {
  return name == other.name && id == other.id && sources == other.sources;
}

bool MqttBridgeConfig::operator==(const MqttBridgeConfig& other) const {
  return std::tie(enabled, host, port, client_id, topic_prefix, username, password_file,
                  tls_ca_file, tls_cert_file, tls_key_file, qos, keepalive_s, max_queued) ==
         std::tie(other.enabled, other.host, other.port, other.client_id, other.topic_prefix,
                  other.username, other.password_file, other.tls_ca_file, other.tls_cert_file,
                  other.tls_key_file, other.qos, other.keepalive_s, other.max_queued);
}

bool WebhookBridgeConfig::operator==(const WebhookBridgeConfig& other) const {
  return std::tie(enabled, url, topics, bearer_token_file, timeout_s, retry_initial_s, retry_max_s,
                  max_attempts, max_queued) ==
         std::tie(other.enabled, other.url, other.topics, other.bearer_token_file, other.timeout_s,
                  other.retry_initial_s, other.retry_max_s, other.max_attempts, other.max_queued);
}

bool PatternConfig::has_negatives() const {
  return std::any_of(examples.begin(), examples.end(),
                     [](const PatternExample& e) { return e.negative; });
}

namespace {


// ---------------------------------------------------------------------------
// Sections

void read_daemon(const MapReader& root, DaemonConfig& daemon) {
  const MapReader map(root.value("daemon"), "daemon", {"log_level", "watchdog_s", "stop_timeout_s"},
                      root.issues());
  read_choice(map, "log_level", {"trace", "debug", "info", "warn", "error"}, daemon.log_level);
  read_number(map, "watchdog_s", at_least(0), daemon.watchdog_s);
  read_number(map, "stop_timeout_s", between(0.1, 3600), daemon.stop_timeout_s);
}

void read_listen_keys(const MapReader& map, ListenConfig& listen) {
  read_string(map, "bind", listen.bind);
  read_int(map, "port", 0, 65535, listen.port);
}

void read_listen(const MapReader& parent, const std::string& key, ListenConfig& listen) {
  read_listen_keys(MapReader(parent.value(key), parent.key_path(key), {"bind", "port"},
                             parent.issues()),
                   listen);
}

void read_tcp_listen(const MapReader& parent, const std::string& key, TcpListenConfig& listen) {
  const MapReader map(parent.value(key), parent.key_path(key),
                      {"bind", "port", "max_connections", "idle_timeout_s"}, parent.issues());
  read_listen_keys(map, listen);
  read_int(map, "max_connections", 1, 1 << 20, listen.max_connections);
  read_number(map, "idle_timeout_s", at_least(0), listen.idle_timeout_s);
}

// A non-empty list of addresses or networks (AddressRange) under `key`: each
// kept as written and parsed; a bad one is an issue at its line. False when
// the key is absent (or not a list).
bool read_address_list(const MapReader& map, const std::string& key,
                       std::vector<std::string>& texts, std::vector<AddressRange>& ranges) {
  std::vector<LocatedString> sources;
  if (!read_string_list(map, key, sources)) return false;
  if (sources.empty()) map.add_issue(key, "must list at least one address or network");
  for (std::size_t k = 0; k < sources.size(); ++k) {
    std::string error;
    const std::optional<AddressRange> range = AddressRange::parse(sources[k].value, error);
    if (!range) {
      map.issues().add(index_path(map.key_path(key), k), sources[k].line, error);
      continue;
    }
    texts.push_back(sources[k].value);
    ranges.push_back(*range);
  }
  return true;
}

// ingest.allowed_devices: the key files must exist and be private (their
// contents are read when the ingest starts).
void read_allowed_devices(const MapReader& map, const std::string& base_dir,
                          IngestConfig& ingest) {
  ingest.restrict_devices = map.has("allowed_devices");
  std::map<std::pair<std::uint32_t, int>, std::string> path_by_key;
  for_each_item(map, "allowed_devices", [&](const YAML::Node& node, const std::string& path,
                                            std::size_t) {
    const MapReader item(node, path, {"wearer", "device", "sources", "mac_key"}, map.issues());
    if (!item.valid()) return;
    AllowedDevice allowed;
    if (item.require("wearer"))
      read_int(item, "wearer", 0, std::numeric_limits<std::uint32_t>::max(), allowed.wearer);
    std::uint16_t device = 0;
    if (read_int(item, "device", 0, 65535, device)) allowed.device = device;
    read_address_list(item, "sources", allowed.sources, allowed.ranges);  // absent = any
    if (read_string(item, "mac_key", allowed.mac_key)) {
      allowed.mac_key = resolve_path(base_dir, allowed.mac_key);
      std::error_code ec;
      const auto status = std::filesystem::status(allowed.mac_key, ec);
      if (ec || !std::filesystem::is_regular_file(status))
        item.add_issue("mac_key", "no such file: " + allowed.mac_key);
      else if ((status.permissions() & (std::filesystem::perms::group_all |
                                        std::filesystem::perms::others_all)) !=
               std::filesystem::perms::none)
        item.add_issue("mac_key", allowed.mac_key +
                                      " is accessible by group or others; a key must be 0600");
    }
    const auto key = std::make_pair(allowed.wearer, allowed.device ? int{*allowed.device} : -1);
    const auto [it, inserted] = path_by_key.emplace(key, path);
    if (!inserted)
      item.add_issue(allowed.device ? "device" : "wearer",
                     "wearer " + std::to_string(allowed.wearer) +
                         (allowed.device ? " device " + std::to_string(*allowed.device) : "") +
                         " is listed twice (also " + it->second + ")");
    ingest.allowed_devices.push_back(std::move(allowed));
  });
}

void read_ingest(const MapReader& root, const std::string& base_dir, IngestConfig& ingest) {
  const MapReader map(root.value("ingest"), "ingest",
                      {"udp", "tcp", "threads", "max_frame_bytes", "queue_capacity",
                       "queue_overflow", "ring_capacity_samples", "max_streams", "stream_idle_s",
                       "stream_stale_s", "stream_offline_s", "allowed_devices", "nats"},
                      root.issues());
  read_allowed_devices(map, base_dir, ingest);
  read_bool(map, "nats", ingest.nats);
  read_listen(map, "udp", ingest.udp);
  read_tcp_listen(map, "tcp", ingest.tcp);
  read_int(map, "threads", 1, 64, ingest.threads);
  // The smallest useful frame carries one float32 sample.
  read_int(map, "max_frame_bytes",
           static_cast<std::int64_t>(sensors::kFrameHeaderBytes + sensors::kFrameCrcBytes + 4),
           static_cast<std::int64_t>(sensors::kMaxFrameBytes), ingest.max_frame_bytes);
  read_int(map, "queue_capacity", 1, 1 << 24, ingest.queue_capacity);
  read_choice(map, "queue_overflow", ingest.queue_overflow);
  read_int(map, "ring_capacity_samples", 2, 1 << 24, ingest.ring_capacity_samples);
  read_int(map, "max_streams", 1, 1 << 24, ingest.max_streams);
  read_number(map, "stream_idle_s", at_least(0), ingest.stream_idle_s);
  const bool stale_read = read_number(map, "stream_stale_s", above(0), ingest.stream_stale_s);
  const bool offline_read =
      read_number(map, "stream_offline_s", above(0), ingest.stream_offline_s);
  if ((stale_read || offline_read) && ingest.stream_offline_s <= ingest.stream_stale_s)
    map.add_issue(offline_read ? "stream_offline_s" : "stream_stale_s",
                  "stream_offline_s (" + format_number(ingest.stream_offline_s) +
                      ") must exceed stream_stale_s (" + format_number(ingest.stream_stale_s) +
                      ")");
}

// Channel names a fixed kind gets when the profile lists none.
std::vector<std::string> default_channel_names(sensors::DeviceKind kind) {
  const int count = sensors::fixed_channel_count(kind);
  std::vector<std::string> names;
  for (int c = 0; c < count; ++c) {
    switch (kind) {
      case sensors::DeviceKind::kForceInsole8:
        names.push_back("s" + std::to_string(c + 1));
        break;
      case sensors::DeviceKind::kAccelerometer3:
        names.push_back(std::string(1, static_cast<char>('x' + c)));
        break;
      default:
        names.push_back("p" + std::to_string(c));
        break;
    }
  }
  return names;
}

void read_groups(const MapReader& map, DeviceProfile& device) {
  const int channel_count = static_cast<int>(device.channels.size());
  std::vector<int> group_of(channel_count, -1);  // index into device.groups
  std::map<std::string, std::string> path_by_name;
  bool complete = true;
  for_each_item(map, "groups", [&](const YAML::Node& node, const std::string& path, std::size_t) {
    const MapReader group_map(node, path, {"name", "first", "last"}, map.issues());
    if (!group_map.valid()) {
      complete = false;
      return;
    }
    ChannelGroup group;
    // Every missing key is reported, so no short-circuit.
    const bool has_name = group_map.require("name");
    const bool has_first = group_map.require("first");
    const bool has_last = group_map.require("last");
    bool ok = has_name && has_first && has_last;
    ok &= !group_map.has("name") || read_string(group_map, "name", group.name);
    ok &= !group_map.has("first") || read_int(group_map, "first", 0, 65535, group.first);
    ok &= !group_map.has("last") || read_int(group_map, "last", 0, 65535, group.last);
    if (!group.name.empty()) {
      const auto [it, inserted] = path_by_name.emplace(group.name, path);
      if (!inserted) {
        group_map.add_issue("name",
                            "duplicate group name '" + group.name + "' (also " + it->second + ")");
      }
    }
    if (!ok) {
      complete = false;
      return;
    }
    if (group.first > group.last) {
      group_map.add_issue("last", "last (" + std::to_string(group.last) +
                                      ") must not be before first (" + std::to_string(group.first) +
                                      ")");
      complete = false;
      return;
    }
    if (group.last >= channel_count) {
      group_map.add_issue("last", "channel " + std::to_string(group.last) +
                                      " is past the device's " + std::to_string(channel_count) +
                                      " channels (0.." + std::to_string(channel_count - 1) + ")");
      complete = false;
      return;
    }
    for (int c = group.first; c <= group.last; ++c) {
      if (group_of[c] >= 0) {
        const ChannelGroup& other = device.groups[group_of[c]];
        group_map.add_issue("first", "channels " + std::to_string(group.first) + ".." +
                                         std::to_string(group.last) + " overlap group '" +
                                         other.name + "' (" + std::to_string(other.first) + ".." +
                                         std::to_string(other.last) + ")");
        complete = false;
        return;
      }
    }
    for (int c = group.first; c <= group.last; ++c) {
      group_of[c] = static_cast<int>(device.groups.size());
    }
    device.groups.push_back(group);
  });
  if (!map.has("groups") || (device.groups.empty() && complete)) {
    if (channel_count > 0) device.groups.push_back(ChannelGroup{"all", 0, channel_count - 1});
    return;
  }
  // Every channel must be in exactly one group, so that "the channels nr may
  // reach" is always defined; an unmentioned channel is most likely a typo.
  if (!complete) return;
  std::vector<std::string> ungrouped;
  for (int c = 0; c < channel_count; ++c) {
    if (group_of[c] >= 0) continue;
    int last = c;
    while (last + 1 < channel_count && group_of[last + 1] < 0) ++last;
    ungrouped.push_back(c == last ? std::to_string(c)
                                  : std::to_string(c) + ".." + std::to_string(last));
    c = last;
  }
  if (!ungrouped.empty()) {
    map.add_issue("groups", "channels " + join(ungrouped) +
                                " are in no group; groups must cover every channel");
  }
}

const std::vector<std::string> kStatusKeys = {"accel", "vertical", "gravity", "left_load",
                                               "right_load"};

// The device's inputs of the time-slot index: the kind's defaults, then the
// `status` map's keys (each replaces its default; an empty list clears it).
void read_status_channels(const MapReader& device_map, DeviceProfile& device) {
  StatusChannels& status = device.status;
  const int count = static_cast<int>(device.channels.size());
  std::vector<int> all(static_cast<std::size_t>(count));
  for (int c = 0; c < count; ++c) all[static_cast<std::size_t>(c)] = c;
  if (device.kind == sensors::DeviceKind::kAccelerometer3) status.accel = {0, 1, 2};
  if (device.kind == sensors::DeviceKind::kPressureInsoleLeft) status.left_load = all;
  if (device.kind == sensors::DeviceKind::kPressureInsoleRight) status.right_load = all;
  if (!device_map.has("status")) return;
  const MapReader map(device_map.value("status"), device_map.key_path("status"), kStatusKeys,
                      device_map.issues());
  if (!map.valid()) return;
  // Channel names of the device -> indices; false (with issues) on an unknown one.
  auto read_channels = [&](const std::string& key, std::vector<int>& out) {
    std::vector<LocatedString> names;
    if (!read_string_list(map, key, names)) return false;
    std::vector<int> indices;
    bool ok = true;
    for (std::size_t k = 0; k < names.size(); ++k) {
      const auto it = std::find(device.channels.begin(), device.channels.end(), names[k].value);
      if (it == device.channels.end()) {
        map.issues().add(index_path(map.key_path(key), k), names[k].line,
                         "device '" + device.name + "' has no channel '" + names[k].value + "'" +
                             did_you_mean(names[k].value, device.channels));
        ok = false;
        continue;
      }
      indices.push_back(static_cast<int>(it - device.channels.begin()));
    }
    if (ok) out = std::move(indices);
    return ok;
  };
  if (read_channels("accel", status.accel) && status.accel.size() != 0 &&
      status.accel.size() != 3)
    map.add_issue("accel", "must name 3 channels (x, y, z) or none, got " +
                               std::to_string(status.accel.size()));
  std::string vertical;
  if (read_string(map, "vertical", vertical)) {
    int found = -1;
    for (std::size_t k = 0; k < status.accel.size(); ++k)
      if (device.channels[static_cast<std::size_t>(status.accel[k])] == vertical)
        found = static_cast<int>(k);
    if (found < 0) {
      map.add_issue("vertical", "'" + vertical + "' is not one of the accel channels");
    } else {
      status.vertical_axis = found;
    }
  }
  read_number(map, "gravity", above(0), status.gravity);
  read_channels("left_load", status.left_load);
  read_channels("right_load", status.right_load);
}

const std::vector<std::string> kHotspotKeys = {"enabled",           "threshold",        "min_duration_s",
                                               "cooldown_s",        "peak_window_s",    "integral_window_s",
                                               "min_foot_load",     "severity"};

// devices[].hotspots: defaults by the insole the device's feet come from;
// a device that carries no foot takes no hotspots map.
void read_hotspots(const MapReader& device_map, DeviceProfile& device) {
  const std::vector<gait::FootSource> feet = gait::device_feet(device.kind, device.channels);
  DeviceHotspots& hotspots = device.hotspots;
  if (!feet.empty()) {
    const gait::HotspotParams defaults = gait::hotspot_defaults(feet.front().form);
    hotspots.enabled = true;
    hotspots.threshold = defaults.threshold;
    hotspots.min_duration_s = defaults.min_duration_s;
    hotspots.cooldown_s = defaults.cooldown_s;
    hotspots.peak_window_s = defaults.peak_window_s;
    hotspots.integral_window_s = defaults.integral_window_s;
    hotspots.min_foot_load = defaults.min_foot_load;
  }
  if (!device_map.has("hotspots")) return;
  const MapReader map(device_map.value("hotspots"), device_map.key_path("hotspots"), kHotspotKeys,
                      device_map.issues());
  if (!map.valid()) return;
  if (feet.empty()) {
    device_map.add_issue("hotspots", "the device carries no foot (a pressure_insole_left/right kind, or "
                                     "channels L1..L8 or R1..R8)");
    return;
  }
  read_bool(map, "enabled", hotspots.enabled);
  read_number(map, "threshold", above(0), hotspots.threshold);
  read_number(map, "min_duration_s", above(0), hotspots.min_duration_s);
  read_number(map, "cooldown_s", at_least(0), hotspots.cooldown_s);
  read_number(map, "peak_window_s", above(0), hotspots.peak_window_s);
  read_number(map, "integral_window_s", above(0), hotspots.integral_window_s);
  read_number(map, "min_foot_load", at_least(0), hotspots.min_foot_load);
  read_choice(map, "severity", hotspots.severity);
}

// Reads one device profile; returns whether its channel list is trustworthy
// (patterns are only checked against devices whose channels are).
bool read_device(const YAML::Node& node, const std::string& path, IssueList& issues,
                 DeviceProfile& device) {
  const MapReader map(node, path,
                      {"id", "name", "kind", "sample_rate_hz", "channels", "groups", "status", "hotspots"},
                      issues);
  if (!map.valid()) return false;
  if (map.require("id")) read_int(map, "id", 1, 65535, device.id);
  if (map.require("name")) read_string(map, "name", device.name);
  bool kind_ok = false;
  std::string kind_name;
  if (map.require("kind")) {
    std::vector<std::string> kind_names;
    for (const sensors::DeviceKind kind : sensors::kDeviceKinds)
      kind_names.push_back(sensors::to_string(kind));
    if (read_choice(map, "kind", kind_names, kind_name)) {
      device.kind = *sensors::device_kind_from_name(kind_name);
      kind_ok = true;
    }
  }
  // The decoder's accepted range (sensors/frame.h kBadRate).
  read_number(map, "sample_rate_hz", Range{0, 100000, true, false}, device.sample_rate_hz);

  std::vector<LocatedString> channels;
  bool channels_ok = true;
  if (map.has("channels")) {
    channels_ok = read_string_list(map, "channels", channels);
    std::map<std::string, int> line_by_name;
    for (const LocatedString& channel : channels) {
      const auto [it, inserted] = line_by_name.emplace(channel.value, channel.line);
      if (!inserted) {
        map.add_issue("channels", "channel '" + channel.value + "' is listed twice");
        channels_ok = false;
      }
      device.channels.push_back(channel.value);
    }
    if (channels_ok && channels.empty()) {
      map.add_issue("channels", "must list at least one channel");
      channels_ok = false;
    }
    const int fixed = kind_ok ? sensors::fixed_channel_count(device.kind) : 0;
    if (channels_ok && fixed > 0 && static_cast<int>(channels.size()) != fixed) {
      map.add_issue("channels", "a " + kind_name + " device has " + std::to_string(fixed) +
                                    " channels, " + std::to_string(channels.size()) +
                                    " names given");
      channels_ok = false;
    }
    if (channels_ok && channels.size() > 65535) {
      map.add_issue("channels", "at most 65535 channels fit a frame");
      channels_ok = false;
    }
  } else if (kind_ok) {
    if (device.kind == sensors::DeviceKind::kGeneric) {
      map.issues().add(map.key_path("channels"), map.line(),
                       "missing required key (a generic device must name its channels)");
      channels_ok = false;
    } else {
      device.channels = default_channel_names(device.kind);
    }
  } else {
    channels_ok = false;
  }
  if (channels_ok) {
    read_groups(map, device);
    read_status_channels(map, device);
    read_hotspots(map, device);
  } else if (map.has("status")) {
    // Checked once the channels are right; its keys are still checked now.
    const MapReader status(map.value("status"), map.key_path("status"), kStatusKeys, issues);
  }
  return channels_ok;
}

void read_devices(const MapReader& root, std::vector<DeviceProfile>& devices,
                  std::vector<bool>& channels_ok) {
  std::map<std::uint16_t, std::string> path_by_id;
  std::map<std::string, std::string> path_by_name;
  for_each_item(root, "devices", [&](const YAML::Node& node, const std::string& path, std::size_t) {
    DeviceProfile device;
    const bool ok = read_device(node, path, root.issues(), device);
    // Uniqueness is reported at the later occurrence, naming the earlier one.
    if (node.IsMap()) {
      const YAML::Node id_node = node["id"];
      const YAML::Node name_node = node["name"];
      if (device.id != 0) {
        const auto [it, inserted] = path_by_id.emplace(device.id, path);
        if (!inserted) {
          root.issues().add(
              path + ".id", line_of(id_node),
              "duplicate device id " + std::to_string(device.id) + " (also " + it->second + ")");
        }
      }
      if (!device.name.empty()) {
        const auto [it, inserted] = path_by_name.emplace(device.name, path);
        if (!inserted) {
          root.issues().add(
              path + ".name", line_of(name_node),
              "duplicate device name '" + device.name + "' (also " + it->second + ")");
        }
      }
    }
    devices.push_back(std::move(device));
    channels_ok.push_back(ok);
  });
}

void read_search(const MapReader& root, SearchConfig& search) {
  const MapReader map(root.value("search"), "search",
                      {"backend", "threads", "tick_ms", "deadline_ms", "max_matches_per_pair",
                       "overload_policy", "deadline_safety_ms", "devices", "warm_up_streams"},
                      root.issues());
  read_choice(map, "backend", search.backend);
  read_int(map, "threads", 0, 4096, search.threads);
  read_int(map, "tick_ms", 1, 10000, search.tick_ms);
  const bool deadline_given = read_int(map, "deadline_ms", 1, 600000, search.deadline_ms);
  // A sample can wait a whole tick before it is searched at all.
  if (search.deadline_ms < search.tick_ms) {
    const std::string message = "must be at least tick_ms (" + std::to_string(search.tick_ms) +
                                "), got " + std::to_string(search.deadline_ms);
    if (deadline_given) {
      map.add_issue("deadline_ms", message);
    } else {
      map.issues().add(map.key_path("deadline_ms"), map.line(), message + " (the default)");
    }
  }
  read_int(map, "max_matches_per_pair", 1, 1 << 20, search.max_matches_per_pair);
  read_choice(map, "overload_policy", search.overload_policy);
  read_int(map, "deadline_safety_ms", 0, 600000, search.deadline_safety_ms);
  read_int(map, "warm_up_streams", 0, 1000000, search.warm_up_streams);
  search.devices.clear();
  for_each_item(map, "devices", [&](const YAML::Node& node, const std::string& path, std::size_t) {
    std::string error;
    const std::optional<std::int64_t> device = parse_integer(node, error);
    const int line = line_of(node) > 0 ? line_of(node) : map.line("devices");
    if (!device || *device < 0 || *device > 1023) {
      map.issues().add(path, line, device ? "must be in 0..1023, got " + std::to_string(*device) : error);
      return;
    }
    if (std::find(search.devices.begin(), search.devices.end(), *device) != search.devices.end()) {
      map.issues().add(path, line, "GPU " + std::to_string(*device) + " is listed twice");
      return;
    }
    search.devices.push_back(static_cast<int>(*device));
  });
}

// A ZeroMQ endpoint such as tcp://127.0.0.1:7710 or ipc:///run/gaitwatch/x.sock.
// A relative ipc path is resolved against `base_dir` (not the abstract
// namespace "ipc://@name", nor the wildcard "ipc://*").
bool read_endpoint(const MapReader& map, const std::string& key, const std::string& base_dir,
                   std::string& out) {
  std::string endpoint;
  if (!read_string(map, key, endpoint)) return false;
  if (endpoint.find("://") == std::string::npos) {
    map.add_issue(key, "expected a ZeroMQ endpoint such as tcp://127.0.0.1:7710 or "
                       "ipc:///run/gaitwatch/control.sock, got '" + endpoint + "'");
    return false;
  }
  const std::string ipc = "ipc://";
  if (endpoint.rfind(ipc, 0) == 0) {
    std::string path = endpoint.substr(ipc.size());
    if (path.empty()) {
      map.add_issue(key, "an ipc endpoint needs a socket path: ipc://PATH");
      return false;
    }
    if (path[0] != '@' && path != "*") path = resolve_path(base_dir, path);
    // sockaddr_un's sun_path: 108 bytes with the terminating NUL.
    constexpr std::size_t kMaxSocketPath = 107;
    if (path.size() > kMaxSocketPath) {
      map.add_issue(key, "unix socket path longer than " + std::to_string(kMaxSocketPath) +
                             " bytes: " + path);
      return false;
    }
    endpoint = ipc + path;
  }
  out = endpoint;
  return true;
}

void read_storage(const MapReader& root, const std::string& base_dir, StorageConfig& storage) {
  const MapReader map(root.value("storage"), "storage",
                      {"path", "retention_days", "commit_interval_ms", "max_batch",
                       "max_pending_alerts", "max_size_mb"},
                      root.issues());
  read_string(map, "path", storage.path);
  storage.path = resolve_path(base_dir, storage.path);
  read_number(map, "retention_days", at_least(0), storage.retention_days);
  read_int(map, "commit_interval_ms", 1, 60000, storage.commit_interval_ms);
  read_int(map, "max_batch", 1, 1000000, storage.max_batch);
  read_int(map, "max_pending_alerts", 1, 100000000, storage.max_pending_alerts);
  read_number(map, "max_size_mb", at_least(0), storage.max_size_mb);
}

void read_history(const MapReader& root, const std::string& base_dir, const StorageConfig& storage,
                  HistoryConfig& history) {
  const MapReader map(root.value("history"), "history",
                      {"enabled", "path", "retention_hours", "chunk_s", "compression",
                       "queue_chunks", "queue_overflow", "commit_interval_ms"},
                      root.issues());
  read_bool(map, "enabled", history.enabled);
  read_string(map, "path", history.path);
  history.path = resolve_path(base_dir, history.path);
  // One SQLite file has one writer at a time: sharing the hit store's would
  // make every alert commit wait behind history writes.
  if (history.path == storage.path)
    map.add_issue("path", "must differ from storage.path (" + storage.path + ")");
  read_number(map, "retention_hours", at_least(0), history.retention_hours);
  read_number(map, "chunk_s", between(0.1, 600), history.chunk_s);
  read_choice(map, "compression", history.compression);
  read_int(map, "queue_chunks", 1, 1 << 24, history.queue_chunks);
  read_choice(map, "queue_overflow", history.queue_overflow);
  read_int(map, "commit_interval_ms", 0, 60000, history.commit_interval_ms);
}

// curve_secret_key and curve_authorized_keys of a section (publish, control).
// The key files' contents are checked when the socket starts (that needs
// libzmq); here only that they are there and come as a pair.
void read_curve_keys(const MapReader& map, const std::string& base_dir, std::string& secret_key,
                     std::string& authorized_keys) {
  const bool key = read_string(map, "curve_secret_key", secret_key);
  const bool authorized = read_string(map, "curve_authorized_keys", authorized_keys);
  if (key) {
    secret_key = resolve_path(base_dir, secret_key);
    if (!std::filesystem::is_regular_file(secret_key))
      map.add_issue("curve_secret_key", "no such file: " + secret_key);
  }
  if (authorized) {
    authorized_keys = resolve_path(base_dir, authorized_keys);
    if (!std::filesystem::is_directory(authorized_keys))
      map.add_issue("curve_authorized_keys", "no such directory: " + authorized_keys);
  }
  if (key != authorized)
    map.add_issue(key ? "curve_authorized_keys" : "curve_secret_key",
                  "CURVE needs both curve_secret_key and curve_authorized_keys");
}

void read_publish(const MapReader& root, const std::string& base_dir, PublishConfig& publish) {
  const MapReader map(root.value("publish"), "publish",
                      {"endpoint", "send_hwm", "stats_interval_s", "curve_secret_key",
                       "curve_authorized_keys"},
                      root.issues());
  read_endpoint(map, "endpoint", base_dir, publish.endpoint);
  read_int(map, "send_hwm", 0, std::numeric_limits<int>::max(), publish.send_hwm);
  read_number(map, "stats_interval_s", at_least(0), publish.stats_interval_s);
  read_curve_keys(map, base_dir, publish.curve_secret_key, publish.curve_authorized_keys);
}

void read_control(const MapReader& root, const std::string& base_dir,
                  const std::string& publish_endpoint, ControlConfig& control) {
  const MapReader map(root.value("control"), "control",
                      {"enabled", "endpoint", "max_jobs", "queue_capacity", "max_request_bytes",
                       "curve_secret_key", "curve_authorized_keys"},
                      root.issues());
  read_curve_keys(map, base_dir, control.curve_secret_key, control.curve_authorized_keys);
  read_bool(map, "enabled", control.enabled);
  read_endpoint(map, "endpoint", base_dir, control.endpoint);
  if (control.enabled && control.endpoint == publish_endpoint)
    map.add_issue("endpoint", "must differ from publish.endpoint (" + publish_endpoint + ")");
  read_int(map, "max_jobs", 1, 1024, control.max_jobs);
  read_int(map, "queue_capacity", 1, 1 << 20, control.queue_capacity);
  read_int(map, "max_request_bytes", 256, 1 << 24, control.max_request_bytes);
}

void read_hashtable(const MapReader& root, HashTableSettings& table) {
  const MapReader map(root.value("hashtable"), "hashtable",
                      {"backend", "cpu_threads", "tables", "buckets_per_table"}, root.issues());
  read_choice(map, "backend", table.backend);
  read_int(map, "cpu_threads", 0, 4096, table.cpu_threads);
  read_int(map, "tables", 1, 4096, table.tables);
  read_int(map, "buckets_per_table", 1, 1 << 24, table.buckets_per_table);
}

// Below the hash table's 32-bit node index limit (kernels/hashtable).
constexpr std::int64_t kMaxNodeCapacityKey = (std::int64_t{1} << 32) - 2;

void read_dedup(const MapReader& root, DedupConfig& dedup) {
  const MapReader map(root.value("dedup"), "dedup",
                      {"enabled", "bucket_s", "retention_s", "node_capacity"}, root.issues());
  read_bool(map, "enabled", dedup.enabled);
  read_number(map, "bucket_s", above(0), dedup.bucket_s);
  read_number(map, "retention_s", at_least(0), dedup.retention_s);
  read_int(map, "node_capacity", 1, kMaxNodeCapacityKey, dedup.node_capacity);
}

// Above any sensible number of a wearer's marked alerts of one pattern.
constexpr std::int64_t kMaxMarkExamplesKey = 10000;

void read_marks(const MapReader& root, MarksConfig& marks) {
  const MapReader map(root.value("marks"), "marks",
                      {"max_examples_per_wearer", "alert_windows", "window_budget_mb_per_s"}, root.issues());
  read_int(map, "max_examples_per_wearer", 1, kMaxMarkExamplesKey, marks.max_examples_per_wearer);
  read_bool(map, "alert_windows", marks.alert_windows);
  read_number(map, "window_budget_mb_per_s", between(0, 100000), marks.window_budget_mb_per_s);
}

// A file the daemon reads at start: resolved against the config's folder
// and required to exist now, so that --check-config finds a typo.
void read_existing_file(const MapReader& map, const std::string& key, const std::string& base_dir,
                        std::string& path) {
  if (!read_string(map, key, path) || path.empty()) return;
  path = resolve_path(base_dir, path);
  if (!std::filesystem::is_regular_file(path)) map.add_issue(key, "no such file: " + path);
}

void read_webhook(const MapReader& bridges, const std::string& base_dir,
                  WebhookBridgeConfig& webhook) {
  const MapReader w(bridges.value("webhook"), bridges.key_path("webhook"),
                    {"enabled", "url", "topics", "bearer_token_file", "timeout_s",
                     "retry_initial_s", "retry_max_s", "max_attempts", "max_queued"},
                    bridges.issues());
  read_bool(w, "enabled", webhook.enabled);
  if (read_string(w, "url", webhook.url)) {
    try {
      parse_http_url(webhook.url);
    } catch (const Error& e) {
      w.add_issue("url", e.what());
    }
  }
  std::vector<LocatedString> topics;
  if (read_string_list(w, "topics", topics)) {
    webhook.topics.clear();
    if (topics.empty()) w.add_issue("topics", "must name at least one topic prefix");
    for (const LocatedString& topic : topics) {
      if (topic.value.rfind("alert.", 0) != 0 && topic.value.rfind("event.", 0) != 0)
        w.add_issue("topics", "'" + topic.value + "' must start with alert. or event.");
      webhook.topics.push_back(topic.value);
    }
  }
  read_existing_file(w, "bearer_token_file", base_dir, webhook.bearer_token_file);
  read_number(w, "timeout_s", between(0.1, 300), webhook.timeout_s);
  read_number(w, "retry_initial_s", between(0.01, 3600), webhook.retry_initial_s);
  read_number(w, "retry_max_s", between(0.01, 86400), webhook.retry_max_s);
  if (webhook.retry_max_s < webhook.retry_initial_s)
    w.add_issue("retry_max_s", "must be >= retry_initial_s");
  read_int(w, "max_attempts", 1, 1000000, webhook.max_attempts);
  read_int(w, "max_queued", 1, 10000000, webhook.max_queued);
}

void read_bridges(const MapReader& root, const std::string& base_dir, BridgesConfig& bridges) {
  const MapReader map(root.value("bridges"), "bridges", {"mqtt", "webhook"}, root.issues());
  read_webhook(map, base_dir, bridges.webhook);
  MqttBridgeConfig& mqtt = bridges.mqtt;
  const MapReader m(map.value("mqtt"), map.key_path("mqtt"),
                    {"enabled", "host", "port", "client_id", "topic_prefix", "username",
                     "password_file", "tls", "qos", "keepalive_s", "max_queued"},
                    root.issues());
  read_bool(m, "enabled", mqtt.enabled);
  read_string(m, "host", mqtt.host);
  if (mqtt.host.empty()) m.add_issue("host", "must not be empty");
  read_int(m, "port", 1, 65535, mqtt.port);
  read_string(m, "client_id", mqtt.client_id);
  if (mqtt.client_id.empty() || mqtt.client_id.size() > 23)
    m.add_issue("client_id", "must be 1 to 23 characters (MQTT 3.1.1)");
  read_string(m, "topic_prefix", mqtt.topic_prefix);
  if (mqtt.topic_prefix.empty() || mqtt.topic_prefix.find_first_of("#+") != std::string::npos ||
      mqtt.topic_prefix.back() == '/')
    m.add_issue("topic_prefix", "must be non-empty, without '#', '+' or a trailing '/'");
  read_string(m, "username", mqtt.username);
  read_existing_file(m, "password_file", base_dir, mqtt.password_file);
  if (!mqtt.password_file.empty() && mqtt.username.empty())
    m.add_issue("password_file", "a password needs a username");
  const MapReader tls(m.value("tls"), m.key_path("tls"), {"ca_file", "cert_file", "key_file"},
                      root.issues());
  read_existing_file(tls, "ca_file", base_dir, mqtt.tls_ca_file);
  read_existing_file(tls, "cert_file", base_dir, mqtt.tls_cert_file);
  read_existing_file(tls, "key_file", base_dir, mqtt.tls_key_file);
  if (mqtt.tls_cert_file.empty() != mqtt.tls_key_file.empty())
    tls.add_issue(mqtt.tls_cert_file.empty() ? "key_file" : "cert_file",
                  "a client certificate needs both cert_file and key_file");
  if (!mqtt.tls_cert_file.empty() && mqtt.tls_ca_file.empty())
    tls.add_issue("cert_file", "a client certificate needs TLS (ca_file)");
  read_int(m, "qos", 0, 2, mqtt.qos);
  read_int(m, "keepalive_s", 5, 3600, mqtt.keepalive_s);
  read_int(m, "max_queued", 1, 10000000, mqtt.max_queued);
}

void read_wearers(const MapReader& root, WearersConfig& wearers) {
  const MapReader map(root.value("wearers"), "wearers",
                      {"stale_after_s", "offline_after_s", "offline_alerts", "offline_severity"},
                      root.issues());
  read_number(map, "stale_after_s", above(0), wearers.stale_after_s);
  read_number(map, "offline_after_s", above(0), wearers.offline_after_s);
  if (!(wearers.offline_after_s > wearers.stale_after_s))
    map.add_issue(map.has("offline_after_s") ? "offline_after_s" : "stale_after_s",
                  "offline_after_s (" + format_number(wearers.offline_after_s) +
                      ") must exceed stale_after_s (" + format_number(wearers.stale_after_s) + ")");
  read_bool(map, "offline_alerts", wearers.offline_alerts);
  read_choice(map, "offline_severity", wearers.offline_severity);
}

// Above any sensible count of re-notifications of one alert.
constexpr std::int64_t kMaxEscalationsKey = 100;

void read_alerts(const MapReader& root, AlertsConfig& alerts) {
  const MapReader map(root.value("alerts"), "alerts", {"escalation_s", "max_escalations"},
                      root.issues());
  read_number(map, "escalation_s", at_least(0), alerts.escalation_s);
  read_int(map, "max_escalations", 1, kMaxEscalationsKey, alerts.max_escalations);
}

void read_console(const MapReader& root, const std::string& base_dir, bool control_enabled,
                  ConsoleConfig& console) {
  const MapReader map(root.value("console"), "console",
                      {"bind", "port", "static_dir", "tls", "session_idle_s", "session_max_s",
                       "max_sessions", "login_max_failures", "login_window_s", "max_connections",
                       "max_stream_clients"},
                      root.issues());
  read_string(map, "bind", console.bind);
  read_int(map, "port", 0, 65535, console.port);
  if (read_string(map, "static_dir", console.static_dir) && !console.static_dir.empty())
    console.static_dir = resolve_path(base_dir, console.static_dir);
  if (console.port != 0) {
    if (console.static_dir.empty())
      map.add_issue("static_dir", "the console needs its pages (set static_dir, or port: 0)");
    else if (!std::filesystem::is_regular_file(console.static_dir + "/index.html"))
      map.add_issue("static_dir", "no index.html in " + console.static_dir);
    if (!control_enabled)
      map.add_issue("port", "the console answers through the control interface: enable "
                            "control, or set console.port: 0");
  }
  const MapReader tls(map.value("tls"), map.key_path("tls"),
                      {"certificate_file", "private_key_file"}, root.issues());
  read_existing_file(tls, "certificate_file", base_dir, console.tls_certificate_file);
  read_existing_file(tls, "private_key_file", base_dir, console.tls_private_key_file);
  if (console.tls_certificate_file.empty() != console.tls_private_key_file.empty())
    tls.add_issue(console.tls_certificate_file.empty() ? "private_key_file" : "certificate_file",
                  "TLS needs both certificate_file and private_key_file");
  read_number(map, "session_idle_s", above(0), console.session_idle_s);
  read_number(map, "session_max_s", above(0), console.session_max_s);
  read_int(map, "max_sessions", 1, 1000000, console.max_sessions);
  read_int(map, "login_max_failures", 1, 1000, console.login_max_failures);
  read_number(map, "login_window_s", above(0), console.login_window_s);
  read_int(map, "max_connections", 1, 100000, console.max_connections);
  read_int(map, "max_stream_clients", 1, 10000, console.max_stream_clients);
}

// The abnormal-gait pack's `abnormal_gait` map (keys relative to the pack's
// directory); its issues go to `issues` with the pack's key paths.
void read_gait_rule(const MapReader& pack, const std::string& pack_dir,
                    const std::vector<PatternConfig>& patterns, GaitConfig& gait) {
  const MapReader map(pack.value("abnormal_gait"), "abnormal_gait",
                      {"name", "kind", "severity", "examples", "k", "band", "threshold", "bout_strides",
                       "cooldown_s"},
                      pack.issues());
  if (!pack.require("abnormal_gait") || !map.valid()) return;
  if (read_string(map, "name", gait.name)) {
    for (const PatternConfig& pattern : patterns)
      if (pattern.name == gait.name)
        map.add_issue("name", "pattern '" + gait.name + "' exists; the abnormal-gait alert needs a name of its own");
    if (gait.name.empty()) map.add_issue("name", "expected a name");
  }
  read_string(map, "kind", gait.kind);
  read_choice(map, "severity", {"info", "warning", "critical"}, gait.severity);
  read_int(map, "k", 1, 10000, gait.k);
  read_number(map, "band", between(0, 1), gait.band);
  read_number(map, "threshold", between(0, 1), gait.threshold);
  read_int(map, "bout_strides", 1, 10000, gait.bout_strides);
  read_number(map, "cooldown_s", at_least(0), gait.cooldown_s);
  std::string examples;
  if (map.require("examples") && read_string(map, "examples", examples)) {
    gait.examples_file = resolve_path(pack_dir, examples);
    try {
      const auto read = gait::read_stride_examples(gait.examples_file, gait::CycleParams{}.curve_points);
      if (std::none_of(read.begin(), read.end(), [](const gait::StrideExample& e) { return e.abnormal; }) ||
          std::all_of(read.begin(), read.end(), [](const gait::StrideExample& e) { return e.abnormal; }))
        map.add_issue("examples", "the examples need both normal and abnormal strides");
      std::ifstream in(gait.examples_file, std::ios::binary);
      std::ostringstream bytes;
      bytes << in.rdbuf();
      gait.examples_digest = std::hash<std::string>{}(bytes.str());
    } catch (const Error& e) {
      map.add_issue("examples", e.what());
    }
  }
}

// The gait pack's optional `gait_change` map: alerts when a wearer's strides
// change against the wearer's own baseline.
void read_gait_change(const MapReader& pack, const std::vector<PatternConfig>& patterns, GaitConfig& gait) {
  if (!pack.has("gait_change")) return;
  const MapReader map(pack.value("gait_change"), "gait_change",
                      {"name", "kind", "severity", "learn_walking_s", "strides", "k", "threshold"},
                      pack.issues());
  if (!map.valid()) return;
  gait.change = true;
  if (read_string(map, "name", gait.change_name)) {
    if (gait.change_name.empty()) map.add_issue("name", "expected a name");
    for (const PatternConfig& pattern : patterns)
      if (pattern.name == gait.change_name)
        map.add_issue("name", "pattern '" + gait.change_name + "' exists; the gait-change alert needs a name of its own");
  }
  if (gait.change_name == gait.name)
    map.add_issue("name", "'" + gait.change_name + "' is the abnormal-gait alert's name; the gait-change alert needs "
                          "a name of its own");
  read_string(map, "kind", gait.change_kind);
  read_choice(map, "severity", {"info", "warning", "critical"}, gait.change_severity);
  read_number(map, "learn_walking_s", Range{10, 86400}, gait.change_learn_walking_s);
  read_int(map, "strides", 2, 1000, gait.change_strides);
  read_int(map, "k", 1, 1000, gait.change_k);
  read_number(map, "threshold", above(0), gait.change_threshold);
  if (gait.change_k >= gait.change_strides)
    map.add_issue("k", "k must be below strides (each baseline stride is measured against the others)");
}

// `gait:` and the pack it names; the pack's issues carry its file name and
// the include's key path, as a pattern pack's do.
void read_gait(const MapReader& root, const std::string& base_dir, const std::string& source_name,
               const std::vector<PatternConfig>& patterns, GaitConfig& gait) {
  namespace fs = std::filesystem;
  if (!root.has("gait")) return;
  const MapReader map(root.value("gait"), "gait", {"enabled", "pack", "minute_s", "max_join_lag_s"},
                      root.issues());
  if (!map.valid()) return;
  gait.enabled = true;
  read_bool(map, "enabled", gait.enabled);
  read_number(map, "minute_s", Range{1, 86400}, gait.minute_s);
  read_number(map, "max_join_lag_s", Range{0.1, 60}, gait.max_join_lag_s);
  std::string pack;
  if (!read_string(map, "pack", pack) || pack.empty()) return;
  gait.pack = resolve_path(base_dir, pack);
  const std::string pack_name = fs::path(pack).is_absolute()
                                    ? fs::path(pack).lexically_normal().string()
                                    : (fs::path(source_name).parent_path() / pack).lexically_normal().string();
  std::ifstream in(gait.pack, std::ios::binary);
  if (!in) {
    map.add_issue("pack", "cannot read the gait pack '" + gait.pack + "': " + std::strerror(errno));
    return;
  }
  std::ostringstream text;
  text << in.rdbuf();
  IssueList pack_issues;
  try {
    const YAML::Node document = parse_yaml(text.str(), pack_name);
    const MapReader pack_map(document, "",
                             {"description", "built_by", "evaluation", "abnormal_gait", "gait_change"},
                             pack_issues);
    if (pack_map.valid()) {
      read_gait_rule(pack_map, fs::path(gait.pack).parent_path().string(), patterns, gait);
      read_gait_change(pack_map, patterns, gait);
    }
  } catch (const ConfigError& error) {
    for (const ConfigIssue& issue : error.issues()) pack_issues.add(issue.path, issue.line, issue.message);
  }
  const std::string pulled_in_by =
      " (in the gait pack named by " + map.key_path("pack") + " at " + source_name + ":" +
      std::to_string(map.line("pack")) + ")";
  std::vector<ConfigIssue> found = pack_issues.take();
  sort_by_line(found);
  for (ConfigIssue& issue : found) {
    issue.file = pack_name;
    issue.message += pulled_in_by;
    root.issues().add(std::move(issue));
  }
}

// A NATS subject of plain tokens: no wildcards, no spaces, no empty token.
bool plain_subject(const std::string& subject) {
  if (subject.empty() || subject.front() == '.' || subject.back() == '.') return false;
  for (std::size_t i = 0; i < subject.size(); ++i) {
    const char c = subject[i];
    if (c == '*' || c == '>' || c == ' ' || c == '\t' || c == '\n' || c == '\r') return false;
    if (c == '.' && i + 1 < subject.size() && subject[i + 1] == '.') return false;
  }
  return true;
}

void read_nats(const MapReader& root, NatsConfig& nats) {
  if (!root.has("nats")) return;
  const MapReader map(root.value("nats"), "nats",
                      {"url", "frames_stream", "frames_subject", "partitions", "max_pending", "frames_per_message", "frames_max_age_s",
                       "replicas", "worker_id", "leases_bucket", "lease_ttl_s", "retain_s", "alerts_stream",
                       "alerts_subject", "alert_dedup_window_s"},
                      root.issues());
  if (!map.valid()) return;
  nats.enabled = true;
  if (read_string(map, "url", nats.url) && nats.url.rfind("nats://", 0) != 0 && nats.url.rfind("tls://", 0) != 0)
    map.add_issue("url", "expected nats://HOST:PORT or tls://HOST:PORT, got '" + nats.url + "'");
  if (read_string(map, "frames_stream", nats.frames_stream) &&
      (nats.frames_stream.empty() ||
       nats.frames_stream.find_first_of(".*> \t/\\") != std::string::npos))
    map.add_issue("frames_stream", "a stream name without '.', '*', '>', '/', '\\' or spaces");
  if (read_string(map, "frames_subject", nats.frames_subject) && !plain_subject(nats.frames_subject))
    map.add_issue("frames_subject", "a subject of plain tokens (no wildcards, spaces or empty tokens)");
  read_int(map, "partitions", 1, 65536, nats.partitions);
  read_int(map, "max_pending", 1, 10000000, nats.max_pending);
  read_int(map, "frames_per_message", 1, 4096, nats.frames_per_message);
  read_number(map, "frames_max_age_s", Range{1, 86400}, nats.frames_max_age_s);
  read_int(map, "replicas", 1, 5, nats.replicas);
  if (read_string(map, "worker_id", nats.worker_id) && !nats.worker_id.empty() &&
      !cluster::is_plain_name(nats.worker_id))
    map.add_issue("worker_id", "letters, digits, '-' and '_' only (it is a key of the lease bucket)");
  if (read_string(map, "leases_bucket", nats.leases_bucket) &&
      !cluster::is_plain_name(nats.leases_bucket))
    map.add_issue("leases_bucket", "a bucket name of letters, digits, '-' and '_'");
  read_number(map, "lease_ttl_s", Range{0.5, 600}, nats.lease_ttl_s);
  const bool retain_read = read_number(map, "retain_s", Range{1, 3600}, nats.retain_s);
  // Empty is a value here: no alert stream.
  if (map.has("alerts_stream")) {
    std::string error;
    if (const auto stream = parse_string(map.value("alerts_stream"), error); !stream)
      map.add_issue("alerts_stream", error);
    else if ((nats.alerts_stream = *stream).find_first_of(".*> \t/\\") != std::string::npos)
      map.add_issue("alerts_stream", "a stream name without '.', '*', '>', '/', '\\' or spaces (empty: alerts not sent)");
  }
  if (read_string(map, "alerts_subject", nats.alerts_subject) && !plain_subject(nats.alerts_subject))
    map.add_issue("alerts_subject", "a subject of plain tokens (no wildcards, spaces or empty tokens)");
  read_number(map, "alert_dedup_window_s", Range{1, 86400}, nats.alert_dedup_window_s);
  // A takeover replays what the stream still holds: the last retain_s, and
  // the frames of the time the lease took to expire.
  if (nats.retain_s + 2 * nats.lease_ttl_s >= nats.frames_max_age_s)
    map.add_issue(retain_read ? "retain_s" : "frames_max_age_s",
                  "retain_s + 2 * lease_ttl_s (" + format_number(nats.retain_s + 2 * nats.lease_ttl_s) +
                      ") must stay below frames_max_age_s (" + format_number(nats.frames_max_age_s) +
                      "), or a takeover finds the frames it needs expired");
}

// The zone is looked up now, so that a name the database lacks is refused
// with its key, not found missing when the first alert is written.
void read_site(const MapReader& root, SiteConfig& site) {
  const MapReader map(root.value("site"), "site", {"time_zone"}, root.issues());
  if (!map.has("time_zone")) return;
  if (!read_string(map, "time_zone", site.time_zone)) return;
  try {
    TimeZone::named(site.time_zone);
  } catch (const Error& e) {
    map.add_issue("time_zone", e.what());
  }
}

void read_slots(const MapReader& root, SlotsConfig& slots) {
  const MapReader map(root.value("slots"), "slots",
                      {"enabled", "clock", "retention_s", "max_wait_s", "node_capacity",
                       "query_chunk_searches", "still_max_std_g", "light_max_std_g",
                       "walking_max_std_g", "posture_axis_min_g", "foot_loaded_min"},
                      root.issues());
  read_bool(map, "enabled", slots.enabled);
  read_choice(map, "clock", slots.clock);
  read_number(map, "retention_s", above(0), slots.retention_s);
  read_number(map, "max_wait_s", Range{0, 3600, true, false}, slots.max_wait_s);
  read_int(map, "node_capacity", 1, kMaxNodeCapacityKey, slots.node_capacity);
  read_int(map, "query_chunk_searches", 64, std::int64_t{1} << 26, slots.query_chunk_searches);
  read_number(map, "still_max_std_g", above(0), slots.still_max_std_g);
  read_number(map, "light_max_std_g", above(0), slots.light_max_std_g);
  read_number(map, "walking_max_std_g", above(0), slots.walking_max_std_g);
  if (!(slots.still_max_std_g < slots.light_max_std_g &&
        slots.light_max_std_g < slots.walking_max_std_g))
    map.issues().add(map.key_path("light_max_std_g"), map.line(),
                     "the activity thresholds must grow: still_max_std_g < light_max_std_g < "
                     "walking_max_std_g");
  read_number(map, "posture_axis_min_g", Range{0, 1, true, false}, slots.posture_axis_min_g);
  read_number(map, "foot_loaded_min", at_least(0), slots.foot_loaded_min);
}

void read_zones(const MapReader& root, std::vector<ZoneConfig>& zones) {
  std::map<std::string, std::string> path_by_name;
  for_each_item(root, "zones", [&](const YAML::Node& node, const std::string& path, std::size_t i) {
    const MapReader map(node, path, {"name", "sources"}, root.issues());
    if (!map.valid()) return;
    ZoneConfig zone;
    zone.id = static_cast<int>(i) + 1;
    if (static_cast<int>(i) == kMaxZones) {
      map.issues().add(path, map.line(),
                       "at most " + std::to_string(kMaxZones) + " zones fit the slot key");
    }
    if (map.require("name") && read_string(map, "name", zone.name)) {
      const bool digits = std::all_of(zone.name.begin(), zone.name.end(),
                                      [](char c) { return c >= '0' && c <= '9'; });
      if (zone.name == kNoZoneName || zone.name == "any" || digits) {
        map.add_issue("name", "'" + zone.name +
                                  "' is reserved (none, any and numbers name zones already)");
      } else {
        const auto [it, inserted] = path_by_name.emplace(zone.name, path);
        if (!inserted)
          map.add_issue("name", "duplicate zone name '" + zone.name + "' (also " + it->second + ")");
      }
    }
    if (map.require("sources")) read_address_list(map, "sources", zone.sources, zone.ranges);
    zones.push_back(std::move(zone));
  });
}

// A stream's ring must hold the longest pattern plus one tick of new samples,
// or windows would be overwritten before they are searched.
void check_ring_capacity(const MapReader& root, const Config& config) {
  IssueList already_reported;  // read_ingest reported the section's own issues
  const MapReader ingest(root.value("ingest"), "ingest", {"ring_capacity_samples"},
                         already_reported);
  for (const DeviceProfile& device : config.devices) {
    int longest = 0;
    for (const PatternConfig& pattern : config.patterns) {
      // Transformed channels need their history in the ring as well.
      if (pattern.device == device.name)
        longest = std::max(
            longest, pattern.length + transform_history(pattern.transforms, device.sample_rate_hz));
    }
    if (longest == 0) continue;
    const auto per_tick =
        static_cast<std::size_t>(std::ceil(device.sample_rate_hz * config.search.tick_ms / 1000.0));
    const std::size_t needed = static_cast<std::size_t>(longest) + per_tick;
    if (config.ingest.ring_capacity_samples <= needed) {
      root.issues().add(
          "ingest.ring_capacity_samples", ingest.line("ring_capacity_samples"),
          "must exceed the longest pattern (with its transforms' history) on device '" +
              device.name + "' (" + std::to_string(longest) + " samples) + samples per tick (" +
              std::to_string(per_tick) + ") = " + std::to_string(needed) + ", is " +
              std::to_string(config.ingest.ring_capacity_samples));
      return;
    }
  }
}

const std::vector<std::string> kSections = {
    "daemon", "ingest", "devices",  "search",    "patterns", "storage", "history",
    "publish", "metrics", "control", "hashtable", "dedup",   "slots",   "zones", "marks",
    "bridges", "wearers", "alerts", "site", "console", "gait", "nats"};


// A daemon's file must say what it detects: an empty file, or one cut off
// before its patterns, would otherwise pass as "all defaults" and run (or be
// reloaded) with no detection at all.
void require_patterns_key(const YAML::Node& document, IssueList& issues) {
  if (!document.IsDefined() || document.IsNull()) {
    issues.add("", 0,
               "the file is empty; a config lists its patterns (`patterns: []` runs without "
               "detection on purpose)");
    return;
  }
  if (!document.IsMap()) return;  // the root reader reports it
  const YAML::Node patterns = document["patterns"];
  if (!patterns.IsDefined()) {
    issues.add("patterns", 0,
               "missing (is the file cut short?); list the patterns, or write `patterns: []` to "
               "run without detection on purpose");
  } else if (patterns.IsNull()) {
    // The line of the key: an empty value's own mark is where the next token starts.
    int key_line = 0;
    for (auto it = document.begin(); it != document.end(); ++it)
      if (it->first.IsScalar() && it->first.Scalar() == "patterns") key_line = line_of(it->first);
    issues.add("patterns", key_line,
               "empty; list the patterns, or write `patterns: []` to run without detection on "
               "purpose");
  }
}


void throw_if_any(IssueList& issues, const std::string& source_name) {
  if (issues.size() == 0) return;
  std::vector<ConfigIssue> all = issues.take();
  sort_by_line(all);
  throw ConfigError(source_name, std::move(all));
}

// The text of a config file and the absolute directory its relative paths
// are resolved against. Throws ConfigError when it cannot be read.
struct ConfigFile {
  std::string text;
  std::filesystem::path absolute;
};

ConfigFile read_config_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ConfigError(path,
                      {ConfigIssue{"", 0, std::string("cannot open: ") + std::strerror(errno), {}}});
  }
  std::ostringstream text;
  text << in.rdbuf();
  // Absolute, so that a daemon that changes directory (or reloads later)
  // still finds the files the config names.
  std::error_code error;
  fs::path absolute = fs::absolute(fs::path(path), error);
  if (error) absolute = fs::path(path);
  return {text.str(), absolute.lexically_normal()};
}

Config parse_config_text(const std::string& yaml_text, const std::string& source_name,
                         const std::string& base_dir, bool require_patterns) {
  const YAML::Node document = parse_yaml(yaml_text, source_name);

  IssueList issues;
  if (require_patterns) require_patterns_key(document, issues);
  Config config;
  config.source_file = source_name;
  const MapReader root(document, "", kSections, issues);
  if (root.valid()) {
    read_daemon(root, config.daemon);
    read_listen(root, "metrics", config.metrics);
    read_ingest(root, base_dir, config.ingest);
    std::vector<bool> device_channels_ok;
    read_devices(root, config.devices, device_channels_ok);
    read_search(root, config.search);
    read_patterns(root, base_dir, source_name, config.devices, device_channels_ok,
                  config.patterns);
    read_storage(root, base_dir, config.storage);
    read_history(root, base_dir, config.storage, config.history);
    read_publish(root, base_dir, config.publish);
    read_control(root, base_dir, config.publish.endpoint, config.control);
    read_hashtable(root, config.hashtable);
    read_dedup(root, config.dedup);
    read_slots(root, config.slots);
    read_zones(root, config.zones);
    read_marks(root, config.marks);
    read_bridges(root, base_dir, config.bridges);
    read_wearers(root, config.wearers);
    read_alerts(root, config.alerts);
    read_site(root, config.site);
    read_console(root, base_dir, config.control.enabled, config.console);
    read_gait(root, base_dir, source_name, config.patterns, config.gait);
    read_nats(root, config.nats);
    if (config.ingest.nats && !config.nats.enabled)
      root.issues().add("ingest.nats", root.line("ingest"),
                        "true needs the nats: section (the stream and leases it names)");
    if (issues.size() == 0) check_ring_capacity(root, config);
  }
  throw_if_any(issues, source_name);
  return config;
}

}  // namespace

Config parse_config(const std::string& yaml_text, const std::string& source_name,
                    const std::string& base_dir) {
  return parse_config_text(yaml_text, source_name, base_dir, /*require_patterns=*/false);
}

Config load_config(const std::string& path) {
  const ConfigFile file = read_config_file(path);
  Config config = parse_config_text(file.text, path, file.absolute.parent_path().string(),
                                    /*require_patterns=*/true);
  config.source_file = file.absolute.string();
  return config;
}

ClientEndpoints load_endpoints(const std::string& path) {
  const ConfigFile file = read_config_file(path);
  const YAML::Node document = parse_yaml(file.text, path);
  const std::string base_dir = file.absolute.parent_path().string();
  IssueList issues;
  ClientEndpoints endpoints;
  const MapReader root(document, "", kSections, issues);
  if (root.valid()) {
    read_publish(root, base_dir, endpoints.publish);
    read_control(root, base_dir, endpoints.publish.endpoint, endpoints.control);
  }
  throw_if_any(issues, path);
  return endpoints;
}

}  // namespace gw::config
