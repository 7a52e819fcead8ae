// The daemon's two hash-table jobs built from its configuration: alert
// de-duplication (jobs/alert_dedup.h) and the time-slot status index with
// its recorder (jobs/slot_index.h, jobs/slot_recorder.h). gaitwatchd
// and the offline runs of `gaitwatch detect|eval|plot` build them here, so
// both de-duplicate alike.
//
// Threads: the returned objects are single-threaded (see their headers).
// Errors: gw::Error when a table cannot be created (hashtable.backend: cuda
// without a GPU, an invalid table shape).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "kernels/hashtable/hash_table.h"
#include "jobs/alert_dedup.h"
#include "jobs/slot_index.h"
#include "jobs/slot_recorder.h"
#include "pipeline/stream_clock.h"

namespace gw::pipeline {

// The table shape of `hashtable.*` with this initial node pool.
kernels::hashtable::HashTableConfig hash_table_config(const config::Config& cfg,
                                                      std::uint64_t node_capacity);

// nullptr when dedup.enabled is false. `note` as kernels::hashtable::make_hash_table_backend().
std::unique_ptr<AlertDeduplicator> make_alert_deduplicator(const config::Config& cfg,
                                                           std::string* note);

// nullptr when slots.enabled is false. `note` as kernels::hashtable::make_hash_table_backend().
std::unique_ptr<SlotIndex> make_slot_index(const config::Config& cfg, std::string* note);
SlotRecorderOptions slot_recorder_options(const config::Config& cfg);
// Every device whose `status` names inputs, by device id.
std::map<std::uint16_t, SlotSources> slot_sources(const config::Config& cfg);

// One detection round through the deduplicator: first expires by each
// stream's clock (so a restarted device clock is forgotten before its new
// candidates are decided), then admits; returns the admitted candidates in
// their order. The routine expiry of one round is bounded
// (kMaxExpiredPerRound keys, AlertDeduplicator::expire_streams): this is on
// every alert's way out.
inline constexpr std::size_t kMaxExpiredPerRound = 8192;
std::vector<Alert> admit_new_alerts(AlertDeduplicator& dedup, const std::vector<StreamClock>& clocks,
                                    std::vector<Alert> candidates);

}  // namespace gw::pipeline
