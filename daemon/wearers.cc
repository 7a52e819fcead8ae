#include "daemon/wearers.h"

#include <chrono>
#include <limits>
#include <set>
#include <utility>

#include <spdlog/spdlog.h>

#include "common/error.h"

namespace gw::daemon {

using nlohmann::json;
namespace err = control_error;

namespace {

constexpr const char* kDaemonActor = "gaitwatchd";

double unix_now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

constexpr std::pair<WearerField, const char*> kFieldNames[] = {
    {WearerField::kDisplayName, "display_name"},
    {WearerField::kRoom, "room"},
    {WearerField::kBed, "bed"},
    {WearerField::kNotes, "notes"},
};

LivenessSettings liveness_settings(const config::Config& config) {
  return {config.wearers.stale_after_s, config.wearers.offline_after_s,
          config.ingest.stream_idle_s};
}

ControlError control_error_of(const pipeline::WearerError& e) {
  return ControlError(e.reason() == pipeline::WearerError::Reason::kDuplicateId
                          ? err::kDuplicateWearer
                          : err::kUnknownWearer,
                      e.what());
}

// Arguments a registry command takes; anything else is refused by name, so
// that a misspelt field is not silently ignored.
void check_known_args(const json& args, std::initializer_list<const char*> known) {
  if (!args.is_object()) return;
  for (const auto& [key, value] : args.items()) {
    bool found = false;
    for (const char* k : known) found = found || key == k;
    if (!found) throw ControlError(err::kBadRequest, "unknown argument '" + key + "'");
  }
}

// The text of `field` in args, validated; nullopt when absent.
std::optional<std::string> field_arg(const json& args, WearerField field) {
  const char* name = wearer_field_name(field);
  std::optional<std::string> value = optional_string_arg(args, name);
  if (!value) return std::nullopt;
  if (const std::string problem = wearer_field_problem(field, *value); !problem.empty())
    throw ControlError(err::kBadRequest, std::string("argument '") + name + "' " + problem);
  return value;
}

std::optional<bool> active_arg(const json& args) {
  if (!args.contains("active") || args["active"].is_null()) return std::nullopt;
  if (!args["active"].is_boolean())
    throw ControlError(err::kBadRequest, "argument 'active' must be a boolean, got " +
                                             std::string(args["active"].type_name()));
  return args["active"].get<bool>();
}

std::uint32_t id_arg(const json& args) {
  return static_cast<std::uint32_t>(int_arg(args, "id", 0, std::numeric_limits<std::uint32_t>::max()));
}

// Who made a registry change, for its wearer_changed event: the request's
// `actor` (the CLI sends the user's login name), else "control".
std::string actor_arg(const json& args) {
  std::string actor = optional_string_arg(args, "actor").value_or("control");
  if (actor.empty() || actor.size() > kMaxWearerNameBytes || !valid_utf8(actor))
    throw ControlError(err::kBadRequest, "argument 'actor' must be non-empty UTF-8 of at most " +
                                             std::to_string(kMaxWearerNameBytes) + " bytes");
  return actor;
}

json wearer_json(const pipeline::WearerRecord& w) {
  return {{"id", w.id},           {"display_name", w.display_name},
          {"room", w.room},       {"bed", w.bed},
          {"notes", w.notes},     {"active", w.active},
          {"created_at", w.created_at}, {"updated_at", w.updated_at}};
}

}  // namespace

const char* wearer_field_name(WearerField field) {
  for (const auto& [value, name] : kFieldNames)
    if (value == field) return name;
  return "?";
}

bool valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t length = 0;
    std::uint32_t code = 0, min = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      length = 2, code = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      length = 3, code = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      length = 4, code = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (i + length > text.size()) return false;
    for (std::size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and code points past Unicode's end.
    if (code < min || (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF) return false;
    i += length;
  }
  return true;
}

std::string wearer_field_problem(WearerField field, std::string_view value) {
  const std::size_t limit =
      field == WearerField::kNotes ? kMaxWearerNotesBytes : kMaxWearerNameBytes;
  if (field == WearerField::kDisplayName && value.empty()) return "must not be empty";
  if (value.size() > limit)
    return "is " + std::to_string(value.size()) + " bytes long, at most " + std::to_string(limit) +
           " are kept";
  if (!valid_utf8(value)) return "is not valid UTF-8";
  for (const char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    const bool control = c < 0x20 || c == 0x7F;
    const bool line_break_or_tab = c == '\n' || c == '\r' || c == '\t';
    if (control && !(field == WearerField::kNotes && line_break_or_tab))
      return field == WearerField::kNotes ? "holds a control character other than a line break or tab"
                                          : "holds a control character (it is printed in one line)";
  }
  return "";
}

WearerBook::WearerBook(const std::string& db_path, const config::Config& config, double start_s,
                       WearerOutputs outputs)
    : store_(std::make_unique<pipeline::HitStore>(db_path)),
      settings_(config.wearers),
      liveness_(liveness_settings(config), start_s),
      outputs_(std::move(outputs)),
      next_save_s_(start_s + kPersistPeriodS) {
  for (pipeline::WearerRecord& w : store_->wearers()) {
    states_due_.insert(w.id);
    registry_[w.id] = std::move(w);
  }
  liveness_.restore(store_->wearer_devices());
}

void WearerBook::set_config(const config::Config& config) {
  settings_ = config.wearers;
  liveness_.set_settings(liveness_settings(config));
}

void WearerBook::on_frame(const sensors::Frame& frame, double arrival_s) {
  const std::optional<Recovery> recovery =
      liveness_.on_frame(frame.wearer_id, frame.device_id, arrival_s,
                         static_cast<double>(frame.device_time_us) * 1e-6, frame.samples,
                         frame.sample_rate_hz);
  if (!recovery) return;
  ++counts_.recoveries;
  std::uint64_t alert_seq = 0;
  try {
    alert_seq = store_->last_offline_alert_seq(recovery->wearer, recovery->device,
                                               recovery->offline_since);
  } catch (const std::exception& e) {
    ++counts_.store_errors;
    spdlog::error("wearers: cannot look up the offline alert of wearer {} device {}: {}",
                  recovery->wearer, recovery->device, e.what());
  }
  spdlog::info("{} device {}: sensor sends again after {:.1f} s of silence (offline alert {})",
               who(recovery->wearer), recovery->device, recovery->silent_s, alert_seq);
  if (!outputs_.event) return;
  pipeline::Event event;
  event.type = pipeline::EventType::kSensorRecovered;
  event.wearer = recovery->wearer;
  event.alert_seq = alert_seq;
  event.actor = kDaemonActor;
  event.at = arrival_s;
  event.details = {{"device", recovery->device},
                   {"alert_seq", alert_seq == 0 ? json() : json(alert_seq)},
                   {"silent_s", recovery->silent_s}};
  outputs_.event(std::move(event));
}

void WearerBook::tick(double now_s) {
  const std::vector<const DeviceLiveness*> offline = liveness_.check(now_s);
  for (const DeviceLiveness* device : offline) raise_offline(*device, now_s);
  if (!offline.empty() || now_s >= next_save_s_) {
    save_changed();
    next_save_s_ = now_s + kPersistPeriodS;
  }
  if (outputs_.state) give_changed_states(now_s);
}

void WearerBook::give_changed_states(double now_s) {
  for (const auto& [key, device] : liveness_.devices()) {
    const Liveness now = liveness_.state(device, now_s);
    const auto [seen, is_new] = liveness_seen_.try_emplace(key, now);
    if (!is_new && seen->second == now) continue;
    seen->second = now;
    states_due_.insert(key.first);
  }
  for (const std::uint32_t id : states_due_) {
    json state = state_json(id, now_s);
    json& sent = states_sent_[id];
    if (sent == state) continue;  // e.g. notes changed: not part of the state
    outputs_.state(id, state);
    sent = std::move(state);
  }
  states_due_.clear();
}

json WearerBook::state_json(std::uint32_t id, double now_s) const {
  json state = {{"id", id}};
  const auto registered = registry_.find(id);
  state["registered"] = registered != registry_.end();
  if (registered != registry_.end()) {
    const pipeline::WearerRecord& w = registered->second;
    state["active"] = w.active;
    state["display_name"] = w.display_name;
    state["room"] = w.room;
    state["bed"] = w.bed;
  } else {
    state["active"] = true;
  }
  json devices = json::array();
  for (auto it = liveness_.devices().lower_bound({id, 0});
       it != liveness_.devices().end() && it->first.first == id; ++it)
    devices.push_back({{"device", it->second.device},
                       {"state", liveness_name(liveness_.state(it->second, now_s))}});
  state["devices"] = std::move(devices);
  return state;
}

void WearerBook::flush() { save_changed(/*final=*/true); }

std::string WearerBook::who(std::uint32_t wearer) const {
  const auto registered = registry_.find(wearer);
  if (registered == registry_.end()) return "wearer " + std::to_string(wearer);
  return "wearer " + std::to_string(wearer) + " (" + registered->second.display_name + ")";
}

void WearerBook::raise_offline(const DeviceLiveness& d, double now_s) {
  const auto registered = registry_.find(d.wearer);
  const bool paused = registered != registry_.end() && !registered->second.active;
  const std::string who = this->who(d.wearer);
  const double silent_s = now_s - d.last_arrival;
  if (!settings_.offline_alerts || paused) {
    spdlog::info("{} device {}: offline, no frame for {:.1f} s (no alert: {})", who, d.device,
                 silent_s, paused ? "registered as inactive" : "wearers.offline_alerts is false");
    return;
  }
  pipeline::Alert alert;
  alert.wearer = d.wearer;
  alert.device = d.device;
  alert.pattern = pipeline::kSensorOfflinePattern;
  alert.kind = pipeline::kSensorOfflineKind;
  alert.severity = config::name(settings_.offline_severity);
  alert.t_start = alert.t_end = d.last_device_time;
  alert.end_index = std::max<std::int64_t>(d.last_index, 0);
  alert.detected_at = now_s;
  alert.latency_ms = 1e3 * silent_s;
  if (registered != registry_.end()) alert.wearer_name = registered->second.display_name;
  liveness_.mark_alerted(d.wearer, d.device, now_s);
  ++counts_.offline_alerts;
  spdlog::warn("{} device {}: sensor offline, no frame for {:.1f} s ({} alert)", who, d.device,
               silent_s, alert.severity);
  if (outputs_.alert) outputs_.alert(std::move(alert));
}

void WearerBook::save_changed(bool final) {
  const std::vector<pipeline::WearerDeviceRecord> changed = liveness_.take_changed();
  if (outputs_.devices) {
    if (changed.empty() || outputs_.devices(changed)) return;
    ++counts_.store_errors;
    // A last save has no next one: it is written on this thread.
    if (!final) {
      liveness_.mark_unsaved(changed);
      spdlog::warn("wearers: the store's writer took no devices' last frames (stopped or its "
                   "queue full); {} kept for the next save",
                   changed.size());
      return;
    }
  }
  try {
    store_->save_wearer_devices(changed);
  } catch (const std::exception& e) {
    ++counts_.store_errors;
    liveness_.mark_unsaved(changed);
    spdlog::error("wearers: cannot store the devices' last frames (retried): {}", e.what());
  }
}

void WearerBook::name_alerts(std::vector<pipeline::Alert>& alerts) const {
  if (registry_.empty()) return;
  for (pipeline::Alert& alert : alerts) {
    const auto it = registry_.find(alert.wearer);
    if (it != registry_.end()) alert.wearer_name = it->second.display_name;
  }
}

void WearerBook::wearer_changed(const char* change, const pipeline::WearerRecord& record,
                                const std::string& actor) {
  spdlog::info("wearer {} ({}): {}", record.id, record.display_name, change);
  if (!outputs_.event) return;
  pipeline::Event event;
  event.type = pipeline::EventType::kWearerChanged;
  event.wearer = record.id;
  event.actor = actor;
  event.at = record.updated_at;
  event.details = {{"change", change}, {"wearer", wearer_json(record)}};
  outputs_.event(std::move(event));
}

json WearerBook::add(const json& args) {
  check_known_args(args, {"id", "display_name", "room", "bed", "notes", "active", "actor"});
  pipeline::WearerRecord w;
  w.id = id_arg(args);
  const std::optional<std::string> name = field_arg(args, WearerField::kDisplayName);
  if (!name) throw ControlError(err::kBadRequest, "argument 'display_name' is required");
  w.display_name = *name;
  w.room = field_arg(args, WearerField::kRoom).value_or("");
  w.bed = field_arg(args, WearerField::kBed).value_or("");
  w.notes = field_arg(args, WearerField::kNotes).value_or("");
  w.active = active_arg(args).value_or(true);
  const std::string actor = actor_arg(args);
  w.created_at = w.updated_at = unix_now_s();
  try {
    store_->add_wearer(w);
  } catch (const pipeline::WearerError& e) {
    throw control_error_of(e);
  }
  registry_[w.id] = w;
  states_due_.insert(w.id);
  wearer_changed("added", w, actor);
  return {{"wearer", wearer_json(w)}};
}

json WearerBook::set(const json& args) {
  check_known_args(args, {"id", "display_name", "room", "bed", "notes", "active", "actor"});
  const std::uint32_t id = id_arg(args);
  const auto it = registry_.find(id);
  if (it == registry_.end())
    throw ControlError(err::kUnknownWearer, "no wearer " + std::to_string(id) + " is registered");
  pipeline::WearerRecord w = it->second;
  json changed = json::array();
  const auto apply = [&](WearerField field, std::string& member) {
    if (std::optional<std::string> value = field_arg(args, field); value && *value != member) {
      member = std::move(*value);
      changed.push_back(wearer_field_name(field));
    }
  };
  apply(WearerField::kDisplayName, w.display_name);
  apply(WearerField::kRoom, w.room);
  apply(WearerField::kBed, w.bed);
  apply(WearerField::kNotes, w.notes);
  if (const std::optional<bool> active = active_arg(args); active && *active != w.active) {
    w.active = *active;
    changed.push_back("active");
  }
  const std::string actor = actor_arg(args);
  if (!changed.empty()) {
    w.updated_at = unix_now_s();
    try {
      store_->update_wearer(w);
    } catch (const pipeline::WearerError& e) {
      throw control_error_of(e);
    }
    it->second = w;
    states_due_.insert(w.id);
    wearer_changed("updated", w, actor);
  }
  return {{"wearer", wearer_json(w)}, {"changed", changed}};
}

json WearerBook::remove(const json& args) {
  check_known_args(args, {"id", "actor"});
  const std::uint32_t id = id_arg(args);
  const std::string actor = actor_arg(args);
  pipeline::WearerRecord removed;
  try {
    removed = store_->remove_wearer(id);
  } catch (const pipeline::WearerError& e) {
    throw control_error_of(e);
  }
  registry_.erase(id);
  states_due_.insert(id);
  removed.updated_at = unix_now_s();
  wearer_changed("removed", removed, actor);
  return {{"wearer", wearer_json(removed)}};
}

json WearerBook::list(const json& args) const {
  check_known_args(args, {});
  const double now = unix_now_s();
  std::set<std::uint32_t> ids;
  for (const auto& [id, w] : registry_) ids.insert(id);
  for (const auto& [key, d] : liveness_.devices()) ids.insert(key.first);
  json wearers = json::array();
  for (const std::uint32_t id : ids) {
    json entry;
    const auto registered = registry_.find(id);
    if (registered != registry_.end()) {
      entry = wearer_json(registered->second);
      entry["registered"] = true;
    } else {
      entry = {{"id", id}, {"registered", false}, {"active", true}};
    }
    json devices = json::array();
    for (auto it = liveness_.devices().lower_bound({id, 0});
         it != liveness_.devices().end() && it->first.first == id; ++it) {
      const DeviceLiveness& d = it->second;
      devices.push_back({{"device", d.device},
                         {"state", liveness_name(liveness_.state(d, now))},
                         {"silent_s", now - d.last_arrival},
                         {"last_frame_at", d.last_arrival},
                         {"last_device_time", d.last_device_time},
                         {"offline_since", d.offline_since ? json(*d.offline_since) : json()}});
    }
    entry["devices"] = std::move(devices);
    wearers.push_back(std::move(entry));
  }
  return {{"count", wearers.size()}, {"wearers", std::move(wearers)}, {"time", now}};
}

json WearerBook::stats_json(double now_s) const {
  const std::array<std::uint64_t, 3> by_state = liveness_.count_by_state(now_s);
  return {{"registered", registry_.size()},
          {"devices",
           {{"online", by_state[static_cast<std::size_t>(Liveness::kOnline)]},
            {"stale", by_state[static_cast<std::size_t>(Liveness::kStale)]},
            {"offline", by_state[static_cast<std::size_t>(Liveness::kOffline)]}}},
          {"offline_alerts", counts_.offline_alerts},
          {"recoveries", counts_.recoveries},
          {"store_errors", counts_.store_errors}};
}

void add_wearer_commands(ControlRegistry& registry, WearerBook* book) {
  const auto on_book = [book](json (WearerBook::*command)(const json&)) {
    return [book, command](const json& args) -> json {
      if (!book) throw ControlError(err::kUnavailable, "this daemon keeps no wearer registry");
      return (book->*command)(args);
    };
  };
  registry.add("wearer.add",
               "register a wearer number: {id, display_name, room?, bed?, notes?, active?, actor?}",
               RunsOn::kPipelineThread, on_book(&WearerBook::add));
  registry.add("wearer.set",
               "change a registered wearer's fields (those given): {id, display_name?, room?, "
               "bed?, notes?, active?, actor?}",
               RunsOn::kPipelineThread, on_book(&WearerBook::set));
  registry.add("wearer.list",
               "every registered wearer and every wearer seen in frames, with each device's "
               "state (online, stale, offline) and seconds since its last frame",
               RunsOn::kPipelineThread, [book](const json& args) -> json {
                 if (!book) throw ControlError(err::kUnavailable, "this daemon keeps no wearer registry");
                 return book->list(args);
               });
  registry.add("wearer.remove", "remove a wearer from the registry: {id, actor?}",
               RunsOn::kPipelineThread, on_book(&WearerBook::remove));
}

}  // namespace gw::daemon
