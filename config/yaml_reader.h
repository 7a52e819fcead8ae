// The YAML toolkit of the config reader (internal to config/): issues with
// their key path and line, scalar parsing with "expected ..., got ..."
// errors, and MapReader, one YAML map with a fixed set of known keys. The
// section readers (config.cc) and the pattern readers (patterns.cc) are
// written with it.
#pragma once

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/spelling.h"
#include "config/config.h"

namespace gw::config::detail {

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
inline int line_of(const YAML::Node& node) {
  if (!node.IsDefined()) return 0;
  const YAML::Mark mark = node.Mark();
  return mark.line >= 0 ? mark.line + 1 : 0;
}

// What a node is, for "expected X, got Y" messages.
inline std::string describe(const YAML::Node& node) {
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

inline std::string format_number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

inline std::string join(const std::vector<std::string>& words, const char* separator = ", ") {
  std::string out;
  for (const std::string& word : words) {
    if (!out.empty()) out += separator;
    out += word;
  }
  return out;
}

inline std::string lowercase(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// " (did you mean 'x'?)" for the closest candidate when it is plausibly a typo,
// else "".
inline std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string best = closest_match(word, candidates);
  return best.empty() ? std::string() : " (did you mean '" + best + "'?)";
}

inline std::string index_path(const std::string& path, std::size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

inline std::string resolve_path(const std::string& base_dir, const std::string& file) {
  namespace fs = std::filesystem;
  const fs::path path(file);
  if (base_dir.empty() || path.is_absolute()) return path.lexically_normal().string();
  return (fs::path(base_dir) / path).lexically_normal().string();
}

// ---------------------------------------------------------------------------
// Scalar parsing. Each returns nullopt and sets `error` ("expected ..., got
// ...") when the node is not of the type.

inline std::optional<std::int64_t> parse_integer(const YAML::Node& node, std::string& error) {
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

inline std::optional<double> parse_number(const YAML::Node& node, std::string& error) {
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

inline std::optional<bool> parse_bool(const YAML::Node& node, std::string& error) {
  if (node.IsScalar()) {
    const std::string text = lowercase(node.Scalar());
    if (text == "true" || text == "yes" || text == "on") return true;
    if (text == "false" || text == "no" || text == "off") return false;
  }
  error = "expected true or false, got " + describe(node);
  return std::nullopt;
}

inline std::optional<std::string> parse_string(const YAML::Node& node, std::string& error) {
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

inline Range at_least(double min) { return Range{min}; }
inline Range above(double min) { return Range{min, std::numeric_limits<double>::infinity(), true}; }
inline Range between(double min, double max) { return Range{min, max}; }

// Typed readers: when the key is present and valid they set `out` and return
// true; when absent they leave the default in `out` and return false; when
// invalid they add an issue and return false.

template <typename Int>
inline bool read_int(const MapReader& map, const std::string& key, std::int64_t min, std::int64_t max,
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

inline bool read_number(const MapReader& map, const std::string& key, const Range& range, double& out) {
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

inline bool read_bool(const MapReader& map, const std::string& key, bool& out) {
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
inline bool read_string(const MapReader& map, const std::string& key, std::string& out) {
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

inline bool read_choice(const MapReader& map, const std::string& key,
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
inline bool read_choice(const MapReader& map, const std::string& key, E& out) {
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
inline bool read_string_list(const MapReader& map, const std::string& key,
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
inline void for_each_item(const MapReader& map, const std::string& key, Fn&& item) {
  if (!map.has(key)) return;
  const YAML::Node node = map.value(key);
  if (node.IsNull()) return;
  if (!node.IsSequence()) {
    map.add_issue(key, "expected a list, got " + describe(node));
    return;
  }
  for (std::size_t i = 0; i < node.size(); ++i) item(node[i], index_path(map.key_path(key), i), i);
}

inline void sort_by_line(std::vector<ConfigIssue>& issues) {
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

inline YAML::Node parse_yaml(const std::string& yaml_text, const std::string& source_name) {
  try {
    return YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    const int line = e.mark.line >= 0 ? e.mark.line + 1 : 0;
    throw ConfigError(source_name, {ConfigIssue{"", line, "YAML syntax error: " + e.msg, {}}});
  }
}

}  // namespace gw::config::detail
