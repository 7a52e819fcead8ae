// The wearer registry: field validation, the control commands against a real
// store, the offline alert and recovery event it hands out, and what a
// restart (a new book on the same file) finds.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "daemon/wearers.h"
#include "sinks/store.h"

using gw::daemon::ControlError;
using gw::daemon::WearerBook;
using gw::daemon::WearerField;
using gw::daemon::wearer_field_problem;
using nlohmann::json;

namespace {

namespace fs = std::filesystem;

struct TempStore {
  fs::path dir;
  TempStore() {
    static int counter = 0;
    dir = fs::temp_directory_path() /
          ("gw_wearers_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir);
    pipeline_store();  // the sink creates the file in the daemon
  }
  ~TempStore() { fs::remove_all(dir); }
  std::string path() const { return (dir / "hits.db").string(); }
  void pipeline_store() const { gw::pipeline::HitStore create(path()); }
};

struct Outputs {
  std::vector<gw::pipeline::Alert> alerts;
  std::vector<gw::pipeline::Event> events;
  gw::daemon::WearerOutputs sinks() {
    return {[this](gw::pipeline::Alert a) { alerts.push_back(std::move(a)); },
            [this](gw::pipeline::Event e) { events.push_back(std::move(e)); },
            {},
            {}};
  }
};

gw::config::Config short_silences() {
  gw::config::Config config;
  config.wearers.stale_after_s = 0.3;
  config.wearers.offline_after_s = 1;
  config.wearers.offline_severity = gw::config::AlertSeverity::kCritical;
  return config;
}

gw::sensors::Frame frame_of(std::uint32_t wearer, std::uint16_t device, double t0_s) {
  gw::sensors::Frame f;
  f.wearer_id = wearer;
  f.device_id = device;
  f.samples = 8;
  f.sample_rate_hz = 64;
  f.device_time_us = static_cast<std::uint64_t>(t0_s * 1e6);
  return f;
}

// The control error code a request gets (empty when it succeeds).
template <typename F>
std::string error_code(F&& request) {
  try {
    request();
  } catch (const ControlError& e) {
    return e.code();
  }
  return "";
}

std::string error_message(const std::function<void()>& request) {
  try {
    request();
  } catch (const ControlError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("registry fields are validated", "[wearers]") {
  CHECK(wearer_field_problem(WearerField::kDisplayName, "Ada Lovelace").empty());
  CHECK(wearer_field_problem(WearerField::kDisplayName, "Zoë Ødegård 李").empty());
  CHECK(wearer_field_problem(WearerField::kDisplayName, "") == "must not be empty");
  CHECK(wearer_field_problem(WearerField::kRoom, "").empty());
  CHECK(wearer_field_problem(WearerField::kDisplayName, std::string(200, 'a')).empty());
  CHECK_FALSE(wearer_field_problem(WearerField::kDisplayName, std::string(201, 'a')).empty());
  CHECK(wearer_field_problem(WearerField::kNotes, std::string(2000, 'a')).empty());
  CHECK_FALSE(wearer_field_problem(WearerField::kNotes, std::string(2001, 'a')).empty());
  CHECK(wearer_field_problem(WearerField::kDisplayName, "Ada\xff") == "is not valid UTF-8");
  CHECK(wearer_field_problem(WearerField::kBed, "\xc0\xaf") == "is not valid UTF-8");  // overlong
  CHECK(wearer_field_problem(WearerField::kBed, "\xed\xa0\x80") == "is not valid UTF-8");  // surrogate
  CHECK(wearer_field_problem(WearerField::kBed, "\xe2\x82") == "is not valid UTF-8");  // cut short
  CHECK_FALSE(wearer_field_problem(WearerField::kDisplayName, "Ada\nLovelace").empty());
  CHECK(wearer_field_problem(WearerField::kNotes, "line one\nline two\tend").empty());
  CHECK_FALSE(wearer_field_problem(WearerField::kNotes, std::string("bell\a")).empty());
}

TEST_CASE("wearer commands add, change, list and remove through the store", "[wearers]") {
  TempStore store;
  Outputs out;
  WearerBook book(store.path(), short_silences(), 1000, out.sinks());

  const json added = book.add({{"id", 7}, {"display_name", "Ada"}, {"room", "12"}, {"actor", "nurse"}});
  CHECK(added["wearer"]["display_name"] == "Ada");
  CHECK(added["wearer"]["active"] == true);
  REQUIRE(out.events.size() == 1);
  CHECK(out.events[0].type == gw::pipeline::EventType::kWearerChanged);
  CHECK(out.events[0].actor == "nurse");
  CHECK(out.events[0].details["change"] == "added");

  CHECK(error_code([&] { book.add({{"id", 7}, {"display_name", "Other"}}); }) == "duplicate_wearer");
  CHECK(error_code([&] { book.add({{"id", 8}}); }) == "bad_request");
  CHECK(error_message([&] { book.add({{"id", 8}, {"display_name", ""}}); }).find("display_name") !=
        std::string::npos);
  CHECK(error_message([&] { book.add({{"id", 8}, {"display_name", "B"}, {"rom", "1"}}); })
            .find("'rom'") != std::string::npos);
  CHECK(error_code([&] { book.add({{"id", -1}, {"display_name", "B"}}); }) == "bad_request");
  CHECK(error_code([&] { book.set({{"id", 9}, {"room", "3"}}); }) == "unknown_wearer");
  CHECK(error_code([&] { book.remove({{"id", 9}}); }) == "unknown_wearer");
  CHECK(error_code([&] { book.set({{"id", 7}, {"active", "no"}}); }) == "bad_request");

  const json set = book.set({{"id", 7}, {"bed", "B"}, {"active", false}});
  CHECK(set["changed"] == json::array({"bed", "active"}));
  CHECK(set["wearer"]["room"] == "12");  // untouched
  CHECK(set["wearer"]["bed"] == "B");

  // A wearer seen only in frames is listed too.
  book.on_frame(frame_of(5, 1, 10), 1001);
  const json list = book.list(json::object());
  REQUIRE(list["wearers"].size() == 2);
  CHECK(list["wearers"][0]["id"] == 5);
  CHECK(list["wearers"][0]["registered"] == false);
  CHECK(list["wearers"][0]["devices"].size() == 1);
  CHECK(list["wearers"][1]["id"] == 7);
  CHECK(list["wearers"][1]["registered"] == true);
  CHECK(list["wearers"][1]["active"] == false);

  // A new book on the same file (a restart) finds the registry.
  WearerBook again(store.path(), short_silences(), 2000, {});
  const json kept = again.list(json::object());
  REQUIRE(kept["wearers"].size() == 1);  // device rows are written by tick(), not yet due
  CHECK(kept["wearers"][0]["bed"] == "B");

  CHECK(book.remove({{"id", 7}})["wearer"]["id"] == 7);
  CHECK(book.list(json::object())["wearers"].size() == 1);
}

TEST_CASE("a silent device raises one named offline alert, an inactive wearer none",
          "[wearers]") {
  TempStore store;
  Outputs out;
  const double start = 1000;
  WearerBook book(store.path(), short_silences(), start, out.sinks());
  book.add({{"id", 7}, {"display_name", "Ada"}});
  book.add({{"id", 8}, {"display_name", "Paused"}, {"active", false}});
  out.events.clear();
  book.on_frame(frame_of(7, 1, 20), start + 1);
  book.on_frame(frame_of(8, 1, 20), start + 1);
  book.on_frame(frame_of(9, 2, 30), start + 1);  // not registered: alerts without a name

  book.tick(start + 1.5);
  CHECK(out.alerts.empty());
  CHECK(book.stats_json(start + 1.5)["devices"]["stale"] == 3);
  book.tick(start + 2.1);
  REQUIRE(out.alerts.size() == 2);
  const gw::pipeline::Alert& a = out.alerts[0];
  CHECK(a.wearer == 7);
  CHECK(a.wearer_name == "Ada");
  CHECK(a.pattern == "sensor_offline");
  CHECK(a.kind == "sensor_offline");
  CHECK(a.severity == "critical");
  CHECK(a.device == 1);
  CHECK(a.t_start == Approx(20 + 7.0 / 64));
  CHECK(a.t_end == a.t_start);
  CHECK(a.end_index == 7);
  CHECK(a.detected_at == Approx(start + 2.1));
  CHECK(a.dims.empty());
  CHECK(a.matched_dims == 0);
  CHECK(a.pattern_dims == 0);
  CHECK(a.window == nullptr);
  CHECK(out.alerts[1].wearer == 9);
  CHECK(out.alerts[1].wearer_name.empty());
  book.tick(start + 10);
  CHECK(out.alerts.size() == 2);  // one per silence
  CHECK(book.stats_json(start + 10)["offline_alerts"] == 2);

  // A restart with the persisted last frames: no second alert for the
  // standing silence; the device that comes back gives a recovery event.
  book.flush();
  Outputs after;
  WearerBook restarted(store.path(), short_silences(), start + 100, after.sinks());
  restarted.tick(start + 102);
  CHECK(after.alerts.empty());
  CHECK(restarted.stats_json(start + 102)["devices"]["offline"] == 3);
  restarted.on_frame(frame_of(7, 1, 500), start + 103);
  REQUIRE(after.events.size() == 1);
  CHECK(after.events[0].type == gw::pipeline::EventType::kSensorRecovered);
  CHECK(after.events[0].wearer == 7);
  CHECK(after.events[0].actor == "gaitwatchd");
  CHECK(after.events[0].details["device"] == 1);
  CHECK(after.events[0].details["silent_s"].get<double>() == Approx(102));
}

TEST_CASE("with a writer for the devices' rows the book hands them over and keeps refused ones",
          "[wearers]") {
  TempStore store;
  Outputs out;
  gw::daemon::WearerOutputs outputs = out.sinks();
  std::vector<std::vector<gw::pipeline::WearerDeviceRecord>> handed;
  bool take = false;
  outputs.devices = [&](std::vector<gw::pipeline::WearerDeviceRecord> rows) {
    if (take) handed.push_back(std::move(rows));
    return take;
  };
  const double start = 1000;
  gw::config::Config long_silences;
  long_silences.wearers.stale_after_s = 100;
  long_silences.wearers.offline_after_s = 200;
  WearerBook book(store.path(), long_silences, start, outputs);
  const auto stored = [&] { return gw::pipeline::HitStore(store.path()).wearer_devices(); };
  book.on_frame(frame_of(7, 1, 20), start + 1);
  book.on_frame(frame_of(8, 2, 20), start + 1);
  // A periodic save refused (the writer's queue full): counted, kept.
  const double period = gw::daemon::kPersistPeriodS;
  book.tick(start + period + 1);
  CHECK(book.stats_json(start + period + 1)["store_errors"] == 1);
  CHECK(handed.empty());
  take = true;
  book.tick(start + 2 * period + 2);
  REQUIRE(handed.size() == 1);
  CHECK(handed[0].size() == 2);
  // Handed over, not written by the book itself.
  CHECK(stored().empty());
  book.flush();
  CHECK(handed.size() == 1);  // nothing changed since
  book.on_frame(frame_of(7, 1, 21), start + 2 * period + 3);
  // The last save, refused: no later one follows, so the book writes it.
  take = false;
  book.flush();
  CHECK(book.stats_json(start + 2 * period + 3)["store_errors"] == 2);
  const auto rows = stored();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].wearer == 7);
  CHECK(rows[0].last_arrival == start + 2 * period + 3);
}

TEST_CASE("alerts of registered wearers get their names", "[wearers]") {
  TempStore store;
  WearerBook book(store.path(), short_silences(), 0, {});
  book.add({{"id", 3}, {"display_name", "Grace"}});
  std::vector<gw::pipeline::Alert> alerts(2);
  alerts[0].wearer = 3;
  alerts[1].wearer = 4;
  book.name_alerts(alerts);
  CHECK(alerts[0].wearer_name == "Grace");
  CHECK(alerts[1].wearer_name.empty());
  const json j = gw::pipeline::alert_to_json(alerts[0]);
  CHECK(j["wearer_name"] == "Grace");
  CHECK_FALSE(gw::pipeline::alert_to_json(alerts[1]).contains("wearer_name"));
  CHECK(gw::pipeline::alert_from_json(j).wearer_name == "Grace");
}

TEST_CASE("a wearer's state is given once at the start, then only when it changes", "[wearers]") {
  TempStore store;
  const double start = 1000;
  {
    WearerBook setup(store.path(), short_silences(), start, {});
    setup.add({{"id", 7}, {"display_name", "Ada"}});
  }
  std::vector<std::pair<std::uint32_t, json>> states;
  gw::daemon::WearerOutputs outputs;
  outputs.state = [&](std::uint32_t wearer, const json& state) {
    states.emplace_back(wearer, state);
  };
  WearerBook book(store.path(), short_silences(), start, outputs);
  const auto given_since = [&](std::size_t from) {
    std::vector<std::uint32_t> ids;
    for (std::size_t i = from; i < states.size(); ++i) ids.push_back(states[i].first);
    return ids;
  };

  book.tick(start);  // the start: every registered wearer, devices or not
  REQUIRE(given_since(0) == std::vector<std::uint32_t>{7});
  CHECK(states[0].second["display_name"] == "Ada");
  CHECK(states[0].second["devices"].empty());

  book.on_frame(frame_of(7, 1, 0), start + 0.05);
  book.on_frame(frame_of(9, 2, 0), start + 0.05);  // unregistered, first seen
  std::size_t mark = states.size();
  book.tick(start + 0.1);
  CHECK(given_since(mark) == std::vector<std::uint32_t>{7, 9});
  CHECK(states.back().second["devices"][0]["state"] == "online");

  // Frames that keep both online, and ticks: nothing new.
  mark = states.size();
  for (int i = 1; i <= 5; ++i) {
    book.on_frame(frame_of(7, 1, i * 0.05), start + 0.1 + i * 0.02);
    book.on_frame(frame_of(9, 2, i * 0.05), start + 0.1 + i * 0.02);
    book.tick(start + 0.1 + i * 0.02);
  }
  // A change outside the state (notes) gives nothing either.
  book.set({{"id", 7}, {"notes", "left knee"}});
  book.tick(start + 0.25);
  CHECK(given_since(mark).empty());

  // A registry change in the state: that wearer only.
  book.set({{"id", 7}, {"room", "12"}});
  book.tick(start + 0.26);
  REQUIRE(given_since(mark) == std::vector<std::uint32_t>{7});
  CHECK(states.back().second["room"] == "12");

  // Wearer 9 keeps sending; wearer 7's device falls silent and goes stale
  // with the clock alone, then offline.
  mark = states.size();
  book.on_frame(frame_of(9, 2, 1), start + 0.5);
  book.tick(start + 0.55);  // 7's last frame at +0.2: stale after 0.3 s
  REQUIRE(given_since(mark) == std::vector<std::uint32_t>{7});
  CHECK(states.back().second["devices"][0]["state"] == "stale");
  book.tick(start + 0.6);
  CHECK(given_since(mark).size() == 1);
  book.on_frame(frame_of(9, 2, 2), start + 1.0);
  book.tick(start + 1.25);
  REQUIRE(given_since(mark) == std::vector<std::uint32_t>{7, 7});
  CHECK(states.back().second["devices"][0]["state"] == "offline");

  // Its next frame brings it back online: one more, for 7.
  mark = states.size();
  book.on_frame(frame_of(7, 1, 5), start + 1.3);
  book.on_frame(frame_of(9, 2, 3), start + 1.3);
  book.tick(start + 1.3);
  REQUIRE(given_since(mark) == std::vector<std::uint32_t>{7});
  CHECK(states.back().second["devices"][0]["state"] == "online");

  // Removed from the registry: its state says so.
  mark = states.size();
  book.remove({{"id", 7}});
  book.tick(start + 1.35);
  REQUIRE(given_since(mark) == std::vector<std::uint32_t>{7});
  CHECK(states.back().second["registered"] == false);
}
