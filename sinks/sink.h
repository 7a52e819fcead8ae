// The alert sink: a writer thread that commits alerts to the HitStore in
// batched transactions and, only after a batch commits, publishes each alert on
// a ZeroMQ PUB socket as [topic, JSON]. It also publishes status messages
// ([ "stats.", JSON ]) handed to it.
//
// Thread safety: submit()/submit_all()/submit_stats()/counters() from any
// thread; drain() and stop() from one thread at a time.
// Never blocks its producers: while commits fail (a full disk, a locked or
// broken file) alerts are held in memory up to max_pending_alerts, and the
// batch that failed is retried with back-off; alerts beyond the bound are
// dropped and counted (store_dropped), never silently: a log line at most
// every kSinkReportPeriod gives the counts.
// Accounting (exact whenever no submit is under way, e.g. after drain()):
// submitted = committed + store_dropped + stop_abandoned + pending.
// drain() commits what is held within a deadline; stop() drains, publishes,
// closes the socket and joins.
// Under a backlog (more than a thousand alerts, and more than the batch,
// waiting behind a transaction) a batch's alerts are stored without their
// windows (windows_shed): detection never waits on the windows' bytes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/bounded_queue.h"
#include "sinks/alert.h"
#include "sinks/event.h"
#include "sinks/store.h"

namespace gw::pipeline {

struct SinkOptions {
  std::string db_path;
  double retention_days = 30;        // 0 = keep forever
  // Longest an alert submit()ted alone waits for its transaction. The alerts
  // of one submit_all() (a tick's) are committed as soon as they are all in,
  // together with whatever queued behind them (group commit).
  int commit_interval_ms = 50;
  int max_batch = 4096;              // most alerts in one transaction
  std::string publish_endpoint;      // e.g. tcp://127.0.0.1:7710; empty = do not publish
  int send_hwm = 10000;              // ZeroMQ high-water mark per subscriber
  // ZeroMQ CURVE: the server key file and the authorized client keys'
  // directory (sinks/curve.h); empty = plain TCP.
  std::string curve_secret_key;
  std::string curve_authorized_keys;
  // Most alerts held (submitted, not yet committed) at once; beyond it
  // submitted alerts are dropped and counted (store_dropped). >= 1.
  std::size_t max_pending_alerts = 100000;
  // The database's size limit in bytes (HitStore::limit_size); 0 = none.
  std::uint64_t max_size_bytes = 0;
  // A WAL larger than this after a checkpoint is started again by the
  // writer between two transactions (it copies what the checkpointer has
  // not), so that a writer that never pauses cannot grow it without bound:
  // the file stays at about this size plus a checkpoint period's writes, and
  // is cut back to 4 times this size when a reader held it off longer. > 0.
  std::uint64_t wal_restart_bytes = 64u << 20;
  // Called on the writer thread with [topic, body] of every alert and event
  // once its row is committed, in commit order, whether or not there is a
  // publish_endpoint (the bridges take alerts this way). It must not block:
  // the next commit waits for it.
  std::function<void(const std::string& topic, const std::string& body)> on_committed;
  // The IANA zone of the published bodies' wall-clock times
  // (alert_message_json, event_to_json); empty = the system's.
  std::string time_zone;
};

// Alerts' windows are the bulk of what the writer stores (kilobytes each
// against a few hundred bytes of row). With at least this many alerts
// waiting behind a transaction (and at least as many as it holds) the store
// is not keeping up with detection: that transaction's alerts are stored
// without their windows (windows_shed), and the daemon stops cutting
// windows (Engine::set_alert_windows_paused) while pending() is above it.
inline constexpr std::uint64_t kWindowsShedBacklog = 1024;

// How often at most the sink logs that it drops alerts, and that commits
// keep failing (with the counts since the last line).
inline constexpr std::chrono::seconds kSinkReportPeriod{10};

struct SinkCounters {
  std::uint64_t submitted = 0;       // alerts handed to submit()/submit_all()
  std::uint64_t committed = 0;
  // The committed alerts by severity, then kind ({"critical": {"fall": 3}});
  // a severity or kind appears once an alert of it commits.
  std::map<std::string, std::map<std::string, std::uint64_t>> committed_by_severity;
  std::uint64_t store_dropped = 0;   // refused: max_pending_alerts were held
  std::uint64_t pending = 0;         // held: accepted, neither committed nor given up
  std::uint64_t stop_abandoned = 0;  // given up by drain()/stop() at their deadline
  std::uint64_t published = 0;
  // Events (submit_event): stored and published, or refused/given up.
  std::uint64_t events_committed = 0;
  std::uint64_t events_dropped = 0;
  std::uint64_t transactions = 0;
  std::uint64_t retention_deleted = 0;
  std::uint64_t last_seq = 0;
  std::uint64_t store_errors = 0;
  std::uint64_t checkpoints = 0;  // WAL checkpoints run (off the writer thread)
  // WALs past SinkOptions::wal_restart_bytes started again, and tries that
  // failed (mostly held off by a reader of an older snapshot or by a
  // checkpoint; tried again).
  std::uint64_t wal_restarts = 0;
  std::uint64_t wal_restarts_busy = 0;
  // Alerts committed without their windows because the writer was behind
  // (alerts waiting behind a transaction): the rows keep up, the windows
  // give way; such an alert cannot be marked.
  std::uint64_t windows_shed = 0;
  // Devices' last frames (submit_wearer_devices): rows stored, and saves
  // that failed (their rows are kept and tried again).
  std::uint64_t wearer_devices_saved = 0;
  std::uint64_t wearer_devices_errors = 0;
  // Cumulative wall seconds of the writer thread in transactions (rows and
  // fsync) and in publishing committed alerts (JSON and sockets).
  double commit_s = 0;
  double publish_s = 0;
};

class AlertSink {
 public:
  // Opens the store and binds the socket (throws gw::Error on failure), then
  // starts the writer thread.
  explicit AlertSink(const SinkOptions& options);
  ~AlertSink();  // calls stop()
  AlertSink(const AlertSink&) = delete;
  AlertSink& operator=(const AlertSink&) = delete;

  // Queues an alert for the writer, or drops and counts it when
  // max_pending_alerts are held; never blocks. Throws gw::Error after
  // stop(): the alert can no longer be stored.
  void submit(Alert alert);
  // submit() of each alert in order, under one lock of the writer's queue
  // (a batch at thousands of wearers has about a thousand), as one group:
  // the writer commits it without waiting for commit_interval_ms. What does
  // not fit under max_pending_alerts is dropped from the group's end.
  // `alerts` is left empty.
  void submit_all(std::vector<Alert>& alerts);
  void submit_stats(nlohmann::json stats);
  // Queues an event for the audit log: committed in order with the alerts
  // submitted around it (in the same transaction as those that share its
  // batch, without waiting for commit_interval_ms), then published on
  // event_topic() with its id. `at` = 0 is set to now. Never blocks and never
  // throws: after stop(), with the writer's queue full, or when its batch is
  // given up at a drain's deadline, the event is dropped, logged and counted
  // (events_dropped).
  void submit_event(Event event);
  // Hands devices' last frames (HitStore::save_wearer_devices) to the
  // writer, which stores them in transactions of their own (a few thousand
  // rows each), between its alert transactions. The store keeps one writer: the caller neither
  // waits for the writer's transactions nor holds them up with its own.
  // Never blocks; returns false, taking nothing, after stop() or with the
  // writer's queue full (the caller keeps the rows for a later call). A
  // save that fails is logged and counted (wearer_devices_errors); its rows
  // are tried again with later ones (the newest row of a (wearer, device)
  // wins). stop() stores what is still held, once more; what that fails to
  // store is logged and lost (a restart then sees older last frames).
  bool submit_wearer_devices(std::vector<WearerDeviceRecord> devices);
  // Commits (and publishes) every alert submitted before the call, at once,
  // and returns when none is held. A batch that fails is retried until
  // `deadline`; from then on a failing batch is given up, and with it every
  // alert still held (counted in stop_abandoned, neither stored nor
  // published; a commit already running may still take the store's busy
  // timeout). Returns false when anything was given up. The sink goes on
  // accepting alerts and stats afterwards.
  bool drain(std::chrono::steady_clock::time_point deadline);
  // drain() with kStopDrainLimit (unless drained before), then publishes what
  // is queued, closes the socket and joins the threads. Idempotent.
  void stop();
  static constexpr std::chrono::seconds kStopDrainLimit{1};
  SinkCounters counters() const;
  // Alerts held now (counters().pending without the rest).
  std::uint64_t pending() const;
  // Endpoint actually bound (resolves tcp://...:0 / wildcards).
  std::string bound_endpoint() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gw::pipeline
