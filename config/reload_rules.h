// Which config keys a reload (SIGHUP) applies and which keep their running
// values until the daemon restarts: one table, read by the daemon's reload
// (which keeps the restart-only keys and logs them) and by `gaitwatchd
// --check-config FILE --against RUNNING` (which warns about them).
// docs/design.md ("Configuration") lists the table for operators.
//
// A key is restart-only when something built once at start depends on it:
// sockets and their threads, the queues, the store and history files, the
// search backend and its threads, the hash tables, the control interface,
// and the device profiles the ingest checks frames against. Everything the
// engine compiles from the config on reload (patterns, tick and deadline,
// the overload policy, the devices' channel groups) and the log level, the
// stats interval and the marks' limits take effect at the next tick.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace gw::config {

enum class ReloadEffect { kReload, kRestart };

struct ReloadRule {
  // A key path as the file spells it, or a section whose keys all share the
  // effect ("patterns"); "devices[].KEY" stands for KEY of every device.
  std::string path;
  ReloadEffect effect = ReloadEffect::kRestart;
};

// The whole table, in the file's order of sections.
std::vector<ReloadRule> reload_rules();

// The effect of a key path such as "search.tick_ms", "devices[2].groups" or
// "patterns[0].threshold": that of the rule naming it or a section above it;
// nullopt for a path no rule covers.
std::optional<ReloadEffect> reload_effect(const std::string& key_path);

// Sets every restart-only key of `fresh` to its value in `running` and
// returns the paths of the keys that this changed, in table order: what a
// reload of `fresh` keeps at the running values. Devices are matched by
// position: a device with a restart-only change keeps all its running
// values (its groups index its running channels), and a different number of
// devices keeps the running list as a whole (path "devices").
std::vector<std::string> keep_restart_values(const Config& running, Config& fresh);

// The paths keep_restart_values(running, fresh) would return, `fresh` left
// as it is: the changes from `running` that need a restart.
std::vector<std::string> restart_only_differences(const Config& running, const Config& fresh);

}  // namespace gw::config
