#include "daemon/lifecycle.h"

#include <spdlog/spdlog.h>

#include <limits>
#include <utility>
#include <vector>

#include "pipeline/alignment.h"
#include "sinks/alert.h"

namespace gw::daemon {

using nlohmann::json;
namespace err = control_error;

namespace {

// Longest note kept with a state change, in bytes (as a mark's).
constexpr std::size_t kMaxNoteBytes = 1000;
// Longest actor name, in bytes.
constexpr std::size_t kMaxActorBytes = 200;
// The severity that escalates.
const std::string kCriticalSeverity = "critical";

json optional_json(const std::optional<double>& value) { return value ? json(*value) : json(); }
json text_or_null(const std::string& text) { return text.empty() ? json() : json(text); }

ControlError control_error_of(const pipeline::AlertStateError& e) {
  using Reason = pipeline::AlertStateError::Reason;
  switch (e.reason()) {
    case Reason::kUnknownSeq:
      return ControlError(err::kUnknownAlert, e.what());
    case Reason::kAlreadyAcknowledged:
      return ControlError(err::kAlreadyAcknowledged, e.what());
    case Reason::kAlreadyResolved:
      return ControlError(err::kAlreadyResolved, e.what());
  }
  return ControlError(err::kFailed, e.what());
}

std::uint64_t seq_arg(const json& args) {
  return static_cast<std::uint64_t>(
      int_arg(args, "seq", 1, std::numeric_limits<std::int64_t>::max()));
}

std::string bounded_text_arg(const json& args, const char* name, std::size_t max_bytes,
                             bool required) {
  const std::optional<std::string> value = required
                                               ? std::optional<std::string>(string_arg(args, name))
                                               : optional_string_arg(args, name);
  if (value && value->size() > max_bytes)
    throw ControlError(err::kBadRequest, std::string("argument '") + name + "' is longer than " +
                                             std::to_string(max_bytes) + " bytes");
  if (required && value->empty())
    throw ControlError(err::kBadRequest, std::string("argument '") + name + "' is empty");
  return value.value_or("");
}

WatchedAlert watched_of(const pipeline::AlertWithState& row) {
  return {row.alert.seq,      row.alert.wearer,      row.alert.pattern,         row.alert.kind,
          row.alert.severity, row.alert.detected_at, row.state.escalation_level};
}

}  // namespace

EscalationPolicy escalation_policy(const config::AlertsConfig& alerts) {
  return {alerts.escalation_s, alerts.max_escalations};
}

json alert_state_json(const pipeline::AlertStateRecord& state) {
  return {{"seq", state.seq},
          {"state", pipeline::alert_state_name(state.state)},
          {"acknowledged_by", text_or_null(state.acknowledged_by)},
          {"acknowledged_at", optional_json(state.acknowledged_at)},
          {"resolved_by", text_or_null(state.resolved_by)},
          {"resolved_at", optional_json(state.resolved_at)},
          {"escalation_level", state.escalation_level},
          {"note", state.note}};
}

AlertLifecycle::AlertLifecycle(const std::string& db_path, EscalationPolicy policy, Publish publish,
                               UnixClock now)
    : store_(std::make_unique<pipeline::HitStore>(db_path)),
      schedule_(policy),
      publish_(std::move(publish)),
      now_(std::move(now)) {}

void AlertLifecycle::set_policy(EscalationPolicy policy) { schedule_.set_policy(policy); }

json AlertLifecycle::acknowledge(const json& args) {
  return change_state(args, pipeline::EventType::kAlertAcknowledged);
}

json AlertLifecycle::resolve(const json& args) {
  return change_state(args, pipeline::EventType::kAlertResolved);
}

json AlertLifecycle::change_state(const json& args, pipeline::EventType type) {
  const std::uint64_t seq = seq_arg(args);
  const std::string by = bounded_text_arg(args, "by", kMaxActorBytes, /*required=*/true);
  const std::string note = bounded_text_arg(args, "note", kMaxNoteBytes, /*required=*/false);
  const double now = now_();
  pipeline::AlertStateRecord state;
  try {
    state = type == pipeline::EventType::kAlertAcknowledged
                ? store_->acknowledge_alert(seq, by, note, now)
                : store_->resolve_alert(seq, by, note, now);
  } catch (const pipeline::AlertStateError& e) {
    throw control_error_of(e);
  }
  schedule_.forget(seq);
  const std::optional<pipeline::AlertWithState> row = store_->alert_with_state(seq);
  pipeline::Event event;
  event.type = type;
  event.wearer = row ? row->alert.wearer : 0;
  event.alert_seq = seq;
  event.actor = by;
  event.at = now;
  event.details = {{"note", note}};
  publish_(std::move(event));
  spdlog::info("alert {}: {} by {}", seq, pipeline::alert_state_name(state.state), by);
  return {{"state", alert_state_json(state)}};
}

void AlertLifecycle::read_new_alerts() {
  const std::uint64_t last = store_->last_seq();
  if (last <= read_up_to_) return;
  pipeline::OpenAlertQuery query;
  query.unacknowledged_only = true;
  query.severity = kCriticalSeverity;
  query.after_seq = read_up_to_;
  query.up_to_seq = last;
  query.newest_first = false;
  query.limit = -1;
  for (const pipeline::AlertWithState& row : store_->open_alerts(query))
    schedule_.watch(watched_of(row));
  read_up_to_ = last;
}

void AlertLifecycle::step(std::uint64_t writer_pending) {
  if (!schedule_.policy().enabled()) return;
  try {
    if (look_for_alerts_) {
      read_new_alerts();
      // Alerts still with the writer when it was asked commit later.
      look_for_alerts_ = writer_pending > 0;
    }
    for (const WatchedAlert& due : schedule_.take_due(now_())) {
      store_->set_escalation_level(due.seq, due.level);
      pipeline::Event event;
      event.type = pipeline::EventType::kAlertEscalated;
      event.wearer = due.wearer;
      event.alert_seq = due.seq;
      event.actor = kDaemonActor;
      event.details = {{"level", due.level},
                       {"severity", due.severity},
                       {"kind", due.kind},
                       {"pattern", due.pattern}};
      publish_(std::move(event));
      spdlog::warn("alert {} (wearer {}, {}) not acknowledged: escalated to level {}", due.seq,
                   due.wearer, due.pattern, due.level);
    }
  } catch (const std::exception& e) {
    // The next step tries again; detection goes on meanwhile.
    spdlog::error("alert escalation: {}", e.what());
  }
}

namespace {

json mark_json(const pipeline::MarkRecord& mark) {
  return {{"id", mark.id},
          {"verdict", pipeline::verdict_name(mark.verdict)},
          {"note", mark.note},
          {"created_at", mark.created_at},
          {"withdrawn_at", optional_json(mark.withdrawn_at)}};
}

// Readers of the lifecycle on the control thread: one read-only connection,
// opened on first use, and the site's zone for the messages' times.
struct LifecycleReader {
  std::string db_path;
  TimeZone zone;
  config::Config config;
  std::unique_ptr<pipeline::HitStore> store;

  pipeline::HitStore& db() {
    if (!store) store = std::make_unique<pipeline::HitStore>(db_path, /*read_only=*/true);
    return *store;
  }

  json get(const json& args) {
    const std::uint64_t seq = seq_arg(args);
    const std::optional<pipeline::AlertWithState> row = db().alert_with_state(seq);
    if (!row)
      throw ControlError(err::kUnknownAlert, "no stored alert has seq " + std::to_string(seq));
    pipeline::MarkQuery marks_query;
    marks_query.wearer = row->alert.wearer;
    marks_query.pattern = row->alert.pattern;
    marks_query.include_withdrawn = true;
    marks_query.limit = -1;
    json marks = json::array();
    for (const pipeline::MarkRecord& mark : db().marks(marks_query))
      if (mark.seq == seq) marks.push_back(mark_json(mark));
    pipeline::EventQuery events_query;
    events_query.alert_seq = seq;
    events_query.limit = -1;
    json events = json::array();
    for (const pipeline::Event& event : db().events(events_query))
      events.push_back(pipeline::event_to_json(event, &zone));
    return {{"alert", pipeline::alert_message_json(row->alert, zone)},
            {"state", alert_state_json(row->state)},
            {"marks", std::move(marks)},
            {"events", std::move(events)}};
  }

  // A stored alert and its window, or ControlError unknown_alert / no_window.
  std::pair<pipeline::AlertWithState, pipeline::AlertWindow> alert_and_window(std::uint64_t seq) {
    std::optional<pipeline::AlertWithState> row = db().alert_with_state(seq);
    if (!row)
      throw ControlError(err::kUnknownAlert, "no stored alert has seq " + std::to_string(seq));
    std::optional<pipeline::AlertWindow> window = db().window(seq);
    if (!window)
      throw ControlError(err::kNoWindow, "alert " + std::to_string(seq) + " was stored without its window");
    return {std::move(*row), std::move(*window)};
  }

  // The samples the alert was detected on, as stored with it: the pattern's
  // channels (raw device values), lead_in samples before the matched
  // length. The device's rate comes from the running config.
  json signal(const json& args) {
    const std::uint64_t seq = seq_arg(args);
    const auto [row, window] = alert_and_window(seq);
    const config::DeviceProfile* device = config.device_by_id(row.alert.device);
    const std::size_t samples = static_cast<std::size_t>(window.lead_in + window.length);
    json rows = json::array();
    for (std::size_t c = 0; c < window.channels.size(); ++c) {
      json row_values = json::array();
      for (std::size_t k = 0; k < samples && c * samples + k < window.values.size(); ++k)
        row_values.push_back(window.values[c * samples + k]);
      rows.push_back({{"channel", window.channels[c]}, {"values", std::move(row_values)}});
    }
    return {{"seq", seq},
            {"pattern", window.pattern},
            {"wearer", window.wearer},
            {"lead_in", window.lead_in},
            {"length", window.length},
            {"rate_hz", device ? json(device->sample_rate_hz) : json()},
            {"t_end", row.alert.t_end},
            {"dims", pipeline::dims_to_json(row.alert)},
            {"channels", std::move(rows)}};
  }

  // The stored window next to the configured example it matched, per
  // matched dim with the warping path (pipeline/alignment.h).
  json match(const json& args) {
    const std::uint64_t seq = seq_arg(args);
    const auto [row, window] = alert_and_window(seq);
    pipeline::AlertExplanation explained;
    try {
      explained = pipeline::explain_alert(config, row.alert, window);
    } catch (const Error& e) {
      throw ControlError(err::kUnavailable, e.what());
    }
    json dims = json::array();
    for (const pipeline::MatchedDim& d : explained.dims) {
      json path = json::array();
      for (const auto& [i, j] : d.alignment.path) path.push_back({i, j});
      dims.push_back({{"pattern_dim", d.pattern_dim},
                      {"channel", d.channel},
                      {"distance", d.alignment.distance},
                      {"example", d.alignment.query},
                      {"window", d.alignment.window},
                      {"path", std::move(path)}});
    }
    return {{"seq", seq},
            {"pattern", window.pattern},
            {"example", explained.example},
            {"approximate", explained.approximate},
            {"dims", std::move(dims)}};
  }

  json open(const json& args) {
    pipeline::OpenAlertQuery query;
    query.limit = static_cast<int>(int_arg(args, "limit", 1, 10000, 100));
    if (args.contains("include_resolved") && !args["include_resolved"].is_null()) {
      if (!args["include_resolved"].is_boolean())
        throw ControlError(err::kBadRequest, "argument 'include_resolved' must be a boolean");
      query.include_resolved = args["include_resolved"].get<bool>();
    }
    json alerts = json::array();
    for (const pipeline::AlertWithState& row : db().open_alerts(query))
      alerts.push_back({{"alert", pipeline::alert_message_json(row.alert, zone)},
                        {"state", alert_state_json(row.state)}});
    const std::size_t count = alerts.size();
    return {{"count", count},
            {"more", static_cast<int>(count) == query.limit},
            {"alerts", std::move(alerts)}};
  }

  json events(const json& args) {
    pipeline::EventQuery query;
    query.after_id = static_cast<std::uint64_t>(
        int_arg(args, "after_id", 0, std::numeric_limits<std::int64_t>::max(), 0));
    if (args.contains("since") && !args["since"].is_null()) query.since = number_arg(args, "since");
    if (args.contains("wearer") && !args["wearer"].is_null())
      query.wearer = static_cast<std::uint32_t>(
          int_arg(args, "wearer", 0, std::numeric_limits<std::uint32_t>::max()));
    if (args.contains("alert_seq") && !args["alert_seq"].is_null())
      query.alert_seq = seq_arg({{"seq", args["alert_seq"]}});
    if (args.contains("type") && !args["type"].is_null()) {
      const auto type = args["type"].is_string() ? pipeline::parse_event_type(args["type"].get<std::string>())
                                                 : std::nullopt;
      if (!type)
        throw ControlError(control_error::kBadRequest, "argument 'type' must be an event type name (e.g. gait_minute)");
      query.type = *type;
    }
    query.limit = static_cast<int>(int_arg(args, "limit", 1, 10000, 1000));
    json events = json::array();
    std::uint64_t last_id = query.after_id;
    for (const pipeline::Event& event : db().events(query)) {
      events.push_back(pipeline::event_to_json(event, &zone));
      last_id = event.id;
    }
    const std::size_t count = events.size();
    return {{"count", count},
            {"last_id", last_id},
            {"more", static_cast<int>(count) == query.limit},
            {"events", std::move(events)}};
  }
};

}  // namespace

void add_lifecycle_commands(ControlRegistry& registry, AlertLifecycle* lifecycle,
                            const config::Config& config) {
  const auto on_pipeline = [lifecycle](json (AlertLifecycle::*command)(const json&)) {
    return [lifecycle, command](const json& args) -> json {
      if (!lifecycle) throw ControlError(err::kUnavailable, "this daemon keeps no alert lifecycle");
      return (lifecycle->*command)(args);
    };
  };
  registry.add("alert.ack",
               "acknowledge an alert (a carer is on it; it no longer escalates): {seq, by, note?}",
               RunsOn::kPipelineThread, on_pipeline(&AlertLifecycle::acknowledge));
  registry.add("alert.resolve", "resolve an alert (nothing more to do; final): {seq, by, note?}",
               RunsOn::kPipelineThread, on_pipeline(&AlertLifecycle::resolve));

  auto reader = std::make_shared<LifecycleReader>(
      LifecycleReader{config.storage.path, TimeZone::named_or_system(config.site.time_zone), config, {}});
  registry.add("alert.get", "a stored alert with its state, marks and events: {seq}",
               RunsOn::kControlThread, [reader](const json& args) { return reader->get(args); });
  registry.add("alert.signal",
               "the samples a stored alert was detected on (its window, per channel): {seq}",
               RunsOn::kControlThread, [reader](const json& args) { return reader->signal(args); });
  registry.add("alert.match",
               "a stored alert's window beside the configured example it matched, per matched "
               "dim with the DTW warping path: {seq}",
               RunsOn::kControlThread, [reader](const json& args) { return reader->match(args); });
  registry.add("alerts.open",
               "alerts not resolved (or every one), newest first, with their state: {limit?, "
               "include_resolved?}",
               RunsOn::kControlThread, [reader](const json& args) { return reader->open(args); });
  registry.add("events.list",
               "the audit log, oldest first: {since?, wearer?, alert_seq?, type?, after_id?, limit?}",
               RunsOn::kControlThread, [reader](const json& args) { return reader->events(args); });
}

}  // namespace gw::daemon
