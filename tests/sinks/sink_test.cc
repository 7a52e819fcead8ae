// AlertSink against real parts: a SQLite file in a temporary directory and a
// ZeroMQ SUB socket on loopback connected to the sink's PUB socket.
//
// The slow-joiner problem: a SUB that has just connected misses whatever the
// PUB sends before the subscription reaches it, and there is no event for
// "subscription arrived". So every test that counts messages first publishes
// stats probes until each subscriber has received one; from then on the
// subscription is in place and, below the high-water mark, nothing is lost.
// Each test ends its stream with a stats message {"end": true}, so receivers
// stop on a marker instead of on a timeout.
#include "sinks/sink.h"

#include <sqlite3.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "common/error.h"
#include "sinks/alert.h"
#include "sinks/store.h"
#include "tests/common/sanitized.h"
#include "tests/common/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using gw::pipeline::Alert;
using gw::pipeline::alert_from_json;
using gw::pipeline::alert_topic;
using gw::pipeline::AlertSink;
using gw::pipeline::DimMatch;
using gw::pipeline::HitQuery;
using gw::pipeline::HitStore;
using gw::pipeline::SinkOptions;
using nlohmann::json;
using namespace std::chrono_literals;

// Each test's own folder.
class TempDir : public gw::test::TempDir {
 public:
  TempDir() : gw::test::TempDir("gw_sink_test") {}
};

void raw_exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
  INFO(sql << ": " << sqlite3_errmsg(db));
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

double unix_now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// end_index identifies an alert in these tests.
Alert make_alert(std::int64_t id, std::uint32_t wearer = 7,
                 const std::string& severity = "critical", double detected_at = 0) {
  Alert a;
  a.wearer = wearer;
  a.device = 2;
  a.pattern = "fall-forward";
  a.kind = "fall";
  a.severity = severity;
  a.t_start = 10.0 + static_cast<double>(id);
  a.t_end = 11.28 + static_cast<double>(id);
  a.end_index = id;
  a.distance = 3.25;
  a.matched_dims = 1;
  a.pattern_dims = 3;
  a.detected_at = detected_at != 0 ? detected_at : unix_now_s();
  a.latency_ms = 12.0;
  a.dims = {DimMatch{0, 0, 3.25, id}};
  return a;
}

SinkOptions options_for(const TempDir& dir) {
  SinkOptions options;
  options.db_path = dir.file("hits.db");
  options.publish_endpoint = "tcp://127.0.0.1:0";
  options.commit_interval_ms = 20;
  options.max_batch = 16;
  return options;
}

// A window of wearer 7's "fall-forward" alert: three channels of `length`
// samples, all 0.5.
std::shared_ptr<gw::pipeline::AlertWindow> flat_window(int length) {
  auto window = std::make_shared<gw::pipeline::AlertWindow>();
  window->pattern = "fall-forward";
  window->wearer = 7;
  window->length = length;
  window->channels = {"x", "y", "z"};
  window->values.assign(static_cast<std::size_t>(3 * length), 0.5f);
  return window;
}

// A sink that only stores: no publisher.
SinkOptions store_only_options_for(const TempDir& dir, int max_batch) {
  SinkOptions options = options_for(dir);
  options.publish_endpoint.clear();
  options.max_batch = max_batch;
  return options;
}

struct Message {
  std::string topic;
  std::string body;
  bool is_stats() const { return topic == "stats."; }
  bool is_end() const { return is_stats() && json::parse(body).value("end", false); }
};

class Subscriber {
 public:
  Subscriber(zmq::context_t& context, const std::string& endpoint,
             const std::vector<std::string>& prefixes)
      : socket_(context, zmq::socket_type::sub) {
    socket_.set(zmq::sockopt::rcvhwm, 0);  // the test is the slow side; keep everything
    socket_.set(zmq::sockopt::linger, 0);
    for (const std::string& prefix : prefixes) socket_.set(zmq::sockopt::subscribe, prefix);
    socket_.connect(endpoint);
  }

  std::optional<Message> receive(std::chrono::milliseconds timeout = 5000ms) {
    socket_.set(zmq::sockopt::rcvtimeo, static_cast<int>(timeout.count()));
    zmq::message_t topic;
    if (!socket_.recv(topic)) return std::nullopt;
    REQUIRE(socket_.get(zmq::sockopt::rcvmore));
    zmq::message_t body;
    REQUIRE(socket_.recv(body));
    REQUIRE_FALSE(socket_.get(zmq::sockopt::rcvmore));
    return Message{topic.to_string(), body.to_string()};
  }

  // Alerts (and non-probe stats) up to the {"end": true} marker.
  std::vector<Message> receive_until_end() {
    std::vector<Message> messages;
    while (true) {
      auto message = receive();
      REQUIRE(message.has_value());  // 5 s without a message: something is lost
      if (message->is_end()) return messages;
      if (message->is_stats() && json::parse(message->body).contains("probe")) continue;
      messages.push_back(std::move(*message));
    }
  }

  bool seen_probe = false;

 private:
  zmq::socket_t socket_;
};

// Publishes stats probes until every subscriber has received one (see the
// file comment). Subscribers must subscribe to "stats.".
void wait_until_subscribed(AlertSink& sink, std::vector<Subscriber*> subscribers) {
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  for (int probe = 0;; ++probe) {
    sink.submit_stats(json{{"probe", probe}});
    bool all = true;
    for (Subscriber* sub : subscribers) {
      if (!sub->seen_probe) sub->seen_probe = sub->receive(50ms).has_value();
      all = all && sub->seen_probe;
    }
    if (all) return;
    REQUIRE(std::chrono::steady_clock::now() < give_up);
  }
}

template <typename Predicate>
bool eventually(Predicate predicate, std::chrono::milliseconds within = 10000ms) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (!predicate()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

std::vector<std::uint64_t> iota_seqs(std::uint64_t n) {
  std::vector<std::uint64_t> seqs;
  for (std::uint64_t s = 1; s <= n; ++s) seqs.push_back(s);
  return seqs;
}

std::vector<std::uint64_t> stored_seqs(const std::string& db_path) {
  HitStore store(db_path, /*read_only=*/true);
  HitQuery all;
  all.limit = -1;
  std::vector<std::uint64_t> seqs;
  for (const Alert& a : store.query(all)) seqs.push_back(a.seq);
  return seqs;
}

}  // namespace

TEST_CASE("AlertSink: a subscriber gets every alert, each committed before it is seen", "[sink]") {
  TempDir dir;
  SinkOptions options = options_for(dir);
  AlertSink sink(options);
  zmq::context_t context;
  Subscriber sub(context, sink.bound_endpoint(), {"alert.", "stats."});
  wait_until_subscribed(sink, {&sub});

  // Opened now that the writer has created the file; it sees commits only.
  HitStore reader(options.db_path, /*read_only=*/true);
  const int kAlerts = 200;
  std::vector<Alert> submitted;
  for (int i = 0; i < kAlerts; ++i) {
    submitted.push_back(make_alert(i, 1 + i % 3, i % 2 ? "warning" : "critical"));
    sink.submit(submitted.back());
  }
  sink.submit_stats(json{{"end", true}});

  std::vector<Message> received = sub.receive_until_end();
  REQUIRE(received.size() == kAlerts);
  std::vector<std::uint64_t> received_seqs;
  for (std::size_t i = 0; i < received.size(); ++i) {
    Alert alert = alert_from_json(json::parse(received[i].body));
    const Alert& expected = submitted.at(static_cast<std::size_t>(alert.end_index));
    CHECK(received[i].topic == alert_topic(expected));
    CHECK(alert.seq == i + 1);  // one producer: seq follows submission order
    CHECK(alert.end_index == static_cast<std::int64_t>(i));
    CHECK(alert.wearer == expected.wearer);
    CHECK(alert.severity == expected.severity);
    CHECK(alert.pattern == expected.pattern);
    CHECK(alert.detected_at == expected.detected_at);
    received_seqs.push_back(alert.seq);

    // The row is already committed when the message arrives.
    HitQuery row;
    row.after_seq = alert.seq - 1;
    row.limit = 1;
    auto rows = reader.query(row);
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].seq == alert.seq);
    CHECK(rows[0].end_index == alert.end_index);
  }

  sink.stop();
  CHECK(received_seqs == iota_seqs(kAlerts));
  CHECK(stored_seqs(options.db_path) == received_seqs);  // and every row was published
  auto counters = sink.counters();
  CHECK(counters.committed == kAlerts);
  // By severity and kind: odd ones warning, even ones critical, all falls.
  std::map<std::string, std::map<std::string, std::uint64_t>> by_severity;
  for (const Alert& a : submitted) ++by_severity[a.severity][a.kind];
  CHECK(by_severity.size() == 2);
  CHECK(counters.committed_by_severity == by_severity);
  CHECK(counters.published == kAlerts);
  CHECK(counters.last_seq == kAlerts);
  CHECK(counters.store_errors == 0);
  CHECK(counters.transactions >= std::uint64_t{kAlerts / 16});
  CHECK(counters.transactions <= kAlerts);
}

TEST_CASE("AlertSink: subscribers filter by topic prefix", "[sink]") {
  TempDir dir;
  AlertSink sink(options_for(dir));
  zmq::context_t context;
  Subscriber critical(context, sink.bound_endpoint(), {"alert.critical.", "stats."});
  Subscriber critical_wearer_1(context, sink.bound_endpoint(), {"alert.critical.1.", "stats."});
  wait_until_subscribed(sink, {&critical, &critical_wearer_1});

  const char* severities[] = {"info", "warning", "critical"};
  const std::uint32_t wearers[] = {1, 12};  // "alert.critical.1." must not match wearer 12
  std::int64_t id = 0;
  for (int round = 0; round < 5; ++round)
    for (const char* severity : severities)
      for (std::uint32_t wearer : wearers) sink.submit(make_alert(id++, wearer, severity));
  sink.submit_stats(json{{"end", true}});

  auto all_critical = critical.receive_until_end();
  CHECK(all_critical.size() == 10);
  for (const Message& m : all_critical) {
    CHECK_THAT(m.topic, Catch::StartsWith("alert.critical."));
    CHECK(json::parse(m.body)["severity"] == "critical");
  }
  auto wearer_1 = critical_wearer_1.receive_until_end();
  CHECK(wearer_1.size() == 5);
  for (const Message& m : wearer_1) {
    CHECK(m.topic == "alert.critical.1.");
    CHECK(json::parse(m.body)["wearer"] == 1);
  }
}

TEST_CASE("AlertSink: stats messages are published in order with alerts", "[sink]") {
  TempDir dir;
  SinkOptions options = options_for(dir);
  options.commit_interval_ms = 300;  // all of it lands in one batch
  AlertSink sink(options);
  zmq::context_t context;
  Subscriber sub(context, sink.bound_endpoint(), {""});
  wait_until_subscribed(sink, {&sub});

  sink.submit(make_alert(0));
  sink.submit_stats(json{{"between", 1}});
  sink.submit(make_alert(1));
  sink.submit_stats(json{{"end", true}});

  auto messages = sub.receive_until_end();
  REQUIRE(messages.size() == 3);
  CHECK(json::parse(messages[0].body)["end_index"] == 0);
  CHECK(messages[1].topic == "stats.");
  CHECK(json::parse(messages[1].body) == json{{"between", 1}});
  CHECK(json::parse(messages[2].body)["end_index"] == 1);
}

TEST_CASE("AlertSink: stop() commits and publishes everything submitted", "[sink]") {
  TempDir dir;
  SinkOptions options = options_for(dir);
  options.commit_interval_ms = 60000;  // nothing would commit on time alone
  options.max_batch = 100000;
  AlertSink sink(options);
  zmq::context_t context;
  Subscriber sub(context, sink.bound_endpoint(), {"alert.", "stats."});
  wait_until_subscribed(sink, {&sub});

  const int kAlerts = 1000;
  for (int i = 0; i < kAlerts; ++i) sink.submit(make_alert(i));
  sink.submit_stats(json{{"end", true}});
  sink.stop();

  CHECK(sink.counters().committed == kAlerts);
  CHECK(sink.counters().published == kAlerts);
  CHECK(sink.counters().transactions == 1);
  CHECK(stored_seqs(options.db_path) == iota_seqs(kAlerts));
  // The messages left before the socket closed.
  CHECK(sub.receive_until_end().size() == kAlerts);

  sink.stop();  // idempotent
  CHECK_THROWS_AS(sink.submit(make_alert(kAlerts)), gw::Error);
  std::vector<Alert> late = {make_alert(kAlerts + 1)};
  CHECK_THROWS_AS(sink.submit_all(late), gw::Error);
  sink.submit_stats(json{{"late", true}});  // dropped, documented
  CHECK(sink.counters().committed == kAlerts);
}

TEST_CASE("AlertSink: a writer that is behind stores alerts without their windows until it catches up",
          "[sink]") {
  TempDir dir;
  SinkOptions options = store_only_options_for(dir, 32);
  AlertSink sink(options);
  const auto window = flat_window(64);
  const auto with_window = [&](std::int64_t id) {
    Alert a = make_alert(id);
    a.window = window;
    return a;
  };
  // A burst far beyond what one transaction of 32 takes: thousands wait
  // behind the first transactions.
  constexpr int kBurst = 5000;
  std::vector<Alert> burst;
  for (int i = 0; i < kBurst; ++i) burst.push_back(with_window(i));
  sink.submit_all(burst);
  REQUIRE(eventually([&] { return sink.counters().committed == kBurst; }, 60000ms));
  // Caught up: a single alert keeps its window.
  sink.submit(with_window(kBurst));
  REQUIRE(eventually([&] { return sink.counters().committed == kBurst + 1; }, 10000ms));
  sink.stop();

  const auto c = sink.counters();
  HitStore store(options.db_path, /*read_only=*/true);
  INFO("windows shed " << c.windows_shed << ", stored " << store.window_count());
  CHECK(c.windows_shed > 0);
  CHECK(c.store_dropped == 0);
  CHECK(store.window_count() + c.windows_shed == kBurst + 1);
  // The alerts that waited behind fewer than 1,024 others kept theirs.
  CHECK(store.window_count() >= 1024 + 1);
  CHECK_FALSE(store.window(1).has_value());  // the first transaction's were shed
  CHECK(store.window(kBurst + 1).has_value());
}

TEST_CASE("AlertSink: thousands of alerts from 2 producer threads commit with gapless seqs", "[sink]") {
  // One producer submits alert by alert, the other in bunches of 37
  // (submit_all), racing for the writer's queue.
  TempDir dir;
  SinkOptions options = options_for(dir);
  options.max_batch = 32;
  AlertSink sink(options);
  zmq::context_t context;
  Subscriber sub(context, sink.bound_endpoint(), {"alert.", "stats."});
  wait_until_subscribed(sink, {&sub});

  const int kPerProducer = gw::test::unless_sanitized(2500, 600);
  auto produce = [&](std::uint32_t wearer) {
    if (wearer == 1) {
      for (int i = 0; i < kPerProducer; ++i) sink.submit(make_alert(i, wearer));
      return;
    }
    std::vector<Alert> bunch;
    for (int i = 0; i < kPerProducer; ++i) {
      bunch.push_back(make_alert(i, wearer));
      if (bunch.size() == 37 || i + 1 == kPerProducer) sink.submit_all(bunch);
    }
  };
  std::thread first(produce, 1);
  std::thread second(produce, 2);
  // Receive while producing, on this thread (Catch assertions are not
  // thread-safe): the test, not the PUB socket, is the buffer.
  // A silence of 60 s ends the wait: under TSan on a loaded 2-core host one
  // commit's fsync took longer than receive()'s default 5 s.
  std::vector<Message> received;
  while (received.size() < std::size_t{2 * kPerProducer}) {
    auto message = sub.receive(60s);
    if (!message) break;  // checked below, after the producers are joined
    if (!message->is_stats()) received.push_back(std::move(*message));
  }
  first.join();
  second.join();
  sink.stop();

  std::vector<std::uint64_t> seqs = stored_seqs(options.db_path);
  CHECK(seqs == iota_seqs(2 * kPerProducer));
  CHECK(sink.counters().committed == 2 * kPerProducer);
  CHECK(sink.counters().last_seq == 2 * kPerProducer);

  // Every message matches its row; each producer's alerts keep their order.
  REQUIRE(received.size() == 2 * kPerProducer);
  HitStore store(options.db_path, /*read_only=*/true);
  HitQuery all;
  all.limit = -1;
  auto rows = store.query(all);
  std::int64_t next_index[3] = {0, 0, 0};
  for (std::size_t i = 0; i < received.size(); ++i) {
    Alert alert = alert_from_json(json::parse(received[i].body));
    REQUIRE(alert.seq == i + 1);
    CHECK(rows[i].wearer == alert.wearer);
    CHECK(rows[i].end_index == alert.end_index);
    CHECK(alert.end_index == next_index[alert.wearer]++);
  }
  CHECK(next_index[1] == kPerProducer);
  CHECK(next_index[2] == kPerProducer);
}

TEST_CASE("AlertSink: bound_endpoint resolves port 0, a taken endpoint is an error", "[sink]") {
  TempDir dir;
  AlertSink sink(options_for(dir));
  const std::string endpoint = sink.bound_endpoint();
  CHECK_THAT(endpoint, Catch::StartsWith("tcp://127.0.0.1:"));
  CHECK(endpoint != "tcp://127.0.0.1:0");

  TempDir other_dir;
  SinkOptions taken = options_for(other_dir);
  taken.publish_endpoint = endpoint;
  try {
    AlertSink second(taken);
    FAIL("binding a taken endpoint must throw");
  } catch (const gw::Error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains(endpoint));
  }

  SinkOptions bad = options_for(other_dir);
  bad.publish_endpoint = "nonsense://here";
  CHECK_THROWS_AS(AlertSink(bad), gw::Error);
  bad = options_for(other_dir);
  bad.max_batch = 0;
  CHECK_THROWS_WITH(AlertSink(bad), Catch::Contains("max_batch"));
  bad = options_for(other_dir);
  bad.db_path = other_dir.file("no/such/dir/hits.db");
  CHECK_THROWS_WITH(AlertSink(bad), Catch::Contains(bad.db_path));
}

TEST_CASE("AlertSink: without an endpoint alerts are stored and not published", "[sink]") {
  TempDir dir;
  SinkOptions options = options_for(dir);
  options.publish_endpoint.clear();
  AlertSink sink(options);
  CHECK(sink.bound_endpoint().empty());
  for (int i = 0; i < 10; ++i) sink.submit(make_alert(i));
  sink.stop();
  CHECK(sink.counters().committed == 10);
  CHECK(sink.counters().published == 0);
  CHECK(stored_seqs(options.db_path) == iota_seqs(10));
}

namespace {

// The dims column's text by seq, read with a plain connection.
std::map<std::uint64_t, std::string> stored_dims_texts(const std::string& db_path) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "SELECT seq, dims FROM hits", -1, &stmt, nullptr) == SQLITE_OK);
  std::map<std::uint64_t, std::string> texts;
  while (sqlite3_step(stmt) == SQLITE_ROW)
    texts[static_cast<std::uint64_t>(sqlite3_column_int64(stmt, 0))] =
        reinterpret_cast<const char*>(sqlite3_column_text(stmt, 1));
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return texts;
}

// A sink that takes a group of up to 1,000 alerts in one transaction (as a
// daemon tick's), publishing to a subscriber that is already connected.
struct LargeGroupSink {
  TempDir dir;
  SinkOptions options = [this] {
    SinkOptions large = options_for(dir);
    large.max_batch = 1000;
    return large;
  }();
  AlertSink sink{options};
  zmq::context_t context;
  Subscriber sub{context, sink.bound_endpoint(), {"alert.", "stats."}};
  LargeGroupSink() { wait_until_subscribed(sink, {&sub}); }
};

}  // namespace

TEST_CASE("AlertSink: a published body holds its row's dims text, byte for byte", "[sink]") {
  // Groups of 150 have the rows' dims texts made on the serializer thread
  // with the bodies; a group of 3 has them made in the commit.
  LargeGroupSink fixture;
  AlertSink& sink = fixture.sink;
  Subscriber& sub = fixture.sub;
  const SinkOptions& options = fixture.options;
  std::int64_t next = 0;
  for (const std::size_t size : {150, 3, 150}) {
    std::vector<Alert> group;
    for (std::size_t k = 0; k < size; ++k, ++next) {
      Alert alert = make_alert(next);
      alert.dims.push_back(DimMatch{1, 2, 0.1 * static_cast<double>(next) + 1e-9, next - 3});
      group.push_back(alert);
    }
    sink.submit_all(group);
    REQUIRE(
        eventually([&] { return sink.counters().committed == static_cast<std::uint64_t>(next); }));
  }
  sink.submit_stats(json{{"end", true}});
  const std::vector<Message> received = sub.receive_until_end();
  sink.stop();
  REQUIRE(received.size() == 303);
  const auto texts = stored_dims_texts(options.db_path);
  REQUIRE(texts.size() == 303);
  for (const Message& message : received) {
    const json body = json::parse(message.body);
    const std::string& stored = texts.at(body.at("seq").get<std::uint64_t>());
    CHECK(stored == gw::pipeline::json_text(body.at("dims")));
    CHECK(message.body.find("\"dims\":" + stored + ",") != std::string::npos);
  }
}

TEST_CASE("AlertSink: without an endpoint, large groups store their dims texts", "[sink]") {
  TempDir dir;
  SinkOptions options = store_only_options_for(dir, 1000);
  std::vector<Alert> group;
  for (std::int64_t i = 0; i < 200; ++i) group.push_back(make_alert(i));
  const std::vector<Alert> submitted = group;
  {
    AlertSink sink(options);
    sink.submit_all(group);
    sink.stop();
    CHECK(sink.counters().transactions == 1);
  }
  const auto texts = stored_dims_texts(options.db_path);
  REQUIRE(texts.size() == submitted.size());
  for (std::size_t i = 0; i < submitted.size(); ++i)
    CHECK(texts.at(i + 1) == gw::pipeline::json_text(gw::pipeline::dims_to_json(submitted[i])));
}

TEST_CASE("AlertSink: retention runs at start and seqs continue after it", "[sink]") {
  TempDir dir;
  SinkOptions options = options_for(dir);
  const double now = unix_now_s();
  {
    HitStore store(options.db_path);
    std::vector<Alert> alerts{
        make_alert(0, 7, "info", now - 40 * 86400.0), make_alert(1, 7, "info", now - 31 * 86400.0),
        make_alert(2, 7, "info", now - 29 * 86400.0), make_alert(3, 7, "info", now - 60.0)};
    store.insert(alerts);
  }

  SECTION("retention_days = 30 deletes the two older rows") {
    options.retention_days = 30;
    AlertSink sink(options);
    CHECK(eventually([&] { return sink.counters().retention_deleted == 2; }));
    sink.submit(make_alert(4));
    sink.stop();
    CHECK(stored_seqs(options.db_path) == std::vector<std::uint64_t>{3, 4, 5});
    CHECK(sink.counters().last_seq == 5);
  }
  SECTION("retention_days = 0 keeps everything") {
    options.retention_days = 0;
    AlertSink sink(options);
    std::this_thread::sleep_for(100ms);
    sink.stop();
    CHECK(sink.counters().retention_deleted == 0);
    CHECK(stored_seqs(options.db_path) == iota_seqs(4));
  }
}

TEST_CASE("AlertSink: a failing commit is retried and published only once it commits", "[sink]") {
  TempDir dir;
  SinkOptions options = options_for(dir);
  AlertSink sink(options);
  zmq::context_t context;
  Subscriber sub(context, sink.bound_endpoint(), {"alert.", "stats."});
  wait_until_subscribed(sink, {&sub});

  // A real SQLite failure: a trigger that aborts inserts for wearer 666.
  raw_exec(options.db_path,
           "CREATE TRIGGER refuse_666 BEFORE INSERT ON hits WHEN NEW.wearer = 666 "
           "BEGIN SELECT RAISE(ABORT, 'wearer 666 refused'); END");
  sink.submit(make_alert(0, 666));
  REQUIRE(eventually([&] { return sink.counters().store_errors >= 2; }));
  CHECK(sink.counters().committed == 0);
  CHECK_FALSE(sub.receive(200ms).has_value());  // nothing published meanwhile

  raw_exec(options.db_path, "DROP TRIGGER refuse_666");
  auto message = sub.receive();
  REQUIRE(message.has_value());
  Alert alert = alert_from_json(json::parse(message->body));
  CHECK(alert.wearer == 666);
  CHECK(alert.seq == 1);
  CHECK(sink.counters().committed == 1);
  sink.stop();
  CHECK(stored_seqs(options.db_path) == iota_seqs(1));
}

TEST_CASE("AlertSink: devices' last frames are stored by the writer, and a failed save keeps the "
          "newest row of each device and stores it later",
          "[sink]") {
  TempDir dir;
  SinkOptions options = options_for(dir);
  AlertSink sink(options);
  const auto row = [](std::uint32_t wearer, std::uint16_t device, double arrival) {
    gw::pipeline::WearerDeviceRecord r;
    r.wearer = wearer;
    r.device = device;
    r.last_arrival = arrival;
    r.last_device_time = arrival - 1;
    r.last_index = static_cast<std::int64_t>(arrival) * 100;
    return r;
  };
  using Rows = std::vector<gw::pipeline::WearerDeviceRecord>;
  const auto stored = [&] {
    std::map<std::pair<std::uint32_t, std::uint16_t>, double> arrival;
    for (const auto& r : HitStore(options.db_path).wearer_devices())
      arrival[{r.wearer, r.device}] = r.last_arrival;
    return arrival;
  };
  REQUIRE(sink.submit_wearer_devices(Rows{row(1, 1, 100), row(1, 2, 100), row(2, 1, 100)}));
  REQUIRE(eventually([&] { return sink.counters().wearer_devices_saved == 3; }));
  CHECK(stored().size() == 3);

  // A real SQLite failure for one device's row fails the whole save; alerts
  // still commit meanwhile, and a newer row of the device replaces the kept one.
  raw_exec(options.db_path,
           "CREATE TRIGGER refuse_666 BEFORE INSERT ON wearer_devices WHEN NEW.wearer = 666 "
           "BEGIN SELECT RAISE(ABORT, 'wearer 666 refused'); END");
  REQUIRE(sink.submit_wearer_devices(Rows{row(666, 1, 200), row(1, 1, 200)}));
  REQUIRE(eventually([&] { return sink.counters().wearer_devices_errors >= 1; }));
  REQUIRE(sink.submit_wearer_devices(Rows{row(666, 1, 300)}));
  sink.submit(make_alert(0));
  REQUIRE(eventually([&] { return sink.counters().committed == 1; }));
  CHECK(stored().at({1, 1}) == 100);  // nothing of the failed save is in
  raw_exec(options.db_path, "DROP TRIGGER refuse_666");
  REQUIRE(eventually([&] { return sink.counters().wearer_devices_saved >= 5; }));
  sink.stop();
  const auto rows = stored();
  CHECK(rows.size() == 4);
  CHECK(rows.at({1, 1}) == 200);
  CHECK(rows.at({1, 2}) == 100);
  CHECK(rows.at({2, 1}) == 100);
  CHECK(rows.at({666, 1}) == 300);
  CHECK(sink.counters().wearer_devices_errors >= 1);
  // Stopped: the rows are not taken (the caller keeps them).
  CHECK_FALSE(sink.submit_wearer_devices(Rows{row(3, 1, 400)}));
}

TEST_CASE("AlertSink: thousands of devices' rows still held at stop() are all stored by it",
          "[sink]") {
  TempDir dir;
  SinkOptions options = options_for(dir);
  // More rows than one of the writer's transactions takes.
  constexpr std::uint32_t kWearers = 5000;
  std::vector<gw::pipeline::WearerDeviceRecord> rows(kWearers);
  for (std::uint32_t w = 0; w < kWearers; ++w) {
    rows[w].wearer = w + 1;
    rows[w].device = 3;
    rows[w].last_arrival = 1000 + w;
  }
  rows.back().offline_since = 120;
  {
    AlertSink sink(options);
    // The first save fails, so the rows are held (the next try is a second
    // away) when stop() comes.
    raw_exec(options.db_path,
             "CREATE TRIGGER refuse_all BEFORE INSERT ON wearer_devices "
             "BEGIN SELECT RAISE(ABORT, 'disk on fire'); END");
    sink.submit(make_alert(0));
    REQUIRE(sink.submit_wearer_devices(rows));
    REQUIRE(eventually([&] { return sink.counters().wearer_devices_errors >= 1; }));
    raw_exec(options.db_path, "DROP TRIGGER refuse_all");
    CHECK(sink.counters().wearer_devices_saved == 0);
    sink.stop();
    CHECK(sink.counters().wearer_devices_saved == kWearers);
  }
  const auto stored = HitStore(options.db_path).wearer_devices();
  REQUIRE(stored.size() == kWearers);
  CHECK(stored.front().wearer == 1);
  CHECK(stored.front().last_arrival == 1000);
  CHECK(stored.back().wearer == kWearers);
  CHECK(stored.back().device == 3);
  CHECK(stored.back().offline_since == std::optional<double>(120));
  CHECK_FALSE(stored.front().offline_since.has_value());
}

TEST_CASE("AlertSink: stop() terminates when a batch can never commit", "[sink]") {
  TempDir dir;
  SinkOptions options = options_for(dir);
  AlertSink sink(options);
  zmq::context_t context;
  Subscriber sub(context, sink.bound_endpoint(), {"alert.", "stats."});
  wait_until_subscribed(sink, {&sub});

  raw_exec(options.db_path,
           "CREATE TRIGGER refuse_all BEFORE INSERT ON hits "
           "BEGIN SELECT RAISE(ABORT, 'disk on fire'); END");
  sink.submit(make_alert(0));
  REQUIRE(eventually([&] { return sink.counters().store_errors >= 1; }));

  const auto start = std::chrono::steady_clock::now();
  sink.stop();
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  CHECK(sink.counters().committed == 0);
  CHECK(sink.counters().stop_abandoned == 1);
  CHECK(sink.counters().pending == 0);
  CHECK(sink.counters().published == 0);
  CHECK(sink.counters().store_errors >= 2);
  CHECK_FALSE(sub.receive(200ms).has_value());
  CHECK(stored_seqs(options.db_path).empty());
}

TEST_CASE("AlertSink: a tick's alerts commit at once, a lone alert waits for the interval",
          "[sink]") {
  TempDir dir;
  SinkOptions options = store_only_options_for(dir, 100);
  options.commit_interval_ms = 60000;  // only group commit or stop() can commit here
  AlertSink sink(options);

  // 250 alerts in one group: two full transactions of 100, then the group's
  // end commits the last 50 without waiting the minute.
  std::vector<Alert> tick;
  for (int i = 0; i < 250; ++i) tick.push_back(make_alert(i));
  sink.submit_all(tick);
  CHECK(tick.empty());
  REQUIRE(eventually([&] { return sink.counters().committed == 250; }));
  CHECK(sink.counters().transactions == 3);
  CHECK(stored_seqs(options.db_path) == iota_seqs(250));

  // A lone alert is not a group: it waits for commit_interval_ms (or stop()).
  sink.submit(make_alert(250));
  std::this_thread::sleep_for(300ms);
  CHECK(sink.counters().committed == 250);

  // The next group takes the waiting alert along in its transaction.
  std::vector<Alert> next_tick = {make_alert(251), make_alert(252)};
  sink.submit_all(next_tick);
  REQUIRE(eventually([&] { return sink.counters().committed == 253; }));
  CHECK(sink.counters().transactions == 4);
  sink.stop();
  CHECK(stored_seqs(options.db_path) == iota_seqs(253));
}

TEST_CASE("AlertSink: large groups publish the committed seqs, also after another writer's rows",
          "[sink]") {
  // Groups of 150 have their JSON made while the transaction runs, with the
  // seqs they are expected to get; a row written by someone else in between
  // moves the seqs, and what is published must still be what was committed.
  LargeGroupSink fixture;
  AlertSink& sink = fixture.sink;
  Subscriber& sub = fixture.sub;
  const SinkOptions& options = fixture.options;

  const auto group = [](std::int64_t first) {
    std::vector<Alert> alerts;
    for (std::int64_t i = first; i < first + 150; ++i) alerts.push_back(make_alert(i, 1 + i % 5));
    return alerts;
  };
  std::vector<Alert> first = group(0);
  sink.submit_all(first);
  REQUIRE(eventually([&] { return sink.counters().committed == 150; }));
  {
    HitStore other(options.db_path);  // another writer: takes seq 151
    std::vector<Alert> intruder = {make_alert(10000, 99)};
    other.insert(intruder);
    REQUIRE(intruder[0].seq == 151);
  }
  std::vector<Alert> second = group(150);
  sink.submit_all(second);
  sink.submit_stats(json{{"end", true}});
  const std::vector<Message> received = sub.receive_until_end();
  sink.stop();
  REQUIRE(received.size() == 300);

  HitStore reader(options.db_path, /*read_only=*/true);
  HitQuery all;
  all.limit = -1;
  std::map<std::uint64_t, std::int64_t> stored;  // seq -> end_index
  for (const Alert& row : reader.query(all)) stored[row.seq] = row.end_index;
  REQUIRE(stored.size() == 301);
  for (std::size_t i = 0; i < received.size(); ++i) {
    const Alert alert = alert_from_json(json::parse(received[i].body));
    CHECK(alert.end_index == static_cast<std::int64_t>(i));
    CHECK(alert.seq == (i < 150 ? i + 1 : i + 2));  // 151 is the other writer's
    REQUIRE(stored.count(alert.seq) == 1);
    CHECK(stored[alert.seq] == alert.end_index);
  }
  CHECK(sink.counters().last_seq == 301);
  CHECK(sink.counters().published == 300);
}

TEST_CASE("AlertSink: the WAL is checkpointed into the database file while the sink runs",
          "[sink]") {
  // The writer's own connection never checkpoints inside a commit (a
  // commit must not copy the WAL); the checkpoint thread does, so the rows
  // reach the database file without a restart.
  TempDir dir;
  SinkOptions options = store_only_options_for(dir, 1000);
  AlertSink sink(options);
  const auto main_file_bytes = [&] { return fs::file_size(options.db_path); };
  const auto empty_size = main_file_bytes();
  for (int g = 0; g < 20; ++g) {
    std::vector<Alert> group;
    for (int i = 0; i < 500; ++i) group.push_back(make_alert(g * 500 + i, 1 + i % 50));
    sink.submit_all(group);
  }
  REQUIRE(eventually([&] { return sink.counters().committed == 10000; }));
  // 10,000 rows are a few MB; a database file that grew past 1 MB holds
  // checkpointed pages. A PASSIVE checkpoint copies only what was committed
  // when it ran, so a checkpoint during the commits may copy part of the
  // rows: wait for the periodic one that follows them (the file grows while
  // it runs, the counter once it returned).
  REQUIRE(eventually([&] { return main_file_bytes() > empty_size + (1u << 20); }, 5000ms));
  CHECK(eventually([&] { return sink.counters().checkpoints > 0; }, 5000ms));
  CHECK(sink.counters().store_errors == 0);
  sink.stop();
  CHECK(stored_seqs(options.db_path) == iota_seqs(10000));
}

// The exact accounting of a sink: every alert handed in is committed (a row),
// dropped, given up at the drain, or still held.
void check_accounting(const AlertSink& sink, const std::string& db_path) {
  const auto c = sink.counters();
  INFO("submitted " << c.submitted << " committed " << c.committed << " dropped "
                    << c.store_dropped << " abandoned " << c.stop_abandoned << " pending "
                    << c.pending);
  CHECK(c.submitted == c.committed + c.store_dropped + c.stop_abandoned + c.pending);
  CHECK(HitStore(db_path, /*read_only=*/true).count() == c.committed);
}

TEST_CASE("AlertSink: while commits fail, submits never block, and beyond max_pending_alerts alerts "
          "are dropped and counted", "[sink]") {
  TempDir dir;
  SinkOptions options = options_for(dir);
  options.max_pending_alerts = 50;
  AlertSink sink(options);
  raw_exec(options.db_path,
           "CREATE TRIGGER refuse_all BEFORE INSERT ON hits "
           "BEGIN SELECT RAISE(ABORT, 'disk full'); END");

  // 10 ticks of 20 alerts: the first 50 are held, the other 150 dropped.
  for (int tick = 0; tick < 10; ++tick) {
    std::vector<Alert> alerts;
    for (int i = 0; i < 20; ++i) alerts.push_back(make_alert(tick * 20 + i));
    sink.submit_all(alerts);
    CHECK(alerts.empty());
  }
  sink.submit(make_alert(200));  // one more, alone: dropped too
  REQUIRE(eventually([&] { return sink.counters().store_errors >= 2; }));
  auto c = sink.counters();
  CHECK(c.submitted == 201);
  CHECK(c.pending == 50);
  CHECK(c.store_dropped == 151);
  CHECK(c.committed == 0);
  check_accounting(sink, options.db_path);

  // The store recovers: what was held commits, seqs from 1, the first 50 in order.
  raw_exec(options.db_path, "DROP TRIGGER refuse_all");
  REQUIRE(sink.drain(std::chrono::steady_clock::now() + 10s));
  c = sink.counters();
  CHECK(c.committed == 50);
  CHECK(c.pending == 0);
  CHECK(c.stop_abandoned == 0);
  check_accounting(sink, options.db_path);
  HitStore store(options.db_path, /*read_only=*/true);
  HitQuery all;
  all.limit = -1;
  const auto rows = store.query(all);
  REQUIRE(rows.size() == 50);
  for (std::size_t i = 0; i < rows.size(); ++i) CHECK(rows[i].end_index == std::int64_t(i));
  sink.stop();
}

TEST_CASE("AlertSink: on a full database drain() gives up at its deadline and the counts match "
          "the rows", "[sink]") {
  TempDir dir;
  SinkOptions options = options_for(dir);
  // A few pages beyond the schema's: SQLITE_FULL after some hundred rows.
  options.max_size_bytes = 64 * 1024;
  options.max_pending_alerts = 300;
  AlertSink sink(options);
  zmq::context_t context;
  Subscriber sub(context, sink.bound_endpoint(), {"stats."});
  wait_until_subscribed(sink, {&sub});

  std::int64_t next = 0;
  while (sink.counters().store_errors == 0) {
    REQUIRE(next < 100000);  // the limit binds long before
    std::vector<Alert> alerts;
    for (int i = 0; i < 50; ++i) alerts.push_back(make_alert(next++));
    sink.submit_all(alerts);
    std::this_thread::sleep_for(1ms);
  }
  for (int tick = 0; tick < 20; ++tick) {  // 1,000 more: 300 held at most
    std::vector<Alert> alerts;
    for (int i = 0; i < 50; ++i) alerts.push_back(make_alert(next++));
    sink.submit_all(alerts);
  }
  CHECK(sink.counters().store_dropped > 0);

  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(sink.drain(start + 300ms));
  CHECK(std::chrono::steady_clock::now() - start < 3s);
  const auto c = sink.counters();
  CHECK(c.committed > 0);
  CHECK(c.stop_abandoned > 0);
  CHECK(c.pending == 0);
  CHECK(c.submitted == std::uint64_t(next));
  check_accounting(sink, options.db_path);
  // Status messages still go out after the drain.
  while (sub.receive(50ms)) {
  }
  sink.submit_stats(json{{"end", true}});
  const auto message = sub.receive();
  REQUIRE(message.has_value());
  CHECK(message->is_end());
  sink.stop();
  check_accounting(sink, options.db_path);
}

TEST_CASE("AlertSink: events are stored in the audit log and published in order with alerts",
          "[sink]") {
  using gw::pipeline::Event;
  using gw::pipeline::EventQuery;
  using gw::pipeline::EventType;
  TempDir dir;
  SinkOptions options = options_for(dir);
  options.commit_interval_ms = 300;
  AlertSink sink(options);
  zmq::context_t context;
  Subscriber sub(context, sink.bound_endpoint(), {"alert.", "event.", "stats."});
  wait_until_subscribed(sink, {&sub});

  sink.submit(make_alert(0, 9));
  Event acknowledged;
  acknowledged.type = EventType::kAlertAcknowledged;
  acknowledged.wearer = 9;
  acknowledged.alert_seq = 1;
  acknowledged.actor = "nurse ana";
  acknowledged.details = json{{"note", "on my way"}};
  sink.submit_event(acknowledged);
  Event recovered;
  recovered.type = EventType::kSensorRecovered;
  recovered.wearer = 4;
  recovered.actor = "gaitwatchd";
  recovered.at = 1.7e9;
  recovered.details = json{{"device", 2}};
  sink.submit_event(recovered);
  sink.submit_stats(json{{"end", true}});

  auto messages = sub.receive_until_end();
  REQUIRE(messages.size() == 3);
  CHECK(messages[0].topic == "alert.critical.9.");
  CHECK(messages[1].topic == "event.alert_acknowledged.9.");
  const json first = json::parse(messages[1].body);
  CHECK(first["schema"] == gw::pipeline::kMessageSchemaVersion);
  CHECK(first["type"] == "alert_acknowledged");
  CHECK(first["alert_seq"] == 1);
  CHECK(first["actor"] == "nurse ana");
  CHECK(first["details"] == json{{"note", "on my way"}});
  CHECK(first["at"].get<double>() > 1.6e9);  // set by the sink
  CHECK(messages[2].topic == "event.sensor_recovered.4.");
  const json second = json::parse(messages[2].body);
  CHECK_FALSE(second.contains("alert_seq"));
  CHECK(second["at"] == 1.7e9);
  CHECK(second["id"].get<std::uint64_t>() > first["id"].get<std::uint64_t>());

  sink.stop();
  CHECK(sink.counters().events_committed == 2);
  CHECK(sink.counters().events_dropped == 0);
  HitStore store(options.db_path);
  const std::vector<Event> stored = store.events(EventQuery{});
  REQUIRE(stored.size() == 2);
  // The published bodies are the stored rows, with their times in the
  // sink's zone (options.time_zone unset: the system's).
  const gw::TimeZone zone = gw::TimeZone::system();
  CHECK(gw::pipeline::event_to_json(stored[0], &zone) == first);
  CHECK(gw::pipeline::event_to_json(stored[1], &zone) == second);
  CHECK(second["zone"] == zone.name());
  EventQuery about_alert;
  about_alert.alert_seq = 1;
  CHECK(store.events(about_alert).size() == 1);
}

TEST_CASE("AlertSink: an event whose commit fails is published only once it commits", "[sink]") {
  using gw::pipeline::Event;
  using gw::pipeline::EventType;
  TempDir dir;
  SinkOptions options = options_for(dir);
  AlertSink sink(options);
  zmq::context_t context;
  Subscriber sub(context, sink.bound_endpoint(), {"event.", "stats."});
  wait_until_subscribed(sink, {&sub});

  raw_exec(options.db_path,
           "CREATE TRIGGER refuse_events BEFORE INSERT ON events "
           "BEGIN SELECT RAISE(ABORT, 'audit log refused'); END");
  Event event;
  event.type = EventType::kAlertResolved;
  event.wearer = 3;
  event.actor = "carer";
  sink.submit_event(event);
  REQUIRE(eventually([&] { return sink.counters().store_errors >= 2; }));
  CHECK_FALSE(sub.receive(200ms).has_value());

  raw_exec(options.db_path, "DROP TRIGGER refuse_events");
  auto message = sub.receive();
  REQUIRE(message.has_value());
  CHECK(message->topic == "event.alert_resolved.3.");
  CHECK(sink.counters().events_committed == 1);
  sink.stop();

  // After stop() an event is dropped and counted, never thrown.
  sink.submit_event(event);
  CHECK(sink.counters().events_dropped == 1);
}

TEST_CASE("AlertSink: published alerts carry the site's wall-clock time beside the stored row",
          "[sink]") {
  TempDir dir;
  SinkOptions options = options_for(dir);
  options.time_zone = "Asia/Kolkata";
  AlertSink sink(options);
  zmq::context_t context;
  Subscriber sub(context, sink.bound_endpoint(), {"alert.", "stats."});
  wait_until_subscribed(sink, {&sub});
  sink.submit(make_alert(0, 9));
  sink.submit_stats(json{{"end", true}});
  auto messages = sub.receive_until_end();
  REQUIRE(messages.size() == 1);
  json body = json::parse(messages[0].body);
  const gw::TimeZone kolkata = gw::TimeZone::named("Asia/Kolkata");
  CHECK(body["schema"] == gw::pipeline::kMessageSchemaVersion);
  CHECK(body["zone"] == "Asia/Kolkata");
  CHECK(body["detected_at_iso"] == kolkata.iso_text(body["detected_at"].get<double>()));
  sink.stop();
  HitStore store(options.db_path);
  const auto rows = store.query(gw::pipeline::HitQuery{});
  REQUIRE(rows.size() == 1);
  CHECK(body == gw::pipeline::alert_message_json(rows[0], kolkata));
  for (const char* readable : {"schema", "detected_at_iso", "zone"}) body.erase(readable);
  CHECK(body == gw::pipeline::alert_to_json(rows[0]));
}

// Hands `sink` groups of 300 alerts with small windows, each once the one
// before is committed (so the writer is hardly ever idle), until `done()`;
// `after_group` runs after each. Ids go on from `id`.
template <typename Done, typename AfterGroup>
void write_back_to_back(AlertSink& sink, std::int64_t& id, Done done, AfterGroup after_group) {
  const auto window = flat_window(128);
  while (!done()) {
    std::vector<Alert> group;
    for (int i = 0; i < 300; ++i) {
      Alert a = make_alert(id++, 1 + i % 50);
      a.window = window;
      group.push_back(std::move(a));
    }
    sink.submit_all(group);
    REQUIRE(
        eventually([&] { return sink.counters().committed == static_cast<std::uint64_t>(id); }));
    after_group();
  }
}

TEST_CASE("AlertSink: a writer that never pauses does not grow the WAL without bound", "[sink]") {
  // A PASSIVE checkpoint never catches up with a writer that commits back
  // to back, and SQLite starts a WAL again only when it has. Without the
  // sink restarting it, this WAL holds every page written: more than the
  // database file, which grows only by what the checkpoints copied.
  TempDir dir;
  SinkOptions options = store_only_options_for(dir, 1000);
  // Far below a checkpoint period's writes: the largest WAL is then about
  // that period's writes, whatever the machine's speed.
  options.wal_restart_bytes = 256u << 10;
  AlertSink sink(options);
  const fs::path wal = options.db_path + "-wal";
  std::uintmax_t largest_wal = 0;
  std::int64_t id = 0;
  // Eight checkpoint periods.
  const auto start = std::chrono::steady_clock::now();
  write_back_to_back(
      sink, id, [&] { return std::chrono::steady_clock::now() - start >= 4s; },
      [&] { largest_wal = std::max(largest_wal, fs::exists(wal) ? fs::file_size(wal) : 0); });
  const auto c = sink.counters();
  const std::uintmax_t database = fs::file_size(options.db_path);
  INFO(id << " alerts, database " << database << " bytes, largest WAL " << largest_wal
          << ", checkpoints " << c.checkpoints << ", WAL restarted " << c.wal_restarts
          << " (failed " << c.wal_restarts_busy << ")");
  CHECK(c.wal_restarts >= 2);
  // Restarted each time it passed the limit, it holds about one or two
  // checkpoint periods' writes at most: a small part of eight periods'.
  CHECK(largest_wal < database / 2);
  CHECK(c.store_errors == 0);
  sink.stop();
  CHECK(stored_seqs(options.db_path) == iota_seqs(static_cast<std::uint64_t>(id)));
}

TEST_CASE("AlertSink: a reader of an old snapshot holds the WAL's restart off, not the writer",
          "[sink]") {
  TempDir dir;
  SinkOptions options = store_only_options_for(dir, 1000);
  options.wal_restart_bytes = 256u << 10;
  AlertSink sink(options);
  std::int64_t id = 0;
  const auto for_a_while = [](std::chrono::milliseconds span) {
    const auto start = std::chrono::steady_clock::now();
    return [start, span] { return std::chrono::steady_clock::now() - start >= span; };
  };
  const auto nothing = [] {};
  write_back_to_back(sink, id, for_a_while(200ms), nothing);  // rows before the snapshot
  // A reader (another connection, as `gaitwatch hits` would be) inside a
  // read transaction: its snapshot keeps the WAL from starting again.
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> reader(nullptr, &sqlite3_close);
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(options.db_path.c_str(), &db) == SQLITE_OK);
    reader.reset(db);
  }
  REQUIRE(sqlite3_exec(reader.get(), "BEGIN; SELECT count(*) FROM hits;", nullptr, nullptr,
                       nullptr) == SQLITE_OK);
  const auto deadline = for_a_while(60000ms);
  write_back_to_back(
      sink, id, [&] { return sink.counters().wal_restarts_busy > 0 || deadline(); }, nothing);
  const auto held = sink.counters();
  CHECK(held.wal_restarts_busy > 0);
  CHECK(held.store_errors == 0);
  REQUIRE(sqlite3_exec(reader.get(), "COMMIT;", nullptr, nullptr, nullptr) == SQLITE_OK);
  reader.reset();
  const auto second_deadline = for_a_while(60000ms);
  write_back_to_back(
      sink, id,
      [&] { return sink.counters().wal_restarts > held.wal_restarts || second_deadline(); },
      nothing);
  const auto c = sink.counters();
  INFO("restarts " << held.wal_restarts << " -> " << c.wal_restarts << ", held off "
                   << held.wal_restarts_busy << " -> " << c.wal_restarts_busy);
  CHECK(c.wal_restarts > held.wal_restarts);
  CHECK(c.store_errors == 0);
  sink.stop();
  CHECK(stored_seqs(options.db_path) == iota_seqs(static_cast<std::uint64_t>(id)));
}
