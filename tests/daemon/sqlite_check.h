// `PRAGMA integrity_check` on a SQLite file, for the process tests that stop
// or kill the daemon and then check what it left on disk.
#pragma once

#include <sqlite3.h>

#include <string>

namespace gw::test {

// "ok" for a sound database; otherwise SQLite's findings (or why the file
// could not be opened), joined by "; ". Opens the file read-only.
inline std::string integrity_check(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    const std::string message = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return "cannot open: " + message;
  }
  std::string result;
  char* error = nullptr;
  const int rc = sqlite3_exec(
      db, "PRAGMA integrity_check",
      [](void* out, int, char** values, char**) {
        auto& text = *static_cast<std::string*>(out);
        text += (text.empty() ? "" : "; ") + std::string(values[0] ? values[0] : "NULL");
        return 0;
      },
      &result, &error);
  if (rc != SQLITE_OK) result = "integrity_check failed: " + std::string(error ? error : "?");
  sqlite3_free(error);
  sqlite3_close(db);
  return result;
}

}  // namespace gw::test
