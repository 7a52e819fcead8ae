// Test helpers that run the real binaries (common/child_process.h) and wait
// for what they should eventually show.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "common/child_process.h"

namespace gw::test {

using gw::free_port;
using gw::Process;
using gw::run_process;
using gw::RunResult;

inline std::string read_file(const std::filesystem::path& p) { return read_text_file(p); }

template <typename Predicate>
bool eventually(Predicate pred, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

}  // namespace gw::test
