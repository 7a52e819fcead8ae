// The alert lifecycle's decisions on a stepped clock: when unacknowledged
// critical alerts escalate (daemon/escalation.h), and the daemon's side of
// it over a real SQLite store (daemon/lifecycle.h): acknowledged alerts
// never escalate, levels stop at the maximum, a restart goes on from the
// stored level, and every change is an event.
#include "daemon/escalation.h"

#include <catch2/catch.hpp>
#include <vector>

#include "daemon/control.h"
#include "daemon/lifecycle.h"
#include "sinks/store.h"
#include "tests/common/temp_dir.h"

namespace {

using gw::daemon::AlertLifecycle;
using gw::daemon::EscalationPolicy;
using gw::daemon::EscalationSchedule;
using gw::daemon::WatchedAlert;
using gw::pipeline::Event;
using gw::pipeline::EventType;
using nlohmann::json;

constexpr double kRaisedAt = 1.8e9;

WatchedAlert watched(std::uint64_t seq, double detected_at = kRaisedAt, int level = 0) {
  WatchedAlert alert;
  alert.seq = seq;
  alert.wearer = 17;
  alert.pattern = "fall_impact";
  alert.kind = "fall";
  alert.severity = "critical";
  alert.detected_at = detected_at;
  alert.level = level;
  return alert;
}

std::vector<std::pair<std::uint64_t, int>> levels(const std::vector<WatchedAlert>& due) {
  std::vector<std::pair<std::uint64_t, int>> out;
  for (const WatchedAlert& alert : due) out.emplace_back(alert.seq, alert.level);
  return out;
}

using Levels = std::vector<std::pair<std::uint64_t, int>>;

}  // namespace

TEST_CASE("escalation: the due level counts whole periods, up to the maximum", "[escalation]") {
  const EscalationPolicy policy{60, 3};
  CHECK(gw::daemon::due_level(policy, kRaisedAt, kRaisedAt) == 0);
  CHECK(gw::daemon::due_level(policy, kRaisedAt, kRaisedAt + 59.9) == 0);
  CHECK(gw::daemon::due_level(policy, kRaisedAt, kRaisedAt + 60) == 1);
  CHECK(gw::daemon::due_level(policy, kRaisedAt, kRaisedAt + 179) == 2);
  CHECK(gw::daemon::due_level(policy, kRaisedAt, kRaisedAt + 1e6) == 3);
  CHECK(gw::daemon::due_level(policy, kRaisedAt, kRaisedAt - 100) == 0);  // a clock stepped back
  CHECK(gw::daemon::due_level(EscalationPolicy{0, 3}, kRaisedAt, kRaisedAt + 1e6) == 0);
}

TEST_CASE("escalation: level after level, every period, then no more", "[escalation]") {
  EscalationSchedule schedule(EscalationPolicy{60, 3});
  schedule.watch(watched(1));
  schedule.watch(watched(2, kRaisedAt + 30));
  CHECK(schedule.take_due(kRaisedAt + 59).empty());
  CHECK(levels(schedule.take_due(kRaisedAt + 60)) == Levels{{1, 1}});
  CHECK(schedule.take_due(kRaisedAt + 61).empty());  // each level once
  CHECK(levels(schedule.take_due(kRaisedAt + 95)) == Levels{{2, 1}});
  // Alert 1 catches up two levels to the maximum, alert 2 (raised later) one.
  CHECK(levels(schedule.take_due(kRaisedAt + 180)) == Levels{{1, 2}, {1, 3}, {2, 2}});
  CHECK(schedule.watched() == 1);  // alert 1 is at the maximum
  CHECK(levels(schedule.take_due(kRaisedAt + 1e5)) == Levels{{2, 3}});
  CHECK(schedule.watched() == 0);
  CHECK(schedule.take_due(kRaisedAt + 1e6).empty());
}

TEST_CASE("escalation: a forgotten (acknowledged) alert never escalates", "[escalation]") {
  EscalationSchedule schedule(EscalationPolicy{60, 3});
  schedule.watch(watched(1));
  schedule.watch(watched(2));
  schedule.forget(1);
  schedule.forget(99);  // unknown: nothing happens
  CHECK(levels(schedule.take_due(kRaisedAt + 60)) == Levels{{2, 1}});
  schedule.forget(2);
  CHECK(schedule.take_due(kRaisedAt + 1e6).empty());
}

TEST_CASE(
    "escalation: a watched alert resumes from the level it had, and a reload changes what "
    "is due",
    "[escalation]") {
  EscalationSchedule schedule(EscalationPolicy{60, 3});
  schedule.watch(watched(1, kRaisedAt, 2));  // as read back after a restart
  schedule.watch(watched(2, kRaisedAt, 3));  // done already: not kept
  CHECK(schedule.watched() == 1);
  CHECK(levels(schedule.take_due(kRaisedAt + 130)) == Levels{});
  CHECK(levels(schedule.take_due(kRaisedAt + 180)) == Levels{{1, 3}});

  schedule.watch(watched(3));
  schedule.watch(watched(4, kRaisedAt, 1));
  schedule.set_policy(EscalationPolicy{0, 3});  // off
  CHECK(schedule.take_due(kRaisedAt + 1e6).empty());
  schedule.set_policy(EscalationPolicy{10, 1});  // alert 4 is past the new maximum
  CHECK(schedule.watched() == 1);
  CHECK(levels(schedule.take_due(kRaisedAt + 10)) == Levels{{3, 1}});
}

namespace {

class TempDir : public gw::test::TempDir {
 public:
  TempDir() : gw::test::TempDir("gw_escalation_test") {}
};

gw::pipeline::Alert alert_of(const std::string& severity, std::uint32_t wearer,
                             double detected_at) {
  gw::pipeline::Alert a;
  a.wearer = wearer;
  a.device = 1;
  a.pattern = "fall_impact";
  a.kind = "fall";
  a.severity = severity;
  a.detected_at = detected_at;
  return a;
}

// A lifecycle over a store file with a clock the test sets, and the events
// it publishes.
struct Bench {
  std::string db;
  double now = kRaisedAt;
  std::vector<Event> events;

  explicit Bench(std::string path) : db(std::move(path)) {}
  std::unique_ptr<AlertLifecycle> open(EscalationPolicy policy) {
    return std::make_unique<AlertLifecycle>(
        db, policy, [this](Event e) { events.push_back(std::move(e)); }, [this] { return now; });
  }
  std::vector<std::pair<std::uint64_t, int>> escalations() const {
    std::vector<std::pair<std::uint64_t, int>> out;
    for (const Event& e : events)
      if (e.type == EventType::kAlertEscalated)
        out.emplace_back(e.alert_seq, e.details.at("level").get<int>());
    return out;
  }
};

std::string error_code(const std::function<void()>& action) {
  try {
    action();
  } catch (const gw::daemon::ControlError& e) {
    return e.code();
  }
  FAIL("expected ControlError");
  return {};
}

}  // namespace

TEST_CASE(
    "lifecycle: an acknowledged alert never escalates, others stop at the maximum, and a "
    "restart goes on from the stored level",
    "[escalation][lifecycle]") {
  TempDir dir;
  Bench bench(dir.file("hits.db"));
  {
    gw::pipeline::HitStore store(bench.db);
    std::vector<gw::pipeline::Alert> alerts = {alert_of("critical", 17, kRaisedAt),
                                               alert_of("critical", 18, kRaisedAt),
                                               alert_of("warning", 19, kRaisedAt)};
    store.insert(alerts);
  }
  const EscalationPolicy policy{10, 3};
  auto lifecycle = bench.open(policy);
  lifecycle->step(0);  // reads the open critical alerts: 1 and 2
  CHECK(lifecycle->watched() == 2);

  bench.now = kRaisedAt + 5;
  const json reply = lifecycle->acknowledge({{"seq", 1}, {"by", "ana"}, {"note", "on my way"}});
  CHECK(reply["state"]["state"] == "acknowledged");
  REQUIRE(bench.events.size() == 1);
  CHECK(bench.events[0].type == EventType::kAlertAcknowledged);
  CHECK(bench.events[0].alert_seq == 1);
  CHECK(bench.events[0].wearer == 17);
  CHECK(bench.events[0].actor == "ana");
  CHECK(bench.events[0].details["note"] == "on my way");

  bench.now = kRaisedAt + 10;
  lifecycle->step(0);
  bench.now = kRaisedAt + 21;
  lifecycle->step(0);
  CHECK(bench.escalations() == Levels{{2, 1}, {2, 2}});
  const Event& escalated = bench.events.back();
  CHECK(escalated.actor == "gaitwatchd");
  CHECK(escalated.wearer == 18);
  CHECK(escalated.details ==
        json{{"level", 2}, {"severity", "critical"}, {"kind", "fall"}, {"pattern", "fall_impact"}});
  CHECK(gw::pipeline::HitStore(bench.db).alert_with_state(2)->state.escalation_level == 2);

  // A restart: the new lifecycle reads level 2 back and sends only level 3.
  lifecycle = bench.open(policy);
  bench.now = kRaisedAt + 100;
  lifecycle->step(0);
  lifecycle->step(0);
  CHECK(bench.escalations() == Levels{{2, 1}, {2, 2}, {2, 3}});
  CHECK(lifecycle->watched() == 0);
  CHECK(gw::pipeline::HitStore(bench.db).alert_with_state(2)->state.escalation_level == 3);
  CHECK(gw::pipeline::HitStore(bench.db).alert_with_state(1)->state.escalation_level == 0);
}

TEST_CASE("lifecycle: alerts committed later are found once the writer says they came",
          "[escalation][lifecycle]") {
  TempDir dir;
  Bench bench(dir.file("hits.db"));
  gw::pipeline::HitStore store(bench.db);
  auto lifecycle = bench.open(EscalationPolicy{10, 1});
  lifecycle->step(0);  // nothing stored yet
  std::vector<gw::pipeline::Alert> alerts = {alert_of("critical", 5, kRaisedAt)};
  lifecycle->critical_alert_submitted();
  lifecycle->step(/*writer_pending=*/1);  // not committed yet: looks again next time
  CHECK(lifecycle->watched() == 0);
  store.insert(alerts);
  lifecycle->step(0);
  CHECK(lifecycle->watched() == 1);
  bench.now = kRaisedAt + 10;
  lifecycle->step(0);
  CHECK(bench.escalations() == Levels{{1, 1}});
  // Resolved straight from new, with no acknowledgement on record.
  const json reply = lifecycle->resolve({{"seq", 1}, {"by", "ben"}});
  CHECK(reply["state"]["state"] == "resolved");
  CHECK(reply["state"]["acknowledged_by"].is_null());
  CHECK(reply["state"]["escalation_level"] == 1);
}

TEST_CASE("lifecycle: bad requests get their error codes and change nothing",
          "[escalation][lifecycle]") {
  TempDir dir;
  Bench bench(dir.file("hits.db"));
  {
    gw::pipeline::HitStore store(bench.db);
    std::vector<gw::pipeline::Alert> alerts = {alert_of("critical", 5, kRaisedAt)};
    store.insert(alerts);
  }
  auto lifecycle = bench.open(EscalationPolicy{10, 3});
  namespace err = gw::daemon::control_error;
  CHECK(error_code([&] {
          lifecycle->acknowledge({{"seq", 9}, {"by", "ana"}});
        }) == err::kUnknownAlert);
  CHECK(error_code([&] { lifecycle->acknowledge({{"seq", 1}}); }) == err::kBadRequest);
  CHECK(error_code([&] { lifecycle->acknowledge({{"seq", 1}, {"by", ""}}); }) == err::kBadRequest);
  CHECK(error_code([&] {
          lifecycle->acknowledge({{"seq", "one"}, {"by", "ana"}});
        }) == err::kBadRequest);
  CHECK(error_code([&] {
          lifecycle->acknowledge({{"seq", 1}, {"by", "ana"}, {"note", std::string(2000, 'x')}});
        }) == err::kBadRequest);
  CHECK(bench.events.empty());
  lifecycle->acknowledge({{"seq", 1}, {"by", "ana"}});
  CHECK(error_code([&] {
          lifecycle->acknowledge({{"seq", 1}, {"by", "ben"}});
        }) == err::kAlreadyAcknowledged);
  lifecycle->resolve({{"seq", 1}, {"by", "ben"}});
  CHECK(error_code([&] {
          lifecycle->resolve({{"seq", 1}, {"by", "ben"}});
        }) == err::kAlreadyResolved);
  CHECK(bench.events.size() == 2);
}
