// The daemon's control interface: a ZeroMQ ROUTER socket that answers JSON
// requests (the protocol, with every message shape and error code, is in
// docs/interfaces.md "Control interface").
//
// Commands live in a ControlRegistry (name -> handler). Each says where it
// runs, which is how a handler gets consistent data:
//   * RunsOn::kControlThread  on the server's own thread, between messages:
//     for handlers that touch only thread-safe or their own state (the
//     config, atomics, their own SQLite connection). Keep them short: the
//     server answers nobody else meanwhile.
//   * RunsOn::kPipelineThread posted to PipelineTasks, a bounded queue the
//     pipeline thread runs between ticks: for handlers that read or change
//     pipeline-owned state (the engine, the hash tables). They see that state
//     between two ticks, never in the middle of one. A full queue answers
//     "busy" at once (drop newest, counted); nothing waits unboundedly.
//   * a job (add_job): long-running; runs on its own thread, answers
//     "accepted" with a job id at once, may send progress messages, and ends
//     with one result or error. A later `cancel` request with the job id
//     sets its cancel flag; the handler polls JobContext::cancelled() (or
//     throw_if_cancelled()) between steps and the job then ends with error
//     "cancelled". A job reaches pipeline state in steps through
//     JobContext::on_pipeline(), so the pipeline interleaves the steps with
//     its ticks. At most ControlOptions::max_jobs run at once; more are
//     refused with "busy".
//     A job request with "detach": true is answered with "accepted" only
//     (one reply: REQ/REP clients can use it); the client then polls
//     `job.status` (state, last progress) and fetches `job.result`. The
//     outcome of the last ControlOptions::kept_outcomes finished jobs is kept
//     for that.
// Built in: `cancel` (args {job}), `commands` (the registry with help),
// `jobs` (running jobs), `job.status` and `job.result` (args {job}).
//
// Threads: ControlServer's constructor binds and starts its thread; stop()
// (and the destructor) cancel running jobs, wait for them, send their final
// replies and join. PipelineTasks: post() from any thread, run_pending() from
// the pipeline thread only. Errors: setup failures (bind) throw gw::Error;
// everything a request does wrong is an error reply, never an exception out
// of the server.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/bounded_queue.h"
#include "common/error.h"

namespace gw::daemon {

// Error codes of error replies (docs/interfaces.md lists what each means).
namespace control_error {
inline constexpr const char* kBadJson = "bad_json";
inline constexpr const char* kBadRequest = "bad_request";
inline constexpr const char* kUnknownCommand = "unknown_command";
inline constexpr const char* kUnknownJob = "unknown_job";
inline constexpr const char* kBusy = "busy";
inline constexpr const char* kCancelled = "cancelled";
inline constexpr const char* kNotFinished = "not_finished";
inline constexpr const char* kUnavailable = "unavailable";
inline constexpr const char* kShuttingDown = "shutting_down";
inline constexpr const char* kFailed = "failed";
// Marks (alert.mark, alert.unmark).
inline constexpr const char* kUnknownAlert = "unknown_alert";
inline constexpr const char* kNoWindow = "no_window";
inline constexpr const char* kUnknownMark = "unknown_mark";
inline constexpr const char* kAlreadyWithdrawn = "already_withdrawn";
// The wearer registry (wearer.add, wearer.set, wearer.remove).
inline constexpr const char* kDuplicateWearer = "duplicate_wearer";
inline constexpr const char* kUnknownWearer = "unknown_wearer";
// The alert lifecycle (alert.ack, alert.resolve).
inline constexpr const char* kAlreadyAcknowledged = "already_acknowledged";
inline constexpr const char* kAlreadyResolved = "already_resolved";
}  // namespace control_error

// Thrown by a handler to answer with this error code and message. Any other
// exception becomes "failed" (gw::Error, with its message) or "bad_request"
// (a JSON type error while reading the arguments).
class ControlError : public gw::Error {
 public:
  ControlError(std::string code, const std::string& message)
      : gw::Error(message), code_(std::move(code)) {}
  const std::string& code() const { return code_; }

 private:
  std::string code_;
};

// Reading handler arguments: each throws ControlError(bad_request) naming the
// argument when it is missing (required forms), of the wrong type or out of
// range.
std::int64_t int_arg(const nlohmann::json& args, const char* name, std::int64_t min,
                     std::int64_t max);
std::int64_t int_arg(const nlohmann::json& args, const char* name, std::int64_t min,
                     std::int64_t max, std::int64_t fallback);
double number_arg(const nlohmann::json& args, const char* name);
double number_arg(const nlohmann::json& args, const char* name, double fallback);
std::string string_arg(const nlohmann::json& args, const char* name);
std::optional<std::string> optional_string_arg(const nlohmann::json& args, const char* name);

// Work for the pipeline thread, bounded (overflow: refuse the newest).
class PipelineTasks {
 public:
  explicit PipelineTasks(std::size_t capacity);
  // Queues `task`; false when the queue is full (counted) or closed.
  bool post(std::function<void()> task);
  // Pipeline thread: runs every task queued now; returns how many.
  std::size_t run_pending();
  // No more posts; the owner calls run_pending() once more afterwards so
  // that nothing queued is left unanswered.
  void close();
  bool closed() const { return closed_.load(); }
  std::uint64_t refused() const { return queue_.dropped(); }
  std::size_t depth() const { return queue_.size(); }

 private:
  BoundedQueue<std::function<void()>> queue_;
  std::atomic<bool> closed_{false};
};

class JobContext {
 public:
  virtual ~JobContext() = default;
  virtual std::uint64_t id() const = 0;
  virtual bool cancelled() const = 0;
  // Throws ControlError(cancelled) once a cancel arrived.
  void throw_if_cancelled() const;
  // Sends {"type": "progress", "job", "progress": progress} to the client.
  virtual void progress(nlohmann::json progress) = 0;
  // Runs `step` on the pipeline thread and returns its result (or rethrows
  // its exception). While the queue is full it retries; it gives up with
  // ControlError(cancelled) when the job is cancelled while waiting (the
  // step may still run later; it must own what it touches, or touch only
  // objects that outlive the pipeline thread) and ControlError(shutting_down)
  // when the pipeline stops.
  virtual nlohmann::json on_pipeline(std::function<nlohmann::json()> step) = 0;
};

enum class RunsOn { kControlThread, kPipelineThread };

using Handler = std::function<nlohmann::json(const nlohmann::json& args)>;
using JobHandler = std::function<nlohmann::json(const nlohmann::json& args, JobContext& job)>;

struct ControlCommand {
  std::string name;
  std::string help;  // one line: what it does and its arguments
  bool is_job = false;
  RunsOn runs_on = RunsOn::kControlThread;  // when !is_job
  Handler handler;
  JobHandler job;
};

class ControlRegistry {
 public:
  // Throw gw::Error for an empty or already registered name.
  void add(const std::string& name, const std::string& help, RunsOn runs_on, Handler handler);
  void add_job(const std::string& name, const std::string& help, JobHandler handler);
  const ControlCommand* find(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  const std::map<std::string, ControlCommand>& commands() const { return commands_; }

 private:
  void insert(ControlCommand command);
  std::map<std::string, ControlCommand> commands_;
};

struct ControlOptions {
  // tcp://HOST:PORT or ipc://PATH. An ipc path where another process listens,
  // or that is no socket, is refused; a stale socket file is replaced
  // (daemon/ipc_socket.h).
  std::string endpoint = "tcp://127.0.0.1:7711";
  int max_jobs = 4;
  std::size_t kept_outcomes = 64;  // finished jobs job.status/job.result still know
  std::size_t max_request_bytes = 65536;
  // Messages queued per client before ZeroMQ drops (counted) instead of
  // growing memory for a client that stopped reading.
  int send_hwm = 1000;
  // ZeroMQ CURVE (sinks/curve.h), as on the alert publisher: the server's
  // key file and the directory of authorized client .pub files; both empty =
  // plain TCP. A client whose key is not authorized gets no answer at all
  // (its handshake is refused, counted as curve_refused).
  std::string curve_secret_key;
  std::string curve_authorized_keys;
};

class ControlServer {
 public:
  // Adds the built-in commands to `registry` (gw::Error if it already holds
  // one of their names), binds `options.endpoint` (gw::Error when it cannot)
  // and starts serving. `pipeline` must outlive the server.
  ControlServer(const ControlOptions& options, ControlRegistry registry, PipelineTasks& pipeline);
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  void stop();
  std::string bound_endpoint() const;

  // An in-process request (the web console's): the same commands, argument
  // rules, queues and replies as a request over the socket, without one.
  // `reply` gets the one final message (result or error, as a client would
  // read it), on the server's thread: it must be quick and must not wait on
  // the server. Jobs are not offered in-process (answered bad_request).
  // Thread-safe; after stop() the answer is shutting_down, on the caller's
  // thread. The request must be an object like a client's: {id?, cmd, args?}.
  using ReplyFn = std::function<void(const nlohmann::json& message)>;
  void call(nlohmann::json request, ReplyFn reply);
  // requests, errors by code, jobs started/finished/cancelled/running,
  // messages dropped at the high-water mark, pipeline queue depth/refusals,
  // CURVE handshakes admitted/refused (when CURVE is on).
  nlohmann::json counters_json() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gw::daemon
