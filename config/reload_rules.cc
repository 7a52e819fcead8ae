#include "config/reload_rules.h"

#include <cstddef>

namespace gw::config {
namespace {

// One row of the table. Restart-only rows say how to compare a key's values
// and how to keep the running one; reload rows need neither.
struct Key {
  const char* path;
  ReloadEffect effect;
  bool (*same)(const Config& running, const Config& fresh);
  void (*keep)(Config& fresh, const Config& running);
};

// The key's path is the member path spelled out (the members carry the
// file's key names), so that the path a log line names is the one compared.
#define GW_RESTART_KEY(member)                                                   \
  Key {                                                                          \
    #member, ReloadEffect::kRestart,                                             \
        [](const Config& running, const Config& fresh) {                         \
          return running.member == fresh.member;                                 \
        },                                                                       \
        [](Config& fresh, const Config& running) { fresh.member = running.member; } \
  }
#define GW_RELOAD_KEY(path) \
  Key { path, ReloadEffect::kReload, nullptr, nullptr }

// Keys of every device (devices[].KEY), compared device by device.
struct DeviceKey {
  const char* key;
  ReloadEffect effect;
  bool (*same)(const DeviceProfile& running, const DeviceProfile& fresh);
};

#define GW_DEVICE_KEY(member, reload_effect)                                     \
  DeviceKey {                                                                    \
    #member, ReloadEffect::reload_effect,                                        \
        [](const DeviceProfile& running, const DeviceProfile& fresh) {           \
          return running.member == fresh.member;                                 \
        }                                                                        \
  }

const std::vector<Key>& keys_before_devices() {
  static const std::vector<Key> keys = {
      GW_RELOAD_KEY("daemon.log_level"),
      GW_RESTART_KEY(daemon.watchdog_s),
      GW_RESTART_KEY(daemon.stop_timeout_s),
      GW_RESTART_KEY(ingest.udp.bind),
      GW_RESTART_KEY(ingest.udp.port),
      GW_RESTART_KEY(ingest.tcp.bind),
      GW_RESTART_KEY(ingest.tcp.port),
      GW_RESTART_KEY(ingest.tcp.max_connections),
      GW_RESTART_KEY(ingest.tcp.idle_timeout_s),
      GW_RESTART_KEY(ingest.threads),
      GW_RESTART_KEY(ingest.max_frame_bytes),
      GW_RESTART_KEY(ingest.queue_capacity),
      GW_RESTART_KEY(ingest.queue_overflow),
      GW_RESTART_KEY(ingest.nats),
      GW_RESTART_KEY(ingest.ring_capacity_samples),
      GW_RESTART_KEY(ingest.max_streams),
      GW_RESTART_KEY(ingest.stream_idle_s),
      GW_RESTART_KEY(ingest.stream_stale_s),
      GW_RESTART_KEY(ingest.stream_offline_s),
      // Whether the key is present at all (restrict_devices) is part of it.
      Key{"ingest.allowed_devices", ReloadEffect::kRestart,
          [](const Config& running, const Config& fresh) {
            return running.ingest.restrict_devices == fresh.ingest.restrict_devices &&
                   running.ingest.allowed_devices == fresh.ingest.allowed_devices;
          },
          [](Config& fresh, const Config& running) {
            fresh.ingest.restrict_devices = running.ingest.restrict_devices;
            fresh.ingest.allowed_devices = running.ingest.allowed_devices;
          }},
  };
  return keys;
}

// The ingest checks frames against the profiles it was started with, and
// the slot recorder reads their status inputs, the hotspot trackers their
// hotspots; the groups only shape the patterns the engine compiles on reload.
const std::vector<DeviceKey>& device_keys() {
  static const std::vector<DeviceKey> keys = {
      GW_DEVICE_KEY(id, kRestart),       GW_DEVICE_KEY(name, kRestart),
      GW_DEVICE_KEY(kind, kRestart),     GW_DEVICE_KEY(sample_rate_hz, kRestart),
      GW_DEVICE_KEY(channels, kRestart), GW_DEVICE_KEY(groups, kReload),
      GW_DEVICE_KEY(status, kRestart),   GW_DEVICE_KEY(hotspots, kRestart),
  };
  return keys;
}

const std::vector<Key>& keys_after_devices() {
  static const std::vector<Key> keys = {
      GW_RESTART_KEY(search.backend),
      GW_RESTART_KEY(search.threads),
      GW_RESTART_KEY(search.devices),
      GW_RESTART_KEY(search.warm_up_streams),
      GW_RELOAD_KEY("search.tick_ms"),
      GW_RELOAD_KEY("search.deadline_ms"),
      GW_RELOAD_KEY("search.max_matches_per_pair"),
      GW_RELOAD_KEY("search.overload_policy"),
      GW_RELOAD_KEY("search.deadline_safety_ms"),
      GW_RELOAD_KEY("patterns"),
      GW_RESTART_KEY(storage.path),
      GW_RESTART_KEY(storage.retention_days),
      GW_RESTART_KEY(storage.commit_interval_ms),
      GW_RESTART_KEY(storage.max_batch),
      GW_RESTART_KEY(storage.max_pending_alerts),
      GW_RESTART_KEY(storage.max_size_mb),
      GW_RELOAD_KEY("marks.max_examples_per_wearer"),
      GW_RELOAD_KEY("marks.alert_windows"),
      GW_RELOAD_KEY("marks.window_budget_mb_per_s"),
      GW_RELOAD_KEY("wearers.stale_after_s"),
      GW_RELOAD_KEY("wearers.offline_after_s"),
      GW_RELOAD_KEY("wearers.offline_alerts"),
      GW_RELOAD_KEY("wearers.offline_severity"),
      GW_RESTART_KEY(metrics.bind),
      GW_RESTART_KEY(metrics.port),
      GW_RESTART_KEY(bridges.mqtt),
      GW_RESTART_KEY(bridges.webhook),
      GW_RESTART_KEY(console),
      GW_RESTART_KEY(gait),
      GW_RESTART_KEY(nats),
      GW_RESTART_KEY(history.enabled),
      GW_RESTART_KEY(history.path),
      GW_RESTART_KEY(history.retention_hours),
      GW_RESTART_KEY(history.chunk_s),
      GW_RESTART_KEY(history.compression),
      GW_RESTART_KEY(history.queue_chunks),
      GW_RESTART_KEY(history.queue_overflow),
      GW_RESTART_KEY(history.commit_interval_ms),
      GW_RESTART_KEY(publish.endpoint),
      GW_RESTART_KEY(publish.curve_secret_key),
      GW_RESTART_KEY(publish.curve_authorized_keys),
      GW_RESTART_KEY(publish.send_hwm),
      GW_RELOAD_KEY("publish.stats_interval_s"),
      GW_RESTART_KEY(control.enabled),
      GW_RESTART_KEY(control.endpoint),
      GW_RESTART_KEY(control.max_jobs),
      GW_RESTART_KEY(control.queue_capacity),
      GW_RESTART_KEY(control.max_request_bytes),
      GW_RESTART_KEY(control.curve_secret_key),
      GW_RESTART_KEY(control.curve_authorized_keys),
      GW_RESTART_KEY(hashtable.backend),
      GW_RESTART_KEY(hashtable.cpu_threads),
      GW_RESTART_KEY(hashtable.tables),
      GW_RESTART_KEY(hashtable.buckets_per_table),
      GW_RESTART_KEY(dedup.enabled),
      GW_RESTART_KEY(dedup.bucket_s),
      GW_RESTART_KEY(dedup.retention_s),
      GW_RESTART_KEY(dedup.node_capacity),
      GW_RESTART_KEY(slots.enabled),
      GW_RESTART_KEY(slots.clock),
      GW_RESTART_KEY(slots.retention_s),
      GW_RESTART_KEY(slots.max_wait_s),
      GW_RESTART_KEY(slots.node_capacity),
      GW_RESTART_KEY(slots.query_chunk_searches),
      GW_RESTART_KEY(slots.still_max_std_g),
      GW_RESTART_KEY(slots.light_max_std_g),
      GW_RESTART_KEY(slots.walking_max_std_g),
      GW_RESTART_KEY(slots.posture_axis_min_g),
      GW_RESTART_KEY(slots.foot_loaded_min),
      GW_RESTART_KEY(zones),
      // The pipeline thread reads the escalation policy at every step.
      GW_RELOAD_KEY("alerts.escalation_s"),
      GW_RELOAD_KEY("alerts.max_escalations"),
      // The alert writer formats times in the zone it started with.
      GW_RESTART_KEY(site.time_zone),
  };
  return keys;
}

#undef GW_RESTART_KEY
#undef GW_RELOAD_KEY
#undef GW_DEVICE_KEY

void keep_keys(const std::vector<Key>& keys, const Config& running, Config& fresh,
               std::vector<std::string>& kept) {
  for (const Key& key : keys) {
    if (key.effect != ReloadEffect::kRestart || key.same(running, fresh)) continue;
    key.keep(fresh, running);
    kept.emplace_back(key.path);
  }
}

void keep_devices(const Config& running, Config& fresh, std::vector<std::string>& kept) {
  if (running.devices.size() != fresh.devices.size()) {
    fresh.devices = running.devices;
    kept.emplace_back("devices");
    return;
  }
  for (std::size_t i = 0; i < running.devices.size(); ++i) {
    const DeviceProfile& was = running.devices[i];
    DeviceProfile& now = fresh.devices[i];
    bool restart_change = false;
    for (const DeviceKey& key : device_keys())
      if (key.effect == ReloadEffect::kRestart && !key.same(was, now)) restart_change = true;
    if (!restart_change) continue;
    // The whole device stays as it runs, so every key that differs is kept.
    const std::string prefix = "devices[" + std::to_string(i) + "].";
    for (const DeviceKey& key : device_keys())
      if (!key.same(was, now)) kept.push_back(prefix + key.key);
    now = was;
  }
}

// "devices[2].groups" -> "devices[].groups": list items share their rule.
std::string without_indices(const std::string& path) {
  std::string out;
  bool in_index = false;
  for (const char c : path) {
    if (c == '[') {
      in_index = true;
      out += c;
    } else if (c == ']') {
      in_index = false;
      out += c;
    } else if (!in_index) {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::vector<ReloadRule> reload_rules() {
  std::vector<ReloadRule> rules;
  for (const Key& key : keys_before_devices()) rules.push_back({key.path, key.effect});
  for (const DeviceKey& key : device_keys())
    rules.push_back({std::string("devices[].") + key.key, key.effect});
  for (const Key& key : keys_after_devices()) rules.push_back({key.path, key.effect});
  return rules;
}

std::optional<ReloadEffect> reload_effect(const std::string& key_path) {
  const std::string path = without_indices(key_path);
  std::optional<ReloadEffect> effect;
  std::size_t matched = 0;
  for (const ReloadRule& rule : reload_rules()) {
    const std::string& r = rule.path;
    const bool covers = path.compare(0, r.size(), r) == 0 &&
                        (path.size() == r.size() || path[r.size()] == '.' || path[r.size()] == '[');
    if (covers && r.size() > matched) {
      effect = rule.effect;
      matched = r.size();
    }
  }
  return effect;
}

std::vector<std::string> keep_restart_values(const Config& running, Config& fresh) {
  std::vector<std::string> kept;
  keep_keys(keys_before_devices(), running, fresh, kept);
  keep_devices(running, fresh, kept);
  keep_keys(keys_after_devices(), running, fresh, kept);
  return kept;
}

std::vector<std::string> restart_only_differences(const Config& running, const Config& fresh) {
  Config copy = fresh;
  return keep_restart_values(running, copy);
}

}  // namespace gw::config
