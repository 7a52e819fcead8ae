// The console's users in the hit store (table users, schema 6; sinks/store.h).
#include <sqlite3.h>

#include <string>

#include "sinks/sqlite_db.h"
#include "sinks/store.h"

namespace gw::pipeline {
namespace {

using sqlite::Statement;

UserRecord row_to_user(const Statement& stmt) {
  UserRecord u;
  u.name = stmt.column_text(0);
  u.role = stmt.column_text(1);
  u.password_hash = stmt.column_text(2);
  u.generation = stmt.column_int64(3);
  u.created_at = stmt.column_double(4);
  u.updated_at = stmt.column_double(5);
  return u;
}

// Sets one column of a user's row and bumps the generation (sessions from
// before the change end); false when there is no such user.
bool change_user(sqlite3* db, const std::string& label, const std::string& column,
                 const std::string& name, const std::string& value, double now) {
  Statement update(db, label,
                   "UPDATE users SET " + column +
                       " = ?2, generation = generation + 1, updated_at = ?3 WHERE name = ?1");
  update.bind(1, name);
  update.bind(2, value);
  update.bind(3, now);
  update.run();
  return sqlite3_changes(db) == 1;
}

const char* const kSelectUserColumns =
    "SELECT name, role, password_hash, generation, created_at, updated_at FROM users";

}  // namespace

bool HitStore::add_user(const UserRecord& user) {
  Statement insert(db_, label_,
                   "INSERT OR IGNORE INTO users(name, role, password_hash, generation, created_at, "
                   "updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  insert.bind(1, user.name);
  insert.bind(2, user.role);
  insert.bind(3, user.password_hash);
  insert.bind(4, user.generation);
  insert.bind(5, user.created_at);
  insert.bind(6, user.updated_at);
  insert.run();
  return sqlite3_changes(db_) == 1;
}

std::optional<UserRecord> HitStore::user(const std::string& name) const {
  Statement select(db_, label_, std::string(kSelectUserColumns) + " WHERE name = ?1");
  select.bind(1, name);
  if (!select.step()) return std::nullopt;
  return row_to_user(select);
}

std::vector<UserRecord> HitStore::users() const {
  Statement select(db_, label_, std::string(kSelectUserColumns) + " ORDER BY name");
  std::vector<UserRecord> out;
  while (select.step()) out.push_back(row_to_user(select));
  return out;
}

bool HitStore::set_user_password(const std::string& name, const std::string& password_hash,
                                 double now) {
  return change_user(db_, label_, "password_hash", name, password_hash, now);
}

bool HitStore::set_user_role(const std::string& name, const std::string& role, double now) {
  return change_user(db_, label_, "role", name, role, now);
}

bool HitStore::remove_user(const std::string& name) {
  Statement remove(db_, label_, "DELETE FROM users WHERE name = ?1");
  remove.bind(1, name);
  remove.run();
  return sqlite3_changes(db_) == 1;
}

}  // namespace gw::pipeline
