#include "pipeline/store.h"

#include <sqlite3.h>

#include <algorithm>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "common/error.h"
#include "pipeline/sqlite_db.h"

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
};
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
const char* const kSelectColumns =
    "SELECT seq, wearer, device, pattern, kind, severity, t_start, t_end, end_index, distance, "
    "matched_dims, pattern_dims, detected_at, latency_ms, dims FROM hits";
const char* const kInsertSql =
    "INSERT INTO hits(seq, wearer, device, pattern, kind, severity, t_start, t_end, end_index, "
    "distance, matched_dims, pattern_dims, detected_at, latency_ms, dims) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";

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
    return alert_from_json(object);
  } catch (const std::exception& e) {
    throw Error(label + ": row seq " + std::to_string(seq) + " is malformed: " + e.what());
  }
}

}  // namespace

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

std::uint64_t HitStore::insert_rows(const std::vector<Alert>& alerts, const DimsText& dims_text) {
  if (alerts.empty()) return last_seq() + 1;
  // IMMEDIATE: take the write lock up front, so the read of last_seq and the
  // writes that follow cannot interleave with another writer.
  std::uint64_t first_seq = 0;
  sqlite::in_transaction(db_, label_, [&] {
    first_seq = last_seq() + 1;
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
      insert.run();
      insert.reset();
    }
    Statement update(db_, label_, "UPDATE meta SET value = ?1 WHERE key = 'last_seq'");
    update.bind(1, static_cast<std::int64_t>(first_seq + alerts.size() - 1));
    update.run();
    if (sqlite3_changes(db_) != 1)
      throw Error(label_ + ": meta.last_seq is missing; the file is damaged");
  });
  return first_seq;
}

std::vector<Alert> HitStore::query(const HitQuery& q) const {
  std::vector<Alert> result;
  if (q.after_seq >= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    return result;
  // Fixed parameter numbers, so each combination of filters is one cached
  // statement and unused numbers are simply absent from the text.
  std::string sql = std::string(kSelectColumns) + " WHERE seq > ?1";
  if (q.wearer) sql += " AND wearer = ?2";
  if (q.pattern) sql += " AND pattern = ?3";
  if (q.since) sql += " AND detected_at >= ?4";
  sql += " ORDER BY seq LIMIT ?5";  // a negative limit means no limit in SQLite

  Statement select(db_, label_, sql);
  select.bind(1, static_cast<std::int64_t>(q.after_seq));
  if (q.wearer) select.bind(2, static_cast<std::int64_t>(*q.wearer));
  if (q.pattern) select.bind(3, *q.pattern);
  if (q.since) select.bind(4, *q.since);
  select.bind(5, static_cast<std::int64_t>(q.limit));
  while (select.step()) result.push_back(row_to_alert(select, label_));
  return result;
}

void HitStore::disable_auto_checkpoint() {
  sqlite::exec(db_, label_, "PRAGMA wal_autocheckpoint=0");
}

void HitStore::checkpoint() {
  const int rc =
      sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  if (rc != SQLITE_OK && rc != SQLITE_BUSY)
    throw Error(label_ + ": WAL checkpoint failed: " + sqlite3_errmsg(db_));
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
  Statement remove(db_, label_, "DELETE FROM hits WHERE detected_at < ?1");
  remove.bind(1, cutoff_unix_s);
  remove.run();
  return static_cast<std::int64_t>(sqlite3_changes64(db_));
}

int HitStore::schema_version() const {
  return static_cast<int>(sqlite::single_integer(db_, label_, "PRAGMA user_version"));
}

}  // namespace gw::pipeline
