// Crash safety of the real daemon (docs/reliability.md): while a replay of a
// real recording streams in, gaitwatchd is killed with SIGKILL at random
// moments and restarted, again and again. After every kill:
// * every alert a real ZeroMQ subscriber received has its row in the SQLite
//   hit store, equal to what was published (the sink commits, then
//   publishes; a kill between the two may leave a stored alert unpublished,
//   never the reverse);
// * `PRAGMA integrity_check` is ok on the hit store and the history store;
// * (checked as each alert arrives, too) its row is already committed;
// * seq numbers keep rising across restarts (a restarted daemon never reuses
//   one);
// and after every restart new alerts arrive (the daemon resumes).
//
// GW_CRASH_SEED=N reproduces a run's kill moments (the seed is printed).

#include <atomic>
#include <cstdlib>
#include <map>
#include <random>
#include <thread>

#include "sinks/store.h"
#include "tests/daemon/daemon_fixture.h"
#include "tests/daemon/sqlite_check.h"

namespace {

using gw::test::DaemonFixture;
using gw::test::Process;
using gw::test::Subscriber;
using nlohmann::json;
using std::chrono::milliseconds;

constexpr int kKillCycles = 24;
// Every kEarlyKillEvery-th kill comes at a random moment of the start-up
// (opening the stores, loading patterns, binding sockets) instead of while
// alerts flow.
constexpr int kEarlyKillEvery = 4;

using gw::test::integrity_check;

// Checks, the moment they arrive, that the alerts received since the last call
// are already committed: a reader in another process sees their rows. With
// publish-before-commit this fails even without a kill, so the test does not
// depend on a kill landing between the two.
class StoredOnArrival {
 public:
  explicit StoredOnArrival(const DaemonFixture& fx) : fx_(fx) {}
  void operator()(const std::vector<json>& published) {
    for (; checked_ < published.size(); ++checked_) {
      const auto seq = published[checked_]["seq"].get<std::uint64_t>();
      gw::pipeline::HitStore store(fx_.db(), /*read_only=*/true);
      gw::pipeline::HitQuery one;
      one.after_seq = seq - 1;
      one.limit = 1;
      const auto rows = store.query(one);
      INFO("alert seq " << seq << " was received before its row was committed");
      REQUIRE(rows.size() == 1);
      CHECK(rows[0].seq == seq);
    }
  }

 private:
  const DaemonFixture& fx_;
  std::size_t checked_ = 0;
};

// What a kill may not break: see the file comment.
void check_after_kill(const DaemonFixture& fx, const std::vector<json>& published) {
  CHECK(integrity_check(fx.db()) == "ok");
  CHECK(integrity_check(fx.history_db()) == "ok");
  gw::pipeline::HitStore store(fx.db(), /*read_only=*/true);
  gw::pipeline::HitQuery all;
  all.limit = -1;
  std::map<std::uint64_t, json> rows;
  for (const auto& row : store.query(all)) rows.emplace(row.seq, gw::test::as_published(row));
  std::uint64_t previous_seq = 0;
  for (const json& alert : published) {
    const auto seq = alert["seq"].get<std::uint64_t>();
    CHECK(seq > previous_seq);
    previous_seq = seq;
    const auto row = rows.find(seq);
    INFO("published alert " << alert.dump());
    REQUIRE(row != rows.end());
    CHECK(row->second == alert);
  }
}

// Replays the test segment again and again, each time as a new wearer (so
// that alert de-duplication, which keys on the wearer, lets the repeated
// events through), until stopped. UDP: the replay does not notice the kills.
class Feeder {
 public:
  explicit Feeder(const DaemonFixture& fx)
      : thread_([this, &fx] {
          for (int wearer = 1; !stop_; ++wearer) {
            Process replay({gw::test::kTool, "replay", "--file", gw::test::kRecording, "--format",
                            "daphnet", "--start", std::to_string(gw::test::kStart), "--end",
                            std::to_string(gw::test::kEnd), "--speed",
                            std::to_string(gw::test::kSpeed), "--wearer", std::to_string(wearer),
                            "--to", fx.udp()},
                           fx.dir / "replay.out", fx.dir / "replay.err");
            while (!stop_ && replay.running()) std::this_thread::sleep_for(milliseconds(20));
            // A replay that fails would starve the test of alerts.
            if (!stop_ && replay.wait(milliseconds(0)) != 0) failed_ = true;
          }
        }) {}
  ~Feeder() {
    stop_ = true;
    thread_.join();
  }
  bool failed() const { return failed_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::thread thread_;
};

}  // namespace

TEST_CASE("kill -9 at random moments: published alerts are stored, stores intact, daemon resumes",
          "[integration]") {
  DaemonFixture fx;
  const char* seed_env = std::getenv("GW_CRASH_SEED");
  const unsigned seed = seed_env ? static_cast<unsigned>(std::stoul(seed_env)) : std::random_device{}();
  std::mt19937 random(seed);
  std::printf("crash test: GW_CRASH_SEED=%u\n", seed);
  INFO("GW_CRASH_SEED=" << seed);

  Subscriber sub(fx.endpoint());  // reconnects to each new daemon by itself
  StoredOnArrival stored_on_arrival(fx);
  // Polls the subscriber for `time`, or until `pred`; every alert is checked
  // against the store as it comes in.
  auto poll = [&](auto pred, milliseconds time) {
    return sub.until(
        [&] {
          stored_on_arrival(sub.alerts);
          return pred();
        },
        time);
  };
  auto never = [] { return false; };
  Feeder feeder(fx);
  int early_kills = 0;
  for (int cycle = 0; cycle < kKillCycles; ++cycle) {
    INFO("kill cycle " << cycle);
    Process daemon = gw::test::start_daemon(fx, "daemon" + std::to_string(cycle));
    if (cycle % kEarlyKillEvery == kEarlyKillEvery - 1) {
      std::this_thread::sleep_for(milliseconds(std::uniform_int_distribution<int>(0, 600)(random)));
      ++early_kills;
    } else {
      // Resumes: a new alert after the restart (the previous cycle killed the
      // last daemon), then a random moment of the alert flow.
      const std::size_t before = sub.alerts.size();
      const bool resumed =
          poll([&] { return sub.alerts.size() > before; }, std::chrono::seconds(30));
      INFO(daemon.err());
      REQUIRE_FALSE(feeder.failed());
      REQUIRE(resumed);
      poll(never, milliseconds(std::uniform_int_distribution<int>(0, 1500)(random)));
    }
    daemon.signal(SIGKILL);
    const auto code = daemon.wait(std::chrono::seconds(10));
    REQUIRE(code.has_value());
    CHECK(*code == 128 + SIGKILL);  // killed, not exited by itself
    // Take in what the daemon sent before it died.
    poll(never, milliseconds(200));
    check_after_kill(fx, sub.alerts);
  }
  // The last restart resumes too.
  Process daemon = gw::test::start_daemon(fx, "daemon_last");
  const std::size_t before = sub.alerts.size();
  const bool resumed =
      poll([&] { return sub.alerts.size() > before; }, std::chrono::seconds(30));
  INFO(daemon.err());
  REQUIRE(resumed);
  gw::test::stop_and_collect(daemon, sub);
  stored_on_arrival(sub.alerts);
  check_after_kill(fx, sub.alerts);
  std::printf("crash test: %d kills (%d during start-up), %zu alerts published and found stored\n",
              kKillCycles, early_kills, sub.alerts.size());
}
