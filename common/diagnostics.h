// The GW_* environment switches: diagnostics for operators and developers
// (logs that time each step of the pipeline, the CUDA search's stage times)
// and one knob that lets the GPU tests reach a CUDA kernel path their small
// batches would not. None changes a result. They are read here, once; every
// component takes what it needs from diagnostics() and none reads the
// environment for them itself. The table of switches is in docs/design.md,
// "Diagnostics".
//
// Thread safety: diagnostics() may be called from any thread. The first call
// reads the environment (a function-local static); the daemon makes it at
// start, before its other threads, by logging the switches that are set.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace gw {

struct Diagnostics {
  // GW_DAEMON_TICK_LOG=FILE: the daemon's pipeline thread appends one line
  // per tick step to FILE (daemon/daemon.cc says what each holds;
  // scripts/tick_log_summary.py reads it). Empty: no log.
  std::string daemon_tick_log;
  // GW_ENGINE_BATCH_LOG=FILE: the engine appends one line per batch to FILE
  // (predicted and observed time, search, phase 2, matches, deferrals so
  // far). Empty: no log.
  std::string engine_batch_log;
  // GW_CUDA_STAGE_TIMES (any value): each CUDA search prints the time of
  // each of its stages to stderr, one JSON line. The stream is synchronised
  // at every stage boundary then, so searches get slower.
  bool cuda_stage_times = false;
  // GW_CUDA_DTW_PER_LANE=N (N >= 1): the candidates each lane of the
  // register DTW kernel owns. 0: chosen from the batch's candidate count,
  // which gives the GPU tests' small batches one per lane, so the kernel's
  // refill runs only when this sets more.
  int cuda_dtw_candidates_per_lane = 0;

  // Every switch that is set, as "NAME=VALUE", in the order above.
  std::vector<std::string> set;
  // Switches set to a value they do not take, as "NAME=VALUE: why"; their
  // field keeps its default.
  std::vector<std::string> ignored;

  // The value of environment variable `name`, or null when it is unset.
  using Lookup = std::function<const char*(const char* name)>;
  static Diagnostics read(const Lookup& lookup);
};

// The process's switches, read from the environment on the first call.
const Diagnostics& diagnostics();

// A diagnostics file that lines are appended to (daemon_tick_log,
// engine_batch_log). A diagnostic must never stop the daemon: writing never
// throws, and at the first write that fails (a full disk) the file is
// closed, one line says so on stderr, and later lines are dropped. Not
// thread-safe: one writer thread.
class DiagnosticLog {
 public:
  DiagnosticLog() = default;
  // Appends to `path`; an empty path is no log, one that cannot be opened
  // is no log and a line on stderr. `name` names it in those lines
  // (e.g. "GW_DAEMON_TICK_LOG").
  DiagnosticLog(const std::string& path, std::string name);
  ~DiagnosticLog();
  DiagnosticLog(const DiagnosticLog&) = delete;
  DiagnosticLog& operator=(const DiagnosticLog&) = delete;

  explicit operator bool() const { return file_ != nullptr; }
  // Appends `text` as it is (the caller ends its lines).
  void write(std::string_view text);

 private:
  void close_after_failure(const char* what);

  std::FILE* file_ = nullptr;
  std::string name_;
  std::string path_;
};

}  // namespace gw
