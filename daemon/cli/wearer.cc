// gaitwatch wearer: the running daemon's wearer registry and its sensors'
// liveness, through the control interface (wearer.add, wearer.set,
// wearer.list, wearer.remove in docs/interfaces.md).
//   gaitwatch wearer add --id N --name TEXT [--room R] [--bed B] [--notes T] [--inactive]
//   gaitwatch wearer set --id N [--name ..] [--room ..] [--bed ..] [--notes ..] [--active|--inactive]
//   gaitwatch wearer list [--json]
//   gaitwatch wearer remove --id N
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "daemon/cli/cli.h"

namespace gw::cli {
namespace {

using nlohmann::json;

// Who changes the registry, for the daemon's wearer_changed event: the
// login name when the environment has one.
void add_actor(json& args) {
  if (const char* user = std::getenv("USER"); user != nullptr && *user != '\0') args["actor"] = user;
}

struct WearerOptions {
  ControlTarget target;
  std::uint32_t id = 0;
  std::string name, room, bed, notes;
  bool active = false;
  bool inactive = false;
  bool json = false;
};

void print_wearer(const json& w) {
  std::printf("wearer %u: %s, room %s, bed %s, %s%s%s\n", w["id"].get<std::uint32_t>(),
              w["display_name"].get<std::string>().c_str(),
              w["room"].get<std::string>().empty() ? "-" : w["room"].get<std::string>().c_str(),
              w["bed"].get<std::string>().empty() ? "-" : w["bed"].get<std::string>().c_str(),
              w["active"].get<bool>() ? "active" : "inactive",
              w["notes"].get<std::string>().empty() ? "" : "; notes: ",
              w["notes"].get<std::string>().c_str());
}

int run_change(const char* command, const WearerOptions& o, const json& args) {
  const json result = control_result(control_request(o.target, command, args));
  if (o.json) {
    std::cout << result.dump() << "\n";
    return 0;
  }
  print_wearer(result["wearer"]);
  return 0;
}

std::string text_or_dash(const json& value) {
  if (!value.is_string() || value.get<std::string>().empty()) return "-";
  return value.get<std::string>();
}

int run_list(const WearerOptions& o) {
  const json result = control_result(control_request(o.target, "wearer.list", json::object()));
  if (o.json) {
    for (const json& w : result["wearers"]) std::cout << w.dump() << "\n";
    return 0;
  }
  std::printf("%8s  %-24s %-8s %-6s %-8s %6s  %-8s %s\n", "wearer", "name", "room", "bed",
              "active", "device", "state", "since last frame");
  for (const json& w : result["wearers"]) {
    const bool registered = w["registered"].get<bool>();
    const std::string name = registered ? w["display_name"].get<std::string>() : "(not registered)";
    const std::string room = registered ? text_or_dash(w["room"]) : "-";
    const std::string bed = registered ? text_or_dash(w["bed"]) : "-";
    const char* active = w["active"].get<bool>() ? "yes" : "no";
    if (w["devices"].empty()) {
      std::printf("%8u  %-24s %-8s %-6s %-8s %6s  %-8s %s\n", w["id"].get<std::uint32_t>(),
                  name.c_str(), room.c_str(), bed.c_str(), active, "-", "-", "no frame yet");
      continue;
    }
    for (const json& d : w["devices"])
      std::printf("%8u  %-24s %-8s %-6s %-8s %6u  %-8s %.1f s\n", w["id"].get<std::uint32_t>(),
                  name.c_str(), room.c_str(), bed.c_str(), active, d["device"].get<unsigned>(),
                  d["state"].get<std::string>().c_str(), d["silent_s"].get<double>());
  }
  std::printf("%zu wearers\n", result["wearers"].size());
  return 0;
}

}  // namespace

void add_wearer(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "wearer", "the running daemon's wearer registry (names, rooms, beds) and its sensors' "
                "liveness (online, stale, offline)");
  cmd->require_subcommand(1);

  auto add = std::make_shared<WearerOptions>();
  auto* add_cmd = cmd->add_subcommand("add", "register a wearer number with a name");
  add->target.add_flags(*add_cmd);
  add_cmd->add_option("--id", add->id, "the wearer number the frames carry")->required();
  add_cmd->add_option("--name", add->name, "the display name carers see")->required();
  add_cmd->add_option("--room", add->room, "room");
  add_cmd->add_option("--bed", add->bed, "bed");
  add_cmd->add_option("--notes", add->notes, "notes for carers");
  add_cmd->add_flag("--inactive", add->inactive,
                    "registered but not monitored: its silent sensors raise no alert");
  add_cmd->add_flag("--json", add->json, "print the daemon's reply as JSON");
  on_run(*add_cmd, exit_code, [add] {
    json args = {{"id", add->id}, {"display_name", add->name}, {"room", add->room},
                 {"bed", add->bed}, {"notes", add->notes}, {"active", !add->inactive}};
    add_actor(args);
    return run_change("wearer.add", *add, args);
  });

  auto set = std::make_shared<WearerOptions>();
  auto* set_cmd = cmd->add_subcommand("set", "change a registered wearer's fields (those given)");
  set->target.add_flags(*set_cmd);
  set_cmd->add_option("--id", set->id, "the wearer number")->required();
  auto* name = set_cmd->add_option("--name", set->name, "the display name");
  auto* room = set_cmd->add_option("--room", set->room, "room (\"\" clears it)");
  auto* bed = set_cmd->add_option("--bed", set->bed, "bed (\"\" clears it)");
  auto* notes = set_cmd->add_option("--notes", set->notes, "notes (\"\" clears them)");
  auto* active = set_cmd->add_flag("--active", set->active, "monitored again");
  set_cmd->add_flag("--inactive", set->inactive, "not monitored: no sensor_offline alerts")
      ->excludes(active);
  set_cmd->add_flag("--json", set->json, "print the daemon's reply as JSON");
  on_run(*set_cmd, exit_code, [set, name, room, bed, notes] {
    json args = {{"id", set->id}};
    if (name->count() > 0) args["display_name"] = set->name;
    if (room->count() > 0) args["room"] = set->room;
    if (bed->count() > 0) args["bed"] = set->bed;
    if (notes->count() > 0) args["notes"] = set->notes;
    if (set->active || set->inactive) args["active"] = set->active;
    if (args.size() == 1)
      throw UsageError("give a field to change: --name, --room, --bed, --notes, --active or "
                       "--inactive");
    add_actor(args);
    return run_change("wearer.set", *set, args);
  });

  auto list = std::make_shared<WearerOptions>();
  auto* list_cmd = cmd->add_subcommand(
      "list", "every registered wearer and every wearer seen in frames, with each device's "
              "state and the seconds since its last frame");
  list->target.add_flags(*list_cmd);
  list_cmd->add_flag("--json", list->json, "one JSON object per wearer and line");
  on_run(*list_cmd, exit_code, [list] { return run_list(*list); });

  auto remove = std::make_shared<WearerOptions>();
  auto* remove_cmd = cmd->add_subcommand("remove", "remove a wearer from the registry");
  remove->target.add_flags(*remove_cmd);
  remove_cmd->add_option("--id", remove->id, "the wearer number")->required();
  remove_cmd->add_flag("--json", remove->json, "print the daemon's reply as JSON");
  on_run(*remove_cmd, exit_code, [remove] {
    json args = {{"id", remove->id}};
    add_actor(args);
    const json result = control_result(control_request(remove->target, "wearer.remove", args));
    if (remove->json) {
      std::cout << result.dump() << "\n";
      return 0;
    }
    std::printf("wearer %u (%s) removed from the registry\n",
                result["wearer"]["id"].get<std::uint32_t>(),
                result["wearer"]["display_name"].get<std::string>().c_str());
    return 0;
  });
}

}  // namespace gw::cli
