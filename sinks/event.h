// An event: something that happened to an alert or a wearer besides a
// detection (a carer acknowledged an alert, a sensor came back, ...). Every
// event is a row of the hit store's audit log (table events) and, once that
// row commits, a message on the alert publisher (docs/interfaces.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/time_text.h"

namespace gw::pipeline {

// What happened. The names (event_type_name) are the wire's and the store's.
enum class EventType {
  kAlertAcknowledged,  // a carer has seen the alert and is on it
  kAlertResolved,      // the alert needs nothing more
  kAlertMarked,        // a carer's true/false verdict on the alert
  kAlertUnmarked,      // that verdict withdrawn
  kAlertEscalated,     // a critical alert was not acknowledged in time
  kEpisodeEnded,       // the detection an alert opened has ended
  kSensorRecovered,    // a device reported offline sends frames again
  kWearerChanged,      // the wearer registry changed (added, edited, removed)
  kGaitMinute,         // a minute of a wearer's walking: its gait metrics (gait/metrics.h)
};

// "alert_acknowledged", "sensor_recovered", ...
const char* event_type_name(EventType type);
// nullopt for any other word.
std::optional<EventType> parse_event_type(std::string_view name);

// The version of the event and alert message bodies (their "schema" member).
inline constexpr int kMessageSchemaVersion = 2;

struct Event {
  EventType type = EventType::kAlertAcknowledged;
  std::uint32_t wearer = 0;
  std::uint64_t alert_seq = 0;  // the alert it concerns; 0 = none
  std::string actor;            // who caused it: a user's name, or "gaitwatchd"
  double at = 0;                // unix time [s]; 0 = when the sink takes it
  nlohmann::json details = nlohmann::json::object();  // per type, documented in docs/interfaces.md
  std::uint64_t id = 0;         // assigned by the store when the row commits; increasing
};

// {"schema", "id", "type", "wearer", "alert_seq" (only when not 0), "actor",
//  "at", "details"}, and with a `zone` also "at_iso" (`at` as ISO 8601 in
// it) and "zone" (its IANA name), as events are published.
nlohmann::json event_to_json(const Event& event, const TimeZone* zone = nullptr);
// Throws gw::Error on missing or malformed fields.
Event event_from_json(const nlohmann::json& j);
// "event.<type>.<wearer>." — a subscriber filters by prefix ("event." for all).
std::string event_topic(const Event& event);

}  // namespace gw::pipeline
