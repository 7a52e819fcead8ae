// Writing files that hold secrets (keys): created with their final mode, so
// the content is never readable by others, not even for a moment.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <fstream>
#include <string>

#include "common/error.h"

namespace gw {

// Writes `text` to `path` (truncating) with permissions `mode` (e.g. 0600).
// Throws gw::Error "cannot write <what> <path>".
inline void write_private_file(const std::string& path, const std::string& text, mode_t mode,
                               const std::string& what) {
  const mode_t old = ::umask(0777 & ~mode);
  std::ofstream out(path, std::ios::trunc);
  ::umask(old);
  out << text;
  out.close();
  if (!out) throw Error("cannot write " + what + " " + path);
  ::chmod(path.c_str(), mode);
}

}  // namespace gw
