#include "sinks/store.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/error.h"
#include "sinks/sqlite_db.h"

namespace gw::pipeline {
namespace {

using nlohmann::json;
using sqlite::Statement;

// Migration i takes the schema from user_version i to i + 1; it runs inside
// the open write transaction, together with the user_version update, so a
// crash leaves either the old schema or the new one.
//
// meta.last_seq is the sequence counter. It lives apart from hits because
// retention may delete every row, and max(seq) would then restart at 1 and
// hand a subscriber a seq it has already seen for a different alert.
const char* const kMigrations[] = {
    // 0 -> 1
    "CREATE TABLE hits ("
    "  seq INTEGER PRIMARY KEY,"
    "  wearer INTEGER NOT NULL,"
    "  device INTEGER NOT NULL,"
    "  pattern TEXT NOT NULL,"
    "  kind TEXT NOT NULL,"
    "  severity TEXT NOT NULL,"
    // REAL columns allow NULL: SQLite stores a NaN as NULL, and an alert with
    // a NaN in it must still commit rather than block the writer forever.
    "  t_start REAL,"
    "  t_end REAL,"
    "  end_index INTEGER NOT NULL,"
    "  distance REAL,"
    "  matched_dims INTEGER NOT NULL,"
    "  pattern_dims INTEGER NOT NULL,"
    "  detected_at REAL,"
    "  latency_ms REAL,"
    "  dims TEXT NOT NULL"  // JSON array of {pattern_dim, stream_dim, distance, end_index}
    ");"
    "CREATE INDEX hits_wearer_detected_at ON hits(wearer, detected_at);"
    "CREATE INDEX hits_detected_at ON hits(detected_at);"
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value);"
    "INSERT INTO meta(key, value) VALUES ('last_seq', 0);",
    // 1 -> 2: alert windows and carers' marks. A window's samples are the
    // pattern's channels, dim-major (channels rows of lead_in + length),
    // float32 in host byte order; channels is a JSON array of names.
    "CREATE TABLE alert_windows ("
    "  seq INTEGER PRIMARY KEY,"
    "  pattern TEXT NOT NULL,"
    "  wearer INTEGER NOT NULL,"
    "  lead_in INTEGER NOT NULL,"
    "  length INTEGER NOT NULL,"
    "  channels TEXT NOT NULL,"
    "  shape TEXT NOT NULL,"
    "  samples BLOB NOT NULL"
    ");"
    "CREATE TABLE marks ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  seq INTEGER NOT NULL,"
    "  wearer INTEGER NOT NULL,"
    "  pattern TEXT NOT NULL,"
    "  verdict TEXT NOT NULL CHECK (verdict IN ('false', 'true')),"
    "  note TEXT NOT NULL DEFAULT '',"
    "  created_at REAL NOT NULL,"
    "  withdrawn_at REAL"
    ");"
    "CREATE INDEX marks_seq ON marks(seq);"
    "CREATE INDEX marks_wearer_pattern ON marks(wearer, pattern);",
    // 2 -> 3: the audit log of events (sinks/event.h); details is a JSON
    // object, alert_seq NULL when the event concerns no alert.
    "CREATE TABLE events ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  type TEXT NOT NULL,"
    "  wearer INTEGER NOT NULL,"
    "  alert_seq INTEGER,"
    "  actor TEXT NOT NULL,"
    "  at REAL NOT NULL,"
    "  details TEXT NOT NULL"
    ");"
    "CREATE INDEX events_alert_seq ON events(alert_seq);"
    "CREATE INDEX events_at ON events(at);",
    // 3 -> 4: the wearer registry and the last frame of each (wearer,
    // device) the daemon saw (sinks/store_wearers.cc). offline_since is set
    // while a sensor_offline alert stands for the device's current silence.
    "CREATE TABLE wearers ("
    "  id INTEGER PRIMARY KEY,"
    "  display_name TEXT NOT NULL,"
    "  room TEXT NOT NULL DEFAULT '',"
    "  bed TEXT NOT NULL DEFAULT '',"
    "  notes TEXT NOT NULL DEFAULT '',"
    "  active INTEGER NOT NULL DEFAULT 1,"
    "  created_at REAL NOT NULL,"
    "  updated_at REAL NOT NULL"
    ");"
    "CREATE TABLE wearer_devices ("
    "  wearer INTEGER NOT NULL,"
    "  device INTEGER NOT NULL,"
    "  last_arrival REAL NOT NULL,"
    "  last_device_time REAL,"
    "  last_index INTEGER NOT NULL,"
    "  offline_since REAL,"
    "  PRIMARY KEY (wearer, device)"
    ");",
    // 4 -> 5: the alert lifecycle (HitStore::acknowledge_alert, ...); an
    // alert without a row is new. Its own table, not columns of hits, so that
    // the hits rows stay as they were committed.
    "CREATE TABLE alert_states ("
    "  seq INTEGER PRIMARY KEY,"
    "  state TEXT NOT NULL CHECK (state IN ('new', 'acknowledged', 'resolved')),"
    "  acknowledged_by TEXT,"
    "  acknowledged_at REAL,"
    "  resolved_by TEXT,"
    "  resolved_at REAL,"
    "  escalation_level INTEGER NOT NULL DEFAULT 0,"
    "  note TEXT NOT NULL DEFAULT ''"
    ");",
    // 5 -> 6: the console's users (console/access.h): an Argon2id hash per
    // name, and a generation bumped by each password or role change so that
    // sessions made before it end.
    "CREATE TABLE users ("
    "  name TEXT PRIMARY KEY,"
    "  role TEXT NOT NULL CHECK (role IN ('viewer', 'carer', 'admin')),"
    "  password_hash TEXT NOT NULL,"
    "  generation INTEGER NOT NULL DEFAULT 1,"
    "  created_at REAL NOT NULL,"
    "  updated_at REAL NOT NULL"
    ");",
    // 6 -> 7: where under the foot a pressure_hotspot alert lies (Alert::
    // region, Alert::foot); NULL for every other alert.
    "ALTER TABLE hits ADD COLUMN region TEXT;"
    "ALTER TABLE hits ADD COLUMN foot TEXT;",
    // 7 -> 8: an episode_ended event names its first alert by (wearer,
    // device, pattern, end_index, t_end) (resolve_episode_alerts); without
    // this index that lookup read every row of the wearer, a cost that grows
    // with the store and is paid once per ended episode on the writer.
    "CREATE INDEX hits_wearer_end_index ON hits(wearer, end_index);",
    // 8 -> 9: a normalised pattern's window keeps the wearer's baseline
    // (AlertWindow::baseline_center, baseline_spread): float32 centers, one
    // per transformed channel, then as many spreads, host byte order; NULL
    // for other patterns' windows.
    "ALTER TABLE alert_windows ADD COLUMN baseline BLOB;",
    // 9 -> 10: one index keyed by wearer, not two. Alerts of one commit are of
    // many wearers, so each wearer-keyed index dirties about one page per
    // alert; (wearer, end_index) serves every lookup by wearer that
    // (wearer, detected_at) served (docs/benchmarks.md, "One index keyed by
    // wearer").
    "DROP INDEX IF EXISTS hits_wearer_detected_at;",
    // 10 -> 11: lookups by wearer through an index led by the alert's block
    // of seqs (seq >> kSeqBlockBits). A commit's alerts fall in one or two
    // blocks, so the index pages it dirties are a few of the newest block's,
    // not one per wearer as with an index led by the wearer; a lookup by
    // wearer probes block by block (docs/design.md, "Lookups by wearer").
    "DROP INDEX IF EXISTS hits_wearer_end_index;"
    "CREATE INDEX IF NOT EXISTS hits_block_wearer_end_index ON hits(seq >> 12, wearer, end_index);",
};
static_assert(kSeqBlockBits == 12,
              "migration 10 -> 11 and the lookups by wearer spell the block as seq >> 12; another "
              "block size needs a migration that makes the index again");
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == kStoreSchemaVersion,
              "one migration per schema version");

// The hits columns in the order kSelectColumns lists them; row_to_alert
// relies on it.
const char* const kColumnNames[] = {"seq",         "wearer",     "device",       "pattern",
                                    "kind",        "severity",   "t_start",      "t_end",
                                    "end_index",   "distance",   "matched_dims", "pattern_dims",
                                    "detected_at", "latency_ms", "dims"};
constexpr int kColumnCount = sizeof(kColumnNames) / sizeof(kColumnNames[0]);
constexpr int kDimsColumn = kColumnCount - 1;
// The nullable text columns after dims, read into the alert's JSON form
// when set.
const char* const kOptionalColumnNames[] = {"region", "foot"};
constexpr int kOptionalColumnCount = sizeof(kOptionalColumnNames) / sizeof(kOptionalColumnNames[0]);
const char* const kSelectColumns =
    "SELECT seq, wearer, device, pattern, kind, severity, t_start, t_end, end_index, distance, "
    "matched_dims, pattern_dims, detected_at, latency_ms, dims, region, foot FROM hits";
const char* const kInsertSql =
    "INSERT INTO hits(seq, wearer, device, pattern, kind, severity, t_start, t_end, end_index, "
    "distance, matched_dims, pattern_dims, detected_at, latency_ms, dims, region, foot) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)";

const char* const kInsertWindowSql =
    "INSERT INTO alert_windows(seq, pattern, wearer, lead_in, length, channels, shape, samples, "
    "baseline) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
const char* const kSelectWindowColumns =
    "SELECT seq, pattern, wearer, lead_in, length, channels, shape, samples, baseline FROM "
    "alert_windows";
const char* const kInsertEventSql =
    "INSERT INTO events(type, wearer, alert_seq, actor, at, details) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
const char* const kSelectEventColumns =
    "SELECT id, type, wearer, alert_seq, actor, at, details FROM events";
// An alert's row joined with its state's (NULLs for a new alert without
// one): the hits columns first, as row_to_alert reads them, then the state's
// from kFirstStateColumn on.
const char* const kSelectAlertWithStateColumns =
    "SELECT h.seq, h.wearer, h.device, h.pattern, h.kind, h.severity, h.t_start, h.t_end, "
    "h.end_index, h.distance, h.matched_dims, h.pattern_dims, h.detected_at, h.latency_ms, "
    "h.dims, h.region, h.foot, s.state, s.acknowledged_by, s.acknowledged_at, s.resolved_by, "
    "s.resolved_at, s.escalation_level, s.note FROM hits h LEFT JOIN alert_states s ON s.seq = h.seq";
constexpr int kFirstStateColumn = kColumnCount + kOptionalColumnCount;
const char* const kSelectMarkColumns =
    "SELECT id, seq, wearer, pattern, verdict, note, created_at, withdrawn_at FROM marks";

AlertWindow row_to_window(const Statement& stmt, const std::string& label) {
  AlertWindow w;
  const std::int64_t seq = stmt.column_int64(0);
  w.pattern = stmt.column_text(1);
  w.wearer = static_cast<std::uint32_t>(stmt.column_int64(2));
  w.lead_in = static_cast<int>(stmt.column_int64(3));
  w.length = static_cast<int>(stmt.column_int64(4));
  w.shape = stmt.column_text(6);
  std::size_t bytes = 0;
  const void* data = stmt.column_blob(7, bytes);
  try {
    w.channels = json::parse(stmt.column_text(5)).get<std::vector<std::string>>();
  } catch (const std::exception& e) {
    throw Error(label + ": window of seq " + std::to_string(seq) + " is malformed: " + e.what());
  }
  const std::size_t expected =
      w.channels.size() * static_cast<std::size_t>(std::max(0, w.lead_in + w.length));
  if (bytes != expected * sizeof(float))
    throw Error(label + ": window of seq " + std::to_string(seq) + " holds " +
                std::to_string(bytes) + " bytes, its shape needs " +
                std::to_string(expected * sizeof(float)));
  w.values.resize(expected);
  if (bytes > 0) std::memcpy(w.values.data(), data, bytes);
  std::size_t baseline_bytes = 0;
  const void* baseline = stmt.column_blob(8, baseline_bytes);
  if (baseline != nullptr) {
    // As many centers as spreads: one of each per transformed channel.
    if (baseline_bytes % (2 * sizeof(float)) != 0)
      throw Error(label + ": window of seq " + std::to_string(seq) + " has a baseline of " +
                  std::to_string(baseline_bytes) + " bytes, not pairs of float32 values");
    const std::size_t dims = baseline_bytes / (2 * sizeof(float));
    std::vector<float> both(2 * dims);
    std::memcpy(both.data(), baseline, baseline_bytes);
    w.baseline_center.assign(both.begin(), both.begin() + static_cast<std::ptrdiff_t>(dims));
    w.baseline_spread.assign(both.begin() + static_cast<std::ptrdiff_t>(dims), both.end());
  }
  return w;
}

Event row_to_event(const Statement& stmt, const std::string& label) {
  Event event;
  event.id = static_cast<std::uint64_t>(stmt.column_int64(0));
  const std::optional<EventType> type = parse_event_type(stmt.column_text(1));
  if (!type)
    throw Error(label + ": event " + std::to_string(event.id) + " has type '" +
                stmt.column_text(1) + "'");
  event.type = *type;
  event.wearer = static_cast<std::uint32_t>(stmt.column_int64(2));
  if (sqlite3_column_type(stmt.get(), 3) != SQLITE_NULL)
    event.alert_seq = static_cast<std::uint64_t>(stmt.column_int64(3));
  event.actor = stmt.column_text(4);
  event.at = stmt.column_double(5);
  try {
    event.details = json::parse(stmt.column_text(6));
  } catch (const std::exception& e) {
    throw Error(label + ": event " + std::to_string(event.id) + " is malformed: " + e.what());
  }
  return event;
}

MarkRecord row_to_mark(const Statement& stmt, const std::string& label) {
  MarkRecord m;
  m.id = stmt.column_int64(0);
  m.seq = static_cast<std::uint64_t>(stmt.column_int64(1));
  m.wearer = static_cast<std::uint32_t>(stmt.column_int64(2));
  m.pattern = stmt.column_text(3);
  const std::optional<MarkVerdict> verdict = parse_verdict(stmt.column_text(4));
  if (!verdict)
    throw Error(label + ": mark " + std::to_string(m.id) + " has verdict '" +
                stmt.column_text(4) + "'");
  m.verdict = *verdict;
  m.note = stmt.column_text(5);
  m.created_at = stmt.column_double(6);
  if (sqlite3_column_type(stmt.get(), 7) != SQLITE_NULL) m.withdrawn_at = stmt.column_double(7);
  return m;
}

// Reads one row of kSelectColumns through the JSON form of an alert, so that
// the store and the wire share one reader and one set of checks. A NULL REAL
// (a NaN when written) becomes JSON null, which alert_from_json reads as NaN.
Alert row_to_alert(const Statement& stmt, const std::string& label) {
  sqlite3_stmt* row = stmt.get();
  json object = json::object();
  for (int column = 0; column < kDimsColumn; ++column) {
    json& value = object[kColumnNames[column]];
    switch (sqlite3_column_type(row, column)) {
      case SQLITE_INTEGER:
        value = static_cast<std::int64_t>(sqlite3_column_int64(row, column));
        break;
      case SQLITE_FLOAT:
        value = sqlite3_column_double(row, column);
        break;
      case SQLITE_TEXT:
        value = stmt.column_text(column);
        break;
      default:
        value = nullptr;
        break;
    }
  }
  std::int64_t seq = sqlite3_column_int64(row, 0);
  try {
    object["dims"] = json::parse(stmt.column_text(kDimsColumn));
    for (int i = 0; i < kOptionalColumnCount; ++i)
      if (sqlite3_column_type(row, kColumnCount + i) == SQLITE_TEXT)
        object[kOptionalColumnNames[i]] = stmt.column_text(kColumnCount + i);
    return alert_from_json(object);
  } catch (const std::exception& e) {
    throw Error(label + ": row seq " + std::to_string(seq) + " is malformed: " + e.what());
  }
}

std::optional<double> optional_double(const Statement& stmt, int column) {
  if (sqlite3_column_type(stmt.get(), column) == SQLITE_NULL) return std::nullopt;
  return stmt.column_double(column);
}

std::string optional_text(const Statement& stmt, int column) {
  if (sqlite3_column_type(stmt.get(), column) == SQLITE_NULL) return "";
  return stmt.column_text(column);
}

AlertWithState row_to_alert_with_state(const Statement& stmt, const std::string& label) {
  AlertWithState out;
  out.alert = row_to_alert(stmt, label);
  AlertStateRecord& state = out.state;
  state.seq = out.alert.seq;
  const int c = kFirstStateColumn;
  if (sqlite3_column_type(stmt.get(), c) == SQLITE_NULL) return out;  // no row: new
  const std::optional<AlertState> parsed = parse_alert_state(stmt.column_text(c));
  if (!parsed)
    throw Error(label + ": alert " + std::to_string(state.seq) + " has state '" +
                stmt.column_text(c) + "'");
  state.state = *parsed;
  state.acknowledged_by = optional_text(stmt, c + 1);
  state.acknowledged_at = optional_double(stmt, c + 2);
  state.resolved_by = optional_text(stmt, c + 3);
  state.resolved_at = optional_double(stmt, c + 4);
  state.escalation_level = static_cast<int>(stmt.column_int64(c + 5));
  state.note = optional_text(stmt, c + 6);
  return out;
}

constexpr std::pair<AlertState, const char*> kAlertStateNames[] = {
    {AlertState::kNew, "new"},
    {AlertState::kAcknowledged, "acknowledged"},
    {AlertState::kResolved, "resolved"},
};

}  // namespace

const char* alert_state_name(AlertState state) {
  for (const auto& [value, name] : kAlertStateNames)
    if (value == state) return name;
  return "?";
}

std::optional<AlertState> parse_alert_state(const std::string& name) {
  for (const auto& [value, word] : kAlertStateNames)
    if (name == word) return value;
  return std::nullopt;
}

HitStore::HitStore(const std::string& path, bool read_only)
    : path_(path), label_("hit store '" + path + "'") {
  sqlite::SchemaSpec spec;
  spec.kind = "hit store";
  spec.migrations.assign(std::begin(kMigrations), std::end(kMigrations));
  // synchronous=FULL, not NORMAL. In WAL mode NORMAL makes a commit durable
  // across a crash of the process but not across power loss: the WAL is
  // only fsync'ed at checkpoints, so the last transactions can roll back.
  // The sink publishes an alert right after its commit; if that commit then
  // rolled back, a caregiver would hold an alert whose row does not exist,
  // and after restart the same seq would be handed to a different alert.
  // FULL fsyncs the WAL on every commit, which keeps "published implies
  // stored" true through power loss. The cost is one fsync per transaction,
  // and the sink batches alerts (at most one transaction per
  // commit_interval_ms under load), so it is small.
  spec.synchronous = "FULL";
  db_ = sqlite::open(path_, read_only, spec);
}

HitStore::~HitStore() { sqlite::close(db_); }

void HitStore::insert(std::vector<Alert>& alerts) {
  const std::uint64_t first_seq = insert_rows(alerts);
  // Seqs are handed out only once the rows exist.
  for (std::size_t i = 0; i < alerts.size(); ++i) alerts[i].seq = first_seq + i;
}

std::uint64_t HitStore::insert_rows(const std::vector<Alert>& alerts) {
  std::string text;  // one row's, bound until the next row's replaces it
  return insert_rows(alerts, [&](std::size_t i) -> const std::string& {
    text = json_text(dims_to_json(alerts[i]));
    return text;
  });
}

std::uint64_t HitStore::insert_rows(const std::vector<Alert>& alerts, const DimsText& dims_text,
                                    std::vector<Event>* events) {
  const bool with_events = events != nullptr && !events->empty();
  if (alerts.empty() && !with_events) return last_seq() + 1;
  // IMMEDIATE: take the write lock up front, so the read of last_seq and the
  // writes that follow cannot interleave with another writer.
  std::uint64_t first_seq = 0;
  std::vector<std::uint64_t> event_ids;
  sqlite::in_transaction(db_, label_, [&] {
    first_seq = last_seq() + 1;
    if (with_events) {
      resolve_episode_alerts(*events, alerts, first_seq);
      event_ids = insert_event_rows(*events);
    }
    if (alerts.empty()) return;
    Statement insert(db_, label_, kInsertSql);
    for (std::size_t i = 0; i < alerts.size(); ++i) {
      const Alert& a = alerts[i];
      insert.bind(1, static_cast<std::int64_t>(first_seq + i));
      insert.bind(2, static_cast<std::int64_t>(a.wearer));
      insert.bind(3, static_cast<std::int64_t>(a.device));
      insert.bind(4, a.pattern);
      insert.bind(5, a.kind);
      insert.bind(6, a.severity);
      insert.bind(7, a.t_start);
      insert.bind(8, a.t_end);
      insert.bind(9, static_cast<std::int64_t>(a.end_index));
      insert.bind(10, a.distance);
      insert.bind(11, static_cast<std::int64_t>(a.matched_dims));
      insert.bind(12, static_cast<std::int64_t>(a.pattern_dims));
      insert.bind(13, a.detected_at);
      insert.bind(14, a.latency_ms);
      insert.bind_static(15, dims_text(i));
      if (!a.region.empty()) insert.bind(16, a.region);
      if (!a.foot.empty()) insert.bind(17, a.foot);
      insert.run();
      insert.reset();
    }
    Statement insert_window(db_, label_, kInsertWindowSql);
    for (std::size_t i = 0; i < alerts.size(); ++i) {
      if (!alerts[i].window) continue;
      const AlertWindow& w = *alerts[i].window;
      insert_window.bind(1, static_cast<std::int64_t>(first_seq + i));
      insert_window.bind(2, w.pattern);
      insert_window.bind(3, static_cast<std::int64_t>(w.wearer));
      insert_window.bind(4, static_cast<std::int64_t>(w.lead_in));
      insert_window.bind(5, static_cast<std::int64_t>(w.length));
      insert_window.bind(6, json_text(json(w.channels)));
      insert_window.bind(7, w.shape);
      insert_window.bind_blob(8, w.values.data(), w.values.size() * sizeof(float));
      // Bound without a copy: alive until run().
      std::vector<float> baseline = w.baseline_center;
      baseline.insert(baseline.end(), w.baseline_spread.begin(), w.baseline_spread.end());
      if (baseline.empty())
        insert_window.bind_null(9);
      else
        insert_window.bind_blob(9, baseline.data(), baseline.size() * sizeof(float));
      insert_window.run();
      insert_window.reset();
    }
    Statement update(db_, label_, "UPDATE meta SET value = ?1 WHERE key = 'last_seq'");
    update.bind(1, static_cast<std::int64_t>(first_seq + alerts.size() - 1));
    update.run();
    if (sqlite3_changes(db_) != 1)
      throw Error(label_ + ": meta.last_seq is missing; the file is damaged");
  });
  // Ids are handed out only once the rows exist.
  for (std::size_t i = 0; i < event_ids.size(); ++i) (*events)[i].id = event_ids[i];
  return first_seq;
}

void HitStore::insert_events(std::vector<Event>& events) {
  if (events.empty()) return;
  std::vector<std::uint64_t> ids;
  sqlite::in_transaction(db_, label_, [&] {
    resolve_episode_alerts(events, {}, 0);
    ids = insert_event_rows(events);
  });
  for (std::size_t i = 0; i < ids.size(); ++i) events[i].id = ids[i];
}

void HitStore::resolve_episode_alerts(std::vector<Event>& events, const std::vector<Alert>& alerts,
                                      std::uint64_t first_seq) const {
  // An alert storm ends thousands of episodes a second, each naming an
  // alert of this transaction or an earlier one: this transaction's alerts
  // are found through an index by (wearer, end_index), built at the first
  // event, the others with one prepared SELECT; nothing of the events'
  // details is copied.
  const auto key_of = [](std::uint32_t wearer, std::int64_t end_index) {
    return (static_cast<std::uint64_t>(wearer) << 40) ^ static_cast<std::uint64_t>(end_index);
  };
  std::unordered_multimap<std::uint64_t, std::size_t> in_batch;
  bool indexed = false;
  std::optional<Statement> select;
  // The store's newest and oldest seqs, read at the first lookup in table
  // hits (oldest 0: no rows).
  std::optional<std::pair<std::uint64_t, std::uint64_t>> seq_range;
  for (Event& event : events) {
    if (event.type != EventType::kEpisodeEnded || event.alert_seq != 0) continue;
    const auto first = event.details.find("first_alert");
    const auto pattern_field = event.details.find("pattern");
    const auto device_field = event.details.find("device");
    if (first == event.details.end() || pattern_field == event.details.end() ||
        device_field == event.details.end())
      continue;
    const auto end_field = first->find("end_index");
    const auto t_end_field = first->find("t_end");
    if (end_field == first->end() || t_end_field == first->end()) continue;
    const auto end_index = end_field->get<std::int64_t>();
    const auto t_end = t_end_field->get<double>();
    const auto& pattern = pattern_field->get_ref<const std::string&>();
    const auto device = device_field->get<std::int64_t>();
    if (!indexed) {
      in_batch.reserve(alerts.size());
      for (std::size_t i = 0; i < alerts.size(); ++i)
        in_batch.emplace(key_of(alerts[i].wearer, alerts[i].end_index), i);
      indexed = true;
    }
    // The latest of this transaction's alerts that is the one named.
    std::size_t found = alerts.size();
    const auto [from, to] = in_batch.equal_range(key_of(event.wearer, end_index));
    for (auto it = from; it != to; ++it) {
      const Alert& a = alerts[it->second];
      if (a.wearer == event.wearer && a.device == device && a.end_index == end_index &&
          a.t_end == t_end && a.pattern == pattern &&
          (found == alerts.size() || it->second > found))
        found = it->second;
    }
    if (found != alerts.size()) {
      event.alert_seq = first_seq + found;
      continue;
    }
    if (!select) {
      select.emplace(db_, label_,
                     "SELECT coalesce(max(seq), 0) FROM hits WHERE (seq >> 12) = ?6 AND "
                     "wearer = ?1 AND device = ?2 AND pattern = ?3 AND end_index = ?4 AND "
                     "t_end = ?5");
    }
    // Newest block first: an episode's first alert is mostly of the
    // transaction before. One the store does not have (not stored) costs a
    // search of every block.
    if (!seq_range) seq_range.emplace(last_seq(), lowest_seq());
    const auto [newest_seq, oldest_seq] = *seq_range;
    if (oldest_seq == 0) continue;  // no rows
    for (std::int64_t block = seq_block(newest_seq); block >= seq_block(oldest_seq); --block) {
      select->reset();  // and its bindings
      select->bind(1, static_cast<std::int64_t>(event.wearer));
      select->bind(2, device);
      select->bind(3, pattern);
      select->bind(4, end_index);
      select->bind(5, t_end);
      select->bind(6, block);
      if (select->step()) event.alert_seq = static_cast<std::uint64_t>(select->column_int64(0));
      if (event.alert_seq != 0) break;
    }
  }
}

std::uint64_t HitStore::lowest_seq() const {
  return static_cast<std::uint64_t>(
      sqlite::single_integer(db_, label_, "SELECT coalesce(min(seq), 0) FROM hits"));
}

std::uint64_t HitStore::first_seq_detected_since(double since) const {
  Statement select(db_, label_,
                   "SELECT seq FROM hits WHERE detected_at >= ?1 ORDER BY detected_at LIMIT 1");
  select.bind(1, since);
  if (!select.step()) return 0;
  return static_cast<std::uint64_t>(select.column_int64(0));
}

std::vector<std::uint64_t> HitStore::insert_event_rows(std::vector<Event>& events) {
  std::vector<std::uint64_t> ids;
  ids.reserve(events.size());
  Statement insert(db_, label_, kInsertEventSql);
  for (const Event& event : events) {
    insert.bind(1, std::string(event_type_name(event.type)));
    insert.bind(2, static_cast<std::int64_t>(event.wearer));
    if (event.alert_seq != 0) insert.bind(3, static_cast<std::int64_t>(event.alert_seq));
    insert.bind(4, event.actor);
    insert.bind(5, event.at);
    insert.bind(6, json_text(event.details.is_null() ? json::object() : event.details));
    insert.run();
    ids.push_back(static_cast<std::uint64_t>(sqlite3_last_insert_rowid(db_)));
    insert.reset();
  }
  return ids;
}

std::vector<Event> HitStore::events(const EventQuery& q) const {
  std::vector<Event> result;
  if (q.after_id >= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    return result;
  std::string sql = std::string(kSelectEventColumns) + " WHERE id > ?1";
  if (q.wearer) sql += " AND wearer = ?2";
  if (q.alert_seq) sql += " AND alert_seq = ?3";
  if (q.since) sql += " AND at >= ?4";
  if (q.type) sql += " AND type = ?6";
  sql += " ORDER BY id LIMIT ?5";
  Statement select(db_, label_, sql);
  select.bind(1, static_cast<std::int64_t>(q.after_id));
  if (q.wearer) select.bind(2, static_cast<std::int64_t>(*q.wearer));
  if (q.alert_seq) select.bind(3, static_cast<std::int64_t>(*q.alert_seq));
  if (q.since) select.bind(4, *q.since);
  if (q.type) select.bind(6, std::string(event_type_name(*q.type)));
  select.bind(5, static_cast<std::int64_t>(q.limit));
  while (select.step()) result.push_back(row_to_event(select, label_));
  return result;
}

std::vector<Alert> HitStore::query(const HitQuery& q) const {
  std::vector<Alert> result;
  if (q.after_seq >= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    return result;
  // Fixed parameter numbers, so each combination of filters is one cached
  // statement and unused numbers are simply absent from the text.
  // By wearer, block by block of seqs (the index on (seq >> kSeqBlockBits,
  // wearer, end_index)), oldest first, until the limit.
  std::string sql = std::string(kSelectColumns) + " WHERE seq > ?1";
  if (q.wearer) sql += " AND (seq >> 12) = ?6 AND wearer = ?2";
  if (q.pattern) sql += " AND pattern = ?3";
  if (q.since) sql += " AND detected_at >= ?4";
  sql += " ORDER BY seq LIMIT ?5";  // a negative limit means no limit in SQLite

  Statement select(db_, label_, sql);
  const auto bind = [&](std::int64_t limit) {
    select.reset();  // and its bindings
    select.bind(1, static_cast<std::int64_t>(q.after_seq));
    if (q.wearer) select.bind(2, static_cast<std::int64_t>(*q.wearer));
    if (q.pattern) select.bind(3, *q.pattern);
    if (q.since) select.bind(4, *q.since);
    select.bind(5, limit);
  };
  if (!q.wearer) {
    bind(q.limit);
    while (select.step()) result.push_back(row_to_alert(select, label_));
    return result;
  }
  // From the oldest block retention left (seqs are never reused, so the
  // blocks it emptied would only add searches).
  const std::int64_t newest_block = seq_block(last_seq());
  for (std::int64_t block = seq_block(std::max(q.after_seq + 1, lowest_seq()));
       block <= newest_block; ++block) {
    const auto found = static_cast<std::int64_t>(result.size());
    if (q.limit >= 0 && found >= q.limit) break;
    bind(q.limit >= 0 ? q.limit - found : q.limit);
    select.bind(6, block);
    while (select.step()) result.push_back(row_to_alert(select, label_));
  }
  return result;
}

void HitStore::disable_auto_checkpoint() {
  sqlite::exec(db_, label_, "PRAGMA wal_autocheckpoint=0");
}

namespace {

HitStore::WalState run_checkpoint(sqlite3* db, const std::string& label, int mode) {
  int frames = 0;
  int copied = 0;
  const int rc = sqlite3_wal_checkpoint_v2(db, nullptr, mode, &frames, &copied);
  // Extended result codes are on: SQLITE_BUSY_RECOVERY and the like are busy too.
  const bool busy = (rc & 0xff) == SQLITE_BUSY;
  if (rc != SQLITE_OK && !busy)
    throw Error(label + ": WAL checkpoint failed: " + sqlite3_errmsg(db));
  HitStore::WalState state;
  state.frames = static_cast<std::uint64_t>(std::max(frames, 0));
  state.copied = static_cast<std::uint64_t>(std::max(copied, 0));
  state.busy = busy;
  return state;
}

}  // namespace

HitStore::WalState HitStore::checkpoint() {
  return run_checkpoint(db_, label_, SQLITE_CHECKPOINT_PASSIVE);
}

HitStore::WalState HitStore::restart_wal(int wait_ms) {
  sqlite3_busy_timeout(db_, std::max(wait_ms, 0));
  try {
    const WalState state = run_checkpoint(db_, label_, SQLITE_CHECKPOINT_RESTART);
    sqlite3_busy_timeout(db_, sqlite::kBusyTimeoutMs);
    return state;
  } catch (...) {
    sqlite3_busy_timeout(db_, sqlite::kBusyTimeoutMs);
    throw;
  }
}

void HitStore::limit_wal_file(std::uint64_t max_bytes) {
  sqlite::exec(db_, label_, "PRAGMA journal_size_limit=" + std::to_string(max_bytes));
}

std::uint64_t HitStore::page_size() const {
  return static_cast<std::uint64_t>(sqlite::single_integer(db_, label_, "PRAGMA page_size"));
}

std::uint64_t HitStore::limit_size(std::uint64_t max_bytes) {
  const auto page_size =
      static_cast<std::uint64_t>(sqlite::single_integer(db_, label_, "PRAGMA page_size"));
  const std::uint64_t pages = std::max<std::uint64_t>(1, max_bytes / page_size);
  const auto in_effect = static_cast<std::uint64_t>(sqlite::single_integer(
      db_, label_, "PRAGMA max_page_count = " + std::to_string(pages)));
  return in_effect * page_size;
}

std::uint64_t HitStore::last_seq() const {
  return static_cast<std::uint64_t>(
      sqlite::single_integer(db_, label_, "SELECT value FROM meta WHERE key = 'last_seq'"));
}

std::uint64_t HitStore::count() const {
  return static_cast<std::uint64_t>(
      sqlite::single_integer(db_, label_, "SELECT count(*) FROM hits"));
}

std::int64_t HitStore::delete_older_than(double cutoff_unix_s) {
  std::int64_t removed = 0;
  sqlite::in_transaction(db_, label_, [&] {
    Statement remove(db_, label_, "DELETE FROM hits WHERE detected_at < ?1");
    remove.bind(1, cutoff_unix_s);
    remove.run();
    removed = static_cast<std::int64_t>(sqlite3_changes64(db_));
    // Windows of alerts gone, unless an active mark makes an example of one.
    Statement orphans(db_, label_,
                      "DELETE FROM alert_windows WHERE seq NOT IN (SELECT seq FROM hits) "
                      "AND seq NOT IN (SELECT seq FROM marks WHERE withdrawn_at IS NULL)");
    orphans.run();
    // An alert's state goes with it.
    Statement states(db_, label_,
                     "DELETE FROM alert_states WHERE seq NOT IN (SELECT seq FROM hits)");
    states.run();
    // The audit log is kept as long as the alerts it speaks of.
    Statement old_events(db_, label_, "DELETE FROM events WHERE at < ?1");
    old_events.bind(1, cutoff_unix_s);
    old_events.run();
  });
  return removed;
}

std::optional<AlertWindow> HitStore::window(std::uint64_t seq) const {
  Statement select(db_, label_, std::string(kSelectWindowColumns) + " WHERE seq = ?1");
  select.bind(1, static_cast<std::int64_t>(seq));
  if (!select.step()) return std::nullopt;
  return row_to_window(select, label_);
}

std::uint64_t HitStore::window_count() const {
  return static_cast<std::uint64_t>(
      sqlite::single_integer(db_, label_, "SELECT count(*) FROM alert_windows"));
}

MarkAdded HitStore::add_mark(std::uint64_t seq, MarkVerdict verdict, const std::string& note,
                             double now_unix_s) {
  MarkAdded added;
  sqlite::in_transaction(db_, label_, [&] {
    Statement alert(db_, label_, "SELECT wearer, pattern FROM hits WHERE seq = ?1");
    alert.bind(1, static_cast<std::int64_t>(seq));
    if (!alert.step())
      throw MarkError(MarkError::Reason::kUnknownSeq,
                      "no stored alert has seq " + std::to_string(seq));
    const auto wearer = alert.column_int64(0);
    const std::string pattern = alert.column_text(1);
    alert.reset();
    Statement window(db_, label_, "SELECT count(*) FROM alert_windows WHERE seq = ?1");
    window.bind(1, static_cast<std::int64_t>(seq));
    if (!window.step() || window.column_int64(0) == 0)
      throw MarkError(MarkError::Reason::kNoWindow,
                      "alert " + std::to_string(seq) +
                          " has no stored window (the stream's ring no longer held it when the "
                          "alert was raised), so it cannot become an example");
    window.reset();
    Statement active(db_, label_,
                     std::string(kSelectMarkColumns) + " WHERE seq = ?1 AND withdrawn_at IS NULL");
    active.bind(1, static_cast<std::int64_t>(seq));
    std::optional<MarkRecord> previous;
    if (active.step()) previous = row_to_mark(active, label_);
    active.reset();
    if (previous) {
      Statement update(db_, label_,
                       "UPDATE marks SET verdict = ?2, note = ?3, created_at = ?4 WHERE id = ?1");
      update.bind(1, previous->id);
      update.bind(2, std::string(verdict_name(verdict)));
      update.bind(3, note);
      update.bind(4, now_unix_s);
      update.run();
      added.replaced = previous->verdict;
      added.mark = *previous;
    } else {
      Statement insert(db_, label_,
                       "INSERT INTO marks(seq, wearer, pattern, verdict, note, created_at) "
                       "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
      insert.bind(1, static_cast<std::int64_t>(seq));
      insert.bind(2, wearer);
      insert.bind(3, pattern);
      insert.bind(4, std::string(verdict_name(verdict)));
      insert.bind(5, note);
      insert.bind(6, now_unix_s);
      insert.run();
      added.mark.id = sqlite3_last_insert_rowid(db_);
      added.mark.seq = seq;
      added.mark.wearer = static_cast<std::uint32_t>(wearer);
      added.mark.pattern = pattern;
    }
    added.mark.verdict = verdict;
    added.mark.note = note;
    added.mark.created_at = now_unix_s;
  });
  return added;
}

std::vector<MarkRecord> HitStore::marks(const MarkQuery& q) const {
  std::string sql = std::string(kSelectMarkColumns) + " WHERE 1";
  if (q.wearer) sql += " AND wearer = ?1";
  if (q.pattern) sql += " AND pattern = ?2";
  if (!q.include_withdrawn) sql += " AND withdrawn_at IS NULL";
  sql += " ORDER BY id DESC LIMIT ?3";
  Statement select(db_, label_, sql);
  if (q.wearer) select.bind(1, static_cast<std::int64_t>(*q.wearer));
  if (q.pattern) select.bind(2, *q.pattern);
  select.bind(3, static_cast<std::int64_t>(q.limit));
  std::vector<MarkRecord> out;
  while (select.step()) out.push_back(row_to_mark(select, label_));
  return out;
}

std::optional<MarkRecord> HitStore::mark(std::int64_t id) const {
  Statement select(db_, label_, std::string(kSelectMarkColumns) + " WHERE id = ?1");
  select.bind(1, id);
  if (!select.step()) return std::nullopt;
  return row_to_mark(select, label_);
}

MarkRecord HitStore::withdraw_mark(std::int64_t id, double now_unix_s) {
  MarkRecord withdrawn;
  sqlite::in_transaction(db_, label_, [&] {
    const std::optional<MarkRecord> found = mark(id);
    if (!found)
      throw MarkError(MarkError::Reason::kUnknownMark, "no mark has id " + std::to_string(id));
    if (found->withdrawn_at)
      throw MarkError(MarkError::Reason::kAlreadyWithdrawn,
                      "mark " + std::to_string(id) + " was withdrawn before");
    Statement update(db_, label_, "UPDATE marks SET withdrawn_at = ?2 WHERE id = ?1");
    update.bind(1, id);
    update.bind(2, now_unix_s);
    update.run();
    withdrawn = *found;
    withdrawn.withdrawn_at = now_unix_s;
  });
  return withdrawn;
}

std::vector<MarkWithWindow> HitStore::active_marks() const {
  std::vector<MarkWithWindow> out;
  Statement select(db_, label_,
                   std::string(kSelectMarkColumns) + " WHERE withdrawn_at IS NULL ORDER BY id");
  std::vector<MarkRecord> active;
  while (select.step()) active.push_back(row_to_mark(select, label_));
  select.reset();
  for (MarkRecord& m : active) {
    std::optional<AlertWindow> w = window(m.seq);
    if (!w) throw Error(label_ + ": mark " + std::to_string(m.id) + " lost its alert's window");
    out.push_back({std::move(m), std::move(*w)});
  }
  return out;
}

std::vector<std::pair<std::uint64_t, MarkVerdict>> HitStore::verdicts(std::uint64_t first,
                                                                      std::uint64_t last) const {
  Statement select(db_, label_,
                   "SELECT seq, verdict FROM marks WHERE withdrawn_at IS NULL AND seq BETWEEN ?1 "
                   "AND ?2 ORDER BY seq");
  select.bind(1, static_cast<std::int64_t>(first));
  select.bind(2, static_cast<std::int64_t>(
                     std::min<std::uint64_t>(last, std::numeric_limits<std::int64_t>::max())));
  std::vector<std::pair<std::uint64_t, MarkVerdict>> out;
  while (select.step())
    out.emplace_back(static_cast<std::uint64_t>(select.column_int64(0)),
                     parse_verdict(select.column_text(1)).value_or(MarkVerdict::kFalse));
  return out;
}

std::optional<AlertWithState> HitStore::alert_with_state(std::uint64_t seq) const {
  if (seq >= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    return std::nullopt;
  Statement select(db_, label_, std::string(kSelectAlertWithStateColumns) + " WHERE h.seq = ?1");
  select.bind(1, static_cast<std::int64_t>(seq));
  if (!select.step()) return std::nullopt;
  return row_to_alert_with_state(select, label_);
}

std::vector<AlertWithState> HitStore::open_alerts(const OpenAlertQuery& q) const {
  std::vector<AlertWithState> out;
  constexpr auto kMaxSeq = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (q.after_seq >= kMaxSeq) return out;
  std::string sql = std::string(kSelectAlertWithStateColumns) + " WHERE h.seq > ?1";
  if (q.unacknowledged_only)
    sql += " AND (s.state IS NULL OR s.state = 'new')";
  else if (!q.include_resolved)
    sql += " AND (s.state IS NULL OR s.state != 'resolved')";
  if (q.severity) sql += " AND h.severity = ?2";
  if (q.up_to_seq) sql += " AND h.seq <= ?3";
  sql += q.newest_first ? " ORDER BY h.seq DESC" : " ORDER BY h.seq";
  sql += " LIMIT ?4";
  Statement select(db_, label_, sql);
  select.bind(1, static_cast<std::int64_t>(q.after_seq));
  if (q.severity) select.bind(2, *q.severity);
  if (q.up_to_seq) select.bind(3, static_cast<std::int64_t>(std::min(*q.up_to_seq, kMaxSeq)));
  select.bind(4, static_cast<std::int64_t>(q.limit));
  while (select.step()) out.push_back(row_to_alert_with_state(select, label_));
  return out;
}

namespace {

// The state of alert `seq` inside an open transaction; throws kUnknownSeq
// when no alert row has it.
AlertStateRecord current_state(const HitStore& store, std::uint64_t seq) {
  const std::optional<AlertWithState> found = store.alert_with_state(seq);
  if (!found)
    throw AlertStateError(AlertStateError::Reason::kUnknownSeq,
                          "no stored alert has seq " + std::to_string(seq));
  return found->state;
}

void refuse_if_resolved(const AlertStateRecord& record) {
  if (record.state == AlertState::kResolved)
    throw AlertStateError(AlertStateError::Reason::kAlreadyResolved,
                          "alert " + std::to_string(record.seq) + " was resolved by " +
                              record.resolved_by + "; a resolved alert stays resolved");
}

}  // namespace

// One statement writes every column, so that the row is the record.
void HitStore::write_alert_state(const AlertStateRecord& record) {
  Statement upsert(
      db_, label_,
      "INSERT INTO alert_states(seq, state, acknowledged_by, acknowledged_at, resolved_by, "
      "resolved_at, escalation_level, note) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
      "ON CONFLICT(seq) DO UPDATE SET state = excluded.state, acknowledged_by = "
      "excluded.acknowledged_by, acknowledged_at = excluded.acknowledged_at, resolved_by = "
      "excluded.resolved_by, resolved_at = excluded.resolved_at, escalation_level = "
      "excluded.escalation_level, note = excluded.note");
  upsert.bind(1, static_cast<std::int64_t>(record.seq));
  upsert.bind(2, std::string(alert_state_name(record.state)));
  if (record.acknowledged_at) {
    upsert.bind(3, record.acknowledged_by);
    upsert.bind(4, *record.acknowledged_at);
  }
  if (record.resolved_at) {
    upsert.bind(5, record.resolved_by);
    upsert.bind(6, *record.resolved_at);
  }
  upsert.bind(7, static_cast<std::int64_t>(record.escalation_level));
  upsert.bind(8, record.note);
  upsert.run();
}

AlertStateRecord HitStore::change_alert_state(
    std::uint64_t seq, const std::function<void(AlertStateRecord&)>& change) {
  AlertStateRecord record;
  sqlite::in_transaction(db_, label_, [&] {
    record = current_state(*this, seq);
    change(record);
    write_alert_state(record);
  });
  return record;
}

AlertStateRecord HitStore::acknowledge_alert(std::uint64_t seq, const std::string& by,
                                             const std::string& note, double now_unix_s) {
  return change_alert_state(seq, [&](AlertStateRecord& record) {
    refuse_if_resolved(record);
    if (record.state == AlertState::kAcknowledged)
      throw AlertStateError(AlertStateError::Reason::kAlreadyAcknowledged,
                            "alert " + std::to_string(seq) + " was acknowledged by " +
                                record.acknowledged_by + " before");
    record.state = AlertState::kAcknowledged;
    record.acknowledged_by = by;
    record.acknowledged_at = now_unix_s;
    record.note = note;
  });
}

AlertStateRecord HitStore::resolve_alert(std::uint64_t seq, const std::string& by,
                                         const std::string& note, double now_unix_s) {
  return change_alert_state(seq, [&](AlertStateRecord& record) {
    refuse_if_resolved(record);
    record.state = AlertState::kResolved;
    record.resolved_by = by;
    record.resolved_at = now_unix_s;
    record.note = note;
  });
}

void HitStore::set_escalation_level(std::uint64_t seq, int level) {
  change_alert_state(seq, [&](AlertStateRecord& record) { record.escalation_level = level; });
}

int HitStore::schema_version() const {
  return static_cast<int>(sqlite::single_integer(db_, label_, "PRAGMA user_version"));
}

}  // namespace gw::pipeline
