// The daemon's wearer registry and sensor liveness (docs/interfaces.md:
// wearer.add, wearer.set, wearer.list, wearer.remove; docs/operations.md,
// "Wearers and sensor liveness"):
//   * the registry names the wearer numbers of the frames (display name,
//     room, bed, notes, active) in the hit store's table wearers, through
//     its own read-write connection to storage.path (apart from the sink's);
//   * liveness follows the last frame of every (wearer, device)
//     (daemon/liveness.h), persisted in table wearer_devices at most every
//     kPersistPeriodS (and when a device goes offline), not per frame;
//   * a device of a wearer not registered as inactive that goes offline
//     raises one sensor_offline alert per silence through the sink (with
//     wearers.offline_alerts), and its next frame a sensor_recovered event;
//   * registered wearers' alerts carry wearer_name (name_alerts()).
//
// Thread safety: none; the daemon's pipeline thread owns it (the control
// commands run there). Errors: a store that cannot be opened throws
// gw::Error; later store failures are logged and counted, never thrown out
// of on_frame() or tick().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "daemon/control.h"
#include "daemon/liveness.h"
#include "sensors/frame.h"
#include "sinks/alert.h"
#include "sinks/event.h"
#include "sinks/store.h"

namespace gw::daemon {

// Longest display name, room and bed, and longest notes, in bytes.
inline constexpr std::size_t kMaxWearerNameBytes = 200;
inline constexpr std::size_t kMaxWearerNotesBytes = 2000;
// How often at most the devices' last frames are written to the store.
inline constexpr double kPersistPeriodS = 5;

// Which registry text field a value is for; each has its own rules.
enum class WearerField { kDisplayName, kRoom, kBed, kNotes };
const char* wearer_field_name(WearerField field);  // "display_name", "room", ...
// Why `value` cannot be stored in `field`; empty when it can. Every field
// is valid UTF-8 within its length (kMaxWearerNameBytes, notes
// kMaxWearerNotesBytes); display_name is not empty; display_name, room and
// bed hold no control characters (they are printed in one line), notes may
// hold line breaks and tabs.
std::string wearer_field_problem(WearerField field, std::string_view value);
bool valid_utf8(std::string_view text);

// Where the book's alerts and events go (the sink's submit and
// submit_event in the daemon).
struct WearerOutputs {
  std::function<void(pipeline::Alert)> alert;
  std::function<void(pipeline::Event)> event;
  // Optional: a wearer's present state (state_json()), from tick(): every
  // known wearer's once at the first tick, then a wearer's only when its
  // state differs from the one last given (a registry change, a device
  // online, stale or offline, a new device). The MQTT bridge's retained
  // per-wearer state.
  std::function<void(std::uint32_t wearer, const nlohmann::json& state)> state;
  // Optional: stores the devices' last frames on the store's own writer
  // (AlertSink::submit_wearer_devices), so that a save of thousands of rows
  // neither holds up the calling thread nor waits for the writer's lock;
  // false: not taken, kept for the next save. Without it the book stores
  // them itself, on the calling thread.
  std::function<bool(std::vector<pipeline::WearerDeviceRecord>)> devices;
};

class WearerBook {
 public:
  // Opens storage.path (the sink has created it), reads the registry and
  // the persisted last frames; `start_s` is when the daemon started (unix s).
  WearerBook(const std::string& db_path, const config::Config& config, double start_s,
             WearerOutputs outputs);

  // A reload: wearers.* (and ingest.stream_idle_s) from the next tick on.
  void set_config(const config::Config& config);

  // A frame the engine accepted.
  void on_frame(const sensors::Frame& frame, double arrival_s);
  // Raises the alerts of devices that went offline by `now_s` and writes
  // what changed to the store when due. The daemon calls it from its
  // pipeline loop, with its clock.
  void tick(double now_s);
  // Writes every change not yet written (at stop): to the devices output
  // when there is one, on the book's own connection when there is none or
  // it refuses them.
  void flush();

  // Sets wearer_name of every alert whose wearer is registered.
  void name_alerts(std::vector<pipeline::Alert>& alerts) const;

  // The control commands; arguments and replies as docs/interfaces.md says.
  // Throw ControlError: bad_request (naming the field), duplicate_wearer,
  // unknown_wearer.
  nlohmann::json add(const nlohmann::json& args);
  nlohmann::json set(const nlohmann::json& args);
  nlohmann::json list(const nlohmann::json& args) const;
  nlohmann::json remove(const nlohmann::json& args);

  // What a dashboard shows of wearer `id` at `now_s`: {id, registered,
  // active, display_name, room, bed (registered only), devices [{device,
  // state}]}; no times, so it changes only when something a carer sees does.
  nlohmann::json state_json(std::uint32_t id, double now_s) const;

  // {registered, devices {online, stale, offline}, offline_alerts,
  //  recoveries, store_errors}.
  nlohmann::json stats_json(double now_s) const;

 private:
  // "wearer 7 (Ada Lovelace)" for log lines; the number alone when unregistered.
  std::string who(std::uint32_t wearer) const;
  void raise_offline(const DeviceLiveness& device, double now_s);
  // `final`: no later save follows (flush), so rows the devices output
  // refuses are written on the book's own connection, not kept.
  void save_changed(bool final = false);
  // WearerOutputs::state for the wearers whose state may have changed.
  void give_changed_states(double now_s);
  void wearer_changed(const char* change, const pipeline::WearerRecord& record,
                      const std::string& actor);

  std::unique_ptr<pipeline::HitStore> store_;
  config::WearersConfig settings_;
  LivenessTracker liveness_;
  WearerOutputs outputs_;
  std::map<std::uint32_t, pipeline::WearerRecord> registry_;
  double next_save_s_ = 0;
  // Wearers whose state to build at the next tick: registry changes, the
  // registered ones at the start, those with a device whose liveness moved.
  std::set<std::uint32_t> states_due_;
  // Each device's liveness as the last tick saw it; the clock alone moves
  // a device from online to stale to offline, so each tick compares.
  std::map<std::pair<std::uint32_t, std::uint16_t>, Liveness> liveness_seen_;
  std::map<std::uint32_t, nlohmann::json> states_sent_;  // WearerOutputs::state's last per wearer
  struct Counts {
    std::uint64_t offline_alerts = 0, recoveries = 0, store_errors = 0;
  } counts_;
};

// wearer.add, wearer.set, wearer.list, wearer.remove on the pipeline thread;
// `book` must outlive the pipeline thread's last PipelineTasks::run_pending().
void add_wearer_commands(ControlRegistry& registry, WearerBook* book);

}  // namespace gw::daemon
