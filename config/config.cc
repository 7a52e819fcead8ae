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
#include <utility>

#include "common/spelling.h"
#include "sensors/recording.h"

namespace gw::config {

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
  const bool magnitude = !steps.empty() && steps[0].kind == TransformStep::Kind::kMagnitude;
  if (!magnitude) {
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
    out.push_back({"|" + name + "|", {channel}, 0});
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
         scale == other.scale;
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

bool PatternConfig::has_negatives() const {
  return std::any_of(examples.begin(), examples.end(),
                     [](const PatternExample& e) { return e.negative; });
}

namespace {

// Patterns are compared sample by sample in kernels that size shared memory by
// the pattern length; 4096 is the longest the backends promise to handle.
constexpr int kMinPatternLength = 2;
constexpr int kMaxPatternLength = 4096;

// ---------------------------------------------------------------------------
// Issue collection and message helpers

class IssueList {
 public:
  void add(std::string path, int line, std::string message) {
    issues_.push_back(ConfigIssue{std::move(path), line, std::move(message), {}});
  }
  void add(ConfigIssue issue) { issues_.push_back(std::move(issue)); }
  std::size_t size() const { return issues_.size(); }
  std::vector<ConfigIssue> take() { return std::move(issues_); }

 private:
  std::vector<ConfigIssue> issues_;
};

// 1-based line of a node, 0 when the node does not come from the text.
int line_of(const YAML::Node& node) {
  if (!node.IsDefined()) return 0;
  const YAML::Mark mark = node.Mark();
  return mark.line >= 0 ? mark.line + 1 : 0;
}

// What a node is, for "expected X, got Y" messages.
std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return "nothing";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Scalar:
      break;
  }
  std::string text = node.Scalar();
  constexpr std::size_t kMaxShown = 40;
  if (text.size() > kMaxShown) text = text.substr(0, kMaxShown) + "...";
  return "'" + text + "'";
}

std::string format_number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

std::string join(const std::vector<std::string>& words, const char* separator = ", ") {
  std::string out;
  for (const std::string& word : words) {
    if (!out.empty()) out += separator;
    out += word;
  }
  return out;
}

std::string lowercase(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// " (did you mean 'x'?)" for the closest candidate when it is plausibly a typo,
// else "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string best = closest_match(word, candidates);
  return best.empty() ? std::string() : " (did you mean '" + best + "'?)";
}

std::string index_path(const std::string& path, std::size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

std::string resolve_path(const std::string& base_dir, const std::string& file) {
  namespace fs = std::filesystem;
  const fs::path path(file);
  if (base_dir.empty() || path.is_absolute()) return path.lexically_normal().string();
  return (fs::path(base_dir) / path).lexically_normal().string();
}

// ---------------------------------------------------------------------------
// Scalar parsing. Each returns nullopt and sets `error` ("expected ..., got
// ...") when the node is not of the type.

std::optional<std::int64_t> parse_integer(const YAML::Node& node, std::string& error) {
  if (node.IsScalar()) {
    const std::string& text = node.Scalar();
    std::size_t digits_from = (!text.empty() && (text[0] == '+' || text[0] == '-')) ? 1 : 0;
    const bool all_digits =
        text.size() > digits_from && std::all_of(text.begin() + digits_from, text.end(),
                                                 [](char c) { return c >= '0' && c <= '9'; });
    if (all_digits) {
      errno = 0;
      const long long value = std::strtoll(text.c_str(), nullptr, 10);
      if (errno != ERANGE) return static_cast<std::int64_t>(value);
      error = "integer " + describe(node) + " is too large";
      return std::nullopt;
    }
  }
  error = "expected an integer, got " + describe(node);
  return std::nullopt;
}

std::optional<double> parse_number(const YAML::Node& node, std::string& error) {
  if (node.IsScalar()) {
    const std::string& text = node.Scalar();
    const char* begin = text.c_str();
    char* end = nullptr;
    errno = 0;
    const double value = std::strtod(begin, &end);
    const bool whole = !text.empty() && end == begin + text.size() &&
                       !std::isspace(static_cast<unsigned char>(text[0]));
    if (whole && errno != ERANGE && std::isfinite(value)) return value;
  }
  error = "expected a number, got " + describe(node);
  return std::nullopt;
}

std::optional<bool> parse_bool(const YAML::Node& node, std::string& error) {
  if (node.IsScalar()) {
    const std::string text = lowercase(node.Scalar());
    if (text == "true" || text == "yes" || text == "on") return true;
    if (text == "false" || text == "no" || text == "off") return false;
  }
  error = "expected true or false, got " + describe(node);
  return std::nullopt;
}

std::optional<std::string> parse_string(const YAML::Node& node, std::string& error) {
  if (node.IsScalar()) return node.Scalar();
  error = "expected a string, got " + describe(node);
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// MapReader: one YAML map with a fixed set of known keys.

class MapReader {
 public:
  // Reports (and then ignores) a non-map node, unknown keys, duplicate keys
  // and keys that are not strings. A null or absent node reads as an empty
  // map, so `daemon:` with nothing under it means "all defaults".
  MapReader(const YAML::Node& node, std::string path, std::vector<std::string> known_keys,
            IssueList& issues)
      : path_(std::move(path)), line_(line_of(node)), issues_(issues) {
    if (!node.IsDefined() || node.IsNull()) return;
    if (!node.IsMap()) {
      issues_.add(path_, line_, "expected a map, got " + describe(node));
      valid_ = false;
      return;
    }
    for (auto it = node.begin(); it != node.end(); ++it) {
      // Copies, not references: a map iterator's `->` yields a temporary
      // pair, so a reference to its member dangles after this statement.
      const YAML::Node key_node = it->first;
      const int key_line = line_of(key_node);
      if (!key_node.IsScalar()) {
        issues_.add(path_, key_line, "keys must be plain names, got " + describe(key_node));
        continue;
      }
      const std::string key = key_node.Scalar();
      if (std::find(known_keys.begin(), known_keys.end(), key) == known_keys.end()) {
        issues_.add(key_path(key), key_line, "unknown key" + did_you_mean(key, known_keys));
        continue;
      }
      const auto [entry, inserted] = entries_.emplace(key, Entry{it->second, key_line});
      if (!inserted) {
        issues_.add(
            key_path(key), key_line,
            "duplicate key (first given at line " + std::to_string(entry->second.line) + ")");
      }
    }
  }

  bool valid() const { return valid_; }
  bool has(const std::string& key) const { return entries_.count(key) != 0; }
  // The value under `key`; an undefined node when absent.
  YAML::Node value(const std::string& key) const {
    const auto it = entries_.find(key);
    return it == entries_.end() ? YAML::Node(YAML::NodeType::Undefined) : it->second.value;
  }
  // Line for an issue about the value of `key`: the value's own line when it
  // has one (lists start below their key), else the key's, else the map's.
  int line(const std::string& key) const {
    const auto it = entries_.find(key);
    if (it == entries_.end()) return line_;
    const int value_line = line_of(it->second.value);
    return value_line > 0 ? value_line : it->second.line;
  }
  int line() const { return line_; }
  const std::string& path() const { return path_; }
  std::string key_path(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
  }
  IssueList& issues() const { return issues_; }

  void add_issue(const std::string& key, const std::string& message) const {
    issues_.add(key_path(key), line(key), message);
  }
  // Reports a required key that is missing (at the line of the map); returns
  // whether it is there.
  bool require(const std::string& key) const {
    if (has(key)) return true;
    issues_.add(key_path(key), line_, "missing required key");
    return false;
  }

 private:
  struct Entry {
    YAML::Node value;
    int line;  // of the key
  };
  std::string path_;
  int line_;
  IssueList& issues_;
  bool valid_ = true;
  std::map<std::string, Entry> entries_;
};

// Bounds of a numeric key, for the check and for the message.
struct Range {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_exclusive = false;
  bool max_exclusive = false;

  bool contains(double value) const {
    if (min_exclusive ? value <= min : value < min) return false;
    if (max_exclusive ? value >= max : value > max) return false;
    return true;
  }
  std::string describe_bounds() const {
    const bool has_min = std::isfinite(min), has_max = std::isfinite(max);
    if (has_min && has_max) {
      return std::string("in ") + (min_exclusive ? "(" : "[") + format_number(min) + ", " +
             format_number(max) + (max_exclusive ? ")" : "]");
    }
    if (has_min) return (min_exclusive ? "> " : ">= ") + format_number(min);
    return (max_exclusive ? "< " : "<= ") + format_number(max);
  }
};

Range at_least(double min) { return Range{min}; }
Range above(double min) { return Range{min, std::numeric_limits<double>::infinity(), true}; }
Range between(double min, double max) { return Range{min, max}; }

// Typed readers: when the key is present and valid they set `out` and return
// true; when absent they leave the default in `out` and return false; when
// invalid they add an issue and return false.

template <typename Int>
bool read_int(const MapReader& map, const std::string& key, std::int64_t min, std::int64_t max,
              Int& out) {
  if (!map.has(key)) return false;
  std::string error;
  const std::optional<std::int64_t> value = parse_integer(map.value(key), error);
  if (!value) {
    map.add_issue(key, error);
    return false;
  }
  if (*value < min || *value > max) {
    const std::string bounds = max == std::numeric_limits<std::int64_t>::max()
                                   ? ">= " + std::to_string(min)
                                   : "in " + std::to_string(min) + ".." + std::to_string(max);
    map.add_issue(key, "must be " + bounds + ", got " + std::to_string(*value));
    return false;
  }
  out = static_cast<Int>(*value);
  return true;
}

bool read_number(const MapReader& map, const std::string& key, const Range& range, double& out) {
  if (!map.has(key)) return false;
  std::string error;
  const std::optional<double> value = parse_number(map.value(key), error);
  if (!value) {
    map.add_issue(key, error);
    return false;
  }
  if (!range.contains(*value)) {
    map.add_issue(key, "must be " + range.describe_bounds() + ", got " + map.value(key).Scalar());
    return false;
  }
  out = *value;
  return true;
}

bool read_bool(const MapReader& map, const std::string& key, bool& out) {
  if (!map.has(key)) return false;
  std::string error;
  const std::optional<bool> value = parse_bool(map.value(key), error);
  if (!value) {
    map.add_issue(key, error);
    return false;
  }
  out = *value;
  return true;
}

// Strings in the config name things (files, devices, endpoints): never empty.
bool read_string(const MapReader& map, const std::string& key, std::string& out) {
  if (!map.has(key)) return false;
  std::string error;
  std::optional<std::string> value = parse_string(map.value(key), error);
  if (!value) {
    map.add_issue(key, error);
    return false;
  }
  if (value->empty()) {
    map.add_issue(key, "must not be empty");
    return false;
  }
  out = std::move(*value);
  return true;
}

bool read_choice(const MapReader& map, const std::string& key,
                 const std::vector<std::string>& choices, std::string& out) {
  std::string value;
  if (!read_string(map, key, value)) return false;
  if (std::find(choices.begin(), choices.end(), value) == choices.end()) {
    map.add_issue(key, "must be one of " + join(choices, " | ") + ", got '" + value + "'" +
                           did_you_mean(value, choices));
    return false;
  }
  out = std::move(value);
  return true;
}

// A choice of Choices<E>: the word is checked (and an issue made) as above,
// then kept as its enum value.
template <typename E>
bool read_choice(const MapReader& map, const std::string& key, E& out) {
  std::string word;
  if (!read_choice(map, key, choice_words<E>(), word)) return false;
  out = *parse_choice<E>(word);
  return true;
}

struct LocatedString {
  std::string value;
  int line = 0;
};

// A list of non-empty strings; each element keeps its line for later checks.
bool read_string_list(const MapReader& map, const std::string& key,
                      std::vector<LocatedString>& out) {
  if (!map.has(key)) return false;
  const YAML::Node node = map.value(key);
  if (!node.IsSequence()) {
    map.add_issue(key, "expected a list, got " + describe(node));
    return false;
  }
  bool ok = true;
  out.clear();
  for (std::size_t i = 0; i < node.size(); ++i) {
    const YAML::Node element = node[i];
    const int element_line = line_of(element) > 0 ? line_of(element) : map.line(key);
    std::string error;
    const std::optional<std::string> value = parse_string(element, error);
    if (!value || value->empty()) {
      map.issues().add(index_path(map.key_path(key), i), element_line,
                       value ? "must not be empty" : error);
      ok = false;
      continue;
    }
    out.push_back(LocatedString{*value, element_line});
  }
  return ok;
}

// Calls `item(element, path)` for each element of the list under `key`.
template <typename Fn>
void for_each_item(const MapReader& map, const std::string& key, Fn&& item) {
  if (!map.has(key)) return;
  const YAML::Node node = map.value(key);
  if (node.IsNull()) return;
  if (!node.IsSequence()) {
    map.add_issue(key, "expected a list, got " + describe(node));
    return;
  }
  for (std::size_t i = 0; i < node.size(); ++i) item(node[i], index_path(map.key_path(key), i), i);
}

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
                       "stream_stale_s", "stream_offline_s", "allowed_devices"},
                      root.issues());
  read_allowed_devices(map, base_dir, ingest);
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

// Reads one device profile; returns whether its channel list is trustworthy
// (patterns are only checked against devices whose channels are).
bool read_device(const YAML::Node& node, const std::string& path, IssueList& issues,
                 DeviceProfile& device) {
  const MapReader map(node, path,
                      {"id", "name", "kind", "sample_rate_hz", "channels", "groups", "status"},
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
                       "overload_policy", "deadline_safety_ms"},
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
  const MapReader map(root.value("marks"), "marks", {"max_examples_per_wearer", "alert_windows"},
                      root.issues());
  read_int(map, "max_examples_per_wearer", 1, kMaxMarkExamplesKey, marks.max_examples_per_wearer);
  read_bool(map, "alert_windows", marks.alert_windows);
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

// ---------------------------------------------------------------------------
// Patterns

// Recordings read once per parse, however many patterns cut from them.
class RecordingCache {
 public:
  // The recording, or nullptr with `error` set.
  const sensors::Recording* get(const std::string& file, const std::string& format,
                                std::string& error) {
    Slot& slot = slots_[{file, format}];
    if (!slot.loaded) {
      slot.loaded = true;
      try {
        slot.recording =
            std::make_unique<sensors::Recording>(sensors::read_recording(file, format));
      } catch (const std::exception& e) {
        slot.error = e.what();
      }
    }
    error = slot.error;
    return slot.recording.get();
  }

 private:
  struct Slot {
    bool loaded = false;
    std::unique_ptr<sensors::Recording> recording;
    std::string error;
  };
  std::map<std::pair<std::string, std::string>, Slot> slots_;
};

// Copies rows [first_row, first_row + rows) of the pattern's channels into
// example.raw (dim-major). `file_key` names the key issues are reported at.
bool cut_raw(const sensors::Recording& recording, std::int64_t first_row, int rows,
             const MapReader& file_map, const std::string& file_key, const PatternConfig& pattern,
             PatternExample& example) {
  std::vector<std::size_t> columns;
  bool ok = true;
  for (const std::string& channel : pattern.channels) {
    const auto it =
        std::find(recording.channel_names.begin(), recording.channel_names.end(), channel);
    if (it == recording.channel_names.end()) {
      file_map.add_issue(file_key, "'" + recording.source + "' has no channel '" + channel + "'" +
                                       did_you_mean(channel, recording.channel_names) +
                                       "; its channels: " + join(recording.channel_names));
      ok = false;
      continue;
    }
    columns.push_back(static_cast<std::size_t>(it - recording.channel_names.begin()));
  }
  if (!ok) return false;
  const auto row_count = static_cast<std::size_t>(rows);
  example.raw.assign(columns.size() * row_count, 0.0f);
  for (std::size_t d = 0; d < columns.size(); ++d) {
    for (std::size_t s = 0; s < row_count; ++s) {
      const auto row = static_cast<std::size_t>(first_row) + s;
      const float value = recording.at(row, columns[d]);
      if (!std::isfinite(value)) {
        file_map.add_issue(file_key, "sample " + std::to_string(row) + " of channel '" +
                                         pattern.channels[d] + "' is not a finite number");
        example.raw.clear();
        return false;
      }
      example.raw[d * row_count + s] = value;
    }
  }
  return true;
}

// What the examples of one pattern share while they are read. The pattern's
// length is fixed by `length`, or else by the first example that gives one;
// every later example must agree.
struct ExampleContext {
  const std::string& base_dir;
  const MapReader& pattern_map;
  bool load_shape = false;    // device, channels, transforms and length are valid
  bool length_given = false;  // the pattern's `length` key
  bool length_known = false;  // given, or taken from an earlier example
  const DeviceProfile* device = nullptr;
  int lead_in = 0;  // samples the transforms need before a window
  RecordingCache& cache;
  // Per recording file: its first lead_in + learn rows of the pattern's
  // channels, from which a normalised pattern's examples learn their
  // wearer's baseline (PatternExample::baseline_rows).
  std::map<std::string, std::shared_ptr<const std::vector<float>>> baseline_rows = {};
};

// A normalised pattern's example cut from a recording learns its wearer's
// baseline from the same recording's first rows, as a live stream of that
// recording would (pipeline/baseline.h, when the pattern is compiled).
void attach_baseline_rows(const sensors::Recording& recording, const std::string& file,
                          const MapReader& map, ExampleContext& ctx, const PatternConfig& pattern,
                          PatternExample& out) {
  if (const auto known = ctx.baseline_rows.find(file); known != ctx.baseline_rows.end()) {
    out.baseline_rows = known->second;
    return;
  }
  const int rows = ctx.lead_in + pattern.normalise.learn_samples(ctx.device->sample_rate_hz);
  if (static_cast<std::int64_t>(recording.samples()) < rows) {
    map.add_issue("file", "the recording has " + std::to_string(recording.samples()) +
                              " samples; learning its wearer's baseline (normalise.learn_s " +
                              format_number(pattern.normalise.learn_s) + ") needs " +
                              std::to_string(rows) + " (or give the example a baseline)");
    return;
  }
  PatternExample first_rows;
  if (!cut_raw(recording, 0, rows, map, "file", pattern, first_rows)) return;
  const std::size_t channels = pattern.channels.size();
  auto sample_major = std::make_shared<std::vector<float>>(first_rows.raw.size());
  for (std::size_t c = 0; c < channels; ++c)
    for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r)
      (*sample_major)[r * channels + c] = first_rows.raw[c * static_cast<std::size_t>(rows) + r];
  ctx.baseline_rows.emplace(file, sample_major);
  out.baseline_rows = std::move(sample_major);
}

// Reads an example's `baseline:` {learn_s, statistic, scale, center, spread}:
// the pattern's normalise settings it was learned with (they must be the
// pattern's) and one center (and spread, unless the scale is none) per
// pattern dim.
void read_example_baseline(const MapReader& example_map, const PatternConfig& pattern,
                           PatternExample& out) {
  if (!example_map.has("baseline")) return;
  const NormaliseConfig& normalise = pattern.normalise;
  if (!normalise.enabled) {
    example_map.add_issue("baseline", "the pattern has no 'normalise' (a baseline is only used "
                                      "by a normalised pattern)");
    return;
  }
  const MapReader map(example_map.value("baseline"), example_map.key_path("baseline"),
                      {"learn_s", "statistic", "scale", "center", "spread"}, example_map.issues());
  if (!map.valid()) return;
  bool ok = map.require("learn_s") & map.require("statistic") & map.require("scale") &
            map.require("center");
  double learn_s = 0;
  std::string statistic, scale;
  if (read_number(map, "learn_s", above(0), learn_s) && learn_s != normalise.learn_s) {
    map.add_issue("learn_s", "learned over " + format_number(learn_s) +
                                 " s, the pattern's normalise.learn_s is " +
                                 format_number(normalise.learn_s) + " (export the pattern again)");
    ok = false;
  }
  if (read_choice(map, "statistic", {"median", "mean"}, statistic) &&
      statistic != NormaliseConfig::name(normalise.statistic)) {
    map.add_issue("statistic", "learned as the " + statistic +
                                   ", the pattern's normalise.statistic is " +
                                   NormaliseConfig::name(normalise.statistic) +
                                   " (export the pattern again)");
    ok = false;
  }
  if (read_choice(map, "scale", {"none", "mad", "std"}, scale) &&
      scale != NormaliseConfig::name(normalise.scale)) {
    map.add_issue("scale", "learned with scale " + scale + ", the pattern's normalise.scale is " +
                               NormaliseConfig::name(normalise.scale) +
                               " (export the pattern again)");
    ok = false;
  }
  const bool scaled = normalise.scale != NormaliseConfig::Scale::kNone;
  if (scaled && !map.require("spread")) ok = false;
  if (!scaled && map.has("spread")) {
    map.add_issue("spread", "the pattern's normalise.scale is none: no spread");
    ok = false;
  }
  ChannelBaseline baseline;
  const auto read_values = [&](const std::string& key, bool positive, std::vector<float>& values) {
    if (!map.has(key)) return false;
    const YAML::Node node = map.value(key);
    if (!node.IsSequence()) {
      map.add_issue(key, "expected a list of numbers, got " + describe(node));
      return false;
    }
    if (static_cast<int>(node.size()) != pattern.dim_count) {
      map.add_issue(key, "expected one value per pattern dim (" +
                             std::to_string(pattern.dim_count) + " after the transforms), got " +
                             std::to_string(node.size()));
      return false;
    }
    bool values_ok = true;
    for (std::size_t i = 0; i < node.size(); ++i) {
      std::string error;
      const std::optional<double> value = parse_number(node[i], error);
      const std::string path = index_path(map.key_path(key), i);
      const int line = line_of(node[i]) > 0 ? line_of(node[i]) : map.line(key);
      if (!value || !std::isfinite(*value)) {
        map.issues().add(path, line, value ? "must be a finite number" : error);
        values_ok = false;
      } else if (positive && *value <= 0) {
        map.issues().add(path, line, "must be > 0, got " + node[i].Scalar());
        values_ok = false;
      } else {
        values.push_back(static_cast<float>(*value));
      }
    }
    return values_ok;
  };
  ok &= read_values("center", false, baseline.center);
  if (scaled)
    ok &= read_values("spread", true, baseline.spread);
  else
    baseline.spread.assign(baseline.center.size(), 1.0f);
  if (ok) out.baseline = std::move(baseline);
}

// Reads a {file, format, start, end} example and loads its raw values.
void read_window_example(const MapReader& map, ExampleContext& ctx, PatternConfig& pattern,
                         PatternExample& out) {
  ExampleSource example;
  // Every missing key is reported, so no short-circuit.
  const bool has_file = map.require("file");
  const bool has_format = map.require("format");
  const bool has_start = map.require("start");
  bool ok = has_file && has_format && has_start;
  ok &= !map.has("file") || read_string(map, "file", example.file);
  ok &= !map.has("format") ||
        read_choice(map, "format", {"gaitpdb", "daphnet", "csv", "values"}, example.format);
  ok &= !map.has("start") ||
        read_int(map, "start", 0, std::numeric_limits<std::int64_t>::max(), example.start);
  const bool end_given = map.has("end");
  const bool length_ok = ctx.length_known || !ctx.pattern_map.has("length");
  if (end_given) {
    if (read_int(map, "end", 1, std::numeric_limits<std::int64_t>::max(), example.end)) {
      if (ok && example.end <= example.start) {
        map.add_issue("end", "end (" + std::to_string(example.end) + ") must be after start (" +
                                 std::to_string(example.start) + ")");
        ok = false;
      }
    } else {
      ok = false;
    }
  } else if (!ctx.pattern_map.has("length") && !ctx.length_known) {
    map.issues().add(map.key_path("end"), map.line(),
                     "missing required key (or give the pattern's length)");
    ok = false;
  } else if (!length_ok) {
    ok = false;  // the length itself is wrong and already reported
  }
  example.file = resolve_path(ctx.base_dir, example.file);
  out.source = example;
  if (!ok) return;
  if (!end_given) example.end = example.start + pattern.length;
  const std::int64_t span = example.end - example.start;
  if (ctx.length_given && span != pattern.length) {
    ctx.pattern_map.add_issue("length",
                              "length " + std::to_string(pattern.length) +
                                  " does not match example end - start = " + std::to_string(span));
    ok = false;
  } else if (ctx.length_known && span != pattern.length) {
    map.add_issue("end", "end - start = " + std::to_string(span) +
                             " differs from the pattern's length " +
                             std::to_string(pattern.length) + " (set by its first example)");
    ok = false;
  } else if (!ctx.length_known) {
    if (span < kMinPatternLength || span > kMaxPatternLength) {
      map.add_issue(
          "end", "the example is " + std::to_string(span) + " samples long; patterns must be " +
                     std::to_string(kMinPatternLength) + ".." + std::to_string(kMaxPatternLength));
      ok = false;
    } else {
      pattern.length = static_cast<int>(span);
      ctx.length_known = true;
    }
  }
  out.source = example;
  if (!ok || !ctx.load_shape) return;
  if (example.start < ctx.lead_in) {
    map.add_issue("start", "the transforms read " + std::to_string(ctx.lead_in) +
                               " samples before the window, so start must be >= " +
                               std::to_string(ctx.lead_in) + ", got " +
                               std::to_string(example.start));
    return;
  }

  std::string error;
  const sensors::Recording* recording = ctx.cache.get(example.file, example.format, error);
  if (recording == nullptr) {
    map.add_issue("file", error);
    return;
  }
  const auto samples = static_cast<std::int64_t>(recording->samples());
  if (example.start >= samples) {
    map.add_issue("start", "start " + std::to_string(example.start) +
                               " is past the end of the recording (" + std::to_string(samples) +
                               " samples)");
    return;
  }
  if (example.end > samples) {
    map.issues().add(map.key_path("end"), map.line("end"),
                     "end " + std::to_string(example.end) + " is past the end of the recording (" +
                         std::to_string(samples) + " samples)");
    return;
  }
  // The formats with a fixed rate tell us the recording's rate; a pattern cut
  // at another rate than its device streams at would be time-scaled.
  const bool rate_known = example.format == "gaitpdb" || example.format == "daphnet";
  if (rate_known && ctx.device != nullptr &&
      std::abs(recording->sample_rate_hz - ctx.device->sample_rate_hz) >
          0.01 * ctx.device->sample_rate_hz) {
    map.add_issue("format", "the recording is sampled at " +
                                format_number(recording->sample_rate_hz) + " Hz but device '" +
                                ctx.device->name + "' at " +
                                format_number(ctx.device->sample_rate_hz) + " Hz");
    return;
  }
  out.lead_in = ctx.lead_in;
  if (!cut_raw(*recording, example.start - ctx.lead_in, ctx.lead_in + pattern.length, map, "file",
               pattern, out))
    return;
  if (pattern.normalise.enabled && !out.baseline)
    attach_baseline_rows(*recording, example.file, map, ctx, pattern, out);
}

// Reads a template file (under `key` of `map`) and loads its raw values: its
// first lead_in rows feed the transforms, the rest are the pattern.
void read_template_example(const MapReader& map, const std::string& key, ExampleContext& ctx,
                           PatternConfig& pattern, PatternExample& out) {
  if (!read_string(map, key, out.template_file)) return;
  out.template_file = resolve_path(ctx.base_dir, out.template_file);
  if (!ctx.load_shape) return;
  std::string error;
  const sensors::Recording* recording = ctx.cache.get(out.template_file, "csv", error);
  if (recording == nullptr) {
    map.add_issue(key, error);
    return;
  }
  const auto rows = static_cast<std::int64_t>(recording->samples()) - ctx.lead_in;
  const std::string lead_note =
      ctx.lead_in > 0 ? " (after the transforms' " + std::to_string(ctx.lead_in) + " rows)" : "";
  if (ctx.length_given && rows != pattern.length) {
    ctx.pattern_map.add_issue("length", "length " + std::to_string(pattern.length) +
                                            " does not match the template's " +
                                            std::to_string(rows) + " rows" + lead_note);
    return;
  }
  if (ctx.length_known && rows != pattern.length) {
    map.add_issue(key, "the template has " + std::to_string(rows) + " rows" + lead_note +
                           ", the pattern's length is " + std::to_string(pattern.length) +
                           " (set by its first example)");
    return;
  }
  if (rows < kMinPatternLength || rows > kMaxPatternLength) {
    map.add_issue(key, "the template has " + std::to_string(rows) + " rows" + lead_note +
                           "; patterns must be " + std::to_string(kMinPatternLength) + ".." +
                           std::to_string(kMaxPatternLength) + " samples long");
    return;
  }
  pattern.length = static_cast<int>(rows);
  ctx.length_known = true;
  out.lead_in = ctx.lead_in;
  cut_raw(*recording, 0, ctx.lead_in + pattern.length, map, key, pattern, out);
  // A template holds the window only, not its wearer's first minutes.
  if (pattern.normalise.enabled && !out.baseline && !map.has("baseline"))
    map.add_issue(key, "the pattern normalises per wearer (normalise): a template example needs "
                       "its wearer's 'baseline' (gaitwatch pattern export writes it)");
}

// Reads the list under `key` (examples | negatives): each item is a window
// {file, format, start, end} or {template: FILE}.
void read_example_list(const std::string& key, bool negative, ExampleContext& ctx,
                       PatternConfig& pattern) {
  for_each_item(ctx.pattern_map, key,
                [&](const YAML::Node& node, const std::string& path, std::size_t) {
                  const MapReader map(
                      node, path,
                      {"file", "format", "start", "end", "template", "subject", "baseline"},
                      ctx.pattern_map.issues());
                  if (!map.valid()) return;
                  PatternExample example;
                  example.negative = negative;
                  read_string(map, "subject", example.subject);
                  read_example_baseline(map, pattern, example);
                  if (map.has("template")) {
                    for (const char* other : {"file", "format", "start", "end"}) {
                      if (map.has(other)) {
                        map.add_issue(other, "give either a template or file/format/start/end");
                        return;
                      }
                    }
                    read_template_example(map, "template", ctx, pattern, example);
                  } else {
                    read_window_example(map, ctx, pattern, example);
                  }
                  pattern.examples.push_back(std::move(example));
                });
}

// Reads `transforms:`: a list of step names or {kind: NAME, options...}.
void read_transforms(const MapReader& pattern_map, PatternConfig& pattern, bool& ok) {
  const std::vector<std::string> kinds = {"raw", "magnitude", "lowpass", "derivative",
                                          "freeze_index"};
  for_each_item(
      pattern_map, "transforms",
      [&](const YAML::Node& node, const std::string& path, std::size_t index) {
        TransformStep step;
        std::string kind;
        const bool shorthand = node.IsScalar();
        const MapReader map(shorthand ? YAML::Node(YAML::NodeType::Undefined) : node, path,
                            {"kind", "cutoff_hz", "window_s", "locomotion_band_hz",
                             "freeze_band_hz", "power_floor"},
                            pattern_map.issues());
        if (!map.valid()) {
          ok = false;
          return;
        }
        if (shorthand) {
          kind = node.Scalar();
          if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) {
            pattern_map.issues().add(path, line_of(node),
                                     "must be one of " + join(kinds, " | ") + ", got '" + kind +
                                         "'" + did_you_mean(kind, kinds));
            ok = false;
            return;
          }
        } else if (!map.require("kind") || !read_choice(map, "kind", kinds, kind)) {
          ok = false;
          return;
        }
        const std::vector<std::pair<std::string, TransformStep::Kind>> by_name = {
            {"raw", TransformStep::Kind::kRaw},
            {"magnitude", TransformStep::Kind::kMagnitude},
            {"lowpass", TransformStep::Kind::kLowpass},
            {"derivative", TransformStep::Kind::kDerivative},
            {"freeze_index", TransformStep::Kind::kFreezeIndex}};
        for (const auto& [name, value] : by_name)
          if (name == kind) step.kind = value;
        // Options of other kinds are mistakes, not silently ignored settings.
        const std::map<std::string, TransformStep::Kind> option_owner = {
            {"cutoff_hz", TransformStep::Kind::kLowpass},
            {"window_s", TransformStep::Kind::kFreezeIndex},
            {"locomotion_band_hz", TransformStep::Kind::kFreezeIndex},
            {"freeze_band_hz", TransformStep::Kind::kFreezeIndex},
            {"power_floor", TransformStep::Kind::kFreezeIndex}};
        for (const auto& [option, owner] : option_owner) {
          if (map.has(option) && owner != step.kind) {
            map.add_issue(option, "applies to " + std::string(TransformStep::name(owner)) +
                                      " only, not to " + kind);
            ok = false;
          }
        }
        if (step.kind == TransformStep::Kind::kMagnitude && index != 0) {
          pattern_map.issues().add(path, line_of(node), "magnitude must be the first transform");
          ok = false;
        }
        if (step.kind == TransformStep::Kind::kLowpass) {
          if (!map.require("cutoff_hz") || !read_number(map, "cutoff_hz", above(0), step.cutoff_hz))
            ok = false;
        }
        if (step.kind == TransformStep::Kind::kFreezeIndex) {
          ok &= !map.has("window_s") || read_number(map, "window_s", above(0), step.window_s);
          ok &= !map.has("power_floor") ||
                read_number(map, "power_floor", above(0), step.power_floor);
          for (const auto& [key, band] :
               {std::pair<std::string, double*>{"locomotion_band_hz", step.locomotion_band_hz},
                std::pair<std::string, double*>{"freeze_band_hz", step.freeze_band_hz}}) {
            if (!map.has(key)) continue;
            const YAML::Node value = map.value(key);
            std::string error;
            std::optional<double> low, high;
            if (value.IsSequence() && value.size() == 2) {
              low = parse_number(value[0], error);
              high = parse_number(value[1], error);
            }
            if (!low || !high || *low < 0 || *high <= *low) {
              map.add_issue(
                  key, "expected [low, high] in Hz with 0 <= low < high, got " + describe(value));
              ok = false;
              continue;
            }
            band[0] = *low;
            band[1] = *high;
          }
        }
        pattern.transforms.push_back(step);
      });
}

// Query segmentation and search exhausting (docs/detection.md): read after
// the examples, which may give the length.
void read_recall_options(const MapReader& map, PatternConfig& pattern) {
  constexpr int kMinSegmentLength = 8;
  if (read_int(map, "segments", 0, 64, pattern.segments) && pattern.segments == 1)
    map.add_issue("segments", "must be 0 (off) or >= 2 parts, got 1");
  if (pattern.segments >= 2 && pattern.length > 0 &&
      pattern.length / pattern.segments < kMinSegmentLength) {
    map.add_issue("segments", std::to_string(pattern.segments) + " parts of " +
                                  std::to_string(pattern.length) + " samples are shorter than " +
                                  std::to_string(kMinSegmentLength) + " samples");
    pattern.segments = 0;
  }
  if (read_number(map, "exhaust_factor", at_least(0), pattern.exhaust_factor) &&
      pattern.exhaust_factor > 0 && pattern.exhaust_factor < 1)
    map.add_issue("exhaust_factor", "must be 0 (off) or >= 1 (the looser threshold's factor), got " +
                                        map.value("exhaust_factor").Scalar());
  if (read_number(map, "exhaust_band", between(0, 1), pattern.exhaust_band)) {
    if (pattern.exhaust_factor <= 0)
      map.add_issue("exhaust_band", "needs exhaust_factor (search exhausting is off)");
    else if (pattern.mode != PatternMode::kWindow || pattern.measure != Measure::kDtw)
      map.add_issue("exhaust_band", "applies to mode window with measure dtw only");
    else if (pattern.exhaust_band < pattern.band)
      map.add_issue("exhaust_band", "must be >= band (" + format_number(pattern.band) + ")");
  }
  if (pattern.exhaust_factor == 1 &&
      (pattern.exhaust_band < 0 || pattern.exhaust_band == pattern.band))
    map.add_issue("exhaust_factor",
                  "1 with exhaust_band equal to band searches nothing looser; raise either");
}

YAML::Node parse_yaml(const std::string& yaml_text, const std::string& source_name);

// The pattern's `decision: {learned: FILE}`: the file `gaitwatch train`
// writes (bias, weights per feature name; the rest documents how it was
// fitted). Problems inside the file are reported at decision.learned, each
// naming the file, its line and the key path inside it.
void read_decision(const MapReader& map, const std::string& base_dir, PatternConfig& pattern) {
  if (!map.has("decision")) return;
  const MapReader decision(map.value("decision"), map.key_path("decision"), {"learned"},
                           map.issues());
  if (!decision.valid()) return;
  if (map.value("decision").IsNull()) {
    map.add_issue("decision", "expected a map with 'learned: FILE', got nothing");
    return;
  }
  std::string file;
  if (!decision.require("learned") || !read_string(decision, "learned", file)) return;
  if (pattern.neighbours > 0) {
    decision.add_issue("learned", "a learned decision replaces the vote: set neighbours to 0");
    return;
  }
  LearnedDecision learned;
  learned.file = resolve_path(base_dir, file);
  std::ifstream in(learned.file, std::ios::binary);
  if (!in) {
    decision.add_issue("learned", "cannot read decision file '" + learned.file +
                                      "': " + std::strerror(errno));
    return;
  }
  std::ostringstream text;
  text << in.rdbuf();
  IssueList inner;
  try {
    const YAML::Node document = parse_yaml(text.str(), learned.file);
    const MapReader root(document, "", {"rule", "bias", "weights", "trained", "evaluation", "command"},
                         inner);
    if (root.valid()) {
      std::string rule = "logistic";
      read_choice(root, "rule", {"logistic"}, rule);
      if (root.require("bias")) read_number(root, "bias", Range{}, learned.bias);
      std::vector<std::string> names(kDecisionFeatureNames.begin(), kDecisionFeatureNames.end());
      const MapReader weights(root.value("weights"), root.key_path("weights"), names, inner);
      if (root.require("weights") && weights.valid())
        for (std::size_t f = 0; f < kDecisionFeatureCount; ++f)
          read_number(weights, names[f], Range{}, learned.weights[f]);
    }
  } catch (const ConfigError& error) {
    for (const ConfigIssue& issue : error.issues()) inner.add(issue.path, issue.line, issue.message);
  }
  std::vector<ConfigIssue> found = inner.take();
  for (const ConfigIssue& issue : found)
    decision.add_issue("learned", file + ":" + std::to_string(issue.line) + ": " +
                                      (issue.path.empty() ? "" : issue.path + ": ") + issue.message);
  if (found.empty()) pattern.learned_decision = std::move(learned);
}

// Reads `normalise: {learn_s, statistic, scale}` (before the examples, whose
// baselines depend on it).
void read_normalise(const MapReader& pattern_map, PatternConfig& pattern) {
  if (!pattern_map.has("normalise")) return;
  const MapReader map(pattern_map.value("normalise"), pattern_map.key_path("normalise"),
                      {"learn_s", "statistic", "scale"}, pattern_map.issues());
  if (!map.valid()) return;
  NormaliseConfig& normalise = pattern.normalise;
  normalise.enabled = true;
  // At most an hour: a stream holds the samples it learns from until it has
  // them all (the median needs every one).
  read_number(map, "learn_s", between(1, 3600), normalise.learn_s);
  std::string statistic = NormaliseConfig::name(normalise.statistic);
  if (read_choice(map, "statistic", {"median", "mean"}, statistic))
    normalise.statistic = statistic == "mean" ? NormaliseConfig::Statistic::kMean
                                              : NormaliseConfig::Statistic::kMedian;
  std::string scale = NormaliseConfig::name(normalise.scale);
  if (read_choice(map, "scale", {"none", "mad", "std"}, scale))
    normalise.scale = scale == "mad"   ? NormaliseConfig::Scale::kMad
                      : scale == "std" ? NormaliseConfig::Scale::kStd
                                       : NormaliseConfig::Scale::kNone;
  // The raw view is shared by every raw pattern of a device; a normalised
  // view is a transformed one of its own.
  if (uses_raw_channels(pattern.transforms))
    pattern_map.add_issue("normalise", "needs transforms (a pattern on the raw channels shares "
                                       "them with every other raw pattern of the device)");
}

// Where a pattern's `agree` was given, for the checks across patterns
// (names, devices, cycles) that can only run once every pattern, the packs'
// included, has been read. One per pattern, in pattern order.
struct AgreementSite {
  std::string path;             // the pattern item's key path
  std::vector<int> with_lines;  // per element of agree.with
  std::string file;             // the pack it is in; empty for the config's own
  std::string note;             // appended to messages about a pack's pattern
};

// `agree: {with: [NAME, ...], within_s: S}`: what can be checked inside one
// pattern (shape, within_s, no self reference, no name twice).
void read_agreement(const MapReader& pattern_map, PatternConfig& pattern, AgreementSite& site) {
  site.path = pattern_map.path();
  read_bool(pattern_map, "publish", pattern.publish);
  if (!pattern_map.has("agree")) return;
  const MapReader map(pattern_map.value("agree"), pattern_map.key_path("agree"),
                      {"with", "within_s"}, pattern_map.issues());
  if (!map.valid()) return;
  std::vector<LocatedString> names;
  if (map.require("with") && read_string_list(map, "with", names) && names.empty())
    map.add_issue("with", "expected at least one pattern name");
  if (map.require("within_s")) read_number(map, "within_s", above(0), pattern.agree.within_s);
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string element_path = index_path(map.key_path("with"), i);
    if (names[i].value == pattern.name) {
      map.issues().add(element_path, names[i].line,
                       "a pattern cannot agree with itself; name its views");
      continue;
    }
    const auto earlier = std::find_if(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(i),
                                      [&](const LocatedString& n) { return n.value == names[i].value; });
    if (earlier != names.begin() + static_cast<std::ptrdiff_t>(i)) {
      map.issues().add(element_path, names[i].line,
                       "'" + names[i].value + "' is named twice (also at line " +
                           std::to_string(earlier->line) + ")");
      continue;
    }
    pattern.agree.with.push_back(names[i].value);
    site.with_lines.push_back(names[i].line);
  }
}

void read_pattern(const YAML::Node& node, const std::string& path, const std::string& base_dir,
                  const std::vector<DeviceProfile>& devices,
                  const std::vector<bool>& device_channels_ok, RecordingCache& cache,
                  IssueList& issues, PatternConfig& pattern, AgreementSite& site) {
  const MapReader map(
      node, path, {"name",       "kind",     "severity", "device",   "channels",   "transforms",
                   "length",     "measure",  "band",     "znorm",    "mode",       "nr",
                   "threshold",  "min_dims", "alpha",    "margin",   "hysteresis", "min_duration_s",
                   "cooldown_s", "example",  "template", "examples", "negatives",
                   "segments",   "exhaust_factor", "exhaust_band", "neighbours", "normalise",
                   "decision",   "publish",  "agree"},
      issues);
  if (!map.valid()) return;
  pattern.kind = "other";
  pattern.severity = "warning";
  if (map.require("name")) read_string(map, "name", pattern.name);
  read_choice(map, "kind", {"fall", "stumble", "freezing_of_gait", "limp", "other"}, pattern.kind);
  read_choice(map, "severity", {"info", "warning", "critical"}, pattern.severity);

  // The device and its channels: everything about the shape depends on them.
  const DeviceProfile* device = nullptr;
  bool device_ok = false;
  if (map.require("device") && read_string(map, "device", pattern.device)) {
    std::vector<std::string> names;
    for (std::size_t d = 0; d < devices.size(); ++d) {
      names.push_back(devices[d].name);
      if (devices[d].name == pattern.device) {
        device = &devices[d];
        device_ok = device_channels_ok[d];
      }
    }
    if (device == nullptr) {
      map.add_issue(
          "device",
          "no device named '" + pattern.device + "'" + did_you_mean(pattern.device, names) +
              (names.empty() ? "; no devices are configured" : "; devices: " + join(names)));
    }
  }
  bool channels_ok = false;
  std::vector<int> channel_indices;
  if (map.require("channels")) {
    std::vector<LocatedString> channels;
    channels_ok = read_string_list(map, "channels", channels);
    if (channels_ok && channels.empty()) {
      map.add_issue("channels", "must list at least one channel");
      channels_ok = false;
    }
    std::set<std::string> seen;
    for (std::size_t k = 0; k < channels.size(); ++k) {
      const LocatedString& channel = channels[k];
      const std::string channel_path = index_path(map.key_path("channels"), k);
      pattern.channels.push_back(channel.value);
      if (!seen.insert(channel.value).second) {
        issues.add(channel_path, channel.line, "channel '" + channel.value + "' is listed twice");
        channels_ok = false;
        continue;
      }
      if (!device_ok) continue;
      const auto it = std::find(device->channels.begin(), device->channels.end(), channel.value);
      if (it == device->channels.end()) {
        issues.add(channel_path, channel.line,
                   "device '" + device->name + "' has no channel '" + channel.value + "'" +
                       did_you_mean(channel.value, device->channels));
        channels_ok = false;
        continue;
      }
      channel_indices.push_back(static_cast<int>(it - device->channels.begin()));
    }
  }
  bool transforms_ok = true;
  read_transforms(map, pattern, transforms_ok);
  // The pattern's dimensions and their groups, once the inputs are known.
  std::vector<DerivedChannel> dims;
  if (device_ok && channels_ok && transforms_ok) {
    dims = derived_channels(*device, channel_indices, pattern.transforms);
    pattern.dim_count = static_cast<int>(dims.size());
  } else {
    pattern.dim_count = static_cast<int>(pattern.channels.size());
  }

  const bool length_given =
      read_int(map, "length", kMinPatternLength, kMaxPatternLength, pattern.length);
  const bool length_ok = length_given || !map.has("length");
  read_choice(map, "measure", pattern.measure);
  const bool euclidean = pattern.measure == Measure::kEuclidean;
  const bool band_given = read_number(map, "band", between(0, 1), pattern.band);
  if (euclidean) {
    // Moazeni's EDT: synchronous windows, i.e. DTW with a band of 0.
    if (band_given && pattern.band != 0)
      map.add_issue("band", "measure euclidean compares synchronous samples: band must be 0");
    pattern.band = 0;
  }
  read_bool(map, "znorm", pattern.znorm);
  if (read_choice(map, "mode", pattern.mode) && euclidean && pattern.mode != PatternMode::kWindow)
    map.add_issue("mode", "measure euclidean needs mode window");
  if (read_int(map, "nr", 0, 65535, pattern.nr) && pattern.nr > 0) {
    if (euclidean) {
      map.add_issue("nr", "measure euclidean compares each dim with its own channel: nr must be 0");
    } else if (!dims.empty()) {
      // nr reaches neighbours inside a channel's group only; an nr as wide as
      // every group the pattern touches compares nothing more than nr = size-1.
      // In the raw view a dim reaches every channel of its device group; a
      // transformed view holds only the pattern's own derived channels.
      const bool raw_view = uses_raw_channels(pattern.transforms);
      std::map<int, int> group_size;
      for (const DerivedChannel& dim : dims) ++group_size[dim.group];
      int widest_group = 1;
      for (const DerivedChannel& dim : dims) {
        int size = group_size[dim.group];
        if (raw_view) {
          const ChannelGroup& group = device->groups[static_cast<std::size_t>(dim.group)];
          size = group.last - group.first + 1;
        }
        widest_group = std::max(widest_group, size);
      }
      if (pattern.nr >= widest_group) {
        map.add_issue("nr", "nr " + std::to_string(pattern.nr) +
                                " reaches past every group holding the pattern's channels (the "
                                "widest has " +
                                std::to_string(widest_group) +
                                " channels, so nr <= " + std::to_string(widest_group - 1) + ")");
      }
    }
  }
  if (map.require("threshold")) read_number(map, "threshold", above(0), pattern.threshold);
  if (read_int(map, "min_dims", 1, 65535, pattern.min_dims) && channels_ok && transforms_ok &&
      pattern.min_dims > pattern.dim_count) {
    const bool derived = pattern.dim_count != static_cast<int>(pattern.channels.size());
    map.add_issue("min_dims", "must be at most the pattern's " + std::to_string(pattern.dim_count) +
                                  (derived ? " dimensions (after the transforms)" : " channels") +
                                  ", got " + std::to_string(pattern.min_dims));
  }
  read_number(map, "alpha", at_least(1), pattern.alpha);
  read_int(map, "neighbours", 0, 1024, pattern.neighbours);
  read_decision(map, base_dir, pattern);
  // A learned decision's evidence is a log-odds: a negative margin (a
  // probability below one half) is meaningful there, not in distance units.
  read_number(map, "margin", pattern.learned_decision ? Range{} : at_least(0), pattern.margin);
  read_number(map, "hysteresis", at_least(0), pattern.hysteresis);
  read_number(map, "min_duration_s", at_least(0), pattern.min_duration_s);
  read_number(map, "cooldown_s", at_least(0), pattern.cooldown_s);
  read_normalise(map, pattern);

  // Shapes are only loaded when what selects them is right: otherwise the
  // file read would only add follow-on noise to the issues already found.
  ExampleContext ctx{base_dir,
                     map,
                     device_ok && channels_ok && transforms_ok && length_ok,
                     length_given,
                     length_given,
                     device,
                     device_ok && transforms_ok
                         ? transform_history(pattern.transforms, device->sample_rate_hz)
                         : 0,
                     cache};
  const bool has_example = map.has("example"), has_template = map.has("template");
  if (has_example && has_template) {
    map.add_issue("template", "give either 'example' or 'template', not both (example is at line " +
                                  std::to_string(map.line("example")) + ")");
  } else if (has_example) {
    const MapReader example_map(map.value("example"), map.key_path("example"),
                                {"file", "format", "start", "end", "subject"}, issues);
    if (example_map.valid()) {
      if (map.value("example").IsNull()) {
        map.add_issue("example", "expected a map with file, format, start and end, got nothing");
      } else {
        PatternExample example;
        read_string(example_map, "subject", example.subject);
        read_window_example(example_map, ctx, pattern, example);
        pattern.examples.push_back(std::move(example));
      }
    }
  } else if (has_template) {
    PatternExample example;
    read_template_example(map, "template", ctx, pattern, example);
    pattern.examples.push_back(std::move(example));
  }
  read_example_list("examples", false, ctx, pattern);
  if (!has_example && !has_template && !map.has("examples")) {
    issues.add(path, map.line(),
               "missing 'example' or 'template' or 'examples' (the pattern's shape)");
  }
  read_example_list("negatives", true, ctx, pattern);
  read_recall_options(map, pattern);
  read_agreement(map, pattern, site);
}

void sort_by_line(std::vector<ConfigIssue>& issues);

// Where pattern names were first given, for the uniqueness check across the
// config and its packs.
using PatternNameOrigins = std::map<std::string, std::string>;

// Reads one pattern item (not an include) and checks that its name is new.
// `origin` prefixes the item's key path in the duplicate message ("" for the
// config's own items, "PACK: " for a pack's).
void read_named_pattern(const YAML::Node& node, const std::string& path, const std::string& origin,
                        const std::string& base_dir, const std::vector<DeviceProfile>& devices,
                        const std::vector<bool>& device_channels_ok, RecordingCache& cache,
                        IssueList& issues, PatternNameOrigins& origins,
                        std::vector<PatternConfig>& patterns, std::vector<AgreementSite>& sites) {
  PatternConfig pattern;
  AgreementSite site;
  read_pattern(node, path, base_dir, devices, device_channels_ok, cache, issues, pattern, site);
  sites.push_back(std::move(site));
  if (!pattern.name.empty()) {
    const auto [it, inserted] = origins.emplace(pattern.name, origin + path);
    if (!inserted) {
      issues.add(path + ".name", line_of(node["name"]),
                 "duplicate pattern name '" + pattern.name + "' (also " + it->second + ")");
    }
  }
  patterns.push_back(std::move(pattern));
}

bool is_include_item(const YAML::Node& node) {
  return node.IsMap() && node["include"].IsDefined();
}

YAML::Node parse_yaml(const std::string& yaml_text, const std::string& source_name);

// Reads the pack named by the include item `node` (at key path `path` of the
// config) and appends its patterns. The pack's issues are reported with its
// file name (relative to the config's directory as the config is named) and
// a note naming the include item.
void read_pattern_pack(const YAML::Node& node, const std::string& path,
                       const std::string& config_base_dir, const std::string& config_source_name,
                       const std::vector<DeviceProfile>& devices,
                       const std::vector<bool>& device_channels_ok, RecordingCache& cache,
                       IssueList& issues, PatternNameOrigins& origins,
                       std::vector<PatternConfig>& patterns, std::vector<AgreementSite>& sites) {
  namespace fs = std::filesystem;
  const std::size_t first_pattern = patterns.size();
  const MapReader item(node, path, {"include"}, issues);
  if (!item.valid()) return;
  std::string include;
  if (!read_string(item, "include", include)) return;
  if (include.empty()) {
    item.add_issue("include", "expected a pack file name, got an empty string");
    return;
  }
  const std::string pack_path = resolve_path(config_base_dir, include);
  const std::string pack_name =
      fs::path(include).is_absolute()
          ? fs::path(include).lexically_normal().string()
          : (fs::path(config_source_name).parent_path() / include).lexically_normal().string();
  std::ifstream in(pack_path, std::ios::binary);
  if (!in) {
    item.add_issue("include", "cannot read pattern pack '" + pack_path +
                                  "': " + std::strerror(errno));
    return;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    item.add_issue("include", "cannot read pattern pack '" + pack_path + "'");
    return;
  }

  IssueList pack_issues;
  try {
    const YAML::Node document = parse_yaml(text.str(), pack_name);
    const MapReader pack(document, "", {"description", "built_by", "evaluation", "patterns"},
                         pack_issues);
    if (!document.IsDefined() || document.IsNull()) {
      pack_issues.add("", 0, "the pack is empty; a pack lists its patterns");
    } else if (pack.valid() && pack.require("patterns")) {
      const std::string pack_base_dir = fs::path(pack_path).parent_path().string();
      for_each_item(pack, "patterns",
                    [&](const YAML::Node& pack_node, const std::string& pack_item_path,
                        std::size_t) {
                      if (is_include_item(pack_node)) {
                        pack_issues.add(pack_item_path + ".include",
                                        line_of(pack_node["include"]),
                                        "a pattern pack cannot include other packs; include "
                                        "them from the main config");
                        return;
                      }
                      read_named_pattern(pack_node, pack_item_path, pack_name + ": ",
                                         pack_base_dir, devices, device_channels_ok, cache,
                                         pack_issues, origins, patterns, sites);
                    });
    }
  } catch (const ConfigError& error) {  // YAML syntax
    for (const ConfigIssue& issue : error.issues()) pack_issues.add(issue.path, issue.line, issue.message);
  }
  std::vector<ConfigIssue> found = pack_issues.take();
  sort_by_line(found);
  const std::string pulled_in_by =
      " (in the pack included by " + item.key_path("include") + " at " + config_source_name +
      ":" + std::to_string(item.line("include")) + ")";
  for (ConfigIssue& issue : found) {
    issue.file = pack_name;
    issue.message += pulled_in_by;
    issues.add(std::move(issue));
  }
  for (std::size_t p = first_pattern; p < sites.size(); ++p) {
    sites[p].file = pack_name;
    sites[p].note = pulled_in_by;
  }
}

// The checks of `agree` across patterns: every name is a pattern on the same
// device (one stream holds both), and no pattern waits, through others, for
// itself (it could never be confirmed).
void check_agreements(const std::vector<PatternConfig>& patterns,
                      const std::vector<AgreementSite>& sites, IssueList& issues) {
  std::map<std::string, std::size_t> index_of;
  std::vector<std::string> names;
  for (std::size_t p = 0; p < patterns.size(); ++p) {
    index_of.emplace(patterns[p].name, p);
    names.push_back(patterns[p].name);
  }
  const auto report = [&](std::size_t p, std::size_t k, const std::string& message) {
    const std::string path = sites[p].path + ".agree.with[" + std::to_string(k) + "]";
    issues.add(ConfigIssue{path, sites[p].with_lines[k], message + sites[p].note, sites[p].file});
  };
  // Edges p -> q for the names that resolve; bad ones are reported and left out.
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> edges(patterns.size());
  for (std::size_t p = 0; p < patterns.size(); ++p) {
    const PatternConfig& pattern = patterns[p];
    for (std::size_t k = 0; k < pattern.agree.with.size(); ++k) {
      const std::string& name = pattern.agree.with[k];
      const auto found = index_of.find(name);
      if (found == index_of.end()) {
        report(p, k, "no pattern '" + name + "'" + did_you_mean(name, names));
        continue;
      }
      const PatternConfig& view = patterns[found->second];
      if (view.device != pattern.device) {
        report(p, k, "pattern '" + name + "' watches device '" + view.device + "', this one '" +
                         pattern.device + "': views that agree must watch one stream");
        continue;
      }
      edges[p].emplace_back(found->second, k);
    }
  }
  // Depth-first; an edge back to a pattern on the path closes a cycle,
  // reported once, at the element that closes it.
  enum class Mark { kNew, kOnPath, kDone };
  std::vector<Mark> mark(patterns.size(), Mark::kNew);
  std::vector<std::size_t> path;
  std::function<void(std::size_t)> visit = [&](std::size_t p) {
    mark[p] = Mark::kOnPath;
    path.push_back(p);
    for (const auto& [q, k] : edges[p]) {
      if (mark[q] == Mark::kOnPath) {
        std::string cycle;
        for (auto it = std::find(path.begin(), path.end(), q); it != path.end(); ++it)
          cycle += patterns[*it].name + " -> ";
        report(p, k, "agreement cycle " + cycle + patterns[q].name +
                         ": each would wait for the other's confirmed detection");
      } else if (mark[q] == Mark::kNew) {
        visit(q);
      }
    }
    path.pop_back();
    mark[p] = Mark::kDone;
  };
  for (std::size_t p = 0; p < patterns.size(); ++p)
    if (mark[p] == Mark::kNew) visit(p);
}

void read_patterns(const MapReader& root, const std::string& base_dir,
                   const std::string& source_name, const std::vector<DeviceProfile>& devices,
                   const std::vector<bool>& device_channels_ok,
                   std::vector<PatternConfig>& patterns) {
  RecordingCache cache;
  PatternNameOrigins origins;
  std::vector<AgreementSite> sites;
  for_each_item(
      root, "patterns", [&](const YAML::Node& node, const std::string& path, std::size_t) {
        if (is_include_item(node)) {
          read_pattern_pack(node, path, base_dir, source_name, devices, device_channels_ok, cache,
                            root.issues(), origins, patterns, sites);
        } else {
          read_named_pattern(node, path, "", base_dir, devices, device_channels_ok, cache,
                             root.issues(), origins, patterns, sites);
        }
      });
  check_agreements(patterns, sites, root.issues());
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
    "publish", "metrics", "control", "hashtable", "dedup",   "slots",   "zones", "marks"};

void sort_by_line(std::vector<ConfigIssue>& issues) {
  // Issues without a line (cross-checks on defaults) go last; issues in
  // included packs (already in order) after the config's own.
  const auto packs_from = std::stable_partition(
      issues.begin(), issues.end(), [](const ConfigIssue& issue) { return issue.file.empty(); });
  std::stable_sort(issues.begin(), packs_from, [](const ConfigIssue& a, const ConfigIssue& b) {
    const int line_a = a.line > 0 ? a.line : std::numeric_limits<int>::max();
    const int line_b = b.line > 0 ? b.line : std::numeric_limits<int>::max();
    return line_a < line_b;
  });
}

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

YAML::Node parse_yaml(const std::string& yaml_text, const std::string& source_name) {
  try {
    return YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    const int line = e.mark.line >= 0 ? e.mark.line + 1 : 0;
    throw ConfigError(source_name, {ConfigIssue{"", line, "YAML syntax error: " + e.msg, {}}});
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
