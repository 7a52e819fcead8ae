// Names the calling thread as `top -H`, /proc/PID/task/*/comm and debuggers
// show it, so an operator sees which of the daemon's threads is busy.
// Linux keeps 15 characters; longer names are cut. Best effort: a failure is
// ignored (the name is only a label).
#pragma once

#include <pthread.h>

#include <string>

namespace gw {

inline void set_thread_name(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace gw
