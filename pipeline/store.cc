#include "pipeline/store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "common/error.h"

namespace gw::pipeline {
namespace {

using nlohmann::json;

// How long a statement waits for another connection's lock (the CLI reading,
// a second daemon by mistake) before it fails with SQLITE_BUSY.
constexpr int kBusyTimeoutMs = 5000;

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

[[noreturn]] void throw_sqlite(sqlite3* db, const std::string& path, const std::string& what) {
  std::string message = "hit store '" + path + "': " + what + ": ";
  if (db == nullptr) {
    message += "out of memory";
  } else {
    message += sqlite3_errmsg(db);
    message += " (SQLite error " + std::to_string(sqlite3_extended_errcode(db)) + ")";
  }
  throw Error(message);
}

void exec(sqlite3* db, const std::string& path, const std::string& sql) {
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK)
    throw_sqlite(db, path, sql.size() > 60 ? sql.substr(0, 60) + "..." : sql);
}

// Prepared statements are cached in the connection itself: SQLite keeps the
// list of a connection's statements (sqlite3_next_stmt) together with the SQL
// text of each, so finding a statement again by its text needs no state in
// HitStore. The list holds at most a dozen statements (query() has 8 shapes),
// so the scan costs nothing next to the statement itself. The destructor
// finalizes them all.
sqlite3_stmt* cached_statement(sqlite3* db, const std::string& path, const std::string& sql) {
  for (sqlite3_stmt* s = sqlite3_next_stmt(db, nullptr); s != nullptr;
       s = sqlite3_next_stmt(db, s)) {
    const char* text = sqlite3_sql(s);
    if (text != nullptr && sql == text) return s;
  }
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v3(db, sql.c_str(), static_cast<int>(sql.size()) + 1,
                         SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) != SQLITE_OK) {
    throw_sqlite(db, path, "prepare \"" + sql + "\"");
  }
  return stmt;
}

// One use of a cached statement. The destructor resets it and clears its
// bindings, so the next user starts clean even after an exception.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& path, const std::string& sql)
      : db_(db), path_(path), sql_(sql), stmt_(cached_statement(db, path, sql)) {}
  ~Statement() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  void bind(int index, std::int64_t value) { check(sqlite3_bind_int64(stmt_, index, value)); }
  void bind(int index, double value) { check(sqlite3_bind_double(stmt_, index, value)); }
  void bind(int index, const std::string& value) {
    check(sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()),
                            SQLITE_TRANSIENT));
  }

  // Returns true when a row is ready, false when the statement is done.
  bool step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw_sqlite(db_, path_, sql_);
  }
  // Runs a statement that returns no rows (or whose rows do not matter).
  void run() {
    while (step()) {
    }
  }
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  sqlite3_stmt* get() const { return stmt_; }
  std::int64_t column_int64(int column) const { return sqlite3_column_int64(stmt_, column); }
  std::string column_text(int column) const {
    const unsigned char* text = sqlite3_column_text(stmt_, column);
    return text == nullptr
               ? std::string()
               : std::string(reinterpret_cast<const char*>(text),
                             static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)));
  }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) throw_sqlite(db_, path_, "bind for " + sql_);
  }

  sqlite3* db_;
  const std::string& path_;
  std::string sql_;
  sqlite3_stmt* stmt_;
};

std::int64_t single_integer(sqlite3* db, const std::string& path, const std::string& sql) {
  Statement stmt(db, path, sql);
  if (!stmt.step()) throw Error("hit store '" + path + "': " + sql + ": returned no row");
  return stmt.column_int64(0);
}

int read_user_version(sqlite3* db, const std::string& path) {
  return static_cast<int>(single_integer(db, path, "PRAGMA user_version"));
}

void refuse_newer_schema(const std::string& path, int version) {
  if (version > kStoreSchemaVersion) {
    throw Error("hit store '" + path + "' has schema version " + std::to_string(version) +
                ", newer than this gaitwatch knows (" + std::to_string(kStoreSchemaVersion) +
                "); refusing to open it. Use the gaitwatch that wrote it.");
  }
}

// Creates the file with mode 0600 before SQLite sees it, so the hits (who
// fell, when) are never readable by other users, not even for a moment.
// SQLite gives the -wal and -shm files the mode of the database file.
void create_private_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw Error("hit store '" + path + "': cannot create or open: " + std::strerror(errno));
  }
  ::close(fd);
}

// Reads one row of kSelectColumns through the JSON form of an alert, so that
// the store and the wire share one reader and one set of checks. A NULL REAL
// (a NaN when written) becomes JSON null, which alert_from_json reads as NaN.
Alert row_to_alert(const Statement& stmt, const std::string& path) {
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
    throw Error("hit store '" + path + "': row seq " + std::to_string(seq) +
                " is malformed: " + e.what());
  }
}

}  // namespace

HitStore::HitStore(const std::string& path, bool read_only) : path_(path) {
  if (!read_only) create_private_file(path_);
  // No SQLITE_OPEN_CREATE: the file exists (created above with mode 0600),
  // and a read-only open of a missing file should fail, not create one.
  // NOMUTEX: a HitStore is used by one thread at a time (see store.h).
  int flags = (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_NOMUTEX;
  int rc = sqlite3_open_v2(path_.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = "hit store '" + path_ + "': cannot open" +
                          (read_only ? " read-only: " : ": ") +
                          (db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw Error(message);
  }
  try {
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_timeout(db_, kBusyTimeoutMs);

    // Refuse a newer schema, or somebody else's database, before changing
    // anything in the file.
    int version = read_user_version(db_, path_);
    refuse_newer_schema(path_, version);
    if (version == 0 && single_integer(db_, path_, "SELECT count(*) FROM sqlite_master") > 0) {
      throw Error("hit store '" + path_ +
                  "' is an SQLite database with tables but no gaitwatch schema version; "
                  "refusing to use it");
    }
    if (read_only) {
      if (version < kStoreSchemaVersion) {
        throw Error("hit store '" + path_ + "' has schema version " + std::to_string(version) +
                    " (this gaitwatch needs " + std::to_string(kStoreSchemaVersion) +
                    "); it is not a hit store yet or needs migrating, which a read-only "
                    "open cannot do. Start gaitwatchd on it once.");
      }
      return;
    }

    // WAL: readers (the CLI, other processes) never block the writer and see
    // every committed transaction. The mode is persistent in the file.
    {
      Statement journal(db_, path_, "PRAGMA journal_mode=WAL");
      std::string mode = journal.step() ? journal.column_text(0) : std::string();
      if (mode != "wal") {
        throw Error("hit store '" + path_ + "': cannot switch to WAL journal mode (got '" + mode +
                    "'); is it on a file system without shared memory support (NFS)?");
      }
    }
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
    exec(db_, path_, "PRAGMA synchronous=FULL");

    if (version < kStoreSchemaVersion) {
      // IMMEDIATE takes the write lock first, so two processes opening the
      // same fresh file cannot both migrate it.
      exec(db_, path_, "BEGIN IMMEDIATE");
      try {
        version = read_user_version(db_, path_);  // again, under the lock
        refuse_newer_schema(path_, version);
        for (; version < kStoreSchemaVersion; ++version) exec(db_, path_, kMigrations[version]);
        exec(db_, path_, "PRAGMA user_version = " + std::to_string(kStoreSchemaVersion));
        exec(db_, path_, "COMMIT");
      } catch (...) {
        if (sqlite3_get_autocommit(db_) == 0)
          sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
      }
    }
  } catch (...) {
    for (sqlite3_stmt* s = sqlite3_next_stmt(db_, nullptr); s != nullptr;
         s = sqlite3_next_stmt(db_, nullptr)) {
      sqlite3_finalize(s);
    }
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw;
  }
}

HitStore::~HitStore() {
  if (db_ == nullptr) return;
  // Finalize every cached statement (see cached_statement), then close.
  for (sqlite3_stmt* s = sqlite3_next_stmt(db_, nullptr); s != nullptr;
       s = sqlite3_next_stmt(db_, nullptr)) {
    sqlite3_finalize(s);
  }
  sqlite3_close_v2(db_);
}

void HitStore::insert(std::vector<Alert>& alerts) {
  if (alerts.empty()) return;
  // IMMEDIATE: take the write lock up front, so the read of last_seq and the
  // writes that follow cannot interleave with another writer.
  exec(db_, path_, "BEGIN IMMEDIATE");
  std::uint64_t first_seq = 0;
  try {
    first_seq = last_seq() + 1;
    Statement insert(db_, path_, kInsertSql);
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
      // The same dims JSON as on the wire; replace, not throw, on bad UTF-8
      // (there are no strings in dims, but dump() must never stop a commit).
      insert.bind(15,
                  alert_to_json(a).at("dims").dump(-1, ' ', false, json::error_handler_t::replace));
      insert.run();
      insert.reset();
    }
    Statement update(db_, path_, "UPDATE meta SET value = ?1 WHERE key = 'last_seq'");
    update.bind(1, static_cast<std::int64_t>(first_seq + alerts.size() - 1));
    update.run();
    if (sqlite3_changes(db_) != 1) {
      throw Error("hit store '" + path_ + "': meta.last_seq is missing; the file is damaged");
    }
    exec(db_, path_, "COMMIT");
  } catch (...) {
    // A failed COMMIT may leave the transaction open (SQLITE_BUSY) or SQLite
    // may already have rolled it back (I/O errors); roll back only if open.
    if (sqlite3_get_autocommit(db_) == 0) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  // Seqs are handed out only once the rows exist.
  for (std::size_t i = 0; i < alerts.size(); ++i) alerts[i].seq = first_seq + i;
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

  Statement select(db_, path_, sql);
  select.bind(1, static_cast<std::int64_t>(q.after_seq));
  if (q.wearer) select.bind(2, static_cast<std::int64_t>(*q.wearer));
  if (q.pattern) select.bind(3, *q.pattern);
  if (q.since) select.bind(4, *q.since);
  select.bind(5, static_cast<std::int64_t>(q.limit));
  while (select.step()) result.push_back(row_to_alert(select, path_));
  return result;
}

std::uint64_t HitStore::last_seq() const {
  return static_cast<std::uint64_t>(
      single_integer(db_, path_, "SELECT value FROM meta WHERE key = 'last_seq'"));
}

std::uint64_t HitStore::count() const {
  return static_cast<std::uint64_t>(single_integer(db_, path_, "SELECT count(*) FROM hits"));
}

std::int64_t HitStore::delete_older_than(double cutoff_unix_s) {
  Statement remove(db_, path_, "DELETE FROM hits WHERE detected_at < ?1");
  remove.bind(1, cutoff_unix_s);
  remove.run();
  return static_cast<std::int64_t>(sqlite3_changes64(db_));
}

int HitStore::schema_version() const { return read_user_version(db_, path_); }

}  // namespace gw::pipeline
