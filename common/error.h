// The one error convention of gaitwatch.
//
// * Setup and control-path failures (bad config, unreadable file, socket that
//   cannot bind, SQLite error) throw gw::Error. The message is complete and
//   user-facing: it names the file / key path / line where there is one.
// * Expected data-path failures (a malformed frame, an out-of-order sample)
//   never throw: the function returns a reason enum, the caller drops the item
//   and increments the counter for that reason. Nothing is lost silently.
#pragma once

#include <stdexcept>
#include <string>

namespace gw {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace gw
