// The daemon's own control commands (the protocol: docs/interfaces.md
// "Control interface"; the mechanism: daemon/control.h):
//   status        pipeline thread  the counters of every part (the "stats."
//                                  message's body)
//   slots         job              a range question to the time-slot index,
//                                  run as pipeline-thread steps of at most
//                                  slots.query_chunk_searches point searches,
//                                  with progress after each step; cancellable
//   alerts.since  control thread   stored alerts with seq > N from SQLite (its
//                                  own read-only connection, WAL), so a
//                                  subscriber fetches what it missed
//   zones         control thread   the configured receiving zones
//   alert.mark    pipeline thread  a carer's verdict on a stored alert: its
//   alert.marks                    window becomes a wearer-scoped example
//   alert.unmark                   (daemon/marks.h); list; withdraw
//   history.search job             the k windows of the raw-stream history
//                                  most like a configured pattern or an
//                                  example (history/history_search.h), on
//                                  the job's thread with its own read-only
//                                  store and a backend of the live kind;
//                                  progress per slice; cancellable
#pragma once

#include <functional>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "daemon/control.h"
#include "daemon/marks.h"
#include "jobs/slot_index.h"

namespace gw::daemon {

struct DaemonCommandDeps {
  config::Config config;                  // the running config (restart-only sections)
  std::function<nlohmann::json()> status; // called on the pipeline thread
  // The slot index, touched only in pipeline-thread steps; null when
  // slots.enabled is false. Must outlive the pipeline thread's last
  // PipelineTasks::run_pending().
  pipeline::SlotIndex* slots = nullptr;
  // Called on the pipeline thread: the config the engine runs now (its
  // patterns follow reloads). Empty = `config`.
  std::function<config::Config()> live_config;
  // Carers' marks, touched only on the pipeline thread; null = the alert.mark
  // commands answer `unavailable`. Must outlive the pipeline thread's last
  // PipelineTasks::run_pending().
  MarkBook* marks = nullptr;
};

void add_daemon_commands(ControlRegistry& registry, DaemonCommandDeps deps);

// One slot hit as the control interface returns it.
nlohmann::json slot_hit_json(const pipeline::SlotHit& hit, const config::Config& config);

}  // namespace gw::daemon
