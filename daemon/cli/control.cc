// The gaitwatch commands that talk to a running daemon through its control
// interface (docs/interfaces.md "Control interface"):
//   status   the daemon's counters
//   slots    a range question to the time-slot index, printed as periods
//   alerts   stored alerts with seq > N (what a subscriber missed)
//   control  any request, every message printed as a JSON line (scripts)
// A long request (a job) is cancelled with Ctrl-C: the command sends
// `cancel` for its job and waits for the daemon's final answer.
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>

#include "common/error.h"
#include "common/time_text.h"
#include "daemon/cli/cli.h"
#include "daemon/control_client.h"
#include "daemon/ipc_socket.h"

namespace gw::cli {

using nlohmann::json;

void ControlTarget::add_flags(CLI::App& cmd, const std::string& prefix, bool with_config_flag) {
  cmd.add_option("--" + prefix + "endpoint", endpoint,
                 "the daemon's control interface, e.g. ipc:///run/gaitwatch/control.sock or "
                 "tcp://127.0.0.1:7711 (default: control.endpoint of the config)");
  if (with_config_flag)
    cmd.add_option("--config", config,
                   "the daemon's config: control.endpoint and its CURVE server key come from "
                   "it (default " GW_INSTALLED_CONFIG " when it exists)");
  cmd.add_option("--" + prefix + "timeout", timeout_s,
                 "seconds to wait for each message from the daemon")
      ->capture_default_str();
  cmd.add_option("--" + prefix + "server-key", server_key,
                 "the daemon's CURVE public key file (control.curve_secret_key's NAME.pub)");
  cmd.add_option("--" + prefix + "key", key,
                 "this client's CURVE key file (NAME.key from gaitwatch keygen); its .pub must "
                 "be in the daemon's control.curve_authorized_keys directory");
}

namespace {

std::string local_time(std::int64_t unix_s) { return local_time_text(static_cast<double>(unix_s)); }

// --- status ----------------------------------------------------------------

void add_status(CLI::App& app, int& exit_code) {
  auto target = std::make_shared<ControlTarget>();
  auto* cmd = app.add_subcommand("status", "print a running daemon's counters (JSON)");
  target->add_flags(*cmd);
  on_run(*cmd, exit_code, [target] {
    std::cout << control_result(control_request(*target, "status", json::object())).dump(2) << "\n";
    return 0;
  });
}

// --- slots -----------------------------------------------------------------

struct SlotsOptions {
  ControlTarget target;
  std::uint32_t wearer = 0;
  std::string activity, posture, loading, zone;
  std::string since = "-1h";
  std::string until;
  long limit = 0;
  bool json = false;
  bool progress = false;
};

int run_slots(const SlotsOptions& o) {
  const double now = unix_time_now();
  json args = {{"wearer", o.wearer}, {"since", parse_time_text(o.since, now)}};
  if (!o.until.empty()) args["until"] = parse_time_text(o.until, now);
  if (!o.activity.empty()) args["activity"] = o.activity;
  if (!o.posture.empty()) args["posture"] = o.posture;
  if (!o.loading.empty()) args["loading"] = o.loading;
  if (!o.zone.empty()) args["zone"] = o.zone;
  if (o.limit > 0) args["limit"] = o.limit;
  const json result = control_result(control_request(o.target, "slots", args, [&](const json& message) {
    if (o.progress && message.value("type", "") == "progress")
      std::cerr << "slots: " << message["progress"].dump() << "\n";
  }));
  if (o.json) {
    std::cout << result.dump() << "\n";
    return 0;
  }
  // Periods: runs of consecutive seconds with the same status and zone.
  const json& slots = result["slots"];
  std::printf("%-19s  %-19s  %7s  %-8s  %-7s  %-7s  %s\n", "from", "to (excl.)", "seconds",
              "activity", "posture", "loading", "zone");
  std::size_t periods = 0;
  for (std::size_t i = 0; i < slots.size();) {
    std::size_t j = i + 1;
    auto same = [&](const json& a, const json& b) {
      return a["activity"] == b["activity"] && a["posture"] == b["posture"] &&
             a["loading"] == b["loading"] && a["zone"] == b["zone"];
    };
    while (j < slots.size() && slots[j]["second"].get<std::int64_t>() ==
                                   slots[j - 1]["second"].get<std::int64_t>() + 1 &&
           same(slots[j], slots[i]))
      ++j;
    const std::int64_t first = slots[i]["second"].get<std::int64_t>();
    const std::int64_t last = slots[j - 1]["second"].get<std::int64_t>();
    std::printf("%-19s  %-19s  %7lld  %-8s  %-7s  %-7s  %s\n", local_time(first).c_str(),
                local_time(last + 1).c_str(), static_cast<long long>(last + 1 - first),
                slots[i]["activity"].get<std::string>().c_str(),
                slots[i]["posture"].get<std::string>().c_str(),
                slots[i]["loading"].get<std::string>().c_str(),
                slots[i]["zone"].get<std::string>().c_str());
    ++periods;
    i = j;
  }
  const std::int64_t searched_from = result["searched_from"].get<std::int64_t>();
  const std::int64_t searched_to = result["searched_to"].get<std::int64_t>();
  std::printf("%zu seconds in %zu periods (wearer %u; searched %s .. %s)%s\n", slots.size(),
              periods, o.wearer, local_time(searched_from).c_str(),
              local_time(std::max(searched_from, searched_to)).c_str(),
              result["truncated"].get<bool>() ? "; truncated at --limit" : "");
  return 0;
}

void add_slots(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SlotsOptions>();
  auto* cmd = app.add_subcommand(
      "slots", "ask a running daemon when a wearer had a status in a zone (time-slot index)");
  o->target.add_flags(*cmd);
  cmd->add_option("--wearer", o->wearer, "wearer id")->required();
  cmd->add_option("--status,--activity", o->activity, "still | light | walking | vigorous | any");
  cmd->add_option("--posture", o->posture, "unknown | upright | lying | any");
  cmd->add_option("--loading", o->loading, "none | left | right | both | any");
  cmd->add_option("--zone", o->zone, "zone name or id (config zones), none, or any (default)");
  cmd->add_option("--since", o->since,
                  "start: HH:MM[:SS] (the latest such local time), YYYY-MM-DD[ T]HH:MM[:SS], "
                  "unix seconds, now, or -N{s,m,h,d} (default -1h)");
  cmd->add_option("--until", o->until,
                  "end (exclusive), same forms (default: up to the newest second recorded)");
  cmd->add_option("--limit", o->limit, "at most this many seconds (default: the daemon's, 100000)");
  cmd->add_flag("--json", o->json, "print the daemon's result object (every second)");
  cmd->add_flag("--progress", o->progress, "print the daemon's progress messages on stderr");
  on_run(*cmd, exit_code, [o] { return run_slots(*o); });
}

// --- alerts ----------------------------------------------------------------

struct AlertsOptions {
  ControlTarget target;
  std::uint64_t since_seq = 0;
  long wearer = -1;
  std::string pattern;
  long limit = 0;
  bool json = false;
};

int run_alerts(const AlertsOptions& o) {
  std::uint64_t last_seq = 0;
  const std::vector<FetchedAlert> fetched =
      fetch_alerts(o.target, o.since_seq, o.limit, o.wearer, o.pattern, &last_seq);
  if (o.json) {
    for (const FetchedAlert& f : fetched) std::cout << pipeline::json_text(f.body) << "\n";
    return 0;
  }
  std::vector<pipeline::Alert> alerts;
  for (const FetchedAlert& f : fetched) alerts.push_back(f.alert);
  print_hits_table(alerts);
  std::printf("%zu alerts with seq > %llu (the store's last seq is %llu)\n", alerts.size(),
              static_cast<unsigned long long>(o.since_seq),
              static_cast<unsigned long long>(last_seq));
  return 0;
}

void add_alerts(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<AlertsOptions>();
  auto* cmd = app.add_subcommand(
      "alerts", "fetch stored alerts from a running daemon by sequence number (catch up)");
  o->target.add_flags(*cmd);
  cmd->add_option("--since-seq", o->since_seq, "only alerts with seq > N (default 0: all)");
  cmd->add_option("--wearer", o->wearer, "only this wearer");
  cmd->add_option("--pattern", o->pattern, "only this pattern");
  cmd->add_option("--limit", o->limit, "at most this many (default: all)");
  cmd->add_flag("--json", o->json, "one JSON alert per line (as published)");
  on_run(*cmd, exit_code, [o] { return run_alerts(*o); });
}

// --- control ---------------------------------------------------------------

struct RawRequestOptions {
  ControlTarget target;
  std::string cmd;
  std::string args = "{}";
};

int run_control(const RawRequestOptions& o) {
  const json args = json::parse(o.args, nullptr, false);
  if (args.is_discarded() || !args.is_object())
    throw Error("ARGS must be a JSON object, got '" + o.args + "'");
  const json final =
      control_request(o.target, o.cmd, args, [](const json& message) { std::cout << message.dump() << std::endl; });
  std::cout << final.dump() << std::endl;
  return final.value("type", "") == "result" ? 0 : 1;
}

void add_control(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<RawRequestOptions>();
  auto* cmd = app.add_subcommand(
      "control", "send any request to a running daemon; print every message as a JSON line");
  o->target.add_flags(*cmd);
  cmd->add_option("command", o->cmd, "command name (gaitwatch control commands: lists them)")
      ->required();
  cmd->add_option("args", o->args, "its arguments as a JSON object (default {})");
  on_run(*cmd, exit_code, [o] { return run_control(*o); });
}

}  // namespace

ControlTarget ControlTarget::resolved() const {
  if (!endpoint.empty()) return *this;
  ControlTarget out = *this;
  const std::string path = client_config_path(config);
  if (path.empty()) {
    out.endpoint = config::ControlConfig{}.endpoint;
    return out;
  }
  const config::ClientEndpoints endpoints = config::load_endpoints(path);
  if (!endpoints.control.enabled)
    throw Error("the control interface is off in " + path + " (control.enabled: false)");
  out.endpoint = endpoints.control.endpoint;
  if (out.server_key.empty() && !endpoints.control.curve_secret_key.empty()) {
    out.server_key = public_key_file_of(endpoints.control.curve_secret_key);
    if (out.key.empty())
      throw Error("the control interface in " + path +
                  " uses CURVE (control.curve_secret_key): give this client's key file with --key");
  }
  return out;
}

namespace {

// A unix socket that is not there, or that this user may not use, would
// only show as a timeout: say so at once.
void check_ipc_socket(const std::string& endpoint) {
  const std::string path = daemon::ipc_socket_path(endpoint);
  if (path.empty()) return;
  if (::access(path.c_str(), W_OK) == 0) return;
  const int error = errno;
  if (error == ENOENT)
    throw Error("control: no socket " + path + " (is gaitwatchd running with this config's "
                "control.endpoint? --config FILE or --endpoint says where it listens)");
  if (error == EACCES)
    throw Error("control: permission denied on " + path +
                " (the daemon's user and group may connect: ask to join group gaitwatch)");
  throw Error("control: " + path + ": " + std::strerror(error));
}

daemon::ControlClient make_client(const ControlTarget& unresolved) {
  const ControlTarget target = unresolved.resolved();
  check_ipc_socket(target.endpoint);
  return daemon::ControlClient(
      target.endpoint, std::chrono::milliseconds(static_cast<long>(target.timeout_s * 1000)),
      pipeline::read_curve_client_keys(target.server_key, target.key));
}

json call(daemon::ControlClient& client, const std::string& cmd, const json& args,
          const std::function<void(const json&)>& on_message) {
  return client.call(cmd, args, on_message, [] { return InterruptScope::interrupted(); });
}

}  // namespace

json control_request(const ControlTarget& target, const std::string& cmd, const json& args,
                     const std::function<void(const json&)>& on_message) {
  daemon::ControlClient client = make_client(target);
  const InterruptScope ctrl_c;
  return call(client, cmd, args, on_message);
}

json control_result(const json& final) {
  if (final.value("type", "") == "result") return final["result"];
  const json& error = final["error"];
  throw Error(error.value("message", "error") + " [" + error.value("code", "?") + "]");
}

std::vector<FetchedAlert> fetch_alerts(const ControlTarget& target, std::uint64_t after,
                                       long limit, long wearer, const std::string& pattern,
                                       std::uint64_t* last_seq) {
  std::vector<FetchedAlert> alerts;
  // One connection (and CURVE handshake) for all pages; pages of at most
  // 1000 until the daemon says there are no more.
  daemon::ControlClient client = make_client(target);
  const InterruptScope ctrl_c;
  for (;;) {
    long page = 1000;
    if (limit > 0) page = std::min<long>(page, limit - static_cast<long>(alerts.size()));
    if (page <= 0) break;
    json args = {{"since_seq", after}, {"limit", page}};
    if (wearer >= 0) args["wearer"] = wearer;
    if (!pattern.empty()) args["pattern"] = pattern;
    const json result = control_result(call(client, "alerts.since", args, {}));
    if (last_seq) *last_seq = result["last_seq"].get<std::uint64_t>();
    for (const json& alert : result["alerts"])
      alerts.push_back({pipeline::alert_from_json(alert), alert});
    if (!result["more"].get<bool>() || result["alerts"].empty()) break;
    after = alerts.back().alert.seq;
  }
  return alerts;
}

void add_control_commands(CLI::App& app, int& exit_code) {
  add_status(app, exit_code);
  add_slots(app, exit_code);
  add_alerts(app, exit_code);
  add_control(app, exit_code);
}

}  // namespace gw::cli
