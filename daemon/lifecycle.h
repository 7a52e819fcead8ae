// The daemon's side of the alert lifecycle (docs/operations.md, "Alert
// lifecycle"; the commands in docs/interfaces.md): carers acknowledge and
// resolve stored alerts, and critical alerts nobody acknowledges escalate
// (daemon/escalation.h). States live in the hit store's alert_states table,
// written on a read-write connection of this class's own (the sink writes
// alerts on its connection); every change is also an event handed to
// `publish` (AlertSink::submit_event in the daemon), so it is an audit row and
// a published message. An alert is not published again when it escalates:
// subscribers count its seq, and follow `event.alert_escalated.` instead.
//
// Critical alerts are found in the store, since only the store knows their
// seq: at the first step() every open one (so that alerts raised before a
// restart go on escalating, from the level stored), afterwards those the
// writer committed since the last look, whenever critical_alert_submitted()
// said some were on their way.
//
// Thread safety: none; the daemon's pipeline thread owns it (its control
// commands run there). Store failures in step() are logged, never thrown;
// the commands throw daemon::ControlError.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "common/time_text.h"
#include "config/config.h"
#include "daemon/control.h"
#include "daemon/escalation.h"
#include "sinks/event.h"
#include "sinks/store.h"

namespace gw::daemon {

// Who the daemon is when it is the actor of an event.
inline constexpr const char* kDaemonActor = "gaitwatchd";

EscalationPolicy escalation_policy(const config::AlertsConfig& alerts);

class AlertLifecycle {
 public:
  using Publish = std::function<void(pipeline::Event)>;
  using UnixClock = std::function<double()>;  // unix seconds now

  // Opens storage path `db_path` (the sink has created it).
  AlertLifecycle(const std::string& db_path, EscalationPolicy policy, Publish publish,
                 UnixClock now);

  // A reload.
  void set_policy(EscalationPolicy policy);

  // alert.ack {seq, by, note?} and alert.resolve {seq, by, note?}: the new
  // state (`state` as alert.get gives it). Errors unknown_alert,
  // already_acknowledged, already_resolved, bad_request.
  nlohmann::json acknowledge(const nlohmann::json& args);
  nlohmann::json resolve(const nlohmann::json& args);

  // A critical alert went to the writer: the next step() looks for it.
  void critical_alert_submitted() { look_for_alerts_ = true; }
  // Reads the critical alerts committed since the last look (when there may
  // be some), then stores and publishes every escalation due at the clock's
  // now. `writer_pending`: the alerts the writer held when the caller asked
  // it (SinkCounters::pending), before this call; while it held any, the
  // next step looks again. Cheap when nothing is due: the daemon calls it
  // about once a second.
  void step(std::uint64_t writer_pending);

  std::size_t watched() const { return schedule_.watched(); }

 private:
  nlohmann::json change_state(const nlohmann::json& args, pipeline::EventType type);
  void read_new_alerts();

  std::unique_ptr<pipeline::HitStore> store_;
  EscalationSchedule schedule_;
  Publish publish_;
  UnixClock now_;
  bool look_for_alerts_ = true;   // the first step reads every open alert
  std::uint64_t read_up_to_ = 0;  // alerts with seq <= this were looked at
};

// The JSON of an alert's state (alert.get's `state`).
nlohmann::json alert_state_json(const pipeline::AlertStateRecord& state);

// alert.ack, alert.resolve (pipeline thread, through `lifecycle`, which must
// outlive the pipeline thread's last PipelineTasks::run_pending()) and
// alert.get, alerts.open, events.list (control thread, on a read-only
// connection of their own to config.storage.path).
void add_lifecycle_commands(ControlRegistry& registry, AlertLifecycle* lifecycle,
                            const config::Config& config);

}  // namespace gw::daemon
