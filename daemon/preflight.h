// Checks of a valid config against the machine it is about to run on, made
// without side effects: what load_config cannot know from the file alone.
// `gaitwatchd --check-config` reports them with the file's own issues, and
// the daemon runs them before it opens anything, so that a start-up failure
// names the key that caused it.
//
// Checked: every bind address (ingest.udp.bind, ingest.tcp.bind,
// metrics.bind, and the addresses of publish.endpoint and control.endpoint)
// is an address of this machine (a socket is bound to it on an ephemeral
// port and closed at once); ZeroMQ endpoints use a transport the daemon
// serves (tcp or ipc) with a well-formed address; the directories of
// storage.path and history.path (when enabled) exist and are writable by
// this process, and a database file that exists is writable; an ipc
// endpoint's directory likewise, or, when it is missing, its parent (the
// daemon then creates it: a runtime directory outside systemd).
// Ports themselves are not tried: the running daemon may hold them while its
// next config is checked. For the gateway (`gaitwatchd --gateway`) only the
// ingest binds are checked: it opens no metrics, publish or control socket
// and writes no file, and its unit has no runtime or state directory.
#pragma once

#include <vector>

#include "config/config.h"

namespace gw::daemon {

// What will run the config.
enum class PreflightRole { kDaemon, kGateway };

// Every problem found, each naming its key path; empty when none.
std::vector<config::ConfigIssue> preflight_checks(const config::Config& config,
                                                  PreflightRole role = PreflightRole::kDaemon);

}  // namespace gw::daemon
