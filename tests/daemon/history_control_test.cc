// Integration: the history search as a control-interface job of the real
// gaitwatchd. The daemon records a replayed Daphnet recording in its
// raw-stream history; `gaitwatch search --daemon` (the history.search job)
// returns the same top-k as the offline `gaitwatch search --history` on the
// same file, for a configured pattern, an example and a time range; a
// cancel request ends the job with "cancelled", and a client that goes away
// has its job cancelled too. A REQ client runs the job detached: it polls
// job.status for the progress and fetches job.result (the same matches), and
// cancels a detached job.
#include <catch2/catch.hpp>

#include <optional>
#include <thread>

#include <zmq.hpp>

#include "daemon/control_client.h"
#include "tests/daemon/daemon_fixture.h"

namespace {

using gw::daemon::ControlClient;
using gw::test::DaemonFixture;
using gw::test::kEnd;
using gw::test::kRecording;
using gw::test::kStart;
using gw::test::kTool;
using gw::test::Process;
using gw::test::Subscriber;
using nlohmann::json;
using namespace std::chrono_literals;

json status(const DaemonFixture& fx) {
  ControlClient client(fx.control_endpoint(), 10s);
  const json reply = client.call("status", json::object());
  INFO(reply.dump());
  REQUIRE(reply["type"] == "result");
  return reply["result"];
}

// Polls `status` until `pred` holds for it (or 30 s pass).
template <typename P>
json status_until(const DaemonFixture& fx, P pred) {
  const auto end = std::chrono::steady_clock::now() + 30s;
  json s = status(fx);
  while (!pred(s) && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(100ms);
    s = status(fx);
  }
  return s;
}

gw::test::RunResult tool(const DaemonFixture& fx, const std::string& tag,
                         std::vector<std::string> args) {
  args.insert(args.begin(), kTool);
  auto r = gw::test::run_process(args, fx.dir, tag, std::chrono::seconds(180));
  INFO(tag << ": " << r.err);
  REQUIRE(r.code == 0);
  return r;
}

// The same search offline on the daemon's history file and through the
// daemon: identical JSON lines, `expected` of them. Both take the config's
// backend (auto): the GPU's float distances differ from the CPU's double
// ones in the last digits, so the two sides must search on the same one.
void same_top_k(const DaemonFixture& fx, const std::string& tag, std::vector<std::string> query,
                std::size_t expected) {
  std::vector<std::string> offline = {"search", "--history", fx.history_db(), "--config",
                                      fx.config_path.string(), "--json"};
  // The daemon found through its config (control.endpoint).
  std::vector<std::string> daemon = {"search", "--daemon", "--config", fx.config_path.string(),
                                     "--json"};
  offline.insert(offline.end(), query.begin(), query.end());
  daemon.insert(daemon.end(), query.begin(), query.end());
  const auto a = tool(fx, tag + "_offline", offline);
  const auto b = tool(fx, tag + "_daemon", daemon);
  INFO(a.out << "\n---\n" << b.out);
  CHECK(b.out == a.out);
  CHECK(static_cast<std::size_t>(std::count(a.out.begin(), a.out.end(), '\n')) == expected);
  CHECK_THAT(b.err, Catch::Contains("progress 1.000"));
}

// Sends a history.search that takes many slices (one 1-s chunk each, k so
// large that the bound never prunes) and waits for its first progress
// message. Returns the job id.
std::uint64_t start_long_search(ControlClient& client) {
  const std::uint64_t id = client.send(
      "history.search", {{"pattern", "fog_freeze_index"}, {"k", 100000}, {"slice_samples", 1}});
  std::optional<std::uint64_t> job;
  for (int i = 0; i < 100; ++i) {
    const auto message = client.receive(10s);
    REQUIRE(message.has_value());
    INFO(message->dump());
    REQUIRE((*message)["id"] == id);
    REQUIRE_FALSE(ControlClient::is_final(*message));
    if ((*message)["type"] == "accepted") job = (*message)["job"].get<std::uint64_t>();
    if ((*message)["type"] == "progress") {
      CHECK((*message)["progress"]["fraction"].get<double>() < 0.1);
      break;
    }
  }
  REQUIRE(job.has_value());
  return *job;
}

// A plain REQ/REP client: one request, one reply.
class ReqClient {
 public:
  explicit ReqClient(const std::string& endpoint) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::rcvtimeo, 10000);
    socket_.connect(endpoint);
  }
  json request(const json& body) {
    socket_.send(zmq::buffer(body.dump()), zmq::send_flags::none);
    zmq::message_t reply;
    REQUIRE(socket_.recv(reply, zmq::recv_flags::none).has_value());
    return json::parse(reply.to_string());
  }
  json call(const std::string& cmd, const json& args) {
    return request({{"id", ++id_}, {"cmd", cmd}, {"args", args}});
  }

 private:
  zmq::context_t context_;
  zmq::socket_t socket_{context_, zmq::socket_type::req};
  int id_ = 0;
};

// Starts `args` as a detached history.search; returns the job id.
std::uint64_t start_detached(ReqClient& req, const json& args) {
  const json accepted = req.request({{"id", 0}, {"cmd", "history.search"}, {"args", args},
                                     {"detach", true}});
  INFO(accepted.dump());
  REQUIRE(accepted["type"] == "accepted");
  CHECK(accepted["detached"] == true);
  return accepted["job"].get<std::uint64_t>();
}

// Polls job.status until the job left `running`; returns the statuses seen.
std::vector<json> poll_until_finished(ReqClient& req, std::uint64_t job) {
  std::vector<json> seen;
  for (int i = 0; i < 3000; ++i) {
    const json reply = req.call("job.status", {{"job", job}});
    INFO(reply.dump());
    REQUIRE(reply["type"] == "result");
    seen.push_back(reply["result"]);
    const std::string state = reply["result"]["state"];
    if (state != "running" && state != "cancelling") break;
    std::this_thread::sleep_for(10ms);
  }
  return seen;
}

}  // namespace

TEST_CASE("history.search: the daemon's top-k equals the offline search of its history file",
          "[integration]") {
  DaemonFixture fx;
  // One-second chunks: many slices for the cancel tests below.
  fx.config["history"]["chunk_s"] = 1;
  fx.write_config(fx.config);
  Subscriber sub(fx.endpoint());
  Process daemon = gw::test::start_daemon(fx);
  REQUIRE(sub.until([&] { return !sub.stats.empty(); }, std::chrono::seconds(20)));
  gw::test::replay(fx, fx.udp());
  const json recorded = status_until(fx, [](const json& s) {
    return s["history"]["samples_written"] == kEnd - kStart;
  });
  REQUIRE(recorded["history"]["samples_written"] == kEnd - kStart);

  // A configured pattern over all wearers, over a wearer and a time range,
  // and an example window.
  {
    same_top_k(fx, "pattern", {"--pattern", "fog_freeze_index", "-k", "5"}, 5);
    // The device times of the replayed range: the recording's ms clock.
    const double t0 = 53000 * 0.015625;
    same_top_k(fx, "range",
               {"--pattern", "fog_freeze_index", "--wearers", "1", "--from",
                std::to_string(t0 + 30), "--to", std::to_string(t0 + 90), "-k", "3"},
               3);
    same_top_k(fx, "example",
               {"--example", kRecording + ":54552:54680", "--format", "daphnet", "--columns",
                "ankle_fwd,ankle_vert,ankle_lat", "--band", "0.1", "--znorm", "--nr", "1",
                "--alpha", "1.5", "-k", "4"},
               4);
  }

  // Cancel ends the job with "cancelled".
  {
    ControlClient client(fx.control_endpoint(), 10s);
    const std::uint64_t job = start_long_search(client);
    ControlClient other(fx.control_endpoint(), 10s);
    const json cancel = other.call("cancel", {{"job", job}});
    INFO(cancel.dump());
    CHECK(cancel["type"] == "result");
    json final;
    for (int i = 0; i < 1000; ++i) {
      const auto message = client.receive(10s);
      REQUIRE(message.has_value());
      if (ControlClient::is_final(*message)) {
        final = *message;
        break;
      }
    }
    INFO(final.dump());
    CHECK(final["type"] == "error");
    CHECK(final["error"]["code"] == "cancelled");
  }

  // A client that goes away has its job cancelled.
  {
    {
      ControlClient client(fx.control_endpoint(), 10s);
      start_long_search(client);
    }  // the client's socket closes here
    const json after = status_until(fx, [](const json& s) {
      return s["control"]["jobs_running"] == 0;
    });
    CHECK(after["control"]["jobs_running"] == 0);
    CHECK(after["control"]["jobs_cancelled_client_gone"] == 1);
  }

  // Polling: a REQ client starts a detached job, watches its progress
  // through job.status and fetches the same matches through job.result.
  {
    const json args = {{"pattern", "fog_freeze_index"}, {"k", 5}, {"slice_samples", 64}};
    ControlClient streaming(fx.control_endpoint(), 10s);
    const json streamed = streaming.call("history.search", args);
    INFO(streamed.dump());
    REQUIRE(streamed["type"] == "result");

    ReqClient req(fx.control_endpoint());
    const std::uint64_t job = start_detached(req, args);
    const std::vector<json> seen = poll_until_finished(req, job);
    REQUIRE_FALSE(seen.empty());
    double last = 0;
    for (const json& s : seen) {
      CHECK(s["job"] == job);
      CHECK(s["detached"] == true);
      if (s["progress"].is_null()) continue;
      const double fraction = s["progress"]["fraction"].get<double>();
      CHECK(fraction >= last);
      last = fraction;
    }
    CHECK(seen.back()["state"] == "done");
    CHECK(seen.back()["progress"]["fraction"] == 1.0);
    const json result = req.call("job.result", {{"job", job}});
    INFO(result.dump());
    REQUIRE(result["type"] == "result");
    CHECK(result["result"]["matches"] == streamed["result"]["matches"]);
    CHECK(result["result"]["count"] == 5);

    // The long search (one slice per 1-s chunk, as in the cancel test
    // above) polled while it runs: progress part-way, no result yet; then
    // cancelled: job.status says so, and job.result answers with its error.
    const std::uint64_t long_job =
        start_detached(req, {{"pattern", "fog_freeze_index"}, {"k", 100000}, {"slice_samples", 1}});
    json running;
    for (int i = 0; i < 1000; ++i) {
      running = req.call("job.status", {{"job", long_job}})["result"];
      if (!running["progress"].is_null()) break;
      std::this_thread::sleep_for(1ms);
    }
    INFO(running.dump());
    REQUIRE(running["state"] == "running");
    CHECK(running["progress"]["fraction"].get<double>() < 1.0);
    CHECK(req.call("job.result", {{"job", long_job}})["error"]["code"] == "not_finished");
    CHECK(req.call("cancel", {{"job", long_job}})["type"] == "result");
    const std::vector<json> after = poll_until_finished(req, long_job);
    CHECK(after.back()["state"] == "cancelled");
    CHECK(after.back()["error"]["code"] == "cancelled");
    CHECK(req.call("job.result", {{"job", long_job}})["error"]["code"] == "cancelled");
    CHECK(req.call("job.status", {{"job", 999999}})["error"]["code"] == "unknown_job");
    CHECK(req.request({{"id", 1}, {"cmd", "status"}, {"detach", true}})["error"]["code"] ==
          "bad_request");
  }

  // Bad requests are clear errors.
  {
    ControlClient client(fx.control_endpoint(), 10s);
    const json unknown = client.call("history.search", {{"pattern", "no_such_pattern"}});
    CHECK(unknown["error"]["code"] == "bad_request");
    CHECK_THAT(unknown["error"]["message"].get<std::string>(), Catch::Contains("no_such_pattern"));
    const json neither = client.call("history.search", {{"k", 3}});
    CHECK(neither["error"]["code"] == "bad_request");
  }

  daemon.signal(SIGTERM);
  const auto code = daemon.wait(std::chrono::seconds(30));
  REQUIRE(code.has_value());
  CHECK(*code == 0);
}
