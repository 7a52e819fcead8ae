#include "console/routes.h"

#include <cstdlib>
#include <map>
#include <optional>

namespace gw::console {

using nlohmann::json;

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decoded(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] == '%' && i + 2 < text.size() && hex_value(text[i + 1]) >= 0 &&
               hex_value(text[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::map<std::string, std::string> query_items(const std::string& query) {
  std::map<std::string, std::string> items;
  std::size_t at = 0;
  while (at < query.size()) {
    const std::size_t amp = query.find('&', at);
    const std::string item = query.substr(at, amp == std::string::npos ? std::string::npos : amp - at);
    const std::size_t eq = item.find('=');
    if (!item.empty())
      items[percent_decoded(item.substr(0, eq))] =
          eq == std::string::npos ? "" : percent_decoded(item.substr(eq + 1));
    if (amp == std::string::npos) break;
    at = amp + 1;
  }
  return items;
}

// A decimal number without sign or spaces, within int64.
std::optional<std::int64_t> whole_number(const std::string& text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  for (char c : text)
    if (c < '0' || c > '9') return std::nullopt;
  return std::strtoll(text.c_str(), nullptr, 10);
}

RouteMatch failure(int status, std::string code, std::string message) {
  RouteMatch m;
  m.status = status;
  m.error_code = std::move(code);
  m.error_message = std::move(message);
  return m;
}

RouteMatch command(Role needs, const char* cmd, json args) {
  RouteMatch m;
  m.needs = needs;
  m.request = {{"cmd", cmd}, {"args", std::move(args)}};
  return m;
}

// The members of `body` named in `allowed`, copied; any other member is an
// error (a typo must not be silently ignored).
std::optional<RouteMatch> copy_members(const json& body, std::initializer_list<const char*> allowed,
                                       json& args) {
  for (const auto& [key, value] : body.items()) {
    bool known = false;
    for (const char* name : allowed) known = known || key == name;
    if (!known) return failure(400, "bad_request", "unknown member '" + key + "'");
    args[key] = value;
  }
  return std::nullopt;
}

// Query members that become integer or boolean arguments.
std::optional<RouteMatch> copy_query(const std::map<std::string, std::string>& items,
                                     std::initializer_list<const char*> integers,
                                     std::initializer_list<const char*> booleans, json& args) {
  for (const auto& [key, value] : items) {
    bool known = false;
    for (const char* name : integers) {
      if (key != name) continue;
      known = true;
      const auto number = whole_number(value);
      if (!number) return failure(400, "bad_request", "'" + key + "' must be a whole number");
      args[key] = *number;
    }
    for (const char* name : booleans) {
      if (key != name) continue;
      known = true;
      if (value != "true" && value != "false")
        return failure(400, "bad_request", "'" + key + "' must be true or false");
      args[key] = value == "true";
    }
    if (!known) return failure(400, "bad_request", "unknown query parameter '" + key + "'");
  }
  return std::nullopt;
}

// "/api/alerts/17/ack" -> segments {"alerts", "17", "ack"}.
std::vector<std::string> segments_of(const std::string& path) {
  std::vector<std::string> parts;
  std::size_t at = 5;  // after "/api/"
  while (at <= path.size()) {
    const std::size_t slash = path.find('/', at);
    parts.push_back(path.substr(at, slash == std::string::npos ? std::string::npos : slash - at));
    if (slash == std::string::npos) break;
    at = slash + 1;
  }
  return parts;
}

}  // namespace

RouteMatch match_route(bool post, const std::string& path, const std::string& query,
                       const json& body, const std::string& user) {
  if (path.rfind("/api/", 0) != 0) return failure(404, "not_found", "no such route: " + path);
  const std::vector<std::string> parts = segments_of(path);
  const auto items = query_items(query);
  const auto wrong_method = [&] {
    return failure(405, "method", std::string(post ? "POST" : "GET") + " is not allowed on " + path);
  };
  json args = json::object();

  if (parts.size() == 1 && parts[0] == "health") {
    if (post) return wrong_method();
    return command(Role::kViewer, "status", args);
  }
  if (parts.size() == 1 && parts[0] == "wearers") {
    if (!post) return command(Role::kViewer, "wearer.list", args);
    if (auto error = copy_members(body, {"id", "display_name", "room", "bed", "notes", "active"}, args))
      return *error;
    args["actor"] = user;
    return command(Role::kAdmin, "wearer.add", args);
  }
  if (parts.size() == 2 && parts[0] == "wearers") {
    const auto id = whole_number(parts[1]);
    if (!id) return failure(404, "not_found", "no such wearer route: " + path);
    if (!post) return wrong_method();
    if (auto error = copy_members(body, {"display_name", "room", "bed", "notes", "active"}, args))
      return *error;
    args["id"] = *id;
    args["actor"] = user;
    return command(Role::kAdmin, "wearer.set", args);
  }
  if (parts.size() == 1 && parts[0] == "alerts") {
    if (post) return wrong_method();
    if (auto error = copy_query(items, {"limit"}, {"include_resolved"}, args)) return *error;
    return command(Role::kViewer, "alerts.open", args);
  }
  if (parts.size() == 1 && parts[0] == "events") {
    if (post) return wrong_method();
    if (auto error = copy_query(items, {"since", "wearer", "alert_seq", "after_id", "limit"}, {}, args))
      return *error;
    return command(Role::kViewer, "events.list", args);
  }
  if ((parts.size() == 2 || parts.size() == 3) && parts[0] == "alerts") {
    const auto seq = whole_number(parts[1]);
    if (!seq) return failure(404, "not_found", "no such alert route: " + path);
    args["seq"] = *seq;
    const std::string action = parts.size() == 3 ? parts[2] : "";
    if (action.empty() || action == "signal" || action == "match") {
      if (post) return wrong_method();
      const char* cmd = action.empty() ? "alert.get" : action == "signal" ? "alert.signal" : "alert.match";
      return command(Role::kViewer, cmd, args);
    }
    if (action == "ack" || action == "resolve" || action == "mark") {
      if (!post) return wrong_method();
      if (action == "mark") {
        if (auto error = copy_members(body, {"verdict", "note"}, args)) return *error;
      } else if (auto error = copy_members(body, {"note"}, args)) {
        return *error;
      }
      args["by"] = user;
      const char* cmd = action == "ack" ? "alert.ack" : action == "resolve" ? "alert.resolve" : "alert.mark";
      return command(Role::kCarer, cmd, args);
    }
  }
  return failure(404, "not_found", "no such route: " + path);
}

int http_status_of(const std::string& code) {
  if (code.rfind("unknown_", 0) == 0) return 404;
  if (code.rfind("already_", 0) == 0 || code.rfind("duplicate_", 0) == 0) return 409;
  if (code == "bad_request" || code == "bad_json" || code == "no_window") return 400;
  if (code == "busy" || code == "shutting_down" || code == "unavailable") return 503;
  return 500;
}

}  // namespace gw::console
