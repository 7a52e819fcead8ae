#include "sinks/event.h"

#include <utility>

#include "common/error.h"

namespace gw::pipeline {
namespace {

constexpr std::pair<EventType, const char*> kEventTypeNames[] = {
    {EventType::kAlertAcknowledged, "alert_acknowledged"},
    {EventType::kAlertResolved, "alert_resolved"},
    {EventType::kAlertMarked, "alert_marked"},
    {EventType::kAlertUnmarked, "alert_unmarked"},
    {EventType::kAlertEscalated, "alert_escalated"},
    {EventType::kEpisodeEnded, "episode_ended"},
    {EventType::kGaitMinute, "gait_minute"},
    {EventType::kSensorRecovered, "sensor_recovered"},
    {EventType::kWearerChanged, "wearer_changed"},
};

}  // namespace

const char* event_type_name(EventType type) {
  for (const auto& [value, name] : kEventTypeNames)
    if (value == type) return name;
  return "?";
}

std::optional<EventType> parse_event_type(std::string_view name) {
  for (const auto& [value, word] : kEventTypeNames)
    if (name == word) return value;
  return std::nullopt;
}

nlohmann::json event_to_json(const Event& event, const TimeZone* zone) {
  nlohmann::json j = {{"schema", kMessageSchemaVersion},
                      {"id", event.id},
                      {"type", event_type_name(event.type)},
                      {"wearer", event.wearer}};
  if (event.alert_seq != 0) j["alert_seq"] = event.alert_seq;
  j["actor"] = event.actor;
  j["at"] = event.at;
  j["details"] = event.details.is_null() ? nlohmann::json::object() : event.details;
  if (zone) {
    j["at_iso"] = zone->iso_text(event.at);
    j["zone"] = zone->name();
  }
  return j;
}

Event event_from_json(const nlohmann::json& j) {
  try {
    Event event;
    const std::string type = j.at("type").get<std::string>();
    const std::optional<EventType> parsed = parse_event_type(type);
    if (!parsed) throw Error("unknown event type '" + type + "'");
    event.type = *parsed;
    event.id = j.at("id").get<std::uint64_t>();
    event.wearer = j.at("wearer").get<std::uint32_t>();
    event.alert_seq = j.value("alert_seq", std::uint64_t{0});
    event.actor = j.at("actor").get<std::string>();
    event.at = j.at("at").get<double>();
    event.details = j.value("details", nlohmann::json::object());
    return event;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("malformed event: ") + e.what());
  }
}

std::string event_topic(const Event& event) {
  return std::string("event.") + event_type_name(event.type) + "." +
         std::to_string(event.wearer) + ".";
}

}  // namespace gw::pipeline
