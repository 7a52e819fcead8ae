// The wearer registry and the devices' last frames in the hit store
// (tables wearers and wearer_devices, schema 4; sinks/store.h).
#include <sqlite3.h>

#include <string>

#include "sinks/sqlite_db.h"
#include "sinks/store.h"

namespace gw::pipeline {
namespace {

using sqlite::Statement;

const char* const kSelectWearerColumns =
    "SELECT id, display_name, room, bed, notes, active, created_at, updated_at FROM wearers";

WearerRecord row_to_wearer(const Statement& stmt) {
  WearerRecord w;
  w.id = static_cast<std::uint32_t>(stmt.column_int64(0));
  w.display_name = stmt.column_text(1);
  w.room = stmt.column_text(2);
  w.bed = stmt.column_text(3);
  w.notes = stmt.column_text(4);
  w.active = stmt.column_int64(5) != 0;
  w.created_at = stmt.column_double(6);
  w.updated_at = stmt.column_double(7);
  return w;
}

// Binds a record's fields as the wearers statements number them: ?1 id
// .. ?6 active, ?8 updated_at (?7, created_at, only an insert sets).
void bind_wearer(Statement& stmt, const WearerRecord& w) {
  stmt.bind(1, static_cast<std::int64_t>(w.id));
  stmt.bind(2, w.display_name);
  stmt.bind(3, w.room);
  stmt.bind(4, w.bed);
  stmt.bind(5, w.notes);
  stmt.bind(6, static_cast<std::int64_t>(w.active ? 1 : 0));
  stmt.bind(8, w.updated_at);
}

std::string unknown_wearer_message(std::uint32_t id) {
  return "no wearer " + std::to_string(id) + " is registered";
}

}  // namespace

void HitStore::add_wearer(const WearerRecord& wearer) {
  sqlite::in_transaction(db_, label_, [&] {
    if (this->wearer(wearer.id))
      throw WearerError(WearerError::Reason::kDuplicateId,
                        "wearer " + std::to_string(wearer.id) + " is already registered");
    Statement insert(db_, label_,
                     "INSERT INTO wearers(id, display_name, room, bed, notes, active, created_at, "
                     "updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    bind_wearer(insert, wearer);
    insert.bind(7, wearer.created_at);
    insert.run();
  });
}

void HitStore::update_wearer(const WearerRecord& wearer) {
  sqlite::in_transaction(db_, label_, [&] {
    Statement update(db_, label_,
                     "UPDATE wearers SET display_name = ?2, room = ?3, bed = ?4, notes = ?5, "
                     "active = ?6, updated_at = ?8 WHERE id = ?1");
    bind_wearer(update, wearer);
    update.run();
    if (sqlite3_changes(db_) != 1)
      throw WearerError(WearerError::Reason::kUnknownId, unknown_wearer_message(wearer.id));
  });
}

WearerRecord HitStore::remove_wearer(std::uint32_t id) {
  WearerRecord removed;
  sqlite::in_transaction(db_, label_, [&] {
    const std::optional<WearerRecord> found = wearer(id);
    if (!found) throw WearerError(WearerError::Reason::kUnknownId, unknown_wearer_message(id));
    Statement remove(db_, label_, "DELETE FROM wearers WHERE id = ?1");
    remove.bind(1, static_cast<std::int64_t>(id));
    remove.run();
    removed = *found;
  });
  return removed;
}

std::optional<WearerRecord> HitStore::wearer(std::uint32_t id) const {
  Statement select(db_, label_, std::string(kSelectWearerColumns) + " WHERE id = ?1");
  select.bind(1, static_cast<std::int64_t>(id));
  if (!select.step()) return std::nullopt;
  return row_to_wearer(select);
}

std::vector<WearerRecord> HitStore::wearers() const {
  Statement select(db_, label_, std::string(kSelectWearerColumns) + " ORDER BY id");
  std::vector<WearerRecord> out;
  while (select.step()) out.push_back(row_to_wearer(select));
  return out;
}

void HitStore::save_wearer_devices(const std::vector<WearerDeviceRecord>& devices) {
  if (devices.empty()) return;
  sqlite::in_transaction(db_, label_, [&] {
    Statement upsert(db_, label_,
                     "INSERT OR REPLACE INTO wearer_devices(wearer, device, last_arrival, "
                     "last_device_time, last_index, offline_since) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
    for (const WearerDeviceRecord& d : devices) {
      upsert.bind(1, static_cast<std::int64_t>(d.wearer));
      upsert.bind(2, static_cast<std::int64_t>(d.device));
      upsert.bind(3, d.last_arrival);
      upsert.bind(4, d.last_device_time);
      upsert.bind(5, d.last_index);
      if (d.offline_since) upsert.bind(6, *d.offline_since);
      upsert.run();
      upsert.reset();
    }
  });
}

std::vector<WearerDeviceRecord> HitStore::wearer_devices() const {
  Statement select(db_, label_,
                   "SELECT wearer, device, last_arrival, last_device_time, last_index, "
                   "offline_since FROM wearer_devices ORDER BY wearer, device");
  std::vector<WearerDeviceRecord> out;
  while (select.step()) {
    WearerDeviceRecord d;
    d.wearer = static_cast<std::uint32_t>(select.column_int64(0));
    d.device = static_cast<std::uint16_t>(select.column_int64(1));
    d.last_arrival = select.column_double(2);
    d.last_device_time = select.column_double(3);
    d.last_index = select.column_int64(4);
    if (sqlite3_column_type(select.get(), 5) != SQLITE_NULL) d.offline_since = select.column_double(5);
    out.push_back(d);
  }
  return out;
}

std::uint64_t HitStore::last_offline_alert_seq(std::uint32_t wearer, std::uint16_t device,
                                               double offline_since) const {
  // From the block where alerts detected then begin, upwards: the alert is
  // there or in the next block, however long the silence lasted.
  const double detected_since = offline_since - kLookupSlackS;
  const std::uint64_t first = first_seq_detected_since(detected_since);
  if (first == 0) return 0;
  Statement select(db_, label_,
                   "SELECT coalesce(min(seq), 0) FROM hits WHERE (seq >> 12) = ?4 AND "
                   "wearer = ?1 AND device = ?2 AND kind = ?3 AND detected_at >= ?5");
  const std::int64_t newest_block = seq_block(last_seq());
  for (std::int64_t block = std::max<std::int64_t>(0, seq_block(first) - 1); block <= newest_block;
       ++block) {
    select.reset();  // and its bindings
    select.bind(1, static_cast<std::int64_t>(wearer));
    select.bind(2, static_cast<std::int64_t>(device));
    select.bind(3, std::string(kSensorOfflineKind));
    select.bind(4, block);
    select.bind(5, detected_since);
    if (select.step() && select.column_int64(0) != 0)
      return static_cast<std::uint64_t>(select.column_int64(0));
  }
  return 0;
}

}  // namespace gw::pipeline
