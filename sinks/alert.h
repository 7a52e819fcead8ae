// An alert: one multi-dimensional detection of one pattern in one stream.
// This is the row in SQLite and the JSON body on ZeroMQ (docs/interfaces.md).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/time_text.h"

namespace gw::pipeline {

struct DimMatch {
  int pattern_dim = 0;
  int stream_dim = 0;
  double distance = 0;
  std::int64_t end_index = 0;  // absolute sample index of the window end
};

// A carer's verdict on an alert: kFalse = it was not the pattern's event
// (its window becomes a negative example for the wearer), kTrue = it was
// (a positive one). Named "false" and "true" on the wire and in SQLite.
enum class MarkVerdict { kFalse, kTrue };
const char* verdict_name(MarkVerdict verdict);
// nullopt for anything but "false" and "true".
std::optional<MarkVerdict> parse_verdict(const std::string& name);

// The raw samples an alert was raised on, as config::PatternExample holds
// them: the pattern's channels, dim-major, channels.size() rows of lead_in +
// length samples, the first lead_in preceding the matched window (the
// transforms read them). The window is the `length` samples ending at the
// alert's end_index. Stored with the alert (HitStore), it becomes a
// wearer-scoped example when a carer marks the alert (pipeline/marks.h).
struct AlertWindow {
  std::string pattern;
  std::uint32_t wearer = 0;
  int lead_in = 0;
  int length = 0;
  std::vector<std::string> channels;  // the pattern's channel names, one row each
  // The pattern's shape when the window was cut (pattern_shape_key()): a
  // pattern whose shape changed since cannot use it.
  std::string shape;
  std::vector<float> values;
  // A normalised pattern's alert: the wearer's baseline the stream's
  // samples were normalised with, one center and one spread per transformed
  // channel (the pattern's dims), so that a marked window becomes an
  // example normalised as the stream was. Both empty for other patterns.
  std::vector<float> baseline_center;
  std::vector<float> baseline_spread;
};

struct Alert {
  std::uint64_t seq = 0;        // assigned by the store when the row commits; 1, 2, 3, ... without gaps
  std::uint32_t wearer = 0;
  std::uint16_t device = 0;
  std::string pattern;
  std::string kind;             // fall, stumble, freezing_of_gait, limp, ...
  std::string severity;         // info, warning, critical
  double t_start = 0;           // device time [s] of the matched window's first sample
  double t_end = 0;             // device time [s] of the sample that completed the match
  std::int64_t end_index = 0;   // absolute sample index of that sample in its stream
  // Ranking distance: sum of f * d over matched dims (Moazeni 2013, §7.4.6).
  double distance = 0;
  int matched_dims = 0;
  int pattern_dims = 0;
  double detected_at = 0;       // unix time [s] when the detector decided
  double latency_ms = 0;        // detected_at minus arrival of the completing sample
  std::vector<DimMatch> dims;
  // The wearer's display name when the wearer is registered (the daemon's
  // wearer registry fills it before the alert goes to the sink); empty =
  // not registered, and then absent from the JSON. Not a column of the
  // store: a stored alert reads back without it.
  std::string wearer_name;
  // Where under the foot a pressure_hotspot alert lies: the insole region
  // (gait/hotspots.h names) and the foot ("left", "right"). Empty for every
  // other alert, and then absent from the JSON. Stored (nullable columns).
  std::string region;
  std::string foot;
  // The raw samples of the match (stored, never published); null when the
  // stream's ring no longer held them (the engine counts those).
  std::shared_ptr<const AlertWindow> window;
};

// The pattern and kind of the alert the daemon raises when a wearer's
// sensor stops sending (daemon/wearers.h); no pattern of a config may take
// the name. Such an alert has no dims and no window, matched_dims and
// pattern_dims 0, and t_start = t_end = the device time of the last sample
// received.
inline constexpr const char* kSensorOfflinePattern = "sensor_offline";
inline constexpr const char* kSensorOfflineKind = "sensor_offline";

// The pattern and kind of a pressure hotspot's alert (gait/hotspots.h); no
// pattern of a config may take the name. Such an alert has no dims, its
// region and foot set, distance = the episode's peak region pressure.
inline constexpr const char* kPressureHotspotPattern = "pressure_hotspot";
inline constexpr const char* kPressureHotspotKind = "pressure_hotspot";

nlohmann::json alert_to_json(const Alert& alert);
// The body an alert is published with (and `alerts.since` returns):
// alert_to_json plus what lets a person or tool read it without knowing the
// site: "schema" (kMessageSchemaVersion), "detected_at_iso" (detected_at as
// ISO 8601 in `zone`) and "zone" (its IANA name). The alert_to_json members
// are unchanged, byte for byte.
nlohmann::json alert_message_json(const Alert& alert, const TimeZone& zone);
// alert_to_json(alert)["dims"] alone: the array the store keeps per row.
nlohmann::json dims_to_json(const Alert& alert);
Alert alert_from_json(const nlohmann::json& j);  // throws gw::Error on missing fields
// The text the store's dims column and the published bodies hold: compact,
// and invalid UTF-8 (a pattern name from a config file, say) replaced rather
// than thrown on, so that the writer never stops over a message.
std::string json_text(const nlohmann::json& j);
// "alert.<severity>.<wearer>." — a subscriber filters by prefix.
std::string alert_topic(const Alert& alert);

}  // namespace gw::pipeline
