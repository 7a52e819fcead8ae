// The control interface's mechanism (daemon/control.h) over real ZeroMQ
// sockets on loopback, with the real client: the registry, the request and
// reply shapes, every error code, pipeline-thread commands and their bounded
// queue, and jobs with progress, cancellation and shutdown.
#include "daemon/control.h"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include <zmq.hpp>

#include "common/error.h"
#include "daemon/control_client.h"
#include "daemon/ipc_socket.h"

namespace gw::daemon {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A stand-in for the daemon's pipeline thread: runs the queued tasks until
// stopped, then closes the queue and runs what is left, as the daemon does.
class PipelineThread {
 public:
  explicit PipelineThread(PipelineTasks& tasks, bool start = true) : tasks_(tasks) {
    if (start) this->start();
  }
  ~PipelineThread() { stop(); }
  void start() {
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        tasks_.run_pending();
        std::this_thread::sleep_for(2ms);
      }
      tasks_.close();
      tasks_.run_pending();
    });
    // Set here, not by the thread: the test reads it after a reply that went
    // through ZeroMQ, an order TSan cannot see.
    id_ = thread_.get_id();
  }
  void stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  std::thread::id id() const { return id_; }

 private:
  PipelineTasks& tasks_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::thread::id id_;
};

std::string thread_name(std::thread::id id) {
  std::ostringstream out;
  out << id;
  return out.str();
}

// Commands the tests drive the mechanism with.
ControlRegistry test_registry() {
  ControlRegistry registry;
  registry.add("echo", "returns its args", RunsOn::kControlThread,
               [](const json& args) { return json{{"args", args}}; });
  registry.add("add", "a + b", RunsOn::kControlThread, [](const json& args) -> json {
    return {{"sum", int_arg(args, "a", -100, 100) + int_arg(args, "b", -100, 100, 0)}};
  });
  registry.add("refuse", "throws a ControlError", RunsOn::kControlThread, [](const json&) -> json {
    throw ControlError(control_error::kUnavailable, "not today");
  });
  registry.add("crash", "throws gw::Error", RunsOn::kControlThread,
               [](const json&) -> json { throw gw::Error("the disk is on fire"); });
  registry.add("where", "the thread it runs on", RunsOn::kPipelineThread, [](const json&) -> json {
    return {{"thread", thread_name(std::this_thread::get_id())}};
  });
  registry.add_job("count", "counts to n with progress, each step on the pipeline thread",
                   [](const json& args, JobContext& job) -> json {
                     const std::int64_t n = int_arg(args, "n", 0, 1000);
                     std::string thread;
                     for (std::int64_t i = 1; i <= n; ++i) {
                       job.throw_if_cancelled();
                       thread = job.on_pipeline([]() -> json {
                                     return thread_name(std::this_thread::get_id());
                                   }).get<std::string>();
                       job.progress({{"done", i}, {"total", n}});
                     }
                     return {{"counted", n}, {"thread", thread}};
                   });
  registry.add_job("wait", "runs until cancelled", [](const json&, JobContext& job) -> json {
    while (!job.cancelled()) std::this_thread::sleep_for(2ms);
    job.throw_if_cancelled();
    return {};
  });
  return registry;
}

ControlOptions options(int max_jobs = 4) {
  ControlOptions o;
  o.endpoint = "tcp://127.0.0.1:*";
  o.max_jobs = max_jobs;
  o.max_request_bytes = 1024;
  return o;
}

std::string error_code(const json& reply) {
  REQUIRE(reply["type"] == "error");
  CHECK(reply["ok"] == false);
  return reply["error"]["code"].get<std::string>();
}

// Reads messages of request `id` until one of `type` arrives.
json next_of(ControlClient& client, std::uint64_t id, const std::string& type) {
  for (int i = 0; i < 200; ++i) {
    const auto message = client.receive(100ms);
    if (message && (*message)["id"] == id && (*message)["type"] == type) return *message;
  }
  FAIL("no '" << type << "' message for request " << id);
  return {};
}

TEST_CASE("the registry finds commands and refuses duplicates", "[control]") {
  ControlRegistry registry = test_registry();
  REQUIRE(registry.find("echo") != nullptr);
  CHECK_FALSE(registry.find("echo")->is_job);
  CHECK(registry.find("count")->is_job);
  CHECK(registry.find("where")->runs_on == RunsOn::kPipelineThread);
  CHECK(registry.find("nope") == nullptr);
  CHECK(registry.names().front() == "add");  // sorted
  CHECK_THROWS_AS(registry.add("echo", "", RunsOn::kControlThread, {}), gw::Error);
  CHECK_THROWS_AS(registry.add_job("", "", {}), gw::Error);

  // The server's built-in names are taken.
  PipelineTasks tasks(8);
  ControlRegistry clash;
  clash.add("cancel", "mine", RunsOn::kControlThread, [](const json&) { return json(); });
  CHECK_THROWS_AS(ControlServer(options(), std::move(clash), tasks), gw::Error);
}

TEST_CASE("requests get one result with their id echoed", "[control]") {
  PipelineTasks tasks(8);
  PipelineThread pipeline(tasks);
  ControlServer server(options(), test_registry(), tasks);
  ControlClient client(server.bound_endpoint(), 5s);

  const json sum = client.call("add", {{"a", 2}, {"b", 40}});
  CHECK(sum["type"] == "result");
  CHECK(sum["ok"] == true);
  CHECK(sum["result"]["sum"] == 42);
  CHECK(sum["id"].is_number());
  CHECK(client.call("add", {{"a", -7}})["result"]["sum"] == -7);  // b's default

  // Any JSON id comes back as it was; args may be omitted.
  client.send_raw(R"({"id": "req-7", "cmd": "echo"})");
  const auto echoed = client.receive(5s);
  REQUIRE(echoed.has_value());
  CHECK((*echoed)["id"] == "req-7");
  CHECK((*echoed)["result"]["args"] == json::object());

  const json commands = client.call("commands", json::object());
  std::vector<std::string> names;
  for (const json& c : commands["result"]["commands"]) names.push_back(c["name"]);
  CHECK(std::find(names.begin(), names.end(), "cancel") != names.end());
  CHECK(std::find(names.begin(), names.end(), "count") != names.end());
}

TEST_CASE("malformed requests get error replies and the server keeps serving", "[control]") {
  PipelineTasks tasks(8);
  PipelineThread pipeline(tasks);
  ControlServer server(options(), test_registry(), tasks);
  ControlClient client(server.bound_endpoint(), 5s);

  auto raw = [&](const std::string& body) {
    client.send_raw(body);
    const auto reply = client.receive(5s);
    REQUIRE(reply.has_value());
    return *reply;
  };
  json reply = raw("{\"cmd\": \"echo\", ");
  CHECK(error_code(reply) == "bad_json");
  CHECK(reply["id"].is_null());
  CHECK(error_code(raw("[1, 2]")) == "bad_request");
  CHECK(error_code(raw(R"({"id": 3})")) == "bad_request");
  reply = raw(R"({"id": 4, "cmd": "echo", "args": [1]})");
  CHECK(error_code(reply) == "bad_request");
  CHECK(reply["id"] == 4);
  CHECK(error_code(raw(std::string(2000, ' ') + "{}")) == "bad_request");  // > max_request_bytes

  reply = client.call("no.such.command", json::object());
  CHECK(error_code(reply) == "unknown_command");
  CHECK_THAT(reply["error"]["message"].get<std::string>(), Catch::Contains("echo"));
  reply = client.call("add", {{"a", "two"}});
  CHECK(error_code(reply) == "bad_request");
  CHECK_THAT(reply["error"]["message"].get<std::string>(),
             Catch::Contains("'a' must be an integer"));
  reply = client.call("add", {{"a", 1000}});
  CHECK_THAT(reply["error"]["message"].get<std::string>(), Catch::Contains("-100..100"));
  CHECK(error_code(client.call("add", json::object())) == "bad_request");
  reply = client.call("refuse", json::object());
  CHECK(error_code(reply) == "unavailable");
  CHECK(reply["error"]["message"] == "not today");
  reply = client.call("crash", json::object());
  CHECK(error_code(reply) == "failed");
  CHECK(reply["error"]["message"] == "the disk is on fire");

  // Still serving, and every error was counted by code.
  CHECK(client.call("add", {{"a", 1}, {"b", 1}})["result"]["sum"] == 2);
  const json counters = server.counters_json();
  CHECK(counters["errors"]["bad_json"] == 1);
  CHECK(counters["errors"]["bad_request"] == 7);
  CHECK(counters["errors"]["unknown_command"] == 1);
}

TEST_CASE("a REQ client works for commands that answer once", "[control]") {
  PipelineTasks tasks(8);
  PipelineThread pipeline(tasks);
  ControlServer server(options(), test_registry(), tasks);
  zmq::context_t context;
  zmq::socket_t req(context, zmq::socket_type::req);
  req.set(zmq::sockopt::rcvtimeo, 5000);
  req.connect(server.bound_endpoint());
  req.send(zmq::str_buffer(R"({"id": 1, "cmd": "add", "args": {"a": 20, "b": 22}})"));
  zmq::message_t reply;
  REQUIRE(req.recv(reply));
  CHECK(json::parse(reply.to_string())["result"]["sum"] == 42);
}

TEST_CASE("pipeline-thread commands run there and a full queue answers busy", "[control]") {
  PipelineTasks tasks(2);
  PipelineThread pipeline(tasks, /*start=*/false);  // not running yet: the queue fills
  ControlServer server(options(), test_registry(), tasks);
  ControlClient client(server.bound_endpoint(), 5s);

  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(client.send("where", json::object()));
  // The third does not fit: refused at once.
  CHECK(error_code(next_of(client, ids[2], "error")) == "busy");
  CHECK(tasks.refused() == 1);
  pipeline.start();
  for (int i = 0; i < 2; ++i) {
    const json result = next_of(client, ids[i], "result");
    CHECK(result["result"]["thread"] == thread_name(pipeline.id()));
  }
  pipeline.stop();  // closes the queue: later requests are told the daemon is stopping
  CHECK(error_code(client.call("where", json::object())) == "shutting_down");
}

TEST_CASE("a job answers accepted then reports progress and ends with its result", "[control]") {
  PipelineTasks tasks(8);
  PipelineThread pipeline(tasks);
  ControlServer server(options(), test_registry(), tasks);
  ControlClient client(server.bound_endpoint(), 5s);

  std::vector<json> messages;
  const json final =
      client.call("count", {{"n", 5}}, [&](const json& m) { messages.push_back(m); });
  REQUIRE(messages.size() == 6);
  CHECK(messages[0]["type"] == "accepted");
  const auto job = messages[0]["job"].get<std::uint64_t>();
  for (int i = 1; i <= 5; ++i) {
    CHECK(messages[i]["type"] == "progress");
    CHECK(messages[i]["job"] == job);
    CHECK(messages[i]["progress"]["done"] == i);
  }
  CHECK(final["type"] == "result");
  CHECK(final["job"] == job);
  CHECK(final["result"]["counted"] == 5);
  CHECK(final["result"]["thread"] == thread_name(pipeline.id()));
  // Job ids are not reused.
  const json again = client.call("count", {{"n", 0}});
  CHECK(again["job"].get<std::uint64_t>() > job);
  // A bad argument is the job's final error.
  CHECK(error_code(client.call("count", {{"n", -1}})) == "bad_request");
}

TEST_CASE("cancel stops a running job and unknown or finished jobs are clear errors",
          "[control]") {
  PipelineTasks tasks(8);
  PipelineThread pipeline(tasks);
  ControlServer server(options(/*max_jobs=*/2), test_registry(), tasks);
  ControlClient client(server.bound_endpoint(), 5s);
  ControlClient other(server.bound_endpoint(), 5s);  // cancel may come from anyone

  const std::uint64_t request = client.send("wait", json::object());
  const auto job = next_of(client, request, "accepted")["job"].get<std::uint64_t>();
  const json listed = other.call("jobs", json::object());
  REQUIRE(listed["result"]["jobs"].size() == 1);
  CHECK(listed["result"]["jobs"][0]["job"] == job);
  CHECK(listed["result"]["jobs"][0]["command"] == "wait");

  // At most max_jobs at once.
  const std::uint64_t second = client.send("wait", json::object());
  const auto second_job = next_of(client, second, "accepted")["job"].get<std::uint64_t>();
  CHECK(error_code(other.call("wait", json::object())) == "busy");

  const json cancelled = other.call("cancel", {{"job", job}});
  CHECK(cancelled["type"] == "result");
  CHECK(cancelled["result"]["cancelling"] == true);
  const json final = next_of(client, request, "error");
  CHECK(final["error"]["code"] == "cancelled");
  CHECK(final["job"] == job);

  json unknown = other.call("cancel", {{"job", 999999}});
  CHECK(error_code(unknown) == "unknown_job");
  CHECK_THAT(unknown["error"]["message"].get<std::string>(), Catch::Contains("no running job 999999"));
  // The finished job cannot be cancelled again (it is marked done just after
  // its final message leaves, so ask until it is).
  bool finished_is_unknown = false;
  for (int i = 0; i < 100 && !finished_is_unknown; ++i) {
    finished_is_unknown = other.call("cancel", {{"job", job}})["type"] == "error";
    if (!finished_is_unknown) std::this_thread::sleep_for(10ms);
  }
  CHECK(finished_is_unknown);
  CHECK(error_code(other.call("cancel", json::object())) == "bad_request");

  // Stopping the server cancels the job still running and sends its answer.
  server.stop();
  CHECK(next_of(client, second, "error")["error"]["code"] == "cancelled");
  (void)second_job;
}

}  // namespace
TEST_CASE("an ipc endpoint: stale socket files replaced, live ones and other files refused",
          "[control]") {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("gw_control_ipc_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "control.sock").string();
  const std::string endpoint = "ipc://" + path;
  CHECK(ipc_socket_path(endpoint) == path);
  CHECK(ipc_socket_path("tcp://127.0.0.1:7711").empty());
  CHECK(ipc_socket_path("ipc://@abstract").empty());

  PipelineTasks tasks(8);
  PipelineThread pipeline(tasks);
  ControlOptions o = options();
  o.endpoint = endpoint;
  {
    ControlServer first(o, test_registry(), tasks);
    ControlClient client(first.bound_endpoint(), 5s);
    CHECK(client.call("add", {{"a", 1}, {"b", 2}})["result"]["sum"] == 3);
    // A second server must not take over the socket of one that runs.
    CHECK_THROWS_WITH(ControlServer(o, test_registry(), tasks),
                      Catch::Contains("in use") && Catch::Contains(path));
    CHECK(client.call("add", {{"a", 1}, {"b", 3}})["result"]["sum"] == 4);

    const SocketAccess access = restrict_ipc_socket(path, 0660, "gw-no-such-group");
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0660);
    CHECK(access.done.find("mode 0660") != std::string::npos);
    CHECK(access.done.find("no group 'gw-no-such-group'") != std::string::npos);
    CHECK(access.warning.empty());
  }
  // Stopped: the file is gone.
  CHECK_FALSE(fs::exists(path));

  // What a crashed run leaves: a socket file nobody listens on.
  {
    zmq::context_t context;
    zmq::socket_t crashed(context, zmq::socket_type::router);
    crashed.bind(endpoint);
    crashed.close();
  }
  REQUIRE(fs::is_socket(path));
  {
    ControlServer after_crash(o, test_registry(), tasks);
    ControlClient client(after_crash.bound_endpoint(), 5s);
    CHECK(client.call("add", {{"a", 2}, {"b", 2}})["result"]["sum"] == 4);
  }

  // Anything else at the path is never deleted.
  std::ofstream(path) << "not a socket";
  CHECK_THROWS_WITH(ControlServer(o, test_registry(), tasks),
                    Catch::Contains("not a unix socket"));
  CHECK(fs::is_regular_file(path));
  fs::remove_all(dir);
}

}  // namespace gw::daemon

namespace gw::daemon {
namespace {

// Waits for one in-process reply; null when none comes within 10 s. No
// Catch2 assertion inside: the callers below run on threads of their own.
json call_and_wait(ControlServer& server, json request) {
  auto promise = std::make_shared<std::promise<json>>();
  auto reply = promise->get_future();
  server.call(std::move(request), [promise](const json& message) { promise->set_value(message); });
  if (reply.wait_for(10s) != std::future_status::ready) return json();
  return reply.get();
}

TEST_CASE("in-process requests get the same answers as a client's", "[control]") {
  PipelineTasks tasks(16);
  PipelineThread pipeline(tasks);
  ControlServer server(options(), test_registry(), tasks);

  json r = call_and_wait(server, {{"id", 5}, {"cmd", "add"}, {"args", {{"a", 2}, {"b", 3}}}});
  CHECK(r["ok"] == true);
  CHECK(r["id"] == 5);
  CHECK(r["result"]["sum"] == 5);
  // Pipeline-thread commands run there.
  r = call_and_wait(server, {{"cmd", "where"}});
  CHECK(r["result"]["thread"] == thread_name(pipeline.id()));
  // The same argument checks and error codes.
  r = call_and_wait(server, {{"cmd", "add"}, {"args", {{"a", 1000}}}});
  CHECK(r["error"]["code"] == "bad_request");
  r = call_and_wait(server, {{"cmd", "nothing"}});
  CHECK(r["error"]["code"] == "unknown_command");
  r = call_and_wait(server, json::array());
  CHECK(r["error"]["code"] == "bad_request");
  // Jobs need a socket: their progress has nowhere to go in-process.
  r = call_and_wait(server, {{"cmd", "count"}, {"args", {{"n", 2}}}});
  CHECK(r["error"]["code"] == "bad_request");
  CHECK(server.counters_json()["requests"] == 6);

  // Many callers at once, each answered exactly once.
  std::atomic<int> answered{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const json answer = call_and_wait(server, {{"cmd", "add"}, {"args", {{"a", t}, {"b", i}}}});
        if (answer.is_object() && answer["result"]["sum"] == t + i) ++answered;
      }
    });
  for (auto& c : callers) c.join();
  CHECK(answered == 200);

  // Stopped: answered at once, on the caller's thread.
  server.stop();
  bool called = false;
  server.call({{"cmd", "echo"}}, [&](const json& message) {
    called = true;
    CHECK(message["error"]["code"] == "shutting_down");
  });
  CHECK(called);
}

}  // namespace
}  // namespace gw::daemon
