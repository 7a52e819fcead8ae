// Where one stream's device clock stands: the device time of its newest
// sample. Alert t_start/t_end are on this clock, so what expires by device
// time (jobs/alert_dedup.h) expires per stream with it.
#pragma once

#include <cstdint>

namespace gw::pipeline {

struct StreamClock {
  std::uint32_t wearer = 0;
  std::uint16_t device = 0;
  double now_s = 0;  // device time [s] of the stream's newest sample
};

}  // namespace gw::pipeline
