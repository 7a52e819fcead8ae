#include "sinks/sqlite_db.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace gw::pipeline::sqlite {
namespace {

sqlite3_stmt* cached_statement(sqlite3* db, const std::string& label, const std::string& sql) {
  // The list holds at most a few dozen statements, so the scan costs nothing
  // next to the statement itself.
  for (sqlite3_stmt* s = sqlite3_next_stmt(db, nullptr); s != nullptr;
       s = sqlite3_next_stmt(db, s)) {
    const char* text = sqlite3_sql(s);
    if (text != nullptr && sql == text) return s;
  }
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v3(db, sql.c_str(), static_cast<int>(sql.size()) + 1,
                         SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) != SQLITE_OK) {
    throw_error(db, label, "prepare \"" + sql + "\"");
  }
  return stmt;
}

int read_user_version(sqlite3* db, const std::string& label) {
  return static_cast<int>(single_integer(db, label, "PRAGMA user_version"));
}

void refuse_newer_schema(const std::string& label, int version, int current) {
  if (version > current) {
    throw Error(label + " has schema version " + std::to_string(version) +
                ", newer than this gaitwatch knows (" + std::to_string(current) +
                "); refusing to open it. Use the gaitwatch that wrote it.");
  }
}

// Creates the file with mode 0600 before SQLite sees it, so health data is
// never readable by other users, not even for a moment. SQLite gives the -wal
// and -shm files the mode of the database file.
void create_private_file(const std::string& label, const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw Error(label + ": cannot create or open: " + std::strerror(errno));
  ::close(fd);
}

void setup(sqlite3* db, bool read_only, const SchemaSpec& spec, const std::string& label) {
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  const int current = static_cast<int>(spec.migrations.size());

  // Refuse a newer schema, or somebody else's database, before changing
  // anything in the file.
  int version = read_user_version(db, label);
  // Another kind of gaitwatch file (another application_id; a hit store has
  // none) is named as such, whatever its version, and never migrated.
  if (version > 0) {
    const auto id = single_integer(db, label, "PRAGMA application_id");
    if (id != spec.application_id)
      throw Error(label + " is not a " + spec.kind + " (SQLite application_id " +
                  std::to_string(id) + ", expected " + std::to_string(spec.application_id) +
                  "); refusing to use it");
  }
  refuse_newer_schema(label, version, current);
  const bool has_tables = single_integer(db, label, "SELECT count(*) FROM sqlite_master") > 0;
  if (version == 0 && has_tables) {
    throw Error(label +
                " is an SQLite database with tables but no gaitwatch schema version; "
                "refusing to use it");
  }
  if (read_only) {
    if (version < current) {
      throw Error(label + " has schema version " + std::to_string(version) +
                  " (this gaitwatch needs " + std::to_string(current) + "); it is not a " +
                  spec.kind +
                  " yet or needs migrating, which a read-only open cannot do. Open it once with "
                  "the program that writes it.");
    }
    return;
  }
  if (!has_tables && !spec.on_create.empty()) exec(db, label, spec.on_create);

  // WAL: readers (the CLI, other processes) never block the writer and see
  // every committed transaction. The mode is persistent in the file.
  {
    Statement journal(db, label, "PRAGMA journal_mode=WAL");
    std::string mode = journal.step() ? journal.column_text(0) : std::string();
    if (mode != "wal") {
      throw Error(label + ": cannot switch to WAL journal mode (got '" + mode +
                  "'); is it on a file system without shared memory support (NFS)?");
    }
  }
  exec(db, label, "PRAGMA synchronous=" + spec.synchronous);

  if (version < current) {
    // IMMEDIATE takes the write lock first, so two processes opening the
    // same fresh file cannot both migrate it.
    in_transaction(db, label, [&] {
      version = read_user_version(db, label);  // again, under the lock
      refuse_newer_schema(label, version, current);
      if (version == 0 && spec.application_id != 0)
        exec(db, label, "PRAGMA application_id = " + std::to_string(spec.application_id));
      for (; version < current; ++version)
        exec(db, label, spec.migrations[static_cast<std::size_t>(version)]);
      exec(db, label, "PRAGMA user_version = " + std::to_string(current));
    });
  }
}

}  // namespace

sqlite3* open(const std::string& path, bool read_only, const SchemaSpec& spec) {
  const std::string label = spec.kind + " '" + path + "'";
  if (!read_only) create_private_file(label, path);
  // No SQLITE_OPEN_CREATE: the file exists (created above with mode 0600),
  // and a read-only open of a missing file should fail, not create one.
  const int flags =
      (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_NOMUTEX;
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = label + ": cannot open" + (read_only ? " read-only: " : ": ") +
                          (db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close_v2(db);
    throw Error(message);
  }
  try {
    setup(db, read_only, spec, label);
  } catch (...) {
    close(db);
    throw;
  }
  return db;
}

void close(sqlite3* db) {
  if (db == nullptr) return;
  for (sqlite3_stmt* s = sqlite3_next_stmt(db, nullptr); s != nullptr;
       s = sqlite3_next_stmt(db, nullptr)) {
    sqlite3_finalize(s);
  }
  sqlite3_close_v2(db);
}

void throw_error(sqlite3* db, const std::string& label, const std::string& what) {
  std::string message = label + ": " + what + ": ";
  if (db == nullptr) {
    message += "out of memory";
  } else {
    message += sqlite3_errmsg(db);
    message += " (SQLite error " + std::to_string(sqlite3_extended_errcode(db)) + ")";
  }
  throw Error(message);
}

void exec(sqlite3* db, const std::string& label, const std::string& sql) {
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK)
    throw_error(db, label, sql.size() > 60 ? sql.substr(0, 60) + "..." : sql);
}

bool in_open_transaction(sqlite3* db) { return sqlite3_get_autocommit(db) == 0; }

void rollback_if_open(sqlite3* db) {
  if (in_open_transaction(db)) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
}

Statement::Statement(sqlite3* db, const std::string& label, const std::string& sql)
    : db_(db), label_(label), sql_(sql), stmt_(cached_statement(db, label, sql)) {}

Statement::~Statement() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

void Statement::bind(int index, std::int64_t value) {
  check(sqlite3_bind_int64(stmt_, index, value));
}
void Statement::bind(int index, double value) { check(sqlite3_bind_double(stmt_, index, value)); }
void Statement::bind(int index, const std::string& value) {
  check(sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()),
                          SQLITE_TRANSIENT));
}
void Statement::bind_static(int index, const std::string& value) {
  check(
      sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_STATIC));
}
void Statement::bind_blob(int index, const void* data, std::size_t bytes) {
  // SQLITE_STATIC: the caller keeps the bytes alive until step() is done.
  check(sqlite3_bind_blob64(stmt_, index, bytes == 0 ? "" : data,
                            static_cast<sqlite3_uint64>(bytes), SQLITE_STATIC));
}

void Statement::bind_null(int index) { check(sqlite3_bind_null(stmt_, index)); }

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw_error(db_, label_, sql_);
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::int64_t Statement::column_int64(int column) const {
  return sqlite3_column_int64(stmt_, column);
}
double Statement::column_double(int column) const { return sqlite3_column_double(stmt_, column); }
std::string Statement::column_text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  return text == nullptr
             ? std::string()
             : std::string(reinterpret_cast<const char*>(text),
                           static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)));
}
const void* Statement::column_blob(int column, std::size_t& bytes) const {
  const void* data = sqlite3_column_blob(stmt_, column);
  bytes = static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column));
  return data;
}

void Statement::check(int rc) {
  if (rc != SQLITE_OK) throw_error(db_, label_, "bind for " + sql_);
}

std::int64_t single_integer(sqlite3* db, const std::string& label, const std::string& sql) {
  Statement stmt(db, label, sql);
  if (!stmt.step()) throw Error(label + ": " + sql + ": returned no row");
  return stmt.column_int64(0);
}

}  // namespace gw::pipeline::sqlite
