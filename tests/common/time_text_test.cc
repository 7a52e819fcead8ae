// The one rule for times typed on the command line (common/time_text.h), in a
// time zone with daylight saving given as a POSIX TZ string (no zone database
// needed).
#include "common/time_text.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <ctime>

#include "common/error.h"

namespace {

// Central European time while alive (UTC+1, UTC+2 in summer).
struct CentralEuropeanTime {
  std::string previous;
  bool had = false;
  CentralEuropeanTime() {
    if (const char* tz = std::getenv("TZ")) previous = tz, had = true;
    setenv("TZ", "CET-1CEST,M3.5.0,M10.5.0/3", 1);
    tzset();
  }
  ~CentralEuropeanTime() {
    if (had)
      setenv("TZ", previous.c_str(), 1);
    else
      unsetenv("TZ");
    tzset();
  }
};

constexpr double kJuly1Noon = 1782907200;   // 2026-07-01T12:00:00Z
constexpr double kJan15Noon = 1768478400;   // 2026-01-15T12:00:00Z

}  // namespace

TEST_CASE("instants with a zone are that instant", "[time]") {
  const CentralEuropeanTime cet;
  CHECK(gw::parse_time_text("2026-07-01T12:00:00Z", 0) == kJuly1Noon);
  CHECK(gw::parse_time_text("2026-07-01 12:00Z", 0) == kJuly1Noon);
  CHECK(gw::parse_time_text("2026-07-01T14:00:00+02:00", 0) == kJuly1Noon);
  CHECK(gw::parse_time_text("2026-07-01T07:30:00-04:30", 0) == kJuly1Noon);
  CHECK(gw::parse_time_text("2026-07-01T12:00:00.25Z", 0) == Approx(kJuly1Noon + 0.25));
}

TEST_CASE("date and time without a zone are local time, daylight saving included", "[time]") {
  const CentralEuropeanTime cet;
  CHECK(gw::parse_time_text("2026-07-01T14:00:00", 0) == kJuly1Noon);  // CEST, UTC+2
  CHECK(gw::parse_time_text("2026-07-01 14:00", 0) == kJuly1Noon);
  CHECK(gw::parse_time_text("2026-01-15T13:00", 0) == kJan15Noon);     // CET, UTC+1
  CHECK(gw::parse_time_text("2026-01-15 13:00:00.5", 0) == Approx(kJan15Noon + 0.5));
}

TEST_CASE("a clock time alone is the latest such local time", "[time]") {
  const CentralEuropeanTime cet;
  const double now = kJuly1Noon;  // 14:00 local
  CHECK(gw::parse_time_text("13:30", now) == kJuly1Noon - 1800);
  CHECK(gw::parse_time_text("14:00:00", now) == kJuly1Noon);
  CHECK(gw::parse_time_text("15:00", now) == kJuly1Noon + 3600 - 86400);  // yesterday's
}

TEST_CASE("now, relative times and plain seconds", "[time]") {
  CHECK(gw::parse_time_text("now", 1000) == 1000);
  CHECK(gw::parse_time_text("-90s", 1000) == 910);
  CHECK(gw::parse_time_text("-2m", 1000) == 880);
  CHECK(gw::parse_time_text("-1.5h", 10000) == 4600);
  CHECK(gw::parse_time_text("-1d", 100000) == 100000 - 86400);
  CHECK(gw::parse_time_text("1782907200", 0) == kJuly1Noon);
  CHECK(gw::parse_time_text("12.5", 0) == 12.5);  // device seconds stay as given
  CHECK(gw::parse_time_text("-5", 0) == -5);
}

TEST_CASE("anything else is rejected with the forms", "[time]") {
  for (const char* bad : {"", "yesterday", "-3w", "2026-07-01", "2026-13-01T10:00", "25:00",
                          "2026-07-01T12:00:00Zulu", "12:00Z", "10:00 pm"}) {
    INFO(bad);
    CHECK_THROWS_WITH(gw::parse_time_text(bad, 0), Catch::Contains("expected now, -N{s,m,h,d}"));
  }
}

// --- TimeZone: unix seconds as wall-clock text of an IANA zone -----------

TEST_CASE("time zone: ISO 8601 text with milliseconds and the offset in effect that day",
          "[time_text]") {
  const gw::TimeZone berlin = gw::TimeZone::named("Europe/Berlin");
  CHECK(berlin.name() == "Europe/Berlin");
  // 2026-11-28T06:12:03.250Z is winter time in Berlin (+01:00) ...
  const double winter = 1795846323.25;
  CHECK(berlin.iso_text(winter) == "2026-11-28T07:12:03.250+01:00");
  CHECK(berlin.readable_text(winter) == "2026-11-28 07:12:03 CET");
  // ... and 2026-07-01T10:00:00Z summer time (+02:00).
  CHECK(berlin.iso_text(1782900000.0) == "2026-07-01T12:00:00.000+02:00");
  CHECK(berlin.readable_text(1782900000.0) == "2026-07-01 12:00:00 CEST");
  // West of Greenwich the offset is negative; a half-hour zone keeps its minutes.
  CHECK(gw::TimeZone::named("America/New_York").iso_text(winter) ==
        "2026-11-28T01:12:03.250-05:00");
  CHECK(gw::TimeZone::named("Asia/Kolkata").iso_text(winter) == "2026-11-28T11:42:03.250+05:30");
  CHECK(gw::TimeZone::named("UTC").iso_text(winter) == "2026-11-28T06:12:03.250+00:00");
}

TEST_CASE("time zone: a fraction that rounds up carries into the next second", "[time_text]") {
  const gw::TimeZone utc = gw::TimeZone::named("UTC");
  CHECK(utc.iso_text(1795846319.9996) == "2026-11-28T06:12:00.000+00:00");
  CHECK(utc.iso_text(std::nan("")) == "");
  CHECK(utc.readable_text(1795846319.9996) == "2026-11-28 06:11:59 UTC");
}

TEST_CASE("time zone: unknown names are refused with the name, and the system zone always exists",
          "[time_text]") {
  CHECK_THROWS_WITH(gw::TimeZone::named("Mars/Olympus_Mons"),
                    Catch::Contains("Mars/Olympus_Mons") && Catch::Contains("IANA"));
  CHECK_THROWS(gw::TimeZone::named(""));
  CHECK_FALSE(gw::TimeZone::system().name().empty());
  CHECK(gw::TimeZone::named_or_system("Europe/Lisbon").name() == "Europe/Lisbon");
}

TEST_CASE("time zone: the system zone follows TZ when it names a zone", "[time_text]") {
  const char* before = std::getenv("TZ");
  const std::string previous = before ? before : "";
  setenv("TZ", "Pacific/Auckland", 1);
  CHECK(gw::TimeZone::system().name() == "Pacific/Auckland");
  setenv("TZ", ":Europe/Paris", 1);
  CHECK(gw::TimeZone::named_or_system("").name() == "Europe/Paris");
  if (before)
    setenv("TZ", previous.c_str(), 1);
  else
    unsetenv("TZ");
}
