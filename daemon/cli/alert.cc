// gaitwatch alert / events: the alert lifecycle through the running daemon's
// control interface (alert.ack, alert.resolve, alert.get, alerts.open and
// events.list in docs/interfaces.md), and the readable lines of alerts and
// events that `subscribe --format text` prints too.
//   gaitwatch alert ack --seq N [--by NAME] [--note TEXT]
//   gaitwatch alert resolve --seq N [--by NAME] [--note TEXT]
//   gaitwatch alert show --seq N [--json]
//   gaitwatch alert list [--open] [--limit N] [--json]
//   gaitwatch events [--since T] [--wearer W] [--alert-seq N] [--limit N] [--json]
// The audit log is read from the daemon (events.list) as `gaitwatch alerts`
// reads alerts: the daemon names the site's zone, and no client needs read
// access to the database file.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <iostream>

#include "common/time_text.h"
#include "daemon/cli/cli.h"

namespace gw::cli {

using nlohmann::json;

namespace {

// "wearer 17", or the wearer's name when the message carries one.
std::string wearer_text(const json& message) {
  const auto name = message.find("wearer_name");
  if (name != message.end() && name->is_string() && !name->get<std::string>().empty())
    return "wearer " + name->get<std::string>();
  return "wearer " + std::to_string(message.value("wearer", 0u));
}

std::string upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

// What happened, in words: "acknowledged by ana", "escalated to level 2".
std::string event_action(const json& event) {
  const std::string type = event.value("type", std::string("?"));
  const std::string actor = event.value("actor", std::string("?"));
  const json details = event.value("details", json::object());
  if (type == "alert_acknowledged") return "acknowledged by " + actor;
  if (type == "alert_resolved") return "resolved by " + actor;
  if (type == "alert_marked")
    return "marked " + details.value("verdict", std::string("?")) + " by " + actor;
  if (type == "alert_unmarked") return "mark withdrawn by " + actor;
  if (type == "alert_escalated")
    return fmt::format("ESCALATED to level {}, not acknowledged ({} {})", details.value("level", 0),
                       details.value("severity", std::string("?")),
                       details.value("kind", std::string("?")));
  std::string words = type;
  for (char& c : words)
    if (c == '_') c = ' ';
  return actor == "gaitwatchd" ? words : words + " by " + actor;
}

}  // namespace

std::string alert_text_line(const json& alert) {
  std::string line = fmt::format("{}  {}  {}  {}  seq {}  {}", readable_time_text(alert, "detected_at"),
                                 upper(alert.value("severity", std::string("?"))),
                                 alert.value("kind", std::string("?")), wearer_text(alert),
                                 alert.value("seq", 0ull), alert.value("pattern", std::string("?")));
  // Where under the foot, for a pressure hotspot: "right foot, heel".
  const std::string region = alert.value("region", std::string());
  if (!region.empty()) line += "  " + alert.value("foot", std::string("?")) + " foot, " + region;
  return line;
}

std::string event_text_line(const json& event) {
  std::string line = readable_time_text(event, "at") + "  " + event_action(event);
  if (event.contains("alert_seq"))
    line += "  seq " + std::to_string(event.value("alert_seq", 0ull));
  line += "  " + wearer_text(event);
  const json details = event.value("details", json::object());
  const std::string note = details.is_object() ? details.value("note", std::string()) : "";
  if (!note.empty()) line += "  \"" + note + "\"";
  return line;
}

namespace {

struct AlertOptions {
  ControlTarget target;
  std::uint64_t seq = 0;
  std::string by;
  std::string note;
  bool open = false;
  long limit = 100;
  bool json = false;
};

// One line of `alert list`: the readable alert, then its state.
std::string listed_line(const json& entry) {
  const json& state = entry["state"];
  std::string line =
      alert_text_line(entry["alert"]) + "  " + state.value("state", std::string("?"));
  if (state["acknowledged_by"].is_string())
    line += " (by " + state["acknowledged_by"].get<std::string>() + ")";
  if (state.value("escalation_level", 0) > 0)
    line += "  escalated " + std::to_string(state["escalation_level"].get<int>());
  return line;
}

int run_change(const AlertOptions& o, const char* command) {
  json args = {{"seq", o.seq}, {"by", o.by.empty() ? login_name() : o.by}};
  if (!o.note.empty()) args["note"] = o.note;
  const json result = control_result(control_request(o.target, command, args));
  if (o.json) {
    std::cout << result.dump() << "\n";
    return 0;
  }
  const json& state = result["state"];
  std::printf("alert %llu: %s\n", static_cast<unsigned long long>(o.seq),
              state["state"].get<std::string>().c_str());
  return 0;
}

int run_show(const AlertOptions& o) {
  const json result = control_result(control_request(o.target, "alert.get", {{"seq", o.seq}}));
  if (o.json) {
    std::cout << result.dump() << "\n";
    return 0;
  }
  const json& state = result["state"];
  std::cout << alert_text_line(result["alert"]) << "\n";
  std::cout << "state: " << state["state"].get<std::string>();
  if (state.value("escalation_level", 0) > 0)
    std::cout << ", escalated to level " << state["escalation_level"].get<int>();
  std::cout << "\n";
  for (const json& mark : result["marks"])
    std::cout << "mark " << mark["id"] << ": " << mark["verdict"].get<std::string>()
              << (mark["withdrawn_at"].is_null() ? "" : " (withdrawn)") << "\n";
  for (const json& event : result["events"]) std::cout << event_text_line(event) << "\n";
  return 0;
}

int run_list(const AlertOptions& o) {
  const json result = control_result(control_request(
      o.target, "alerts.open", {{"limit", o.limit}, {"include_resolved", !o.open}}));
  for (const json& entry : result["alerts"])
    std::cout << (o.json ? entry.dump() : listed_line(entry)) << "\n";
  return 0;
}

struct EventsOptions {
  ControlTarget target;
  std::string since;
  long wearer = -1;
  std::uint64_t alert_seq = 0;
  long limit = 0;
  bool json = false;
};

int run_events(const EventsOptions& o) {
  json args = json::object();
  if (!o.since.empty()) args["since"] = parse_time_text(o.since, unix_time_now());
  if (o.wearer >= 0) args["wearer"] = o.wearer;
  if (o.alert_seq > 0) args["alert_seq"] = o.alert_seq;
  long printed = 0;
  std::uint64_t after_id = 0;
  // Pages of the oldest first, until none are left or --limit is reached.
  for (;;) {
    args["after_id"] = after_id;
    const long page_limit = o.limit > 0 ? std::min<long>(1000, o.limit - printed) : 1000;
    args["limit"] = page_limit;
    const json result = control_result(control_request(o.target, "events.list", args));
    for (const json& event : result["events"]) {
      std::cout << (o.json ? event.dump() : event_text_line(event)) << "\n";
      ++printed;
    }
    after_id = result["last_id"].get<std::uint64_t>();
    if (!result["more"].get<bool>() || (o.limit > 0 && printed >= o.limit)) break;
  }
  return 0;
}

}  // namespace

void add_alert(CLI::App& app, int& exit_code) {
  auto* alert = app.add_subcommand(
      "alert", "acknowledge, resolve, show or list alerts and their states (running daemon)");
  alert->require_subcommand(1);
  const auto change = [&](const char* name, const char* command, const char* help) {
    auto o = std::make_shared<AlertOptions>();
    auto* cmd = alert->add_subcommand(name, help);
    o->target.add_flags(*cmd);
    cmd->add_option("--seq", o->seq, "the alert's seq")->required();
    cmd->add_option("--by", o->by, "who does it (default: the login name)");
    cmd->add_option("--note", o->note, "a note, kept with the state and in the audit log");
    cmd->add_flag("--json", o->json, "print the daemon's reply as JSON");
    on_run(*cmd, exit_code, [o, command] { return run_change(*o, command); });
  };
  change("ack", "alert.ack", "acknowledge an alert: a carer is on it, it no longer escalates");
  change("resolve", "alert.resolve", "resolve an alert: nothing more to do (final)");

  auto show = std::make_shared<AlertOptions>();
  auto* show_cmd = alert->add_subcommand("show", "an alert with its state, marks and events");
  show->target.add_flags(*show_cmd);
  show_cmd->add_option("--seq", show->seq, "the alert's seq")->required();
  show_cmd->add_flag("--json", show->json, "print the daemon's reply as JSON");
  on_run(*show_cmd, exit_code, [show] { return run_show(*show); });

  auto list = std::make_shared<AlertOptions>();
  auto* list_cmd = alert->add_subcommand("list", "the newest alerts with their states");
  list->target.add_flags(*list_cmd);
  list_cmd->add_flag("--open", list->open, "only alerts not resolved");
  list_cmd->add_option("--limit", list->limit, "at most this many (1..10000)")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  list_cmd->add_flag("--json", list->json, "one {alert, state} object per line");
  on_run(*list_cmd, exit_code, [list] { return run_list(*list); });
}

void add_events(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<EventsOptions>();
  auto* cmd = app.add_subcommand(
      "events",
      "the audit log: acknowledgements, resolutions, escalations, marks (running daemon)");
  o->target.add_flags(*cmd);
  cmd->add_option("--since", o->since, std::string("only events at or after T: ") + kTimeTextForms);
  cmd->add_option("--wearer", o->wearer, "only this wearer's events");
  cmd->add_option("--alert-seq", o->alert_seq, "only the events of this alert");
  cmd->add_option("--limit", o->limit, "at most this many (default: all)");
  cmd->add_flag("--json", o->json, "one event per line, as published");
  on_run(*cmd, exit_code, [o] { return run_events(*o); });
}

}  // namespace gw::cli
