#include "daemon/ipc_socket.h"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/error.h"

namespace gw::daemon {

std::string ipc_socket_path(const std::string& endpoint) {
  const std::string scheme = "ipc://";
  if (endpoint.rfind(scheme, 0) != 0) return {};
  const std::string path = endpoint.substr(scheme.size());
  if (path.empty() || path[0] == '@' || path == "*") return {};
  return path;
}

namespace {

// Whether a process accepts connections on the unix socket `path`.
bool someone_listens(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof address.sun_path)
    throw Error("unix socket path too long: " + path);
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error("socket(AF_UNIX): " + std::string(std::strerror(errno)));
  const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  const int error = errno;
  ::close(fd);
  if (rc == 0) return true;
  // EACCES: a socket we may not even connect to belongs to someone else.
  return error != ECONNREFUSED && error != ENOENT;
}

}  // namespace

void claim_ipc_path(const std::string& path) {
  // The socket's own directory (a runtime directory outside systemd) is made
  // when its parent exists, owner and group only.
  const std::string dir = path.substr(0, path.find_last_of('/'));
  struct stat dir_st {};
  if (!dir.empty() && ::stat(dir.c_str(), &dir_st) != 0 && errno == ENOENT &&
      ::mkdir(dir.c_str(), 0750) != 0 && errno != EEXIST)
    throw Error("cannot create the socket's directory " + dir + ": " + std::strerror(errno));
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw Error(path + ": " + std::strerror(errno));
  }
  if (!S_ISSOCK(st.st_mode))
    throw Error(path + " exists and is not a unix socket; not removing it");
  if (someone_listens(path))
    throw Error(path + " is in use: another process (a running gaitwatchd?) listens on it");
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    throw Error("cannot remove the stale socket " + path + ": " + std::strerror(errno));
}

SocketAccess restrict_ipc_socket(const std::string& path, mode_t mode, const std::string& group) {
  if (::chmod(path.c_str(), mode) != 0)
    throw Error("chmod " + path + ": " + std::strerror(errno));
  char mode_text[8];
  std::snprintf(mode_text, sizeof mode_text, "%04o", static_cast<unsigned>(mode));
  SocketAccess access;
  access.done = std::string("mode ") + mode_text;
  const struct group* entry = ::getgrnam(group.c_str());
  if (!entry) {
    access.done += " (no group '" + group + "': the group stays the daemon's)";
    return access;
  }
  if (::chown(path.c_str(), static_cast<uid_t>(-1), entry->gr_gid) != 0) {
    access.warning = "cannot give " + path + " to group '" + group + "' (" +
                     std::strerror(errno) + "): only the daemon's user and group can connect";
    return access;
  }
  access.done += ", group " + group;
  return access;
}

}  // namespace gw::daemon
