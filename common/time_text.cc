#include "common/time_text.h"

#include <date/date.h>
#include <date/tz.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <sstream>

#include "common/error.h"

namespace gw {

const char* const kTimeTextForms =
    "now, -N{s,m,h,d}, seconds, YYYY-MM-DD[T ]HH:MM[:SS] with Z or +HH:MM (that instant) or "
    "without (local time), or HH:MM[:SS] (local, the latest such time)";

namespace {

using Fractional = std::chrono::duration<double>;

// Parses all of `text` with `format` into a time point of seconds with a
// fraction; false when the format does not take the whole text.
template <typename TimePoint>
bool parse_whole(const std::string& text, const char* format, TimePoint& out,
                 std::chrono::minutes* offset = nullptr) {
  std::istringstream in(text);
  if (offset)
    in >> date::parse(format, out, *offset);
  else
    in >> date::parse(format, out);
  return !in.fail() && in.peek() == std::char_traits<char>::eof();
}

// Local wall-clock fields to unix seconds, as the C library's time zone sees
// that date (daylight saving decided for the date itself).
double local_to_unix(const date::local_time<std::chrono::microseconds>& local) {
  const auto day = date::floor<date::days>(local);
  const date::year_month_day ymd(day);
  const date::hh_mm_ss<std::chrono::microseconds> clock(local - day);
  std::tm tm{};
  tm.tm_year = static_cast<int>(ymd.year()) - 1900;
  tm.tm_mon = static_cast<int>(static_cast<unsigned>(ymd.month())) - 1;
  tm.tm_mday = static_cast<int>(static_cast<unsigned>(ymd.day()));
  tm.tm_hour = static_cast<int>(clock.hours().count());
  tm.tm_min = static_cast<int>(clock.minutes().count());
  tm.tm_sec = static_cast<int>(clock.seconds().count());
  tm.tm_isdst = -1;
  return static_cast<double>(std::mktime(&tm)) +
         std::chrono::duration_cast<Fractional>(clock.subseconds()).count();
}

}  // namespace

double parse_time_text(const std::string& text, double now) {
  const auto fail = [&]() -> double {
    throw Error("time '" + text + "': expected " + kTimeTextForms);
  };
  if (text == "now") return now;
  if (text.empty()) return fail();
  if (text[0] == '-' && text.size() > 1 && !std::isdigit(static_cast<unsigned char>(text.back()))) {
    char* end = nullptr;
    const double amount = std::strtod(text.c_str() + 1, &end);
    const std::string unit(end);
    const double scale =
        unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : unit == "d" ? 86400 : 0;
    if (end == text.c_str() + 1 || scale == 0 || !(amount >= 0)) return fail();
    return now - amount * scale;
  }
  {
    char* end = nullptr;
    const double seconds = std::strtod(text.c_str(), &end);
    if (*end == '\0' && std::isfinite(seconds)) return seconds;
  }
  // A date and a time; 'T' or a space between them.
  std::string normal = text;
  if (normal.size() > 10 && normal[10] == ' ') normal[10] = 'T';
  const bool zulu = !normal.empty() && (normal.back() == 'Z' || normal.back() == 'z');
  if (zulu) normal.back() = '+', normal += "00:00";
  using Micro = std::chrono::microseconds;
  for (const char* format : {"%FT%T%Ez", "%FT%R%Ez"}) {
    date::sys_time<Micro> instant;
    std::chrono::minutes offset{};
    if (parse_whole(normal, format, instant, &offset))
      return std::chrono::duration_cast<Fractional>(instant.time_since_epoch()).count();
  }
  if (zulu) return fail();
  for (const char* format : {"%FT%T", "%FT%R"}) {
    date::local_time<Micro> local;
    if (parse_whole(normal, format, local)) return local_to_unix(local);
  }
  // A clock time alone: today's, or yesterday's when today's is still ahead.
  for (const char* format : {"%T", "%R"}) {
    std::chrono::duration<std::int64_t, std::micro> of_day{};
    std::istringstream in(normal);
    in >> date::parse(format, of_day);
    if (in.fail() || in.peek() != std::char_traits<char>::eof()) continue;
    if (of_day >= date::days{1}) return fail();
    const auto now_t = static_cast<std::time_t>(std::floor(now));
    std::tm today{};
    localtime_r(&now_t, &today);
    const date::local_days day = date::local_days(date::year_month_day(
        date::year(today.tm_year + 1900), date::month(static_cast<unsigned>(today.tm_mon + 1)),
        date::day(static_cast<unsigned>(today.tm_mday))));
    double t = local_to_unix(day + of_day);
    if (t > now) t = local_to_unix(day - date::days{1} + of_day);
    return t;
  }
  return fail();
}

namespace {

// The zone's local time of `unix_s`, split for formatting: whole seconds, the
// milliseconds and the zone's offset and abbreviation then in effect.
struct LocalParts {
  date::local_seconds local;
  int millis = 0;
  std::chrono::seconds offset{0};
  std::string abbrev;
};

LocalParts local_parts(const date::time_zone& zone, double unix_s) {
  // Rounded to the millisecond first, so that 59.9996 s reads 00.000 of the
  // next minute rather than 59.1000.
  const auto ms = std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(unix_s * 1000)));
  const date::sys_time<std::chrono::milliseconds> instant(ms);
  const auto seconds = date::floor<std::chrono::seconds>(instant);
  const date::sys_info info = zone.get_info(seconds);
  LocalParts parts;
  parts.local = date::local_seconds((seconds + info.offset).time_since_epoch());
  parts.millis = static_cast<int>((instant - seconds).count());
  parts.offset = info.offset;
  parts.abbrev = info.abbrev;
  return parts;
}

// "YYYY-MM-DD", the separator, "HH:MM:SS".
std::string date_and_clock(date::local_seconds local, char separator) {
  const auto day = date::floor<date::days>(local);
  const date::year_month_day ymd(day);
  const date::hh_mm_ss<std::chrono::seconds> clock(local - day);
  char text[40];
  std::snprintf(text, sizeof text, "%04d-%02u-%02u%c%02d:%02d:%02d", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()), separator,
                static_cast<int>(clock.hours().count()), static_cast<int>(clock.minutes().count()),
                static_cast<int>(clock.seconds().count()));
  return text;
}

}  // namespace

TimeZone TimeZone::named(const std::string& iana_name) {
  try {
    const date::time_zone* zone = date::locate_zone(iana_name);
    return TimeZone(zone, iana_name);
  } catch (const std::exception&) {
    throw Error("time zone '" + iana_name +
                "': not in the time zone database (an IANA name such as Europe/Berlin or UTC; "
                "Debian package tzdata)");
  }
}

TimeZone TimeZone::system() {
  if (const char* tz = std::getenv("TZ"); tz != nullptr && *tz != '\0') {
    // POSIX allows a leading ':' before a zone's name.
    const std::string name(tz[0] == ':' ? tz + 1 : tz);
    try {
      return TimeZone(date::locate_zone(name), name);
    } catch (const std::exception&) {
      // Not an IANA name (a POSIX rule such as "CET-1CEST"): the system file decides.
    }
  }
  try {
    const date::time_zone* zone = date::current_zone();
    return TimeZone(zone, std::string(zone->name()));
  } catch (const std::exception&) {
  }
  try {
    return TimeZone(date::locate_zone("UTC"), "UTC");
  } catch (const std::exception& e) {
    throw Error(std::string("no time zone database (Debian package tzdata): ") + e.what());
  }
}

TimeZone TimeZone::named_or_system(const std::string& iana_name) {
  return iana_name.empty() ? system() : named(iana_name);
}

std::string TimeZone::iso_text(double unix_s) const {
  if (!std::isfinite(unix_s)) return "";
  const LocalParts parts = local_parts(*zone_, unix_s);
  const long offset_min = static_cast<long>(parts.offset.count() / 60);
  const long magnitude = offset_min < 0 ? -offset_min : offset_min;
  char tail[40];
  std::snprintf(tail, sizeof tail, ".%03d%c%02ld:%02ld", parts.millis, offset_min < 0 ? '-' : '+',
                magnitude / 60, magnitude % 60);
  return date_and_clock(parts.local, 'T') + tail;
}

std::string TimeZone::readable_text(double unix_s) const {
  if (!std::isfinite(unix_s)) return "";
  const LocalParts parts = local_parts(*zone_, std::floor(unix_s));
  return date_and_clock(parts.local, ' ') + " " + parts.abbrev;
}

}  // namespace gw
