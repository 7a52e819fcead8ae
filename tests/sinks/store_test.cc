// HitStore and the alert JSON form, against real SQLite files in a temporary
// directory. A second, raw sqlite3 connection checks what is really in the
// file and provokes failures (a newer schema, a trigger that aborts inserts).
#include "sinks/store.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "sinks/alert.h"
#include "tests/common/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using gw::pipeline::Alert;
using gw::pipeline::alert_from_json;
using gw::pipeline::alert_to_json;
using gw::pipeline::alert_topic;
using gw::pipeline::DimMatch;
using gw::pipeline::HitQuery;
using gw::pipeline::HitStore;
using gw::pipeline::kStoreSchemaVersion;
using nlohmann::json;

// Each test's own folder.
class TempDir : public gw::test::TempDir {
 public:
  TempDir() : gw::test::TempDir("gw_store_test") {}
};

// A plain sqlite3 connection, independent of HitStore.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    REQUIRE(sqlite3_open(path.c_str(), &db_) == SQLITE_OK);
    sqlite3_busy_timeout(db_, 5000);
  }
  ~RawDb() { sqlite3_close(db_); }
  void exec(const std::string& sql) {
    char* error = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
    INFO(sql << ": " << (error ? error : ""));
    sqlite3_free(error);
    REQUIRE(rc == SQLITE_OK);
  }
  std::string text(const std::string& sql, int column = 0) {
    sqlite3_stmt* stmt = nullptr;
    REQUIRE(sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_step(stmt) == SQLITE_ROW);
    std::string value = reinterpret_cast<const char*>(sqlite3_column_text(stmt, column));
    sqlite3_finalize(stmt);
    return value;
  }

 private:
  sqlite3* db_ = nullptr;
};

Alert make_alert(int i, std::uint32_t wearer = 7, const std::string& pattern = "fall",
                 double detected_at = 1.7e9) {
  Alert a;
  a.wearer = wearer;
  a.device = static_cast<std::uint16_t>(3 + i % 2);
  a.pattern = pattern;
  a.kind = pattern == "limp" ? "limp" : "fall";
  a.severity = "critical";
  a.t_start = 100.0 + i;
  a.t_end = 101.28 + i;
  a.end_index = 10000 + i;
  a.distance = 12.5 + 0.25 * i;
  a.matched_dims = 2;
  a.pattern_dims = 201;
  a.detected_at = detected_at + i;
  a.latency_ms = 31.5;
  a.dims = {DimMatch{0, 1, 5.5, 10000 + i}, DimMatch{200, 199, 7.0, 9999 + i}};
  return a;
}

// An episode_ended event naming `first` as the engine raises it: the alert
// named by (wearer, device, pattern, end_index, t_end), its seq unknown.
gw::pipeline::Event episode_end_naming(const Alert& first, double at) {
  gw::pipeline::Event e;
  e.type = gw::pipeline::EventType::kEpisodeEnded;
  e.wearer = first.wearer;
  e.actor = "gaitwatchd";
  e.at = at;
  e.details = {{"pattern", first.pattern},
               {"device", first.device},
               {"first_alert", {{"end_index", first.end_index}, {"t_end", first.t_end}}}};
  return e;
}

void check_same_except_seq(const Alert& a, const Alert& b) {
  CHECK(a.wearer == b.wearer);
  CHECK(a.device == b.device);
  CHECK(a.pattern == b.pattern);
  CHECK(a.kind == b.kind);
  CHECK(a.severity == b.severity);
  CHECK(a.t_start == b.t_start);
  CHECK(a.t_end == b.t_end);
  CHECK(a.end_index == b.end_index);
  CHECK(a.distance == b.distance);
  CHECK(a.matched_dims == b.matched_dims);
  CHECK(a.pattern_dims == b.pattern_dims);
  CHECK(a.detected_at == b.detected_at);
  CHECK(a.latency_ms == b.latency_ms);
  REQUIRE(a.dims.size() == b.dims.size());
  for (std::size_t i = 0; i < a.dims.size(); ++i) {
    CHECK(a.dims[i].pattern_dim == b.dims[i].pattern_dim);
    CHECK(a.dims[i].stream_dim == b.dims[i].stream_dim);
    CHECK(a.dims[i].distance == b.dims[i].distance);
    CHECK(a.dims[i].end_index == b.dims[i].end_index);
  }
}

std::vector<std::uint64_t> seqs_of(const std::vector<Alert>& alerts) {
  std::vector<std::uint64_t> seqs;
  for (const Alert& a : alerts) seqs.push_back(a.seq);
  return seqs;
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const gw::Error& e) {
    return e.what();
  }
  FAIL("expected gw::Error");
  return {};
}

}  // namespace

TEST_CASE("HitStore: a new store has the current schema version and WAL journal mode", "[store]") {
  TempDir dir;
  const std::string path = dir.file("hits.db");
  HitStore store(path);
  CHECK(store.schema_version() == kStoreSchemaVersion);
  CHECK(store.count() == 0);
  CHECK(store.last_seq() == 0);
  CHECK(store.path() == path);

  RawDb raw(path);
  CHECK(raw.text("PRAGMA user_version") == std::to_string(kStoreSchemaVersion));
  CHECK(raw.text("PRAGMA journal_mode") == "wal");
  CHECK(raw.text("SELECT value FROM meta WHERE key = 'last_seq'") == "0");
  // Lookups by wearer (an ended episode's first alert, a sensor's offline
  // alert, a query by wearer with or without a time) are index searches per
  // block of seqs, not reads of every row of the wearer (which grow with the
  // store). The one index with the wearer in it is led by the block: a
  // commit of alerts of many wearers dirties a few of its pages, not one per
  // alert.
  CHECK(raw.text("SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_master WHERE "
                 "type = 'index' AND tbl_name = 'hits' ORDER BY name)") ==
        "hits_block_wearer_end_index hits_detected_at");
  CHECK(raw.text("EXPLAIN QUERY PLAN SELECT coalesce(max(seq), 0) FROM hits WHERE (seq >> 12) = 0 "
                 "AND wearer = 1 AND device = 2 AND pattern = 'p' AND end_index = 4 AND t_end = 5",
                 3) ==
        "SEARCH hits USING INDEX hits_block_wearer_end_index (<expr>=? AND wearer=? AND "
        "end_index=?)");
  CHECK(raw.text("EXPLAIN QUERY PLAN SELECT coalesce(max(seq), 0) FROM hits WHERE (seq >> 12) = 0 "
                 "AND wearer = 1 AND device = 2 AND kind = 'sensor_offline'",
                 3) == "SEARCH hits USING INDEX hits_block_wearer_end_index (<expr>=? AND wearer=?)");
  CHECK(raw.text("EXPLAIN QUERY PLAN SELECT seq FROM hits WHERE seq > 0 AND (seq >> 12) = 0 AND "
                 "wearer = 1 AND detected_at >= 5 ORDER BY seq LIMIT 10",
                 3) == "SEARCH hits USING INDEX hits_block_wearer_end_index (<expr>=? AND wearer=?)");
  CHECK(raw.text("EXPLAIN QUERY PLAN SELECT seq FROM hits WHERE detected_at >= 5 ORDER BY "
                 "detected_at LIMIT 1",
                 3) == "SEARCH hits USING COVERING INDEX hits_detected_at (detected_at>?)");
}

TEST_CASE("HitStore: the database and its WAL are created with mode 0600", "[store]") {
  TempDir dir;
  const std::string path = dir.file("hits.db");
  // With umask 0 SQLite on its own would create the file 0644: the 0600 has
  // to come from the store.
  struct UmaskZero {
    UmaskZero() : previous(umask(0)) {}
    ~UmaskZero() { umask(previous); }
    mode_t previous;
  } umask_zero;
  {
    HitStore store(path);
    std::vector<Alert> alerts{make_alert(0)};
    store.insert(alerts);
    struct stat st {};
    REQUIRE(stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    REQUIRE(stat((path + "-wal").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
  }
}

TEST_CASE("HitStore: reopening keeps the rows and the sequence", "[store]") {
  TempDir dir;
  const std::string path = dir.file("hits.db");
  Alert original = make_alert(1);
  {
    HitStore store(path);
    std::vector<Alert> alerts{original, make_alert(2)};
    store.insert(alerts);
  }
  HitStore reopened(path);
  CHECK(reopened.schema_version() == kStoreSchemaVersion);
  CHECK(reopened.count() == 2);
  CHECK(reopened.last_seq() == 2);
  auto rows = reopened.query(HitQuery{});
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].seq == 1);
  check_same_except_seq(rows[0], original);
}

TEST_CASE("HitStore: a database with a newer schema version is refused, untouched", "[store]") {
  TempDir dir;
  const std::string path = dir.file("hits.db");
  { HitStore store(path); }
  const std::string newer = std::to_string(kStoreSchemaVersion + 1);
  RawDb(path).exec("PRAGMA user_version = " + newer);

  std::string message = error_of([&] { HitStore store(path); });
  CHECK_THAT(message, Catch::Contains(path) && Catch::Contains("schema version " + newer) &&
                          Catch::Contains("newer"));
  message = error_of([&] { HitStore store(path, /*read_only=*/true); });
  CHECK_THAT(message, Catch::Contains("schema version " + newer));
  CHECK(RawDb(path).text("PRAGMA user_version") == newer);
}

TEST_CASE("HitStore: an unrelated SQLite database is not taken over", "[store]") {
  TempDir dir;
  const std::string path = dir.file("other.db");
  RawDb(path).exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)");
  std::string message = error_of([&] { HitStore store(path); });
  CHECK_THAT(message, Catch::Contains(path) && Catch::Contains("refusing"));
  RawDb raw(path);
  CHECK(raw.text("PRAGMA user_version") == "0");
  CHECK(raw.text("PRAGMA journal_mode") == "delete");
}

TEST_CASE("HitStore: insert assigns consecutive seqs across calls and across reopen", "[store]") {
  TempDir dir;
  const std::string path = dir.file("hits.db");
  {
    HitStore store(path);
    std::vector<Alert> first{make_alert(0), make_alert(1), make_alert(2)};
    store.insert(first);
    CHECK(seqs_of(first) == std::vector<std::uint64_t>{1, 2, 3});
    std::vector<Alert> second{make_alert(3)};
    store.insert(second);
    CHECK(second[0].seq == 4);
    std::vector<Alert> none;
    store.insert(none);  // no transaction, no seq used
    CHECK(store.last_seq() == 4);
  }
  HitStore store(path);
  std::vector<Alert> third{make_alert(4), make_alert(5)};
  store.insert(third);
  CHECK(seqs_of(third) == std::vector<std::uint64_t>{5, 6});

  auto rows = store.query(HitQuery{});
  CHECK(seqs_of(rows) == std::vector<std::uint64_t>{1, 2, 3, 4, 5, 6});
  for (std::size_t i = 0; i < rows.size(); ++i) check_same_except_seq(rows[i], make_alert(int(i)));
}

TEST_CASE("HitStore: seqs are not reused after retention deleted every row", "[store]") {
  TempDir dir;
  const std::string path = dir.file("hits.db");
  {
    HitStore store(path);
    std::vector<Alert> old{make_alert(0, 7, "fall", 1000), make_alert(1, 7, "fall", 1000),
                           make_alert(2, 7, "fall", 1000)};
    store.insert(old);
    CHECK(store.delete_older_than(1002.5) == 3);  // detected_at 1000, 1001, 1002
    CHECK(store.count() == 0);
    CHECK(store.delete_older_than(1e12) == 0);
    CHECK(store.last_seq() == 3);
    std::vector<Alert> next{make_alert(3)};
    store.insert(next);
    CHECK(next[0].seq == 4);
    CHECK(store.delete_older_than(1e12) == 1);
  }
  HitStore reopened(path);
  CHECK(reopened.count() == 0);
  std::vector<Alert> after_reopen{make_alert(4)};
  reopened.insert(after_reopen);
  CHECK(after_reopen[0].seq == 5);
}

TEST_CASE("HitStore: delete_older_than keeps rows at or after the cutoff", "[store]") {
  TempDir dir;
  HitStore store(dir.file("hits.db"));
  std::vector<Alert> alerts;
  for (int i = 0; i < 5; ++i) alerts.push_back(make_alert(i, 7, "fall", 1000));  // 1000..1004
  store.insert(alerts);
  CHECK(store.delete_older_than(1002) == 2);
  CHECK(seqs_of(store.query(HitQuery{})) == std::vector<std::uint64_t>{3, 4, 5});
}

TEST_CASE("HitStore: query filters by wearer, pattern, after_seq, since and limit", "[store]") {
  TempDir dir;
  HitStore store(dir.file("hits.db"));
  // seq:      1       2       3       4       5       6
  // wearer:   1       2       1       2       1       1
  // pattern:  fall    fall    limp    limp    fall    limp
  // detected: 1000    1001    1002    1003    1004    1005
  std::vector<Alert> alerts;
  const std::uint32_t wearers[] = {1, 2, 1, 2, 1, 1};
  const char* patterns[] = {"fall", "fall", "limp", "limp", "fall", "limp"};
  for (int i = 0; i < 6; ++i) alerts.push_back(make_alert(0, wearers[i], patterns[i], 1000 + i));
  store.insert(alerts);

  using Seqs = std::vector<std::uint64_t>;
  HitQuery q;
  CHECK(seqs_of(store.query(q)) == Seqs{1, 2, 3, 4, 5, 6});

  q = HitQuery{};
  q.wearer = 1;
  CHECK(seqs_of(store.query(q)) == Seqs{1, 3, 5, 6});
  q.wearer = 99;
  CHECK(store.query(q).empty());

  q = HitQuery{};
  q.pattern = "limp";
  CHECK(seqs_of(store.query(q)) == Seqs{3, 4, 6});

  q = HitQuery{};
  q.after_seq = 4;
  CHECK(seqs_of(store.query(q)) == Seqs{5, 6});

  q = HitQuery{};
  q.since = 1003.0;  // inclusive
  CHECK(seqs_of(store.query(q)) == Seqs{4, 5, 6});

  q = HitQuery{};
  q.limit = 2;
  CHECK(seqs_of(store.query(q)) == Seqs{1, 2});
  q.after_seq = 2;  // paging on
  CHECK(seqs_of(store.query(q)) == Seqs{3, 4});

  q = HitQuery{};
  q.wearer = 1;
  q.pattern = "limp";
  q.since = 1003.0;
  CHECK(seqs_of(store.query(q)) == Seqs{6});
  q.pattern = "fall";
  q.after_seq = 1;
  q.since.reset();
  CHECK(seqs_of(store.query(q)) == Seqs{5});
}

TEST_CASE("HitStore: lookups by wearer find alerts in every block of seqs", "[store]") {
  using gw::pipeline::kSeqBlockBits;
  TempDir dir;
  HitStore store(dir.file("hits.db"));
  // Three blocks and a part: wearers 0-49 in turn, one pattern of two, one
  // second between detections; every 1000th alert of wearer 5 on device 3
  // is a sensor's offline alert.
  constexpr int kAlerts = 3 * (1 << kSeqBlockBits) + 100;
  std::vector<Alert> all;
  for (int i = 0; i < kAlerts; ++i) {
    Alert a = make_alert(i, static_cast<std::uint32_t>(i % 50), i % 3 == 0 ? "limp" : "fall");
    if (i % 1000 == 5) {
      a.kind = gw::pipeline::kSensorOfflineKind;
      a.device = 3;
    }
    all.push_back(a);
  }
  for (std::size_t first = 0; first < all.size(); first += 1000) {
    std::vector<Alert> part(all.begin() + static_cast<std::ptrdiff_t>(first),
                            all.begin() + static_cast<std::ptrdiff_t>(std::min(first + 1000, all.size())));
    store.insert(part);
    for (std::size_t k = 0; k < part.size(); ++k) all[first + k].seq = part[k].seq;
  }
  REQUIRE(store.last_seq() == kAlerts);

  // Against the same filters applied to every row here.
  const auto expected = [&](const HitQuery& q) {
    std::vector<std::uint64_t> seqs;
    for (const Alert& a : all) {
      if (a.seq <= q.after_seq || (q.wearer && a.wearer != *q.wearer) ||
          (q.pattern && a.pattern != *q.pattern) || (q.since && a.detected_at < *q.since))
        continue;
      if (q.limit >= 0 && seqs.size() == static_cast<std::size_t>(q.limit)) break;
      seqs.push_back(a.seq);
    }
    return seqs;
  };
  HitQuery q;
  q.limit = -1;
  q.wearer = 3;
  REQUIRE(expected(q).size() > 200);
  CHECK(seqs_of(store.query(q)) == expected(q));
  q.limit = 100;  // spans two blocks
  CHECK(seqs_of(store.query(q)) == expected(q));
  q.after_seq = (1 << kSeqBlockBits) - 10;  // starts inside a block
  CHECK(seqs_of(store.query(q)) == expected(q));
  q.pattern = "limp";
  q.since = all[9000].detected_at;
  q.limit = 30;
  CHECK(seqs_of(store.query(q)) == expected(q));
  q.limit = -1;
  CHECK(seqs_of(store.query(q)) == expected(q));
  q.wearer = 50;  // nobody's
  CHECK(store.query(q).empty());

  // A sensor's offline alert by the time it was raised, in any block.
  for (const int i : {5, 1005, 6005, 12005}) {
    INFO("offline alert " << i);
    REQUIRE(all[i].kind == gw::pipeline::kSensorOfflineKind);
    CHECK(store.last_offline_alert_seq(5, 3, all[i].detected_at) == all[i].seq);
    CHECK(store.last_offline_alert_seq(5, 3, all[i].detected_at - 30) == all[i].seq);
  }
  CHECK(store.last_offline_alert_seq(5, 4, all[5].detected_at) == 0);
  CHECK(store.last_offline_alert_seq(5, 3, all.back().detected_at + 1) == 0);

  // An ended episode's first alert, however far back, and one never stored.
  const auto episode_end = [&](const Alert& first) {
    return episode_end_naming(first, all.back().detected_at + 1);
  };
  Alert never_stored = all[105];
  never_stored.end_index = -1;
  std::vector<gw::pipeline::Event> ends = {episode_end(all[105]), episode_end(all[9105]),
                                           episode_end(all.back()), episode_end(never_stored)};
  store.insert_events(ends);
  CHECK(ends[0].alert_seq == all[105].seq);
  CHECK(ends[1].alert_seq == all[9105].seq);
  CHECK(ends[2].alert_seq == all.back().seq);
  CHECK(ends[3].alert_seq == 0);

  // After retention emptied the first two blocks, the same answers for
  // what is left.
  const double cutoff = all[2 * (1 << kSeqBlockBits) + 7].detected_at;
  store.delete_older_than(cutoff);
  all.erase(std::remove_if(all.begin(), all.end(), [&](const Alert& a) { return a.detected_at < cutoff; }),
            all.end());
  q = HitQuery{};
  q.wearer = 3;
  q.limit = -1;
  REQUIRE_FALSE(expected(q).empty());
  CHECK(seqs_of(store.query(q)) == expected(q));
  q.limit = 7;
  CHECK(seqs_of(store.query(q)) == expected(q));
}

TEST_CASE("HitStore: a failed insert stores nothing and uses no seq", "[store]") {
  TempDir dir;
  const std::string path = dir.file("hits.db");
  HitStore store(path);
  std::vector<Alert> first{make_alert(0)};
  store.insert(first);

  // A real constraint failure in the middle of the batch.
  RawDb raw(path);
  raw.exec(
      "CREATE TRIGGER refuse_666 BEFORE INSERT ON hits WHEN NEW.wearer = 666 "
      "BEGIN SELECT RAISE(ABORT, 'wearer 666 refused'); END");
  std::vector<Alert> batch{make_alert(1), make_alert(2, 666), make_alert(3)};
  std::string message = error_of([&] { store.insert(batch); });
  CHECK_THAT(message, Catch::Contains(path) && Catch::Contains("wearer 666 refused"));
  CHECK(seqs_of(batch) == std::vector<std::uint64_t>{0, 0, 0});
  CHECK(store.count() == 1);
  CHECK(store.last_seq() == 1);

  raw.exec("DROP TRIGGER refuse_666");
  store.insert(batch);  // the same batch now commits, right after seq 1
  CHECK(seqs_of(batch) == std::vector<std::uint64_t>{2, 3, 4});
}

TEST_CASE("HitStore: insert_rows with given dims texts stores what insert_rows makes itself",
          "[store]") {
  TempDir dir;
  HitStore own(dir.file("own.db"));
  HitStore given(dir.file("given.db"));
  std::vector<Alert> alerts{make_alert(0), make_alert(1, 9), make_alert(2)};
  alerts[1].dims.push_back(DimMatch{5, 6, 0.1 + 0.2, -4});
  alerts[2].dims.clear();
  std::vector<std::string> texts;
  for (const Alert& a : alerts)
    texts.push_back(gw::pipeline::json_text(gw::pipeline::dims_to_json(a)));

  std::vector<std::size_t> asked;
  CHECK(own.insert_rows(alerts) == 1);
  CHECK(given.insert_rows(alerts, [&](std::size_t i) -> const std::string& {
    asked.push_back(i);
    return texts[i];
  }) == 1);
  CHECK(asked == std::vector<std::size_t>{0, 1, 2});  // once per row, in order
  RawDb own_raw(dir.file("own.db"));
  RawDb given_raw(dir.file("given.db"));
  for (std::size_t i = 0; i < alerts.size(); ++i) {
    const std::string sql = "SELECT dims FROM hits WHERE seq = " + std::to_string(i + 1);
    CHECK(given_raw.text(sql) == texts[i]);
    CHECK(own_raw.text(sql) == texts[i]);
  }
  HitQuery all;
  const std::vector<Alert> back = given.query(all);
  REQUIRE(back.size() == alerts.size());
  for (std::size_t i = 0; i < alerts.size(); ++i) check_same_except_seq(back[i], alerts[i]);
}

TEST_CASE("HitStore: limit_size fails inserts with 'full' beyond the limit and keeps every row "
          "that committed", "[store]") {
  TempDir dir;
  const std::string path = dir.file("hits.db");
  std::uint64_t committed = 0;
  {
    HitStore store(path);
    CHECK(store.limit_size(96 * 1024) == 96 * 1024);
    std::string error;
    for (int tick = 0; tick < 1000 && error.empty(); ++tick) {
      std::vector<Alert> alerts(20, make_alert(tick));
      try {
        store.insert(alerts);
        committed += alerts.size();
      } catch (const gw::Error& e) {
        error = e.what();
      }
    }
    INFO(error);
    CHECK(error.find("full") != std::string::npos);
    CHECK(committed > 0);
    CHECK(store.count() == committed);
    CHECK(store.last_seq() == committed);
    // Not below the file's size: a lower limit keeps what it has.
    CHECK(store.limit_size(4096) >= 96 * 1024);
  }
  HitStore unlimited(path);  // the limit is the connection's
  std::vector<Alert> more(20, make_alert(1));
  unlimited.insert(more);
  CHECK(unlimited.count() == committed + 20);
}

TEST_CASE("HitStore: read-only sees committed rows, refuses writes, never creates", "[store]") {
  TempDir dir;
  const std::string path = dir.file("hits.db");
  HitStore writer(path);
  HitStore reader(path, /*read_only=*/true);
  CHECK(reader.schema_version() == kStoreSchemaVersion);
  CHECK(reader.count() == 0);

  std::vector<Alert> alerts{make_alert(0), make_alert(1)};
  writer.insert(alerts);
  CHECK(reader.count() == 2);
  CHECK(reader.last_seq() == 2);
  check_same_except_seq(reader.query(HitQuery{}).at(1), make_alert(1));

  std::vector<Alert> more{make_alert(2)};
  CHECK_THROWS_AS(reader.insert(more), gw::Error);
  CHECK(more[0].seq == 0);
  CHECK_THROWS_AS(reader.delete_older_than(1e12), gw::Error);
  CHECK(writer.count() == 2);

  const std::string missing = dir.file("missing.db");
  std::string message = error_of([&] { HitStore store(missing, /*read_only=*/true); });
  CHECK_THAT(message, Catch::Contains(missing));
  CHECK_FALSE(fs::exists(missing));
}

TEST_CASE("HitStore: a NaN value is stored and read back as NaN", "[store]") {
  TempDir dir;
  HitStore store(dir.file("hits.db"));
  Alert alert = make_alert(0);
  alert.latency_ms = std::nan("");
  alert.dims[0].distance = std::nan("");
  std::vector<Alert> alerts{alert};
  store.insert(alerts);
  auto rows = store.query(HitQuery{});
  REQUIRE(rows.size() == 1);
  CHECK(std::isnan(rows[0].latency_ms));
  CHECK(std::isnan(rows[0].dims[0].distance));
  CHECK(rows[0].distance == alert.distance);
}

TEST_CASE("alert JSON has exactly the documented keys and round-trips", "[alert]") {
  Alert alert = make_alert(5, 4000000000u);  // a wearer id above INT32_MAX
  alert.seq = 123456789012345ULL;
  alert.end_index = -3;
  alert.device = 65535;
  json j = alert_to_json(alert);

  std::set<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.insert(it.key());
  CHECK(keys == std::set<std::string>{"seq", "wearer", "device", "pattern", "kind", "severity",
                                      "t_start", "t_end", "end_index", "distance", "matched_dims",
                                      "pattern_dims", "detected_at", "latency_ms", "dims"});
  REQUIRE(j["dims"].is_array());
  for (const json& dim : j["dims"]) {
    std::set<std::string> dim_keys;
    for (auto it = dim.begin(); it != dim.end(); ++it) dim_keys.insert(it.key());
    CHECK(dim_keys == std::set<std::string>{"pattern_dim", "stream_dim", "distance", "end_index"});
  }
  CHECK(j["seq"] == 123456789012345ULL);
  CHECK(j["wearer"] == 4000000000u);

  // Through text, as a subscriber gets it.
  Alert back = alert_from_json(json::parse(j.dump()));
  CHECK(back.seq == alert.seq);
  check_same_except_seq(back, alert);
}

TEST_CASE("HitStore: a pressure hotspot's region and foot are stored and read back, other alerts have none",
          "[store][alert]") {
  TempDir dir;
  HitStore store(dir.file("hits.db"));
  Alert hotspot = make_alert(0);
  hotspot.pattern = gw::pipeline::kPressureHotspotPattern;
  hotspot.kind = gw::pipeline::kPressureHotspotKind;
  hotspot.dims.clear();
  hotspot.region = "forefoot_lateral";
  hotspot.foot = "right";
  std::vector<Alert> alerts{make_alert(1), hotspot, make_alert(2)};
  store.insert(alerts);

  const auto rows = store.query(HitQuery{});
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].region.empty());
  CHECK(rows[0].foot.empty());
  CHECK(rows[1].region == "forefoot_lateral");
  CHECK(rows[1].foot == "right");
  check_same_except_seq(rows[1], hotspot);
  CHECK(rows[2].region.empty());
  const auto with_state = store.alert_with_state(rows[1].seq);
  REQUIRE(with_state.has_value());
  CHECK(with_state->alert.region == "forefoot_lateral");
  CHECK(with_state->alert.foot == "right");
  CHECK(with_state->state.state == gw::pipeline::AlertState::kNew);

  // In the JSON only when set, and back from it.
  const json j = alert_to_json(rows[1]);
  CHECK(j["region"] == "forefoot_lateral");
  CHECK(j["foot"] == "right");
  const Alert back = alert_from_json(json::parse(j.dump()));
  CHECK(back.region == "forefoot_lateral");
  CHECK(back.foot == "right");
  CHECK_FALSE(alert_to_json(rows[0]).contains("region"));
  CHECK_FALSE(alert_to_json(rows[0]).contains("foot"));
  CHECK(RawDb(dir.file("hits.db")).text("SELECT count(*) FROM hits WHERE region IS NULL AND foot IS NULL") == "2");
}

// The exact text, byte for byte: the store's dims column and the published
// bodies are this text, and readers of older rows compare against it.
TEST_CASE("alert JSON text: sorted keys, compact, shortest doubles, NaN as null", "[alert]") {
  Alert a;
  a.seq = 42;
  a.wearer = 4000000000u;
  a.device = 65535;
  a.pattern = "p\xff";  // invalid UTF-8 is replaced, not thrown on
  a.kind = "fall";
  a.severity = "critical";
  a.t_start = 1.7e9 + 0.1;
  a.t_end = -2.5e-7;
  a.end_index = -9007199254740993LL;
  a.distance = std::nan("");
  a.matched_dims = 2;
  a.pattern_dims = 201;
  a.detected_at = 1234567890.123456789;
  a.latency_ms = HUGE_VAL;
  a.dims = {DimMatch{0, 200, 0.1 + 0.2, 1LL << 53}, DimMatch{7, 3, 1e-300, -1}};
  const std::string dims =
      R"([{"distance":0.30000000000000004,"end_index":9007199254740992,"pattern_dim":0,)"
      R"("stream_dim":200},{"distance":1e-300,"end_index":-1,"pattern_dim":7,"stream_dim":3}])";
  CHECK(gw::pipeline::json_text(gw::pipeline::dims_to_json(a)) == dims);
  CHECK(gw::pipeline::json_text(alert_to_json(a)) ==
        R"({"detected_at":1234567890.1234567,"device":65535,"dims":)" + dims +
            R"(,"distance":null,"end_index":-9007199254740993,"kind":"fall","latency_ms":null,)"
            R"("matched_dims":2,"pattern":"p)" "\xEF\xBF\xBD" R"(","pattern_dims":201,"seq":42,)"
            R"("severity":"critical","t_end":-2.5e-07,"t_start":1700000000.1,"wearer":4000000000})");
}

TEST_CASE("alert_from_json names the missing or wrong key", "[alert]") {
  const json good = alert_to_json(make_alert(0));

  json j = good;
  j.erase("severity");
  CHECK_THAT(error_of([&] { alert_from_json(j); }),
             Catch::Contains("severity") && Catch::Contains("missing"));

  j = good;
  j["wearer"] = "seven";
  CHECK_THAT(error_of([&] { alert_from_json(j); }),
             Catch::Contains("wearer") && Catch::Contains("expected an integer"));

  j = good;
  j["wearer"] = -1;
  CHECK_THAT(error_of([&] { alert_from_json(j); }),
             Catch::Contains("wearer") && Catch::Contains("out of range"));

  j = good;
  j["device"] = 70000;
  CHECK_THAT(error_of([&] { alert_from_json(j); }), Catch::Contains("device"));

  j = good;
  j["seq"] = 1.5;
  CHECK_THAT(error_of([&] { alert_from_json(j); }), Catch::Contains("seq"));

  j = good;
  j["distance"] = "far";
  CHECK_THAT(error_of([&] { alert_from_json(j); }),
             Catch::Contains("distance") && Catch::Contains("expected a number"));

  j = good;
  j["dims"][1].erase("stream_dim");
  CHECK_THAT(error_of([&] { alert_from_json(j); }), Catch::Contains("dims[1].stream_dim"));

  j = good;
  j["dims"] = 3;
  CHECK_THAT(error_of([&] { alert_from_json(j); }),
             Catch::Contains("dims") && Catch::Contains("array"));

  CHECK_THAT(error_of([&] { alert_from_json(json::array()); }),
             Catch::Contains("expected an object"));

  j = good;
  j["distance"] = 3;  // an integer is a fine number
  CHECK(alert_from_json(j).distance == 3.0);
}

TEST_CASE("alert_topic is alert.<severity>.<wearer>.", "[alert]") {
  Alert alert = make_alert(0, 17);
  alert.severity = "warning";
  CHECK(alert_topic(alert) == "alert.warning.17.");
}

// ---- alert windows and marks ----------------------------------------------

namespace {

using gw::pipeline::AlertWindow;
using gw::pipeline::MarkError;
using gw::pipeline::MarkQuery;
using gw::pipeline::MarkVerdict;

std::shared_ptr<const AlertWindow> make_window(const Alert& a, float base) {
  auto w = std::make_shared<AlertWindow>();
  w->pattern = a.pattern;
  w->wearer = a.wearer;
  w->lead_in = 2;
  w->length = 3;
  w->channels = {"x", "y"};
  w->shape = "length=3;channels=x,y;transforms=lowpass;lead_in=2";
  for (int i = 0; i < 10; ++i) w->values.push_back(base + 0.5f * static_cast<float>(i));
  return w;
}

MarkError::Reason reason_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const MarkError& e) {
    return e.reason();
  }
  FAIL("expected MarkError");
  return MarkError::Reason::kUnknownSeq;
}

}  // namespace

TEST_CASE("HitStore: an alert's window is stored with it and read back exactly", "[store][marks]") {
  TempDir dir;
  HitStore store(dir.file("hits.db"));
  std::vector<Alert> alerts{make_alert(0), make_alert(1)};
  alerts[0].window = make_window(alerts[0], 1.25f);  // alert 1 has none
  store.insert(alerts);
  CHECK(store.window_count() == 1);
  const auto w = store.window(alerts[0].seq);
  REQUIRE(w);
  CHECK(w->pattern == "fall");
  CHECK(w->wearer == 7);
  CHECK(w->lead_in == 2);
  CHECK(w->length == 3);
  CHECK(w->channels == std::vector<std::string>{"x", "y"});
  CHECK(w->shape == alerts[0].window->shape);
  CHECK(w->values == alerts[0].window->values);
  CHECK_FALSE(store.window(alerts[1].seq));
  // The published JSON does not carry the window.
  CHECK_FALSE(alert_to_json(alerts[0]).contains("window"));
}

TEST_CASE("HitStore: marks are added, replaced, listed and withdrawn", "[store][marks]") {
  TempDir dir;
  HitStore store(dir.file("hits.db"));
  std::vector<Alert> alerts{make_alert(0, 7), make_alert(1, 8, "limp"), make_alert(2, 7)};
  alerts[0].window = make_window(alerts[0], 0);
  alerts[1].window = make_window(alerts[1], 10);
  store.insert(alerts);

  CHECK(reason_of([&] { store.add_mark(99, MarkVerdict::kFalse, "", 1.0); }) ==
        MarkError::Reason::kUnknownSeq);
  CHECK(reason_of([&] { store.add_mark(3, MarkVerdict::kFalse, "", 1.0); }) ==
        MarkError::Reason::kNoWindow);
  CHECK(store.marks(MarkQuery{}).empty());

  const auto first = store.add_mark(1, MarkVerdict::kFalse, "was sitting down", 100.0);
  CHECK_FALSE(first.replaced);
  CHECK(first.mark.seq == 1);
  CHECK(first.mark.wearer == 7);
  CHECK(first.mark.pattern == "fall");
  const auto second = store.add_mark(2, MarkVerdict::kTrue, "", 101.0);
  // Re-marking replaces the verdict of the same mark.
  const auto again = store.add_mark(1, MarkVerdict::kTrue, "it was a freeze", 102.0);
  REQUIRE(again.replaced);
  CHECK(*again.replaced == MarkVerdict::kFalse);
  CHECK(again.mark.id == first.mark.id);

  auto all = store.marks(MarkQuery{});
  REQUIRE(all.size() == 2);
  CHECK(all[0].id == second.mark.id);  // newest first
  CHECK(all[1].verdict == MarkVerdict::kTrue);
  CHECK(all[1].note == "it was a freeze");
  CHECK(all[1].created_at == 102.0);
  MarkQuery of_wearer;
  of_wearer.wearer = 8;
  REQUIRE(store.marks(of_wearer).size() == 1);
  CHECK(store.marks(of_wearer)[0].pattern == "limp");
  MarkQuery of_pattern;
  of_pattern.pattern = "fall";
  CHECK(store.marks(of_pattern).size() == 1);

  auto active = store.active_marks();
  REQUIRE(active.size() == 2);
  CHECK(active[0].mark.id == first.mark.id);  // oldest first
  CHECK(active[0].window.values == alerts[0].window->values);
  CHECK(store.verdicts(1, 3) ==
        std::vector<std::pair<std::uint64_t, MarkVerdict>>{{1, MarkVerdict::kTrue},
                                                           {2, MarkVerdict::kTrue}});

  const auto withdrawn = store.withdraw_mark(second.mark.id, 200.0);
  REQUIRE(withdrawn.withdrawn_at);
  CHECK(*withdrawn.withdrawn_at == 200.0);
  CHECK(reason_of([&] { store.withdraw_mark(second.mark.id, 201.0); }) ==
        MarkError::Reason::kAlreadyWithdrawn);
  CHECK(reason_of([&] { store.withdraw_mark(12345, 201.0); }) == MarkError::Reason::kUnknownMark);
  CHECK(store.marks(MarkQuery{}).size() == 1);
  MarkQuery with_withdrawn;
  with_withdrawn.include_withdrawn = true;
  CHECK(store.marks(with_withdrawn).size() == 2);
  CHECK(store.active_marks().size() == 1);
  CHECK(store.verdicts(1, 3).size() == 1);
  // Marking again after a withdrawal makes a new mark.
  const auto fresh = store.add_mark(2, MarkVerdict::kFalse, "", 300.0);
  CHECK_FALSE(fresh.replaced);
  CHECK(fresh.mark.id != second.mark.id);

  // Stored in the file as documented.
  RawDb raw(dir.file("hits.db"));
  CHECK(raw.text("SELECT verdict FROM marks WHERE id = " + std::to_string(fresh.mark.id)) == "false");
  CHECK(raw.text("SELECT count(*) FROM marks WHERE withdrawn_at IS NOT NULL") == "1");
}

TEST_CASE("HitStore: retention removes windows with their alerts, except marked ones",
          "[store][marks]") {
  TempDir dir;
  HitStore store(dir.file("hits.db"));
  std::vector<Alert> old{make_alert(0, 7, "fall", 1000.0), make_alert(1, 7, "fall", 1000.0),
                         make_alert(2, 7, "fall", 1000.0)};
  for (Alert& a : old) a.window = make_window(a, 1);
  std::vector<Alert> recent{make_alert(3, 7, "fall", 5000.0)};
  recent[0].window = make_window(recent[0], 2);
  store.insert(old);
  store.insert(recent);
  const auto kept = store.add_mark(1, MarkVerdict::kFalse, "", 1.0);
  const auto dropped = store.add_mark(2, MarkVerdict::kFalse, "", 1.0);
  store.withdraw_mark(dropped.mark.id, 2.0);

  CHECK(store.delete_older_than(4000.0) == 3);
  CHECK(store.count() == 1);
  // Alert 1's window stays: its active mark makes an example of it.
  CHECK(store.window(1));
  CHECK_FALSE(store.window(2));
  CHECK_FALSE(store.window(3));
  CHECK(store.window(4));
  CHECK(store.window_count() == 2);
  REQUIRE(store.active_marks().size() == 1);
  CHECK(store.active_marks()[0].mark.id == kept.mark.id);
  MarkQuery all;
  all.include_withdrawn = true;
  CHECK(store.marks(all).size() == 2);  // marks themselves are kept
  // Once withdrawn, the next retention pass takes the window too.
  store.withdraw_mark(kept.mark.id, 3.0);
  store.delete_older_than(4000.0);
  CHECK_FALSE(store.window(1));
}

TEST_CASE("HitStore: a normalised pattern's window keeps its baseline, other windows keep none",
          "[store][marks]") {
  TempDir dir;
  const std::string path = dir.file("hits.db");
  std::vector<Alert> alerts{make_alert(0), make_alert(1), make_alert(2)};
  auto with_baseline = std::make_shared<AlertWindow>(*make_window(alerts[0], 1.25f));
  with_baseline->baseline_center = {0.5f, -1.0f / 3.0f, 7.0f};
  with_baseline->baseline_spread = {0.125f, 2.0f, 1e-6f};
  alerts[0].window = with_baseline;
  alerts[1].window = make_window(alerts[1], 2.5f);  // after one with a baseline, in one insert
  {
    HitStore store(path);
    store.insert(alerts);
  }
  {
    HitStore store(path);
    const auto w = store.window(alerts[0].seq);
    REQUIRE(w);
    CHECK(w->baseline_center == with_baseline->baseline_center);
    CHECK(w->baseline_spread == with_baseline->baseline_spread);
    CHECK(w->values == with_baseline->values);
    const auto plain = store.window(alerts[1].seq);
    REQUIRE(plain);
    CHECK(plain->baseline_center.empty());
    CHECK(plain->baseline_spread.empty());
  }
  // A version 8 store (no baseline column) keeps its windows, without one.
  {
    RawDb raw(path);
    raw.exec("ALTER TABLE alert_windows DROP COLUMN baseline; PRAGMA user_version = 8;");
  }
  HitStore migrated(path);
  CHECK(migrated.schema_version() == kStoreSchemaVersion);
  CHECK(migrated.window_count() == 2);
  const auto kept = migrated.window(alerts[0].seq);
  REQUIRE(kept);
  CHECK(kept->values == with_baseline->values);
  CHECK(kept->baseline_center.empty());
  // A baseline blob of odd float32 count is malformed, and says so.
  {
    RawDb raw(path);
    raw.exec("UPDATE alert_windows SET baseline = x'0000803f' WHERE seq = " +
             std::to_string(alerts[1].seq));
  }
  CHECK_THROWS_WITH(migrated.window(alerts[1].seq), Catch::Contains("not pairs of float32 values"));
}

TEST_CASE("HitStore: a version 1 store is migrated with its rows kept", "[store][marks]") {
  TempDir dir;
  const std::string path = dir.file("hits.db");
  {
    RawDb raw(path);
    raw.exec("PRAGMA journal_mode=WAL");
    raw.exec(
        "CREATE TABLE hits (seq INTEGER PRIMARY KEY, wearer INTEGER NOT NULL, device INTEGER NOT "
        "NULL, pattern TEXT NOT NULL, kind TEXT NOT NULL, severity TEXT NOT NULL, t_start REAL, "
        "t_end REAL, end_index INTEGER NOT NULL, distance REAL, matched_dims INTEGER NOT NULL, "
        "pattern_dims INTEGER NOT NULL, detected_at REAL, latency_ms REAL, dims TEXT NOT NULL);"
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value);"
        "INSERT INTO meta(key, value) VALUES ('last_seq', 1);"
        "INSERT INTO hits VALUES (1, 7, 3, 'fall', 'fall', 'critical', 1, 2, 10, 0.5, 1, 1, "
        "1.7e9, 1, '[]');"
        "PRAGMA user_version = 1;");
  }
  HitStore store(path);
  CHECK(store.schema_version() == kStoreSchemaVersion);
  CHECK(store.count() == 1);
  CHECK(store.window_count() == 0);
  CHECK(reason_of([&] { store.add_mark(1, MarkVerdict::kFalse, "", 1.0); }) ==
        MarkError::Reason::kNoWindow);
  // The index by block and wearer made, the one by wearer of versions 8-10
  // made and dropped on the way (this version 1 has no index of its own);
  // the row is found by wearer.
  CHECK(RawDb(path).text("SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_master "
                         "WHERE type = 'index' AND tbl_name = 'hits' ORDER BY name)") ==
        "hits_block_wearer_end_index");
  HitQuery by_wearer;
  by_wearer.wearer = 7;
  CHECK(seqs_of(store.query(by_wearer)) == std::vector<std::uint64_t>{1});
}

TEST_CASE("HitStore: events get increasing ids, filter by wearer, alert and type, and age out",
          "[store]") {
  using gw::pipeline::Event;
  using gw::pipeline::EventQuery;
  using gw::pipeline::EventType;
  TempDir dir;
  HitStore store(dir.file("hits.db"));
  std::vector<Event> events(3);
  events[0].type = EventType::kAlertAcknowledged;
  events[0].wearer = 5;
  events[0].alert_seq = 12;
  events[0].actor = "ana";
  events[0].at = 1000;
  events[1].type = EventType::kSensorRecovered;
  events[1].wearer = 6;
  events[1].actor = "gaitwatchd";
  events[1].at = 2000;
  events[1].details = nlohmann::json{{"device", 1}, {"silent_s", 42.5}};
  events[2].type = EventType::kAlertResolved;
  events[2].wearer = 5;
  events[2].alert_seq = 12;
  events[2].actor = "ben";
  events[2].at = 3000;
  store.insert_events(events);
  CHECK(events[0].id > 0);
  CHECK(events[1].id > events[0].id);
  CHECK(events[2].id > events[1].id);

  const std::vector<Event> all = store.events(EventQuery{});
  REQUIRE(all.size() == 3);
  for (std::size_t i = 0; i < all.size(); ++i)
    CHECK(gw::pipeline::event_to_json(all[i]) == gw::pipeline::event_to_json(events[i]));
  EventQuery of_wearer;
  of_wearer.wearer = 5;
  CHECK(store.events(of_wearer).size() == 2);
  EventQuery after;
  after.after_id = events[1].id;
  REQUIRE(store.events(after).size() == 1);
  CHECK(store.events(after)[0].actor == "ben");
  EventQuery of_type;
  of_type.type = EventType::kSensorRecovered;
  of_type.limit = 2;
  REQUIRE(store.events(of_type).size() == 1);
  CHECK(store.events(of_type)[0].wearer == 6);
  of_type.wearer = 5;
  CHECK(store.events(of_type).empty());

  store.delete_older_than(2500);
  const std::vector<Event> left = store.events(EventQuery{});
  REQUIRE(left.size() == 1);
  CHECK(left[0].id == events[2].id);
}

TEST_CASE("Event: JSON round trip and unknown types refused", "[store]") {
  gw::pipeline::Event event;
  event.type = gw::pipeline::EventType::kEpisodeEnded;
  event.wearer = 77;
  event.alert_seq = 3;
  event.actor = "gaitwatchd";
  event.at = 1.5e9;
  event.id = 9;
  const nlohmann::json j = gw::pipeline::event_to_json(event);
  CHECK(gw::pipeline::event_to_json(gw::pipeline::event_from_json(j)) == j);
  CHECK(gw::pipeline::event_topic(event) == "event.episode_ended.77.");
  nlohmann::json bad = j;
  bad["type"] = "alert_exploded";
  CHECK_THROWS_WITH(gw::pipeline::event_from_json(bad), Catch::Contains("alert_exploded"));
  for (const char* name : {"alert_acknowledged", "alert_resolved", "alert_marked", "alert_unmarked",
                           "alert_escalated", "episode_ended", "sensor_recovered",
                           "wearer_changed"}) {
    const auto type = gw::pipeline::parse_event_type(name);
    REQUIRE(type.has_value());
    CHECK(std::string(gw::pipeline::event_type_name(*type)) == name);
  }
}

namespace {

gw::pipeline::AlertStateError::Reason state_refusal(const std::function<void()>& action) {
  try {
    action();
  } catch (const gw::pipeline::AlertStateError& e) {
    return e.reason();
  }
  FAIL("expected AlertStateError");
  return {};
}

}  // namespace

TEST_CASE("HitStore: alert states go new -> acknowledged -> resolved, and resolved is final",
          "[store][lifecycle]") {
  using gw::pipeline::AlertState;
  using Reason = gw::pipeline::AlertStateError::Reason;
  TempDir dir;
  HitStore store(dir.file("hits.db"));
  std::vector<Alert> alerts = {make_alert(0), make_alert(1), make_alert(2)};
  store.insert(alerts);

  // Without a row an alert is new.
  REQUIRE(store.alert_with_state(1).has_value());
  CHECK(store.alert_with_state(1)->state.state == AlertState::kNew);
  CHECK(store.alert_with_state(1)->alert.pattern == "fall");
  CHECK_FALSE(store.alert_with_state(99).has_value());

  const auto acked = store.acknowledge_alert(1, "ana", "on my way", 1000);
  CHECK(acked.state == AlertState::kAcknowledged);
  CHECK(acked.acknowledged_by == "ana");
  CHECK(acked.acknowledged_at == 1000);
  CHECK(state_refusal([&] { store.acknowledge_alert(1, "ben", "", 1001); }) ==
        Reason::kAlreadyAcknowledged);
  const auto resolved = store.resolve_alert(1, "ben", "sat up, fine", 1100);
  CHECK(resolved.state == AlertState::kResolved);
  CHECK(resolved.acknowledged_by == "ana");  // the acknowledgement stays on record
  CHECK(resolved.resolved_by == "ben");
  CHECK(resolved.note == "sat up, fine");
  CHECK(state_refusal([&] { store.resolve_alert(1, "ben", "", 1200); }) ==
        Reason::kAlreadyResolved);
  CHECK(state_refusal([&] { store.acknowledge_alert(1, "ana", "", 1200); }) ==
        Reason::kAlreadyResolved);

  // Straight from new to resolved: no acknowledgement recorded.
  const auto direct = store.resolve_alert(2, "cy", "", 1300);
  CHECK(direct.state == AlertState::kResolved);
  CHECK(direct.acknowledged_by.empty());
  CHECK_FALSE(direct.acknowledged_at.has_value());

  CHECK(state_refusal([&] { store.acknowledge_alert(42, "ana", "", 1); }) == Reason::kUnknownSeq);
  CHECK(state_refusal([&] { store.resolve_alert(42, "ana", "", 1); }) == Reason::kUnknownSeq);

  // What is in the file, read by another connection.
  RawDb raw(dir.file("hits.db"));
  CHECK(raw.text("SELECT state || ',' || acknowledged_by || ',' || resolved_by FROM alert_states "
                 "WHERE seq = 1") == "resolved,ana,ben");
  CHECK(raw.text("SELECT count(*) FROM alert_states WHERE seq = 2 AND acknowledged_by IS NULL") ==
        "1");
}

TEST_CASE("HitStore: open alerts newest first, escalation levels kept, states age out",
          "[store][lifecycle]") {
  using gw::pipeline::OpenAlertQuery;
  TempDir dir;
  const std::string path = dir.file("hits.db");
  {
    HitStore store(path);
    std::vector<Alert> alerts = {make_alert(0), make_alert(1), make_alert(2), make_alert(3)};
    alerts[3].severity = "warning";
    store.insert(alerts);
    store.acknowledge_alert(2, "ana", "", 10);
    store.resolve_alert(3, "ana", "", 10);
    store.set_escalation_level(1, 2);
  }
  HitStore store(path);  // reopened: what a restarted daemon reads
  const auto seqs = [](const std::vector<gw::pipeline::AlertWithState>& rows) {
    std::vector<std::uint64_t> out;
    for (const auto& row : rows) out.push_back(row.alert.seq);
    return out;
  };
  CHECK(seqs(store.open_alerts(OpenAlertQuery{})) == std::vector<std::uint64_t>{4, 2, 1});
  OpenAlertQuery all;
  all.include_resolved = true;
  CHECK(seqs(store.open_alerts(all)) == std::vector<std::uint64_t>{4, 3, 2, 1});
  OpenAlertQuery escalating;
  escalating.unacknowledged_only = true;
  escalating.severity = "critical";
  escalating.newest_first = false;
  const auto critical = store.open_alerts(escalating);
  CHECK(seqs(critical) == std::vector<std::uint64_t>{1});
  CHECK(critical[0].state.escalation_level == 2);
  escalating.after_seq = 1;
  CHECK(store.open_alerts(escalating).empty());
  OpenAlertQuery one;
  one.limit = 1;
  CHECK(seqs(store.open_alerts(one)) == std::vector<std::uint64_t>{4});

  // Retention takes an alert's state with it.
  store.delete_older_than(1.7e9 + 2);
  RawDb raw(path);
  CHECK(raw.text("SELECT group_concat(seq) FROM alert_states") == "3");
}

TEST_CASE("alert message body: the alert's JSON plus schema, detected_at_iso and zone",
          "[alert]") {
  Alert alert = make_alert(0);
  alert.seq = 42;
  alert.detected_at = 1795846323.25;
  const json plain = alert_to_json(alert);
  const json body =
      gw::pipeline::alert_message_json(alert, gw::TimeZone::named("Europe/Berlin"));
  CHECK(body["schema"] == gw::pipeline::kMessageSchemaVersion);
  CHECK(body["detected_at_iso"] == "2026-11-28T07:12:03.250+01:00");
  CHECK(body["zone"] == "Europe/Berlin");
  // Every member of the alert is there, unchanged, and nothing else is new.
  json without = body;
  for (const char* added : {"schema", "detected_at_iso", "zone"}) without.erase(added);
  CHECK(gw::pipeline::json_text(without) == gw::pipeline::json_text(plain));
  CHECK(alert_from_json(body).seq == 42);
}

TEST_CASE("event message body: at_iso and zone only when a zone is given", "[store]") {
  gw::pipeline::Event event;
  event.type = gw::pipeline::EventType::kAlertAcknowledged;
  event.wearer = 17;
  event.alert_seq = 42;
  event.actor = "ana";
  event.at = 1795846390.0;
  const json bare = gw::pipeline::event_to_json(event);
  CHECK_FALSE(bare.contains("at_iso"));
  CHECK_FALSE(bare.contains("zone"));
  const gw::TimeZone berlin = gw::TimeZone::named("Europe/Berlin");
  const json body = gw::pipeline::event_to_json(event, &berlin);
  CHECK(body["schema"] == 2);
  CHECK(body["at_iso"] == "2026-11-28T07:13:10.000+01:00");
  CHECK(body["zone"] == "Europe/Berlin");
  CHECK(gw::pipeline::event_from_json(body).alert_seq == 42);
}

TEST_CASE("HitStore: an episode_ended event gets its first alert's seq", "[store][episode]") {
  using gw::pipeline::Event;
  using gw::pipeline::EventType;
  TempDir dir;
  HitStore store(dir.file("hits.db"));
  // The event as the engine raises it: the alert named, its seq unknown.
  const auto episode_end = [](const Alert& first) { return episode_end_naming(first, 2e9); };
  std::vector<Alert> earlier = {make_alert(0), make_alert(1), make_alert(2, 8)};
  store.insert(earlier);

  // Its alert in the same transaction (after others), or committed before.
  std::vector<Alert> batch = {make_alert(5), make_alert(6, 9, "limp")};
  std::vector<Event> events = {episode_end(batch[1]), episode_end(earlier[1]),
                               episode_end(make_alert(3)) /* never stored */};
  const std::string dims = "[]";
  const std::uint64_t first_seq =
      store.insert_rows(batch, [&](std::size_t) -> const std::string& { return dims; }, &events);
  CHECK(events[0].alert_seq == first_seq + 1);
  CHECK(events[1].alert_seq == earlier[1].seq);
  CHECK(events[2].alert_seq == 0);

  // Alerts of one transaction with the same wearer and end index differ by
  // pattern or device; of two identical ones the later is named.
  const Alert named = make_alert(7);
  Alert other_pattern = named;
  other_pattern.pattern = "limp";
  Alert other_device = named;
  other_device.device = static_cast<std::uint16_t>(named.device + 1);
  std::vector<Alert> crowded = {named, other_pattern, other_device, named};
  std::vector<Event> crowded_ends = {episode_end(other_pattern), episode_end(other_device),
                                     episode_end(named)};
  const std::uint64_t crowded_first = store.insert_rows(
      crowded, [&](std::size_t) -> const std::string& { return dims; }, &crowded_ends);
  CHECK(crowded_ends[0].alert_seq == crowded_first + 1);
  CHECK(crowded_ends[1].alert_seq == crowded_first + 2);
  CHECK(crowded_ends[2].alert_seq == crowded_first + 3);

  // The same end index of another wearer, or another time, is not it.
  Alert other_wearer = earlier[0];
  other_wearer.wearer = 99;
  Alert other_time = earlier[0];
  other_time.t_end += 1;
  std::vector<Event> alone = {episode_end(other_wearer), episode_end(other_time),
                              episode_end(earlier[2])};
  store.insert_events(alone);
  CHECK(alone[0].alert_seq == 0);
  CHECK(alone[1].alert_seq == 0);
  CHECK(alone[2].alert_seq == earlier[2].seq);
  // As stored: the audit row carries the seq.
  gw::pipeline::EventQuery q;
  q.after_id = alone[1].id;
  const std::vector<Event> stored = store.events(q);
  REQUIRE(stored.size() == 1);
  CHECK(stored[0].alert_seq == earlier[2].seq);
}
