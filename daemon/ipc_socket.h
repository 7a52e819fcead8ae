// The file of a ZeroMQ ipc:// endpoint (a unix socket): who may connect is
// decided by the file's mode and group, and a file left behind by a crashed
// run must not stop the next one, nor may a second daemon take over the
// socket of one that still runs (libzmq's ipc bind unlinks whatever file is
// at the path).
#pragma once

#include <sys/types.h>

#include <string>

namespace gw::daemon {

// The socket path of an ipc:// endpoint; empty for other transports and for
// the abstract namespace (ipc://@name) and the wildcard (ipc://*), which
// have no file.
std::string ipc_socket_path(const std::string& endpoint);

// Before binding `path`: its directory is created (mode 0750) when only that
// last directory is missing. Nothing at the path is fine; a unix socket nobody listens
// on (a crashed run's) is removed. Throws gw::Error naming the path when a
// process listens there, or when the path is something else than a socket
// (never deleted).
void claim_ipc_path(const std::string& path);

// What restrict_ipc_socket did, for the log: `done` says it ("mode 0660,
// group gaitwatch"); `warning` is non-empty when the group could not be set.
struct SocketAccess {
  std::string done;
  std::string warning;
};

// After binding: sets the socket file's mode to `mode` (the daemon's umask
// 0077 left it owner-only) and, when a group named `group` exists, its group.
// Only the mode is required: throws gw::Error when chmod fails; a failed
// chown is reported in `warning`.
SocketAccess restrict_ipc_socket(const std::string& path, mode_t mode, const std::string& group);

}  // namespace gw::daemon
