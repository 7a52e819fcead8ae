// The JetStream frame path end to end, with real processes on loopback: a
// nats-server with JetStream, `gaitwatchd --gateway`, three gaitwatchd
// workers (ingest.nats) and, beside them, one plain gaitwatchd fed the same
// samples over TCP. Wearers are replayed to the gateway; one worker is
// killed with SIGKILL mid-replay. Its partitions must move to the two
// others within the lease TTL and a round; the alert stream must then hold
// exactly the plain daemon's alerts, by event key (wearer, pattern,
// t_end bucket), each once; every frame is acknowledged in the end and the
// counters add up.
#include <catch2/catch.hpp>

#include <nats/nats.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <iterator>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "cluster/partition.h"
#include "daemon/control_client.h"
#include "daemon/metrics_families.h"
#include "sinks/store.h"
#include "tests/common/nats_server.h"
#include "tests/common/temp_dir.h"
#include "tests/daemon/daemon_fixture.h"

namespace {

using gw::daemon::ControlClient;
using gw::test::DaemonFixture;
using gw::test::json;
using gw::test::kDaemon;
using gw::test::kTool;
using namespace std::chrono_literals;

constexpr std::uint32_t kPartitions = 8;
constexpr double kLeaseTtl = 2;
constexpr double kRetain = 6;
constexpr double kBucket = 5;  // dedup.bucket_s of the shipped config: the alerts' event key
const std::vector<std::uint32_t> kWearers = {1, 2, 3, 4};

using EventKey = std::tuple<std::uint32_t, std::string, long long>;

EventKey event_key(std::uint32_t wearer, const std::string& pattern, double t_end) {
  return {wearer, pattern, static_cast<long long>(std::floor(t_end / kBucket))};
}

void use_nats(DaemonFixture& fx, const std::string& url, const std::string& worker) {
  // The freeze pattern alone: the five processes share two cores in CI.
  YAML::Node freeze = fx.config["patterns"][0];
  fx.config["patterns"] = YAML::Node(YAML::NodeType::Sequence);
  fx.config["patterns"].push_back(freeze);
  fx.config["nats"]["url"] = url;
  fx.config["nats"]["partitions"] = kPartitions;
  fx.config["nats"]["lease_ttl_s"] = kLeaseTtl;
  fx.config["nats"]["retain_s"] = kRetain;
  fx.config["nats"]["frames_max_age_s"] = 300;
  // Both sides must see every sample for their alerts to be compared: the
  // replays go over TCP and a full queue holds the sender back rather than
  // dropping (on two busy cores a daemon may be descheduled for seconds).
  fx.config["ingest"]["queue_overflow"] = "block";
  if (!worker.empty()) {
    fx.config["nats"]["worker_id"] = worker;
    fx.config["ingest"]["nats"] = true;
  }
  fx.write_config(fx.config);
}

bool wait_for(const gw::Process& process, const std::string& line, std::chrono::seconds timeout) {
  return gw::test::eventually([&] { return process.err().find(line) != std::string::npos; }, timeout);
}

json status_of(const DaemonFixture& fx) {
  // `status` is answered between ticks; five daemons on two busy cores may
  // take seconds per tick.
  ControlClient client(fx.control_endpoint(), 30s);
  const json reply = client.call("status", json::object());
  REQUIRE(reply["type"] == "result");
  return reply["result"];
}

std::set<std::uint32_t> partitions_of(const json& status) {
  std::set<std::uint32_t> held;
  for (const auto& p : status["nats"]["ingest"]["leases"]["partitions"]) held.insert(p.get<std::uint32_t>());
  return held;
}

std::uint64_t stream_messages(const std::string& url, const std::string& stream) {
  natsConnection* connection = nullptr;
  jsCtx* js = nullptr;
  REQUIRE(natsConnection_ConnectTo(&connection, url.c_str()) == NATS_OK);
  REQUIRE(natsConnection_JetStream(&js, connection, nullptr) == NATS_OK);
  jsStreamInfo* info = nullptr;
  jsErrCode code;
  REQUIRE(js_GetStreamInfo(&info, js, stream.c_str(), nullptr, &code) == NATS_OK);
  const std::uint64_t n = info->State.Msgs;
  jsStreamInfo_Destroy(info);
  jsCtx_Destroy(js);
  natsConnection_Destroy(connection);
  return n;
}

// Processes are not copied (a copy's destructor would kill the child):
// each is made in place.
std::unique_ptr<gw::Process> replay_to(const DaemonFixture& fx, const std::string& to, std::uint32_t wearer,
                                       const std::string& tag) {
  return std::make_unique<gw::Process>(std::vector<std::string>{kTool, "replay", "--file", gw::test::kRecording, "--format", "daphnet", "--start",
                      std::to_string(gw::test::kStart), "--end", std::to_string(gw::test::kEnd), "--speed", "8",
                      "--wearer", std::to_string(wearer), "--to", to},
                     fx.dir / (tag + ".out"), fx.dir / (tag + ".err"));
}

}  // namespace

TEST_CASE("three workers share the frame stream, one killed mid-replay: its partitions move, and the alert "
          "stream holds a single daemon's alerts, each once",
          "[integration][cluster]") {
  if (gw::test::nats_server_missing()) return;
  const gw::test::TempNatsServer nats("gw_nats_workers");

  DaemonFixture gateway_fx, reference_fx;
  use_nats(gateway_fx, nats.url(), "");
  // The plain daemon: the same detection, no JetStream at all.
  use_nats(reference_fx, nats.url(), "");
  reference_fx.config.remove("nats");
  reference_fx.write_config(reference_fx.config);
  std::vector<std::unique_ptr<DaemonFixture>> worker_fx;
  for (int i = 0; i < 3; ++i) {
    worker_fx.push_back(std::make_unique<DaemonFixture>());
    use_nats(*worker_fx.back(), nats.url(), "w" + std::to_string(i));
  }
  gw::Process gateway({kDaemon, "--gateway", "--config", gateway_fx.config_path.string()},
                      gateway_fx.dir / "gateway.out", gateway_fx.dir / "gateway.err");
  gw::Process reference = gw::test::start_daemon(reference_fx);
  std::vector<std::unique_ptr<gw::Process>> workers;
  for (const auto& fx : worker_fx)
    workers.push_back(std::make_unique<gw::Process>(
        std::vector<std::string>{kDaemon, "--config", fx->config_path.string()}, fx->dir / "daemon.out",
        fx->dir / "daemon.err"));
  REQUIRE(wait_for(gateway, "gaitwatchd gateway ready", 30s));
  REQUIRE(wait_for(reference, "gaitwatchd ready", 60s));
  for (const auto& w : workers)
    if (!wait_for(*w, "gaitwatchd ready", 60s)) FAIL("a worker did not start: " << w->err());

  // The leases settle: three live workers, every partition held once.
  std::vector<std::set<std::uint32_t>> held(3);
  REQUIRE(gw::test::eventually(
      [&] {
        std::set<std::uint32_t> all;
        std::size_t total = 0;
        for (int i = 0; i < 3; ++i) {
          const json status = status_of(*worker_fx[static_cast<std::size_t>(i)]);
          if (status["nats"]["ingest"]["leases"]["live_workers"] != 3) return false;
          held[static_cast<std::size_t>(i)] = partitions_of(status);
          total += held[static_cast<std::size_t>(i)].size();
          all.insert(held[static_cast<std::size_t>(i)].begin(), held[static_cast<std::size_t>(i)].end());
        }
        return total == kPartitions && all.size() == kPartitions;
      },
      15s));
  // The worker to kill: the one holding most of the replayed wearers.
  std::size_t victim = 0, most = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    std::size_t wearers = 0;
    for (const std::uint32_t w : kWearers) wearers += held[i].count(gw::cluster::partition_of(w, kPartitions));
    if (wearers > most) most = wearers, victim = i;
  }
  REQUIRE(most > 0);

  // The same samples to the gateway and to the plain daemon, at 8x.
  std::vector<std::unique_ptr<gw::Process>> replays;
  for (const std::uint32_t w : kWearers) {
    replays.push_back(replay_to(gateway_fx, gateway_fx.tcp(), w, "replay_gateway_" + std::to_string(w)));
    replays.push_back(replay_to(reference_fx, reference_fx.tcp(), w, "replay_reference_" + std::to_string(w)));
  }
  // Mid-replay, and before any frame is retain_s old: what the victim took
  // is all still in the stream for its successors.
  std::this_thread::sleep_for(3s);
  workers[victim]->signal(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  REQUIRE(workers[victim]->wait(5s).has_value());

  std::vector<std::size_t> survivors;
  for (std::size_t i = 0; i < 3; ++i)
    if (i != victim) survivors.push_back(i);
  REQUIRE(gw::test::eventually(
      [&] {
        std::set<std::uint32_t> all;
        for (const std::size_t i : survivors) {
          const std::set<std::uint32_t> p = partitions_of(status_of(*worker_fx[i]));
          all.insert(p.begin(), p.end());
        }
        return all.size() == kPartitions;
      },
      15s));
  const double moved_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  INFO("partitions moved " << moved_s << " s after the kill");
  CHECK(moved_s < kLeaseTtl * 4 / 3 + 2.0);

  // Frames each replay sent (its JSON line); replays alternate gateway, plain daemon.
  std::uint64_t sent_to_reference = 0;
  for (std::size_t i = 0; i < replays.size(); ++i) {
    const auto code = replays[i]->wait(60s);
    REQUIRE(code.has_value());
    CHECK(*code == 0);
    const std::vector<json> lines = gw::test::json_lines(replays[i]->out());
    REQUIRE(lines.size() == 1);
    if (i % 2 == 1) sent_to_reference += lines[0]["frames"].get<std::uint64_t>();
  }
  // Every frame acknowledged (retain_s after its receipt) by a survivor.
  CHECK(gw::test::eventually([&] { return stream_messages(nats.url(), "GW_FRAMES") == 0; }, 60s));
  // The plain daemon and the survivors done: every window searched, every
  // alert committed (and sent).
  // A replay's last frames may still wait in the plain daemon's socket after
  // the replay exits: it is done once it has read them all.
  const auto done = [&](const DaemonFixture& fx) {
    const json status = status_of(fx);
    if (&fx == &reference_fx && status["ingest"]["tcp_frames"] != sent_to_reference) return false;
    return status["ingest"]["queue_depth"] == 0 && status["engine"]["pending_windows"] == 0 &&
           status["sink"]["pending"] == 0;
  };
  // Which process kept the test waiting, and what it logged.
  const auto logs = [&] {
    const auto tail = [](const std::string& text) { return text.substr(text.size() > 3000 ? text.size() - 3000 : 0); };
    std::string out = "\n--- plain daemon:\n" + tail(reference.err());
    for (const std::size_t i : survivors) out += "\n--- worker " + std::to_string(i) + ":\n" + tail(workers[i]->err());
    return out + "\n--- gateway:\n" + tail(gateway.err());
  };
  bool all_done = false;
  try {
    all_done = gw::test::eventually(
        [&] { return done(reference_fx) && done(*worker_fx[survivors[0]]) && done(*worker_fx[survivors[1]]); }, 180s);
  } catch (const std::exception& e) {
    FAIL(e.what() << logs());
  }
  if (!all_done) FAIL("the daemons did not finish their work" << logs());
  std::this_thread::sleep_for(1s);
  // Nothing lost on the way in (the comparison below assumes it): no queue
  // drops at the plain daemon, and every stream whole at both ends.
  const json reference_status = status_of(reference_fx);
  INFO("plain daemon: ingest " << reference_status["ingest"].dump() << " engine " << reference_status["engine"].dump());
  {
    const json& status = reference_status;
    CHECK(status["ingest"]["queue_dropped"] == 0);
    CHECK(status["engine"]["gaps"] == 0);
    for (const std::size_t i : survivors) CHECK(status_of(*worker_fx[i])["engine"]["gaps"] == 0);
  }

  // The plain daemon's alerts, and the alert stream's: each event once, the
  // same events. On a loaded machine a daemon may still be searching the
  // last samples it took when the counters above say done (they say nothing
  // of a batch still to come), so both are read again until they agree or a
  // minute and a half has passed; what differs then is reported below.
  std::set<EventKey> expected;
  std::vector<json> stream_alerts;
  std::map<EventKey, int> stored;
  std::set<EventKey> stored_keys;
  const auto read_both = [&] {
    expected.clear();
    {
      gw::pipeline::HitStore store(reference_fx.db(), /*read_only=*/true);
      gw::pipeline::HitQuery all;
      all.limit = -1;
      for (const auto& alert : store.query(all))
        expected.insert(event_key(alert.wearer, alert.pattern, alert.t_end));
    }
    const auto r = gw::run_process({kTool, "subscribe", "--nats", nats.url(), "--from-start", "--timeout", "2"},
                                   reference_fx.dir, "subscribe_nats", 30s);
    REQUIRE(r.code == 0);
    stream_alerts = gw::test::json_lines(r.out);
    stored.clear();
    stored_keys.clear();
    for (const json& a : stream_alerts)
      ++stored[event_key(a["wearer"].get<std::uint32_t>(), a["pattern"].get<std::string>(), a["t_end"].get<double>())];
    for (const auto& [key, count] : stored) stored_keys.insert(key);
    return stored_keys == expected && stream_alerts.size() == expected.size();
  };
  gw::test::eventually(read_both, 90s);
  std::set<std::uint32_t> alerted_wearers;
  for (const auto& [wearer, pattern, bucket] : expected) alerted_wearers.insert(wearer);
  INFO(expected.size() << " reference events");
  REQUIRE(alerted_wearers.size() == kWearers.size());
  for (const auto& [key, count] : stored) CHECK(count == 1);
  // Named, so that a failure says which events differ and on whose partition.
  const auto describe = [&](const std::set<EventKey>& keys) {
    std::string out;
    for (const auto& [wearer, pattern, bucket] : keys)
      out += "(wearer " + std::to_string(wearer) + " partition " +
             std::to_string(gw::cluster::partition_of(wearer, kPartitions)) + " " + pattern + " t_end bucket " +
             std::to_string(bucket) + ") ";
    return out;
  };
  std::set<EventKey> missing, extra;
  std::set_difference(expected.begin(), expected.end(), stored_keys.begin(), stored_keys.end(),
                      std::inserter(missing, missing.end()));
  std::set_difference(stored_keys.begin(), stored_keys.end(), expected.begin(), expected.end(),
                      std::inserter(extra, extra.end()));
  std::string victim_partitions;
  for (const std::uint32_t p : held[victim]) victim_partitions += std::to_string(p) + " ";
  INFO("the killed worker held partitions " << victim_partitions);
  INFO("only the plain daemon raised: " << describe(missing));
  INFO("only the stream holds: " << describe(extra));
  CHECK(missing.empty());
  CHECK(extra.empty());
  CHECK(stream_alerts.size() == expected.size());

  // The survivors' counters: every alert they published was stored or
  // recognised as a duplicate (of the victim's, or of their own replays).
  std::uint64_t survivors_stored = 0;
  for (const std::size_t i : survivors) {
    const json status = status_of(*worker_fx[i]);
    const json& alerts = status["nats"]["alerts"];
    INFO(status["nats"].dump());
    CHECK(alerts["published"] == alerts["stored"].get<std::uint64_t>() + alerts["duplicates"].get<std::uint64_t>());
    CHECK(alerts["failed"] == 0);
    CHECK(alerts["dropped"] == 0);
    CHECK(status["nats"]["ingest"]["consumer"]["errors"] == 0);
    CHECK(status["nats"]["ingest"]["consumer"]["frames"] == status["ingest"]["stream_frames"]);
    json counters = status;
    counters.erase("time");  // status's own, not a counter
    CHECK(gw::daemon::unmapped_counter_leaves(counters) == std::vector<std::string>{});  // all on /metrics
    survivors_stored += alerts["stored"].get<std::uint64_t>();
  }
  CHECK(survivors_stored <= stream_alerts.size());

  for (const std::size_t i : survivors) {
    workers[i]->signal(SIGTERM);
    const auto code = workers[i]->wait(30s);
    REQUIRE(code.has_value());
    CHECK(*code == 0);
  }
  gateway.signal(SIGTERM);
  REQUIRE(gateway.wait(30s).has_value());
  json final_counters;
  for (const json& line : gw::test::json_lines(gateway.out()))
    if (line.contains("gateway")) final_counters = line["gateway"];
  INFO(final_counters.dump());
  CHECK(final_counters["publisher"]["published"] == final_counters["ingest"]["queued"]);
  CHECK(final_counters["publisher"]["acked"] == final_counters["publisher"]["published"]);
  CHECK(final_counters["publisher"]["dropped"] == 0);
}
