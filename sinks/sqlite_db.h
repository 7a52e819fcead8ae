// What the two SQLite files of gaitwatch (the hit store, sinks/store.h, and
// the raw-stream history, history/history_store.h) share: opening a private
// (0600) file with a versioned schema and migrations, WAL, cached prepared
// statements, and one error form. Internal to gw_sinks/gw_pipeline; public
// headers only forward-declare sqlite3.
//
// Thread safety: a connection is used by one thread at a time (opened with
// SQLITE_OPEN_NOMUTEX). Errors: every SQLite failure throws gw::Error whose
// message starts with the database's label, e.g. "hit store 'x.db': ".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace gw::pipeline::sqlite {

// How long a statement waits for another connection's lock (the CLI reading,
// a second daemon by mistake, a restarting checkpoint) before it fails with
// SQLITE_BUSY; every connection open() makes has it.
inline constexpr int kBusyTimeoutMs = 5000;

// How a file is opened and brought to its schema.
struct SchemaSpec {
  std::string kind;  // "hit store", "history store": first words of every message
  // migrations[i] takes the schema from user_version i to i + 1; the current
  // version is migrations.size(). All run in one IMMEDIATE transaction with
  // the user_version update, so a crash leaves the old schema or the new one.
  std::vector<const char*> migrations;
  // PRAGMA synchronous in WAL mode: "FULL" (durable through power loss) or
  // "NORMAL" (durable through a process crash; the last commits may roll
  // back on power loss).
  std::string synchronous = "FULL";
  // PRAGMA application_id written with the first migration and required on
  // every later open (a file of another kind, one with another id or with
  // none, is refused before any version check or migration); 0 = none.
  std::int32_t application_id = 0;
  // Statements run once on a fresh, empty file before it switches to WAL and
  // before the first migration (pragmas such as auto_vacuum that only apply
  // to a database without tables). May be empty.
  std::string on_create;
};

// Opens or creates `path` (created with mode 0600 before SQLite sees it) and
// migrates it; a read-only open neither creates nor migrates and refuses a
// file that is not at the current version. Refuses a newer schema and an
// SQLite file with tables but no user_version. Returns the connection; close
// it with close().
sqlite3* open(const std::string& path, bool read_only, const SchemaSpec& spec);
// Finalizes every statement of the connection and closes it; nullptr is a no-op.
void close(sqlite3* db);

[[noreturn]] void throw_error(sqlite3* db, const std::string& label, const std::string& what);
// Runs statements that return no rows. `label` prefixes error messages.
void exec(sqlite3* db, const std::string& label, const std::string& sql);

// One use of a prepared statement cached in the connection (found again by
// its SQL text via sqlite3_next_stmt, so callers keep no statement state).
// The destructor resets it and clears its bindings, also after an exception.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& label, const std::string& sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  void bind(int index, std::int64_t value);
  void bind(int index, double value);
  void bind(int index, const std::string& value);
  // Without a copy (SQLITE_STATIC): the caller keeps `value` alive and
  // unchanged until step() is done and the binding is replaced or reset.
  void bind_static(int index, const std::string& value);
  void bind_blob(int index, const void* data, std::size_t bytes);
  void bind_null(int index);

  // True when a row is ready, false when the statement is done.
  bool step();
  // Runs a statement whose rows do not matter.
  void run();
  void reset();

  sqlite3_stmt* get() const { return stmt_; }
  std::int64_t column_int64(int column) const;
  double column_double(int column) const;
  std::string column_text(int column) const;
  // Pointer valid until the next step()/reset(); bytes may be 0.
  const void* column_blob(int column, std::size_t& bytes) const;

 private:
  void check(int rc);

  sqlite3* db_;
  const std::string& label_;
  std::string sql_;
  sqlite3_stmt* stmt_;
};

// The first column of the first row as an integer; throws when no row.
std::int64_t single_integer(sqlite3* db, const std::string& label, const std::string& sql);
// Runs `body` inside BEGIN IMMEDIATE ... COMMIT; rolls back (if still open)
// and rethrows when anything throws.
template <typename Body>
void in_transaction(sqlite3* db, const std::string& label, Body&& body);
// Whether the connection is inside an open transaction.
bool in_open_transaction(sqlite3* db);
void rollback_if_open(sqlite3* db);

template <typename Body>
void in_transaction(sqlite3* db, const std::string& label, Body&& body) {
  exec(db, label, "BEGIN IMMEDIATE");
  try {
    body();
    exec(db, label, "COMMIT");
  } catch (...) {
    // A failed COMMIT may leave the transaction open (SQLITE_BUSY) or SQLite
    // may already have rolled it back (I/O errors); roll back only if open.
    rollback_if_open(db);
    throw;
  }
}

}  // namespace gw::pipeline::sqlite
