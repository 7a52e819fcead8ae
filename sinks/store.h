// The SQLite hit store. One file, WAL mode, schema versioned with
// PRAGMA user_version and migrated on open.
//
// Thread safety: a HitStore is one connection and must be used by one thread
// at a time (the sink's writer thread in the daemon; the CLI reads with its
// own HitStore). Readers in other processes see committed rows (WAL).
// Errors: every SQLite failure throws gw::Error with the statement and message.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "sinks/alert.h"
#include "sinks/event.h"

struct sqlite3;

namespace gw::pipeline {

inline constexpr int kStoreSchemaVersion = 11;

// Alerts are indexed for lookups by wearer in blocks of 2^kSeqBlockBits
// consecutive seqs (index hits_block_wearer_end_index on (seq >> bits,
// wearer, end_index)): a lookup by wearer is one index search per block.
inline constexpr int kSeqBlockBits = 12;
inline constexpr std::int64_t seq_block(std::uint64_t seq) {
  return static_cast<std::int64_t>(seq >> kSeqBlockBits);
}
// The lookup of a sensor's offline alert by its time also looks this much
// further back, for detection times that do not follow seq order exactly
// (alerts decided late, small clock steps).
inline constexpr double kLookupSlackS = 60;

struct HitQuery {
  std::optional<std::uint32_t> wearer;
  std::optional<std::string> pattern;
  std::uint64_t after_seq = 0;  // rows with seq > after_seq
  std::optional<double> since;  // detected_at >= since (unix s)
  int limit = 1000;
};

struct EventQuery {
  std::optional<std::uint32_t> wearer;
  std::optional<std::uint64_t> alert_seq;
  std::uint64_t after_id = 0;   // rows with id > after_id
  std::optional<double> since;  // at >= since (unix s)
  std::optional<EventType> type;
  int limit = 1000;
};

// A carer's mark of a stored alert (table marks): its verdict, and whether
// it still stands (withdrawn_at unset) or was withdrawn.
struct MarkRecord {
  std::int64_t id = 0;
  std::uint64_t seq = 0;  // the alert's
  std::uint32_t wearer = 0;
  std::string pattern;
  MarkVerdict verdict = MarkVerdict::kFalse;
  std::string note;
  double created_at = 0;  // unix s; a re-mark sets it anew
  std::optional<double> withdrawn_at;
};

struct MarkQuery {
  std::optional<std::uint32_t> wearer;
  std::optional<std::string> pattern;
  bool include_withdrawn = false;
  int limit = 1000;
};

// What HitStore::add_mark did.
struct MarkAdded {
  MarkRecord mark;
  // The verdict the alert's active mark had before (the mark was updated in
  // place: same id); nullopt when the alert had none.
  std::optional<MarkVerdict> replaced;
};

// An active mark with the window of its alert: what the daemon turns into
// an example (pipeline/marks.h).
struct MarkWithWindow {
  MarkRecord mark;
  AlertWindow window;
};

// A console user (table users). role is viewer, carer or admin.
struct UserRecord {
  std::string name;
  std::string role;
  std::string password_hash;  // libsodium's crypto_pwhash_str form
  std::int64_t generation = 1;
  double created_at = 0;
  double updated_at = 0;
};

// A registered wearer (table wearers): who the wearer number of the frames
// is. Text fields are UTF-8; display_name is never empty.
struct WearerRecord {
  std::uint32_t id = 0;
  std::string display_name;
  std::string room;
  std::string bed;
  std::string notes;
  bool active = true;  // false: monitoring paused (no sensor_offline alerts)
  double created_at = 0;  // unix s
  double updated_at = 0;
};

// The last frame of one (wearer, device) the daemon took (table
// wearer_devices), so that liveness survives a restart.
struct WearerDeviceRecord {
  std::uint32_t wearer = 0;
  std::uint16_t device = 0;
  double last_arrival = 0;      // unix s the frame arrived
  double last_device_time = 0;  // device time [s] of its last sample
  std::int64_t last_index = 0;  // that sample's index in its stream
  // While a sensor_offline alert stands for the current silence: when the
  // device went offline (unix s).
  std::optional<double> offline_since;
};

// Where a carer's handling of an alert stands (table alert_states; an alert
// without a row is kNew). new -> acknowledged -> resolved, or new ->
// resolved; resolved is final. Named "new", "acknowledged", "resolved".
enum class AlertState { kNew, kAcknowledged, kResolved };
const char* alert_state_name(AlertState state);
std::optional<AlertState> parse_alert_state(const std::string& name);

struct AlertStateRecord {
  std::uint64_t seq = 0;
  AlertState state = AlertState::kNew;
  std::string acknowledged_by;  // empty unless acknowledged
  std::optional<double> acknowledged_at;
  std::string resolved_by;      // empty unless resolved
  std::optional<double> resolved_at;
  int escalation_level = 0;     // escalations so far (alert_escalated events)
  std::string note;             // the latest acknowledgement's or resolution's note
};

// A stored alert with where its handling stands.
struct AlertWithState {
  Alert alert;
  AlertStateRecord state;
};

// Which alerts open_alerts() returns: those not resolved, only those nobody
// has acknowledged either (what still escalates), or every one.
struct OpenAlertQuery {
  bool unacknowledged_only = false;
  bool include_resolved = false;  // every alert, whatever its state
  std::optional<std::string> severity;
  std::uint64_t after_seq = 0;    // seq > after_seq
  std::optional<std::uint64_t> up_to_seq;  // seq <= up_to_seq
  bool newest_first = true;
  int limit = 1000;               // negative = no limit
};

class HitStore {
 public:
  // Opens or creates `path`; the file is created with mode 0600.
  explicit HitStore(const std::string& path, bool read_only = false);
  ~HitStore();
  HitStore(const HitStore&) = delete;
  HitStore& operator=(const HitStore&) = delete;

  // Inserts all alerts in one transaction and assigns each its seq
  // (last_seq() + 1, + 2, ...). On failure nothing is inserted and it throws.
  void insert(std::vector<Alert>& alerts);
  // insert() without touching `alerts`: returns the seq of the first row
  // (the others follow it), which the caller assigns.
  std::uint64_t insert_rows(const std::vector<Alert>& alerts);
  // The dims column's text of alerts[i]: json_text(dims_to_json(alerts[i])),
  // byte for byte, wherever it was made.
  using DimsText = std::function<const std::string&(std::size_t i)>;
  // insert_rows() with the dims texts made by the caller, so that making them
  // need not be part of the transaction (the sink makes them on another
  // thread while the rows go in). dims_text is called once per row, in
  // order, inside the transaction, and may wait for the text; the string is
  // bound without a copy, so it must stay as it is until the next call or
  // the return.
  // `events`, when given, go into the same transaction (before the alerts)
  // and get their ids when it commits.
  std::uint64_t insert_rows(const std::vector<Alert>& alerts, const DimsText& dims_text,
                            std::vector<Event>* events = nullptr);
  std::vector<Alert> query(const HitQuery& q) const;
  // The audit log (table events): insert_events() adds rows in one
  // transaction and sets each event's id; events() reads them oldest first.
  // delete_older_than() removes events older than its cutoff too.
  void insert_events(std::vector<Event>& events);
  std::vector<Event> events(const EventQuery& q) const;
  std::uint64_t last_seq() const;
  std::uint64_t count() const;
  // Deletes rows with detected_at < cutoff; returns how many. Seq numbers of
  // later rows never change and are never reused. The alerts' windows go
  // with them, except those an active mark uses (its example outlives the
  // alert); marks themselves are kept.
  std::int64_t delete_older_than(double cutoff_unix_s);

  // Alert windows (table alert_windows): insert_rows() stores the window of
  // every alert that carries one, in the same transaction.
  std::optional<AlertWindow> window(std::uint64_t seq) const;
  std::uint64_t window_count() const;

  // Marks. add_mark() records a carer's verdict on alert `seq` in one
  // transaction; re-marking an alert that has an active mark updates that
  // mark (verdict, note, created_at). Throws MarkError: kUnknownSeq when no
  // alert row has that seq, kNoWindow when the alert has no stored window.
  MarkAdded add_mark(std::uint64_t seq, MarkVerdict verdict, const std::string& note,
                     double now_unix_s);
  // Newest first.
  std::vector<MarkRecord> marks(const MarkQuery& q) const;
  std::optional<MarkRecord> mark(std::int64_t id) const;
  // Withdraws mark `id` (withdrawn_at = now); throws MarkError kUnknownMark
  // for no such mark, kAlreadyWithdrawn for one withdrawn before.
  MarkRecord withdraw_mark(std::int64_t id, double now_unix_s);
  // Every active mark with its alert's window, oldest mark first.
  std::vector<MarkWithWindow> active_marks() const;
  // The active marks' verdicts of the alerts with seq in [first, last].
  std::vector<std::pair<std::uint64_t, MarkVerdict>> verdicts(std::uint64_t first,
                                                              std::uint64_t last) const;
  // The console's users (sinks/store_users.cc; console/access.h gives them
  // meaning). add_user() returns false when the name exists; the update and
  // remove calls return false when it does not. set_user_password() and
  // set_user_role() bump the user's generation.
  bool add_user(const UserRecord& user);
  std::optional<UserRecord> user(const std::string& name) const;
  std::vector<UserRecord> users() const;  // by name
  bool set_user_password(const std::string& name, const std::string& password_hash, double now);
  bool set_user_role(const std::string& name, const std::string& role, double now);
  bool remove_user(const std::string& name);

  // The wearer registry (sinks/store_wearers.cc). add_wearer() throws
  // WearerError kDuplicateId when the id is registered; update_wearer()
  // and remove_wearer() throw kUnknownId when it is not. Fields are stored
  // as given (the daemon validates them).
  void add_wearer(const WearerRecord& wearer);
  void update_wearer(const WearerRecord& wearer);
  // Returns the record removed. The device rows stay (the devices still send).
  WearerRecord remove_wearer(std::uint32_t id);
  std::optional<WearerRecord> wearer(std::uint32_t id) const;
  std::vector<WearerRecord> wearers() const;  // by id
  // Inserts or replaces each (wearer, device) row, in one transaction.
  void save_wearer_devices(const std::vector<WearerDeviceRecord>& devices);
  std::vector<WearerDeviceRecord> wearer_devices() const;  // by wearer, device
  // The seq of the sensor_offline alert of (wearer, device) raised at
  // `offline_since` (unix s, its detected_at): the first such alert detected
  // at or after offline_since - kLookupSlackS; 0 = none. A wall clock set
  // back by more than kLookupSlackS since then can hide it.
  std::uint64_t last_offline_alert_seq(std::uint32_t wearer, std::uint16_t device,
                                       double offline_since) const;

  // The alert lifecycle (table alert_states). acknowledge_alert() and
  // resolve_alert() change an alert's state in one transaction and return
  // the new record; they throw AlertStateError: kUnknownSeq when no alert row
  // has that seq, kAlreadyAcknowledged for a second acknowledgement,
  // kAlreadyResolved for anything done to a resolved alert. Resolving a new
  // alert records no acknowledgement. `note` replaces the stored note.
  AlertStateRecord acknowledge_alert(std::uint64_t seq, const std::string& by,
                                     const std::string& note, double now_unix_s);
  AlertStateRecord resolve_alert(std::uint64_t seq, const std::string& by,
                                 const std::string& note, double now_unix_s);
  // Records that alert `seq` escalated to `level` (its state is unchanged).
  void set_escalation_level(std::uint64_t seq, int level);
  // The alert and its state; nullopt when no alert row has that seq.
  std::optional<AlertWithState> alert_with_state(std::uint64_t seq) const;
  std::vector<AlertWithState> open_alerts(const OpenAlertQuery& q) const;
  int schema_version() const;
  // WAL checkpoints. By default SQLite checkpoints inside a commit once the
  // WAL passes 1,000 pages; a writer that must commit promptly turns that
  // off and has checkpoint() called on another connection instead.
  void disable_auto_checkpoint();
  // What a checkpoint left: the WAL's frames (pages) and how many of them
  // are copied into the database file; `busy` when a restarting checkpoint
  // could not finish within its wait (it then copied what it could).
  struct WalState {
    std::uint64_t frames = 0;
    std::uint64_t copied = 0;
    bool busy = false;
  };
  // A PASSIVE checkpoint (never waits for, nor blocks, the writer): copies
  // what it can of the WAL into the database file; throws gw::Error on failure.
  WalState checkpoint();
  // A RESTART checkpoint: waits up to `wait_ms` for another connection's
  // open transaction or checkpoint and for readers of older snapshots,
  // copies the rest of the WAL (new writers wait meanwhile), so that the
  // next transaction writes the WAL from its start again; the file keeps
  // its size (see limit_wal_file). On a timeout it copies what it can,
  // returns with `busy` set and blocks no one further. Throws gw::Error on
  // other failures.
  WalState restart_wal(int wait_ms);
  // When this connection starts the WAL again, a file larger than
  // `max_bytes` is cut to it (PRAGMA journal_size_limit).
  void limit_wal_file(std::uint64_t max_bytes);
  // The database's page size in bytes (a WAL frame holds one page).
  std::uint64_t page_size() const;
  // Caps the database at `max_bytes` for this connection (PRAGMA
  // max_page_count, rounded down to whole pages, at least the pages it has
  // now: a file already larger keeps its size, and only its free pages are
  // reused). A transaction that would grow the file beyond it fails with
  // SQLITE_FULL, as on a full disk; nothing of it is kept. Returns the limit
  // in effect, in bytes. Throws gw::Error on failure.
  std::uint64_t limit_size(std::uint64_t max_bytes);
  const std::string& path() const { return path_; }

 private:
  // Inserts or replaces record.seq's row of alert_states inside the
  // caller's open transaction.
  void write_alert_state(const AlertStateRecord& record);
  // In one transaction: alert `seq`'s state (kUnknownSeq when no alert row
  // has it), changed by `change` (which may refuse by throwing), written back.
  AlertStateRecord change_alert_state(std::uint64_t seq,
                                      const std::function<void(AlertStateRecord&)>& change);
  // Inserts the rows inside the caller's open transaction; returns their ids.
  std::vector<std::uint64_t> insert_event_rows(std::vector<Event>& events);
  // An episode_ended event names its first alert by details.first_alert
  // (end_index, t_end) with its wearer, device and pattern: the engine that
  // raises it cannot know the seq the writer gives. Sets alert_seq of each
  // such event without one to that alert's seq, looked up in `alerts` (this
  // transaction's, the first being `first_seq`), else in table hits, newest
  // seq block first (an alert not stored costs a search of every block);
  // left 0 when none has it.
  void resolve_episode_alerts(std::vector<Event>& events, const std::vector<Alert>& alerts,
                              std::uint64_t first_seq) const;
  // The seq of the earliest-detected alert with detected_at >= since (by
  // index hits_detected_at), 0 when there is none.
  std::uint64_t first_seq_detected_since(double since) const;
  // The lowest seq in table hits, 0 when it has no rows.
  std::uint64_t lowest_seq() const;

  std::string path_;
  std::string label_;  // "hit store 'PATH'", the start of every error message
  sqlite3* db_ = nullptr;
};

// A mark request the store refuses, with the reason as a code.
class MarkError : public gw::Error {
 public:
  enum class Reason { kUnknownSeq, kNoWindow, kUnknownMark, kAlreadyWithdrawn };
  MarkError(Reason reason, const std::string& message) : gw::Error(message), reason_(reason) {}
  Reason reason() const { return reason_; }

 private:
  Reason reason_;
};

// A wearer registry request the store refuses.
class WearerError : public gw::Error {
 public:
  enum class Reason { kDuplicateId, kUnknownId };
  WearerError(Reason reason, const std::string& message) : gw::Error(message), reason_(reason) {}
  Reason reason() const { return reason_; }

 private:
  Reason reason_;
};

// A lifecycle request the store refuses, with the reason as a code.
class AlertStateError : public gw::Error {
 public:
  enum class Reason { kUnknownSeq, kAlreadyAcknowledged, kAlreadyResolved };
  AlertStateError(Reason reason, const std::string& message)
      : gw::Error(message), reason_(reason) {}
  Reason reason() const { return reason_; }

 private:
  Reason reason_;
};

}  // namespace gw::pipeline
