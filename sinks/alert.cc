#include "sinks/alert.h"

#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "common/error.h"
#include "sinks/event.h"

namespace gw::pipeline {
namespace {

using nlohmann::json;

// Reading is strict so that a subscriber or the CLI never works with a
// half-understood alert: every key must be present with the right JSON type,
// and integers must fit the field. Errors name the key path, e.g.
// "alert JSON: dims[2].stream_dim: missing".
[[noreturn]] void fail(const std::string& where, const std::string& key,
                       const std::string& problem) {
  throw Error("alert JSON: " + where + key + ": " + problem);
}

const json& field(const json& object, const std::string& where, const std::string& key) {
  if (!object.is_object()) {
    // `where` is "" for the alert itself or "dims[i]." for one of its dims.
    std::string name = where.empty() ? "top level" : where.substr(0, where.size() - 1);
    throw Error("alert JSON: " + name + ": expected an object, got " + object.type_name());
  }
  auto it = object.find(key);
  if (it == object.end()) fail(where, key, "missing");
  return *it;
}

std::string get_string(const json& object, const std::string& where, const std::string& key) {
  const json& value = field(object, where, key);
  if (!value.is_string())
    fail(where, key, std::string("expected a string, got ") + value.type_name());
  return value.get<std::string>();
}

// Any JSON number: a producer may well write 0 rather than 0.0. null reads as
// NaN because that is how JSON (and nlohmann's dump) writes a non-finite
// double, so alert_from_json(alert_to_json(a)) keeps a NaN a NaN.
double get_double(const json& object, const std::string& where, const std::string& key) {
  const json& value = field(object, where, key);
  if (value.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (!value.is_number())
    fail(where, key, std::string("expected a number, got ") + value.type_name());
  return value.get<double>();
}

// A JSON integer within [min, max]. Floats are refused even when integral
// (1.0): sequence numbers and indexes are exact, and a float in their place
// means the producer is not what we think it is.
template <typename Int>
Int get_integer(const json& object, const std::string& where, const std::string& key) {
  const json& value = field(object, where, key);
  if (value.is_number_unsigned()) {
    auto v = value.get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(std::numeric_limits<Int>::max()))
      fail(where, key, std::to_string(v) + " is out of range");
    return static_cast<Int>(v);
  }
  if (value.is_number_integer()) {
    auto v = value.get<std::int64_t>();
    if (v < static_cast<std::int64_t>(std::numeric_limits<Int>::min()) ||
        (v > 0 && static_cast<std::uint64_t>(v) >
                      static_cast<std::uint64_t>(std::numeric_limits<Int>::max())))
      fail(where, key, std::to_string(v) + " is out of range");
    return static_cast<Int>(v);
  }
  fail(where, key, std::string("expected an integer, got ") + value.type_name());
}

}  // namespace

// Both build their objects by emplacing into the object's map: the same
// value an initializer list gives, without the list's copies of every member
// (2.5 times faster for dims), which matters because the sink makes both for
// every alert on the way from detection to subscriber.
nlohmann::json dims_to_json(const Alert& alert) {
  json dims(json::value_t::array);
  auto& list = dims.get_ref<json::array_t&>();
  list.reserve(alert.dims.size());
  for (const DimMatch& dim : alert.dims) {
    json object(json::value_t::object);
    auto& members = object.get_ref<json::object_t&>();
    members.emplace("pattern_dim", dim.pattern_dim);
    members.emplace("stream_dim", dim.stream_dim);
    members.emplace("distance", dim.distance);
    members.emplace("end_index", dim.end_index);
    list.push_back(std::move(object));
  }
  return dims;
}

nlohmann::json alert_to_json(const Alert& alert) {
  json object(json::value_t::object);
  auto& members = object.get_ref<json::object_t&>();
  members.emplace("seq", alert.seq);
  members.emplace("wearer", alert.wearer);
  members.emplace("device", alert.device);
  members.emplace("pattern", alert.pattern);
  members.emplace("kind", alert.kind);
  members.emplace("severity", alert.severity);
  members.emplace("t_start", alert.t_start);
  members.emplace("t_end", alert.t_end);
  members.emplace("end_index", alert.end_index);
  members.emplace("distance", alert.distance);
  members.emplace("matched_dims", alert.matched_dims);
  members.emplace("pattern_dims", alert.pattern_dims);
  members.emplace("detected_at", alert.detected_at);
  members.emplace("latency_ms", alert.latency_ms);
  members.emplace("dims", dims_to_json(alert));
  if (!alert.wearer_name.empty()) members.emplace("wearer_name", alert.wearer_name);
  if (!alert.region.empty()) members.emplace("region", alert.region);
  if (!alert.foot.empty()) members.emplace("foot", alert.foot);
  return object;
}

nlohmann::json alert_message_json(const Alert& alert, const TimeZone& zone) {
  json object = alert_to_json(alert);
  auto& members = object.get_ref<json::object_t&>();
  members.emplace("schema", kMessageSchemaVersion);
  members.emplace("detected_at_iso", zone.iso_text(alert.detected_at));
  members.emplace("zone", zone.name());
  return object;
}

std::string json_text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Alert alert_from_json(const nlohmann::json& j) {
  const std::string top;
  Alert alert;
  alert.seq = get_integer<std::uint64_t>(j, top, "seq");
  alert.wearer = get_integer<std::uint32_t>(j, top, "wearer");
  alert.device = get_integer<std::uint16_t>(j, top, "device");
  alert.pattern = get_string(j, top, "pattern");
  alert.kind = get_string(j, top, "kind");
  alert.severity = get_string(j, top, "severity");
  alert.t_start = get_double(j, top, "t_start");
  alert.t_end = get_double(j, top, "t_end");
  alert.end_index = get_integer<std::int64_t>(j, top, "end_index");
  alert.distance = get_double(j, top, "distance");
  alert.matched_dims = get_integer<int>(j, top, "matched_dims");
  alert.pattern_dims = get_integer<int>(j, top, "pattern_dims");
  alert.detected_at = get_double(j, top, "detected_at");
  alert.latency_ms = get_double(j, top, "latency_ms");
  if (j.contains("wearer_name")) alert.wearer_name = get_string(j, top, "wearer_name");
  if (j.contains("region") && !j["region"].is_null()) alert.region = get_string(j, top, "region");
  if (j.contains("foot") && !j["foot"].is_null()) alert.foot = get_string(j, top, "foot");

  const json& dims = field(j, top, "dims");
  if (!dims.is_array())
    fail(top, "dims", std::string("expected an array, got ") + dims.type_name());
  alert.dims.reserve(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const std::string where = "dims[" + std::to_string(i) + "].";
    const json& dim = dims[i];
    DimMatch match;
    match.pattern_dim = get_integer<int>(dim, where, "pattern_dim");
    match.stream_dim = get_integer<int>(dim, where, "stream_dim");
    match.distance = get_double(dim, where, "distance");
    match.end_index = get_integer<std::int64_t>(dim, where, "end_index");
    alert.dims.push_back(match);
  }
  return alert;
}

std::string alert_topic(const Alert& alert) {
  // The trailing dot makes prefix filters exact: "alert.critical.1." does not
  // also match wearer 17.
  return "alert." + alert.severity + "." + std::to_string(alert.wearer) + ".";
}

const char* verdict_name(MarkVerdict verdict) {
  return verdict == MarkVerdict::kTrue ? "true" : "false";
}

std::optional<MarkVerdict> parse_verdict(const std::string& name) {
  if (name == "false") return MarkVerdict::kFalse;
  if (name == "true") return MarkVerdict::kTrue;
  return std::nullopt;
}

}  // namespace gw::pipeline
