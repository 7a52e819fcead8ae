// gaitwatch mark: a carer's verdict on a stored alert, through the running
// daemon's control interface (alert.mark, alert.marks, alert.unmark in
// docs/interfaces.md). A false alert's window becomes a negative example of
// its pattern for that wearer (the same movement no longer alerts for that
// person), a true one's a positive example; the daemon applies it from its
// next tick on.
//   gaitwatch mark --seq N --false|--true [--note TEXT] [--by NAME]
//   gaitwatch mark --list [--wearer W] [--pattern P] [--all] [--json]
//   gaitwatch mark --withdraw ID
#include <cstdio>
#include <iostream>

#include "daemon/cli/cli.h"

namespace gw::cli {
namespace {

using nlohmann::json;

struct MarkOptions {
  ControlTarget target;
  std::uint64_t seq = 0;
  bool mark_false = false;
  bool mark_true = false;
  std::string note;
  std::string by;  // empty: the login name
  bool list = false;
  long wearer = -1;
  std::string pattern;
  bool include_withdrawn = false;
  std::int64_t withdraw = 0;
  bool json = false;
};

// "active", or why the mark's example is not in use.
std::string state_of(const json& mark) {
  if (mark.value("active", false)) return "active";
  const json& reason = mark["inactive_reason"];
  return reason.is_string() ? "inactive: " + reason.get<std::string>() : "inactive";
}

void print_mark_line(const json& m) {
  std::printf("%6lld %6llu %7u %-20s %-7s %-19s  %-26s %s\n",
              static_cast<long long>(m["id"].get<std::int64_t>()),
              static_cast<unsigned long long>(m["seq"].get<std::uint64_t>()),
              m["wearer"].get<std::uint32_t>(), m["pattern"].get<std::string>().c_str(),
              m["verdict"].get<std::string>().c_str(),
              local_time_text(m["created_at"].get<double>()).c_str(), state_of(m).c_str(),
              m["note"].get<std::string>().c_str());
}

void print_mark_header() {
  std::printf("%6s %6s %7s %-20s %-7s %-19s  %-26s %s\n", "id", "seq", "wearer", "pattern",
              "verdict", "marked at", "example", "note");
}

int run_mark(const MarkOptions& o, bool seq_given, bool withdraw_given) {
  const int modes = (seq_given ? 1 : 0) + (o.list ? 1 : 0) + (withdraw_given ? 1 : 0);
  if (modes != 1)
    throw UsageError("give exactly one of --seq N (with --false or --true), --list, --withdraw ID");
  if (seq_given && o.mark_false == o.mark_true)
    throw UsageError("--seq needs exactly one of --false (a false alert) and --true");
  if (!seq_given && (o.mark_false || o.mark_true || !o.note.empty()))
    throw UsageError("--false, --true and --note go with --seq");
  if (!o.list && (o.wearer >= 0 || !o.pattern.empty() || o.include_withdrawn))
    throw UsageError("--wearer, --pattern and --all go with --list");

  if (o.list) {
    json args = {{"include_withdrawn", o.include_withdrawn}};
    if (o.wearer >= 0) args["wearer"] = o.wearer;
    if (!o.pattern.empty()) args["pattern"] = o.pattern;
    const json result = control_result(control_request(o.target, "alert.marks", args));
    if (o.json) {
      for (const json& m : result["marks"]) std::cout << m.dump() << "\n";
      return 0;
    }
    print_mark_header();
    for (const json& m : result["marks"]) print_mark_line(m);
    std::printf("%zu marks\n", result["marks"].size());
    return 0;
  }
  json result;
  if (withdraw_given) {
    result = control_result(control_request(
        o.target, "alert.unmark", {{"id", o.withdraw}, {"by", o.by.empty() ? login_name() : o.by}}));
  } else {
    json args = {{"seq", o.seq},
                 {"verdict", o.mark_true ? "true" : "false"},
                 {"by", o.by.empty() ? login_name() : o.by}};
    if (!o.note.empty()) args["note"] = o.note;
    result = control_result(control_request(o.target, "alert.mark", args));
  }
  if (o.json) {
    std::cout << result.dump() << "\n";
    return 0;
  }
  const json& m = result["mark"];
  if (withdraw_given) {
    std::printf("mark %lld withdrawn: alert %llu of wearer %u is no longer an example\n",
                static_cast<long long>(m["id"].get<std::int64_t>()),
                static_cast<unsigned long long>(m["seq"].get<std::uint64_t>()),
                m["wearer"].get<std::uint32_t>());
    return 0;
  }
  const bool negative = m["verdict"] == "false";
  std::printf("mark %lld: alert %llu marked %s%s; its window is a %s example of %s for wearer %u "
              "(%s)\n",
              static_cast<long long>(m["id"].get<std::int64_t>()),
              static_cast<unsigned long long>(m["seq"].get<std::uint64_t>()),
              m["verdict"].get<std::string>().c_str(),
              result["replaced"].is_string()
                  ? (" (was " + result["replaced"].get<std::string>() + ")").c_str()
                  : "",
              negative ? "negative" : "positive", m["pattern"].get<std::string>().c_str(),
              m["wearer"].get<std::uint32_t>(), state_of(m).c_str());
  return 0;
}

}  // namespace

void add_mark(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<MarkOptions>();
  auto* cmd = app.add_subcommand(
      "mark", "mark a stored alert false or true (its window becomes a negative or positive "
              "example for its wearer), list marks, or withdraw one (running daemon)");
  o->target.add_flags(*cmd);
  auto* seq = cmd->add_option("--seq", o->seq, "the alert's seq (gaitwatch hits, alerts)");
  cmd->add_flag("--false", o->mark_false, "a false alert: the window becomes a negative example");
  cmd->add_flag("--true", o->mark_true, "a true alert: the window becomes a positive example");
  cmd->add_option("--note", o->note, "the carer's note, kept with the mark");
  cmd->add_option("--by", o->by,
                  "who marks or withdraws, named in the audit log (default: the login name)");
  cmd->add_flag("--list", o->list, "list the marks, newest first");
  cmd->add_option("--wearer", o->wearer, "with --list: only this wearer");
  cmd->add_option("--pattern", o->pattern, "with --list: only this pattern");
  cmd->add_flag("--all", o->include_withdrawn, "with --list: withdrawn marks too");
  auto* withdraw = cmd->add_option("--withdraw", o->withdraw, "withdraw the mark with this id");
  cmd->add_flag("--json", o->json, "print the daemon's reply as JSON (--list: a mark per line)");
  on_run(*cmd, exit_code, [o, seq, withdraw] {
    return run_mark(*o, seq->count() > 0, withdraw->count() > 0);
  });
}

}  // namespace gw::cli
