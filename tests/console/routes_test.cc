// The console's API routes as control commands (console/routes.h).
#include <catch2/catch.hpp>

#include "console/routes.h"

using gw::console::match_route;
using gw::console::Role;
using nlohmann::json;

TEST_CASE("reading routes ask the read commands and need only a viewer", "[console]") {
  auto m = match_route(false, "/api/wearers", "", json::object(), "ann");
  CHECK(m.status == 200);
  CHECK(m.needs == Role::kViewer);
  CHECK(m.request["cmd"] == "wearer.list");

  m = match_route(false, "/api/alerts", "include_resolved=true&limit=20", json::object(), "ann");
  REQUIRE(m.status == 200);
  CHECK(m.request["cmd"] == "alerts.open");
  CHECK(m.request["args"]["include_resolved"] == true);
  CHECK(m.request["args"]["limit"] == 20);

  m = match_route(false, "/api/alerts/17", "", json::object(), "ann");
  CHECK(m.request == json{{"cmd", "alert.get"}, {"args", {{"seq", 17}}}});
  m = match_route(false, "/api/alerts/17/signal", "", json::object(), "ann");
  CHECK(m.request["cmd"] == "alert.signal");
  m = match_route(false, "/api/alerts/17/match", "", json::object(), "ann");
  CHECK(m.request == json{{"cmd", "alert.match"}, {"args", {{"seq", 17}}}});
  m = match_route(false, "/api/events", "after_id=5&alert_seq=3", json::object(), "ann");
  CHECK(m.request["cmd"] == "events.list");
  CHECK(m.request["args"] == json{{"after_id", 5}, {"alert_seq", 3}});
  m = match_route(false, "/api/health", "", json::object(), "ann");
  CHECK(m.request["cmd"] == "status");
}

TEST_CASE("changes need a carer or an admin and are made in the session user's name", "[console]") {
  auto m = match_route(true, "/api/alerts/4/ack", "", json{{"note", "on my way"}}, "bea");
  REQUIRE(m.status == 200);
  CHECK(m.needs == Role::kCarer);
  CHECK(m.request == json{{"cmd", "alert.ack"}, {"args", {{"seq", 4}, {"note", "on my way"}, {"by", "bea"}}}});

  m = match_route(true, "/api/alerts/4/mark", "", json{{"verdict", "false"}}, "bea");
  CHECK(m.request["cmd"] == "alert.mark");
  CHECK(m.request["args"]["verdict"] == "false");
  CHECK(m.request["args"]["by"] == "bea");

  m = match_route(true, "/api/alerts/4/resolve", "", json::object(), "bea");
  CHECK(m.request["cmd"] == "alert.resolve");

  // The body cannot choose who did it.
  m = match_route(true, "/api/alerts/4/ack", "", json{{"by", "someone else"}}, "bea");
  CHECK(m.status == 400);
  CHECK(m.error_message.find("by") != std::string::npos);

  m = match_route(true, "/api/wearers", "", json{{"id", 7}, {"display_name", "Ann"}}, "root");
  CHECK(m.needs == Role::kAdmin);
  CHECK(m.request["cmd"] == "wearer.add");
  CHECK(m.request["args"]["actor"] == "root");
  m = match_route(true, "/api/wearers/7", "", json{{"room", "12"}}, "root");
  CHECK(m.needs == Role::kAdmin);
  CHECK(m.request == json{{"cmd", "wearer.set"}, {"args", {{"id", 7}, {"room", "12"}, {"actor", "root"}}}});
}

TEST_CASE("wrong methods, unknown routes and bad parameters are refused", "[console]") {
  CHECK(match_route(true, "/api/alerts", "", json::object(), "x").status == 405);
  CHECK(match_route(false, "/api/alerts/3/ack", "", json::object(), "x").status == 405);
  CHECK(match_route(false, "/api/nothing", "", json::object(), "x").status == 404);
  CHECK(match_route(false, "/api/alerts/abc", "", json::object(), "x").status == 404);
  CHECK(match_route(false, "/api/alerts/-1", "", json::object(), "x").status == 404);
  CHECK(match_route(false, "/api/alerts", "limit=ten", json::object(), "x").status == 400);
  CHECK(match_route(false, "/api/alerts", "include_resolved=yes", json::object(), "x").status == 400);
  CHECK(match_route(false, "/api/alerts", "colour=red", json::object(), "x").status == 400);
  CHECK(match_route(false, "/api/alerts", "limit=%32%30", json::object(), "x").request["args"]["limit"] == 20);
}

TEST_CASE("control error codes map to HTTP statuses", "[console]") {
  using gw::console::http_status_of;
  CHECK(http_status_of("unknown_alert") == 404);
  CHECK(http_status_of("unknown_wearer") == 404);
  CHECK(http_status_of("already_acknowledged") == 409);
  CHECK(http_status_of("duplicate_wearer") == 409);
  CHECK(http_status_of("bad_request") == 400);
  CHECK(http_status_of("no_window") == 400);
  CHECK(http_status_of("busy") == 503);
  CHECK(http_status_of("failed") == 500);
}
