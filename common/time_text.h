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
#pragma once

#include <string>

namespace gw {

double parse_time_text(const std::string& text, double now);

// The forms parse_time_text accepts, for usage and error messages.
extern const char* const kTimeTextForms;

}  // namespace gw
