#include "jobs/daemon_jobs.h"

#include <algorithm>
#include <utility>

namespace gw::pipeline {

namespace ht = kernels::hashtable;

ht::HashTableConfig hash_table_config(const config::Config& cfg, std::uint64_t node_capacity) {
  ht::HashTableConfig table;
  table.tables = cfg.hashtable.tables;
  table.buckets_per_table = cfg.hashtable.buckets_per_table;
  table.cpu_threads = cfg.hashtable.cpu_threads;
  table.node_capacity = node_capacity;
  return table;
}

std::unique_ptr<AlertDeduplicator> make_alert_deduplicator(const config::Config& cfg,
                                                           std::string* note) {
  if (note) note->clear();
  if (!cfg.dedup.enabled) return nullptr;
  AlertDedupOptions options;
  options.bucket_s = cfg.dedup.bucket_s;
  options.retention_s = cfg.dedup.retention_s;
  return std::make_unique<AlertDeduplicator>(
      kernels::hashtable::make_hash_table_backend(config::name(cfg.hashtable.backend), note,
                              hash_table_config(cfg, cfg.dedup.node_capacity)),
      options);
}

std::unique_ptr<SlotIndex> make_slot_index(const config::Config& cfg, std::string* note) {
  if (note) note->clear();
  if (!cfg.slots.enabled) return nullptr;
  SlotIndexOptions options;
  // A query runs in chunks of this many searches (daemon/commands.cc), so
  // the index never needs to accept more in one batch, except for one second
  // of every status in every zone.
  const std::uint64_t one_second_everywhere =
      matching_status_codes({}).size() * static_cast<std::uint64_t>(kMaxSlotZone + 1);
  options.max_query_searches = std::max(cfg.slots.query_chunk_searches, one_second_everywhere);
  return std::make_unique<SlotIndex>(
      kernels::hashtable::make_hash_table_backend(config::name(cfg.hashtable.backend), note,
                              hash_table_config(cfg, cfg.slots.node_capacity)),
      options);
}

SlotRecorderOptions slot_recorder_options(const config::Config& cfg) {
  SlotRecorderOptions options;
  options.clock = cfg.slots.clock;
  options.max_wait_s = cfg.slots.max_wait_s;
  options.still_max_std_g = static_cast<float>(cfg.slots.still_max_std_g);
  options.light_max_std_g = static_cast<float>(cfg.slots.light_max_std_g);
  options.walking_max_std_g = static_cast<float>(cfg.slots.walking_max_std_g);
  options.posture_axis_min_g = static_cast<float>(cfg.slots.posture_axis_min_g);
  options.foot_loaded_min = static_cast<float>(cfg.slots.foot_loaded_min);
  return options;
}

std::map<std::uint16_t, SlotSources> slot_sources(const config::Config& cfg) {
  std::map<std::uint16_t, SlotSources> sources;
  for (const config::DeviceProfile& device : cfg.devices) {
    SlotSources source;
    source.accel = device.status.accel;
    source.vertical_axis = device.status.vertical_axis;
    source.gravity = static_cast<float>(device.status.gravity);
    source.left_load = device.status.left_load;
    source.right_load = device.status.right_load;
    if (!source.empty()) sources.emplace(device.id, std::move(source));
  }
  return sources;
}

std::vector<Alert> admit_new_alerts(AlertDeduplicator& dedup, const std::vector<StreamClock>& clocks,
                                    std::vector<Alert> candidates) {
  dedup.expire_streams(clocks, kMaxExpiredPerRound);
  if (candidates.empty()) return candidates;
  const std::vector<bool> admitted = dedup.admit(candidates);
  std::vector<Alert> out;
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (admitted[i]) out.push_back(std::move(candidates[i]));
  return out;
}

}  // namespace gw::pipeline
