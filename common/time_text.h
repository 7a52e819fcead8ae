// Times as users type them on the command line, one rule for every command
// (`gaitwatch slots --since`, `history ... --from/--to`, `search --from`):
//
//   now                        the given `now`
//   -N{s,m,h,d}                N seconds/minutes/hours/days before now
//   a plain number             that many seconds, as given (unix seconds, or
//                              device-clock seconds where a command searches
//                              device time)
//   YYYY-MM-DD[T| ]HH:MM[:SS[.fff]] followed by Z or +HH:MM / -HH:MM
//                              that instant (ISO 8601 with its zone)
//   the same without a zone    local time on that date (the process's TZ)
//   HH:MM[:SS]                 local time today, or yesterday when that is
//                              still to come
//
// Returns unix seconds (or the plain number). Throws gw::Error naming the
// accepted forms when `text` is none of them.
//
// Thread safety: reads the process's time zone (TZ) only.
//
// Written the other way, TimeZone turns unix seconds into wall-clock text of
// one IANA zone (the site's, config `site.time_zone`), from the system's
// time zone database (Debian package tzdata), for messages that people and
// their tools read: the same instant reads the same wherever it is printed.
#pragma once

#include <string>
#include <utility>

namespace date {
class time_zone;
}

namespace gw {

double parse_time_text(const std::string& text, double now);

// The forms parse_time_text accepts, for usage and error messages.
extern const char* const kTimeTextForms;

// An IANA time zone. Copies are cheap (the zone data is the database's,
// loaded once per process and never freed). Thread safety: const methods may
// be called from any thread.
class TimeZone {
 public:
  // The zone named `iana_name` ("Europe/Berlin", "UTC"); throws gw::Error
  // naming it when the database has no such zone.
  static TimeZone named(const std::string& iana_name);
  // The system's zone: $TZ when it names a zone, else /etc/localtime; UTC
  // when neither can be found (a container without tzdata, say).
  static TimeZone system();
  // named(iana_name), or system() for an empty name.
  static TimeZone named_or_system(const std::string& iana_name);

  // The IANA name ("Europe/Berlin").
  const std::string& name() const { return name_; }
  // ISO 8601 with milliseconds and the offset in effect at that instant:
  // "2026-11-28T07:12:03.250+01:00". Non-finite input gives "".
  std::string iso_text(double unix_s) const;
  // For reading at a glance, whole seconds and the zone's abbreviation:
  // "2026-11-28 07:12:03 CET". Non-finite input gives "".
  std::string readable_text(double unix_s) const;

 private:
  TimeZone(const date::time_zone* zone, std::string name) : zone_(zone), name_(std::move(name)) {}
  const date::time_zone* zone_;
  std::string name_;
};

}  // namespace gw
