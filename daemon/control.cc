#include "daemon/control.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <deque>
#include <future>
#include <iterator>
#include <limits>
#include <mutex>
#include <thread>
#include <utility>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "daemon/ipc_socket.h"
#include "sinks/curve.h"

namespace gw::daemon {

using nlohmann::json;
namespace err = control_error;

namespace {

ControlError bad_arg(const char* name, const std::string& what) {
  return ControlError(err::kBadRequest, std::string("argument '") + name + "' " + what);
}

const json* find_arg(const json& args, const char* name) {
  const auto it = args.find(name);
  return it == args.end() || it->is_null() ? nullptr : &*it;
}

std::int64_t to_int(const json& value, const char* name, std::int64_t min, std::int64_t max) {
  if (!value.is_number_integer())
    throw bad_arg(name, "must be an integer, got " + std::string(value.type_name()));
  if (value.is_number_unsigned() &&
      value.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    throw bad_arg(name, "is out of range");
  const std::int64_t v = value.get<std::int64_t>();
  if (v < min || v > max)
    throw bad_arg(name, "must be in " + std::to_string(min) + ".." + std::to_string(max) +
                            ", got " + std::to_string(v));
  return v;
}

double to_number(const json& value, const char* name) {
  if (!value.is_number())
    throw bad_arg(name, "must be a number, got " + std::string(value.type_name()));
  return value.get<double>();
}

}  // namespace

std::int64_t int_arg(const json& args, const char* name, std::int64_t min, std::int64_t max) {
  const json* value = find_arg(args, name);
  if (!value) throw bad_arg(name, "is required");
  return to_int(*value, name, min, max);
}

std::int64_t int_arg(const json& args, const char* name, std::int64_t min, std::int64_t max,
                     std::int64_t fallback) {
  const json* value = find_arg(args, name);
  return value ? to_int(*value, name, min, max) : fallback;
}

double number_arg(const json& args, const char* name) {
  const json* value = find_arg(args, name);
  if (!value) throw bad_arg(name, "is required");
  return to_number(*value, name);
}

double number_arg(const json& args, const char* name, double fallback) {
  const json* value = find_arg(args, name);
  return value ? to_number(*value, name) : fallback;
}

std::optional<std::string> optional_string_arg(const json& args, const char* name) {
  const json* value = find_arg(args, name);
  if (!value) return std::nullopt;
  if (!value->is_string())
    throw bad_arg(name, "must be a string, got " + std::string(value->type_name()));
  return value->get<std::string>();
}

std::string string_arg(const json& args, const char* name) {
  std::optional<std::string> value = optional_string_arg(args, name);
  if (!value) throw bad_arg(name, "is required");
  return *value;
}

// ---------------------------------------------------------------------------

PipelineTasks::PipelineTasks(std::size_t capacity)
    : queue_(capacity, OverflowPolicy::kDropNewest) {}

bool PipelineTasks::post(std::function<void()> task) {
  if (closed_.load()) return false;
  return queue_.push(std::move(task));  // false when full (counted) or closed
}

std::size_t PipelineTasks::run_pending() {
  std::vector<std::function<void()>> tasks;
  queue_.drain(tasks);
  for (auto& task : tasks) task();
  return tasks.size();
}

void PipelineTasks::close() {
  closed_.store(true);
  queue_.close();
}

void JobContext::throw_if_cancelled() const {
  if (cancelled())
    throw ControlError(err::kCancelled, "job " + std::to_string(id()) + " was cancelled");
}

// ---------------------------------------------------------------------------

void ControlRegistry::insert(ControlCommand command) {
  if (command.name.empty()) throw Error("control: a command needs a name");
  const std::string name = command.name;
  if (!commands_.emplace(name, std::move(command)).second)
    throw Error("control: command '" + name + "' is registered twice");
}

void ControlRegistry::add(const std::string& name, const std::string& help, RunsOn runs_on,
                          Handler handler) {
  insert({name, help, /*is_job=*/false, runs_on, std::move(handler), {}});
}

void ControlRegistry::add_job(const std::string& name, const std::string& help,
                              JobHandler handler) {
  insert({name, help, /*is_job=*/true, RunsOn::kControlThread, {}, std::move(handler)});
}

const ControlCommand* ControlRegistry::find(const std::string& name) const {
  const auto it = commands_.find(name);
  return it == commands_.end() ? nullptr : &it->second;
}

std::vector<std::string> ControlRegistry::names() const {
  std::vector<std::string> names;
  for (const auto& entry : commands_) names.push_back(entry.first);
  return names;
}

// ---------------------------------------------------------------------------

namespace {

using Envelope = std::vector<std::string>;  // routing frames, echoed on every message
using Clock = std::chrono::steady_clock;

// The envelope of an in-process request: one frame, this prefix and a
// number. ROUTER's own routing ids are five bytes starting with a zero byte,
// and clients may not choose ids starting with one, so none can look like it.
const std::string kInProcessPrefix("\0in-process:", 12);

bool in_process(const Envelope& envelope) {
  return envelope.size() == 1 && envelope.front().rfind(kInProcessPrefix, 0) == 0;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

}  // namespace

struct ControlServer::Impl {
  struct Job {
    std::uint64_t id = 0;
    std::string command;
    Clock::time_point started;
    std::atomic<bool> cancel{false};
    std::atomic<bool> done{false};
    std::string peer;  // the client's routing id: its job stops when it is gone
    bool detached = false;  // the client polls (job.status, job.result): nothing is sent to it
    std::thread thread;
    // Guarded by mu: the last progress (null before the first) and, once
    // done, the final message and when it was made.
    std::mutex mu;
    json last_progress;
    json final;
    Clock::time_point finished;
  };

  class Context final : public JobContext {
   public:
    Context(Impl& server, std::shared_ptr<Job> job, Envelope envelope, json request_id)
        : server_(server), job_(std::move(job)), envelope_(std::move(envelope)),
          request_id_(std::move(request_id)) {}
    std::uint64_t id() const override { return job_->id; }
    bool cancelled() const override { return job_->cancel.load(); }
    void progress(json progress) override {
      {
        std::lock_guard<std::mutex> lock(job_->mu);
        job_->last_progress = progress;
      }
      if (job_->detached) return;
      server_.send(envelope_, {{"id", request_id_},
                               {"type", "progress"},
                               {"job", job_->id},
                               {"progress", std::move(progress)}});
    }
    json on_pipeline(std::function<json()> step) override {
      auto promise = std::make_shared<std::promise<json>>();
      std::future<json> result = promise->get_future();
      std::function<void()> task = [promise, step = std::move(step)] {
        try {
          promise->set_value(step());
        } catch (...) {
          promise->set_exception(std::current_exception());
        }
      };
      for (;;) {
        throw_if_cancelled();
        if (server_.pipeline.closed())
          throw ControlError(err::kShuttingDown, "the daemon is stopping");
        if (server_.pipeline.post(task)) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));  // queue full: retry
      }
      while (result.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready)
        throw_if_cancelled();
      return result.get();
    }

   private:
    Impl& server_;
    std::shared_ptr<Job> job_;
    Envelope envelope_;
    json request_id_;
  };

  Impl(const ControlOptions& o, ControlRegistry r, PipelineTasks& p)
      : options(o), registry(std::move(r)), pipeline(p), router(context, zmq::socket_type::router) {}

  // Any thread: queues a message for the server thread to send.
  void send(const Envelope& envelope, const json& message) {
    {
      std::lock_guard<std::mutex> lock(out_mu);
      outbox.emplace_back(envelope, message.dump());
    }
    wake();
  }
  void wake() {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd, &one, sizeof one);
  }
  // An error message (counted by code).
  json error_message(const json& id, const std::string& code, const std::string& text,
                     std::optional<std::uint64_t> job = std::nullopt) {
    {
      std::lock_guard<std::mutex> lock(counters_mu);
      ++errors[code];
    }
    json message = {{"id", id},
                    {"type", "error"},
                    {"ok", false},
                    {"error", {{"code", code}, {"message", text}}}};
    if (job) message["job"] = *job;
    return message;
  }
  void send_error(const Envelope& envelope, const json& id, const std::string& code,
                  const std::string& text, std::optional<std::uint64_t> job = std::nullopt) {
    send(envelope, error_message(id, code, text, job));
  }
  // Runs a handler and turns its outcome into one final message.
  template <typename Fn>
  json outcome(const json& id, std::optional<std::uint64_t> job, Fn&& run) {
    try {
      json message = {{"id", id}, {"type", "result"}, {"ok", true}, {"result", run()}};
      if (job) message["job"] = *job;
      return message;
    } catch (const ControlError& e) {
      return error_message(id, e.code(), e.what(), job);
    } catch (const json::exception& e) {
      return error_message(id, err::kBadRequest, std::string("bad arguments: ") + e.what(), job);
    } catch (const std::exception& e) {
      return error_message(id, err::kFailed, e.what(), job);
    }
  }
  template <typename Fn>
  void answer(const Envelope& envelope, const json& id, std::optional<std::uint64_t> job, Fn&& run) {
    send(envelope, outcome(id, job, std::forward<Fn>(run)));
  }

  void add_builtins();
  void serve();
  void handle(std::vector<zmq::message_t>& frames);
  void handle_request(const Envelope& envelope, const std::string& body);
  void handle_in_process();
  void start_job(const Envelope& envelope, const json& id, const ControlCommand& command,
                 json args, bool detach);
  // A running or kept job (jobs_mu held), or ControlError(unknown_job).
  std::shared_ptr<Job> find_job(std::uint64_t id, bool running_only);
  json job_status(Job& job);
  void flush_outbox();
  void cancel_jobs_of(const std::string& peer);
  void reap_jobs();
  std::size_t running_jobs();

  ControlOptions options;
  ControlRegistry registry;
  PipelineTasks& pipeline;
  zmq::context_t context;
  // The ZAP handler when CURVE is on; between `context` and `router` so that
  // it is destroyed after the socket and before the context.
  std::unique_ptr<pipeline::CurveAuthenticator> authenticator;
  zmq::socket_t router;
  std::string bound;
  std::string ipc_path;  // the socket file of an ipc:// endpoint, removed at stop()
  int wake_fd = -1;
  std::thread thread;
  std::atomic<bool> stopping{false};
  std::mutex stop_mu;
  bool stopped = false;

  std::mutex out_mu;
  std::deque<std::pair<Envelope, std::string>> outbox;

  // In-process requests waiting for the server thread, and the reply
  // functions of those not answered yet (by their envelope's frame).
  std::mutex in_process_mu;
  std::deque<std::pair<Envelope, std::string>> in_process_requests;
  std::map<std::string, ReplyFn> in_process_replies;
  std::uint64_t next_in_process = 1;

  std::mutex jobs_mu;
  std::map<std::uint64_t, std::shared_ptr<Job>> jobs;
  std::map<std::uint64_t, std::shared_ptr<Job>> kept;  // finished, newest options.kept_outcomes
  std::uint64_t next_job = 1;

  mutable std::mutex counters_mu;
  std::map<std::string, std::uint64_t> errors;
  std::atomic<std::uint64_t> requests{0};
  std::atomic<std::uint64_t> dropped_messages{0};
  std::atomic<std::uint64_t> jobs_started{0};
  std::atomic<std::uint64_t> jobs_finished{0};
  std::atomic<std::uint64_t> jobs_client_gone{0};  // cancelled because their client went away
};

namespace {
// The `job` argument of cancel, job.status and job.result.
std::uint64_t job_arg(const json& args) {
  return static_cast<std::uint64_t>(
      int_arg(args, "job", 1, std::numeric_limits<std::int64_t>::max()));
}
}  // namespace

void ControlServer::Impl::add_builtins() {
  registry.add("cancel", "cancel a running job: {job}", RunsOn::kControlThread,
               [this](const json& args) -> json {
                 const std::uint64_t job_id = job_arg(args);
                 std::lock_guard<std::mutex> lock(jobs_mu);
                 find_job(job_id, true)->cancel.store(true);
                 return {{"job", job_id}, {"cancelling", true}};
               });
  registry.add("job.status",
               "a job's state (running, cancelling, done, failed, cancelled) and last progress: "
               "{job}",
               RunsOn::kControlThread, [this](const json& args) -> json {
                 const std::uint64_t job_id = job_arg(args);
                 std::lock_guard<std::mutex> lock(jobs_mu);
                 return job_status(*find_job(job_id, false));
               });
  registry.add("job.result",
               "a finished job's result (or its error, e.g. cancelled); not_finished while it "
               "runs: {job}",
               RunsOn::kControlThread, [this](const json& args) -> json {
                 const std::uint64_t job_id = job_arg(args);
                 json final;
                 {
                   std::lock_guard<std::mutex> lock(jobs_mu);
                   const std::shared_ptr<Job> job = find_job(job_id, false);
                   std::lock_guard<std::mutex> job_lock(job->mu);
                   final = job->final;
                 }
                 if (final.is_null())
                   throw ControlError(err::kNotFinished,
                                      "job " + std::to_string(job_id) + " is still running");
                 if (final.value("type", "") == "result") return final["result"];
                 throw ControlError(final["error"].value("code", err::kFailed),
                                    final["error"].value("message", ""));
               });
  registry.add("commands", "list the commands with their help", RunsOn::kControlThread,
               [this](const json&) -> json {
                 json list = json::array();
                 for (const auto& [name, command] : registry.commands())
                   list.push_back({{"name", name},
                                   {"help", command.help},
                                   {"runs_on", command.is_job ? "job"
                                               : command.runs_on == RunsOn::kPipelineThread
                                                   ? "pipeline"
                                                   : "control"}});
                 return {{"commands", list}};
               });
  registry.add("jobs", "list the running jobs", RunsOn::kControlThread, [this](const json&) -> json {
    json list = json::array();
    std::lock_guard<std::mutex> lock(jobs_mu);
    const auto now = Clock::now();
    for (const auto& [id, job] : jobs) {
      if (job->done.load()) continue;
      list.push_back({{"job", id},
                      {"command", job->command},
                      {"running_s", std::chrono::duration<double>(now - job->started).count()},
                      {"cancelling", job->cancel.load()},
                      {"detached", job->detached}});
    }
    return {{"jobs", list}};
  });
}

std::shared_ptr<ControlServer::Impl::Job> ControlServer::Impl::find_job(std::uint64_t id,
                                                                       bool running_only) {
  auto it = jobs.find(id);
  if (it != jobs.end() && !(running_only && it->second->done.load())) return it->second;
  if (!running_only) {
    it = kept.find(id);
    if (it != kept.end()) return it->second;
  }
  throw ControlError(err::kUnknownJob,
                     running_only ? "no running job " + std::to_string(id) +
                                        " (it finished, or never existed)"
                                  : "no job " + std::to_string(id) +
                                        " (never existed, or older than the last " +
                                        std::to_string(options.kept_outcomes) + " finished)");
}

json ControlServer::Impl::job_status(Job& job) {
  std::lock_guard<std::mutex> lock(job.mu);
  const bool done = !job.final.is_null();
  std::string state = job.cancel.load() ? "cancelling" : "running";
  if (done && job.final.value("type", "") == "result") state = "done";
  else if (done) state = job.final["error"].value("code", "") == err::kCancelled ? "cancelled" : "failed";
  json status = {
      {"job", job.id},
      {"command", job.command},
      {"state", state},
      {"detached", job.detached},
      {"running_s",
       std::chrono::duration<double>((done ? job.finished : Clock::now()) - job.started).count()},
      {"progress", job.last_progress}};
  if (done && state != "done") status["error"] = job.final["error"];
  return status;
}

std::size_t ControlServer::Impl::running_jobs() {
  std::lock_guard<std::mutex> lock(jobs_mu);
  std::size_t n = 0;
  for (const auto& entry : jobs) n += entry.second->done.load() ? 0 : 1;
  return n;
}

void ControlServer::Impl::start_job(const Envelope& envelope, const json& id,
                                    const ControlCommand& command, json args, bool detach) {
  if (running_jobs() >= static_cast<std::size_t>(options.max_jobs)) {
    send_error(envelope, id, err::kBusy,
               std::to_string(options.max_jobs) + " jobs are running (control.max_jobs); retry later");
    return;
  }
  auto job = std::make_shared<Job>();
  job->command = command.name;
  job->started = Clock::now();
  job->detached = detach;
  // A detached job's client may come and go: it polls.
  job->peer = envelope.empty() || detach ? std::string() : envelope.front();
  std::lock_guard<std::mutex> lock(jobs_mu);
  job->id = next_job++;
  jobs.emplace(job->id, job);
  ++jobs_started;
  json accepted = {{"id", id}, {"type", "accepted"}, {"job", job->id}};
  if (detach) accepted["detached"] = true;
  send(envelope, accepted);
  // The thread only starts its work once it is stored in `job` (the lock is
  // held until then, and reap_jobs() takes it before joining).
  job->thread = std::thread([this, job, envelope, id, &command, args = std::move(args)] {
    Context context(*this, job, envelope, id);
    json final = outcome(id, job->id, [&] { return command.job(args, context); });
    {
      std::lock_guard<std::mutex> job_lock(job->mu);
      job->final = final;
      job->finished = Clock::now();
    }
    if (!job->detached) send(envelope, final);
    ++jobs_finished;
    job->done.store(true);
    wake();
  });
}

void ControlServer::Impl::handle(std::vector<zmq::message_t>& frames) {
  ++requests;
  if (frames.size() < 2) return;  // no routing identity and body: nothing to answer to
  Envelope envelope;
  for (std::size_t i = 0; i + 1 < frames.size(); ++i) envelope.push_back(frames[i].to_string());
  handle_request(envelope, frames.back().to_string());
}

void ControlServer::Impl::handle_in_process() {
  std::deque<std::pair<Envelope, std::string>> requests_now;
  {
    std::lock_guard<std::mutex> lock(in_process_mu);
    requests_now.swap(in_process_requests);
  }
  for (const auto& [envelope, body] : requests_now) {
    ++requests;
    handle_request(envelope, body);
  }
}

void ControlServer::Impl::handle_request(const Envelope& envelope, const std::string& body) {
  const json no_id;
  if (body.size() > options.max_request_bytes) {
    send_error(envelope, no_id, err::kBadRequest,
               "request of " + std::to_string(body.size()) + " bytes exceeds control.max_request_bytes (" +
                   std::to_string(options.max_request_bytes) + ")");
    return;
  }
  json request = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded()) {
    send_error(envelope, no_id, err::kBadJson, "the request is not valid JSON");
    return;
  }
  if (!request.is_object()) {
    send_error(envelope, no_id, err::kBadRequest,
               "a request is a JSON object {\"id\": ..., \"cmd\": NAME, \"args\": {...}}");
    return;
  }
  const json id = request.contains("id") ? request["id"] : json();
  if (!request.contains("cmd") || !request["cmd"].is_string()) {
    send_error(envelope, id, err::kBadRequest, "the request has no \"cmd\" string");
    return;
  }
  json args = request.contains("args") ? request["args"] : json::object();
  if (args.is_null()) args = json::object();
  if (!args.is_object()) {
    send_error(envelope, id, err::kBadRequest, "\"args\" must be a JSON object");
    return;
  }
  const std::string name = request["cmd"].get<std::string>();
  const ControlCommand* command = registry.find(name);
  if (!command) {
    send_error(envelope, id, err::kUnknownCommand,
               "unknown command '" + name + "'; commands: " + join(registry.names()));
    return;
  }
  if (request.contains("detach") && !request["detach"].is_boolean()) {
    send_error(envelope, id, err::kBadRequest, "\"detach\" must be true or false");
    return;
  }
  const bool detach = request.value("detach", false);
  if (detach && !command->is_job) {
    send_error(envelope, id, err::kBadRequest,
               "'" + name + "' answers at once; only jobs can be detached");
    return;
  }
  if (command->is_job && in_process(envelope)) {
    send_error(envelope, id, err::kBadRequest, "'" + name + "' is a job: ask over the socket");
  } else if (command->is_job) {
    start_job(envelope, id, *command, std::move(args), detach);
  } else if (command->runs_on == RunsOn::kControlThread) {
    answer(envelope, id, std::nullopt, [&] { return command->handler(args); });
  } else {
    auto task = [this, envelope, id, command, args = std::move(args)] {
      answer(envelope, id, std::nullopt, [&] { return command->handler(args); });
    };
    if (!pipeline.post(std::move(task))) {
      if (pipeline.closed())
        send_error(envelope, id, err::kShuttingDown, "the daemon is stopping");
      else
        send_error(envelope, id, err::kBusy,
                   "the pipeline's request queue is full (control.queue_capacity); retry later");
    }
  }
}

void ControlServer::Impl::flush_outbox() {
  std::deque<std::pair<Envelope, std::string>> messages;
  {
    std::lock_guard<std::mutex> lock(out_mu);
    messages.swap(outbox);
  }
  for (const auto& [envelope, body] : messages) {
    if (in_process(envelope)) {
      ReplyFn reply;
      {
        std::lock_guard<std::mutex> lock(in_process_mu);
        const auto it = in_process_replies.find(envelope.front());
        if (it == in_process_replies.end()) continue;
        reply = std::move(it->second);
        in_process_replies.erase(it);
      }
      reply(json::parse(body));
      continue;
    }
    bool sent = true;
    // ROUTER never blocks: at the high-water mark or for a client that is
    // gone the message is dropped; count it. A client that is gone (its
    // connection closed: ROUTER_MANDATORY reports it) needs no more
    // messages, so its running jobs are cancelled.
    try {
      for (const std::string& frame : envelope)
        sent = sent &&
               router.send(zmq::buffer(frame), zmq::send_flags::sndmore | zmq::send_flags::dontwait)
                   .has_value();
      sent = sent && router.send(zmq::buffer(body), zmq::send_flags::dontwait).has_value();
    } catch (const zmq::error_t& e) {
      if (e.num() != EHOSTUNREACH) throw;
      sent = false;
      if (!envelope.empty()) cancel_jobs_of(envelope.front());
    }
    if (!sent) ++dropped_messages;
  }
}

void ControlServer::Impl::cancel_jobs_of(const std::string& peer) {
  std::lock_guard<std::mutex> lock(jobs_mu);
  for (auto& [id, job] : jobs)
    if (job->peer == peer && !job->done.load() && !job->cancel.exchange(true))
      ++jobs_client_gone;
}

void ControlServer::Impl::reap_jobs() {
  std::vector<std::shared_ptr<Job>> finished;
  {
    std::lock_guard<std::mutex> lock(jobs_mu);
    for (auto it = jobs.begin(); it != jobs.end();) {
      if (it->second->done.load()) {
        finished.push_back(it->second);
        it = jobs.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& job : finished)
    if (job->thread.joinable()) job->thread.join();
  if (finished.empty()) return;
  std::lock_guard<std::mutex> lock(jobs_mu);
  for (auto& job : finished) kept.emplace(job->id, std::move(job));
  while (kept.size() > options.kept_outcomes) kept.erase(kept.begin());  // ids grow: oldest first
}

void ControlServer::Impl::serve() {
  zmq::pollitem_t items[2] = {{router.handle(), 0, ZMQ_POLLIN, 0},
                              {nullptr, wake_fd, ZMQ_POLLIN, 0}};
  auto drain_wake = [&] {
    std::uint64_t value;
    [[maybe_unused]] const ssize_t n = ::read(wake_fd, &value, sizeof value);
  };
  while (!stopping.load()) {
    zmq::poll(items, 2, std::chrono::milliseconds(200));
    if (items[1].revents & ZMQ_POLLIN) drain_wake();
    handle_in_process();
    if (items[0].revents & ZMQ_POLLIN) {
      // A bounded number per round, so replies are not starved by a flood.
      for (int i = 0; i < 256; ++i) {
        std::vector<zmq::message_t> frames;
        if (!zmq::recv_multipart(router, std::back_inserter(frames), zmq::recv_flags::dontwait))
          break;
        handle(frames);
      }
    }
    flush_outbox();
    reap_jobs();
  }
  // Stopping: cancel every job, and keep sending until each has answered.
  {
    std::lock_guard<std::mutex> lock(jobs_mu);
    for (auto& entry : jobs) entry.second->cancel.store(true);
  }
  for (;;) {
    flush_outbox();
    reap_jobs();
    {
      std::lock_guard<std::mutex> lock(jobs_mu);
      if (jobs.empty()) break;
    }
    zmq::poll(&items[1], 1, std::chrono::milliseconds(50));
    if (items[1].revents & ZMQ_POLLIN) drain_wake();
  }
  flush_outbox();
}

ControlServer::ControlServer(const ControlOptions& options, ControlRegistry registry,
                             PipelineTasks& pipeline)
    : impl_(std::make_unique<Impl>(options, std::move(registry), pipeline)) {
  Impl& s = *impl_;
  s.add_builtins();
  s.router.set(zmq::sockopt::linger, 200);  // final replies get a moment to leave
  s.router.set(zmq::sockopt::sndhwm, options.send_hwm);
  s.router.set(zmq::sockopt::router_mandatory, true);  // a gone client is an error, not silence
  if (!options.curve_secret_key.empty()) {
    try {
      s.authenticator = pipeline::secure_curve_server(
          s.context, s.router, options.curve_secret_key, options.curve_authorized_keys);
    } catch (const std::exception& e) {
      throw Error(std::string("control: CURVE: ") + e.what());
    }
  }
  // A unix socket: refuse to take over a live daemon's socket (libzmq would
  // unlink it), clear a crashed run's.
  if (const std::string path = ipc_socket_path(options.endpoint); !path.empty()) {
    try {
      claim_ipc_path(path);
    } catch (const std::exception& e) {
      throw Error(std::string("control: cannot bind ") + options.endpoint + ": " + e.what());
    }
    s.ipc_path = path;
  }
  try {
    s.router.bind(options.endpoint);
  } catch (const zmq::error_t& e) {
    std::string hint;
    if (e.num() == ENOENT && !ipc_socket_path(options.endpoint).empty())
      hint = " (the socket's directory must exist: systemd's RuntimeDirectory=gaitwatch "
             "makes /run/gaitwatch; elsewhere set control.endpoint)";
    throw Error("control.endpoint: cannot bind " + options.endpoint + ": " + e.what() + hint);
  }
  s.bound = s.router.get(zmq::sockopt::last_endpoint);
  s.wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s.wake_fd < 0) throw Error("control: eventfd failed");
  s.thread = std::thread([&s] { s.serve(); });
}

ControlServer::~ControlServer() { stop(); }

void ControlServer::stop() {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> lock(s.stop_mu);
  if (s.stopped) return;
  s.stopped = true;
  s.stopping.store(true);
  s.wake();
  if (s.thread.joinable()) s.thread.join();
  // In-process requests the thread did not take: answered here.
  std::deque<std::pair<Envelope, std::string>> left;
  std::map<std::string, ReplyFn> waiting;
  {
    std::lock_guard<std::mutex> lock(s.in_process_mu);
    left.swap(s.in_process_requests);
    waiting.swap(s.in_process_replies);
  }
  for (auto& [frame, reply] : waiting)
    reply(s.error_message(json(), err::kShuttingDown, "the daemon is stopping"));
  s.router.close();
  // libzmq leaves a bound ipc socket's file behind; it is ours (claimed at bind).
  if (!s.ipc_path.empty()) ::unlink(s.ipc_path.c_str());
  std::lock_guard<std::mutex> in_process_lock(s.in_process_mu);
  ::close(s.wake_fd);
  s.wake_fd = -1;
}

void ControlServer::call(json request, ReplyFn reply) {
  Impl& s = *impl_;
  {
    std::lock_guard<std::mutex> lock(s.in_process_mu);
    if (!s.stopping.load()) {
      const std::string frame = kInProcessPrefix + std::to_string(s.next_in_process++);
      s.in_process_replies.emplace(frame, std::move(reply));
      s.in_process_requests.emplace_back(Envelope{frame}, request.dump());
      reply = nullptr;
      s.wake();  // under the lock: stop() closes the descriptor under it
    }
  }
  if (reply) {
    const json id = request.is_object() && request.contains("id") ? request["id"] : json();
    reply(s.error_message(id, err::kShuttingDown, "the daemon is stopping"));
  }
}

std::string ControlServer::bound_endpoint() const { return impl_->bound; }

json ControlServer::counters_json() const {
  const Impl& s = *impl_;
  json errors = json::object();
  {
    std::lock_guard<std::mutex> lock(s.counters_mu);
    for (const auto& [code, count] : s.errors) errors[code] = count;
  }
  const std::uint64_t started = s.jobs_started.load(), finished = s.jobs_finished.load();
  json counters = {{"requests", s.requests.load()},
          {"errors", errors},
          {"jobs_started", started},
          {"jobs_finished", finished},
          {"jobs_running", started - finished},
          {"jobs_cancelled_client_gone", s.jobs_client_gone.load()},
          {"dropped_messages", s.dropped_messages.load()},
          {"pipeline_queue_depth", s.pipeline.depth()},
          {"pipeline_queue_refused", s.pipeline.refused()}};
  if (s.authenticator) {
    counters["curve_admitted"] = s.authenticator->admitted();
    counters["curve_refused"] = s.authenticator->refused();
  }
  return counters;
}

}  // namespace gw::daemon
