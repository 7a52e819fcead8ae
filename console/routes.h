// The console's JSON API as control commands: which route asks which
// command with which arguments, and which role it needs. Pure functions, so
// that the mapping is tested without a server (tests/console/routes_test.cc).
//
// A change's arguments come only from the request body's known members and
// the route; who did it (`by`, `actor`) is always the session's user, never
// the body's.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "console/access.h"

namespace gw::console {

struct RouteMatch {
  int status = 200;          // 200: `request` is set; else an HTTP error status
  std::string error_code;    // when status != 200
  std::string error_message;
  Role needs = Role::kViewer;
  nlohmann::json request;    // {cmd, args} for ControlServer::call
};

// `path` without the query; `query` the text after '?', percent-encoded;
// `body` a JSON object (empty for GET); `user` the session's user name.
RouteMatch match_route(bool post, const std::string& path, const std::string& query,
                       const nlohmann::json& body, const std::string& user);

// The HTTP status of a control error code: unknown_* 404, already_* and
// duplicate_* 409, bad_request and no_window 400, busy and shutting_down 503,
// anything else 500.
int http_status_of(const std::string& control_error_code);

}  // namespace gw::console
