// Scoring patterns on annotated recordings, shared by `gaitwatch eval` and
// `gaitwatch train` (daemon/cli/eval.cc, train.cc): the options both take,
// how a recording and its annotation are loaded, and the scoring run itself.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "config/config.h"
#include "daemon/cli/cli.h"
#include "pipeline/evaluation.h"

namespace gw::cli {

struct EvalOptions {
  std::string config_path;
  RecordingSource source;
  std::vector<std::string> files;
  std::vector<std::string> subjects;  // FILE=ID overrides
  OfflineRun run;
  std::vector<std::string> events_files;  // one EVENTS, or FILE=EVENTS per recording
  std::string pattern;  // empty = every pattern of the device
  bool cv = false;
  bool loso = false;
  std::string leave_out;  // subject | recording; --loso = subject
  bool json = false;
  int ndcg_k = 20;
  double tolerance_s = 1.0;
  int simulate_marks = 0;
  std::string mine_negatives;  // directory for the false alerts' windows
  // Set by `train --loso`: the library a group is scored with (the pattern
  // without the group's examples) is passed through this first, so that a
  // learned decision is fitted without the scored group's recordings.
  std::function<config::PatternConfig(const config::PatternConfig& fold, const std::string& group)>
      refit;
};

// The flags eval and train share: --config, the recording flags with --file
// repeated, the offline-run flags, --subject, --events, --pattern, --loso,
// --leave-out, --json, --tolerance.
void add_scoring_flags(CLI::App& cmd, EvalOptions& options);

// One scored recording: what it is and how it is labelled.
struct ScoredFile {
  std::string file;
  pipeline::RecordingName name;
  sensors::Recording rec;
  bool trial = false;                   // SisFall: labelled per file
  std::vector<pipeline::LabelledEvent> events;  // recording indices, inside [first, stop)
  std::vector<pipeline::LabelledEvent> unannotated;
  std::int64_t first = 0;
  std::int64_t stop = 0;
};

pipeline::LeaveOut leave_out_of(const EvalOptions& o);

// Reads `file` as `device` takes it and its annotation: --events, else the
// recording's own labels (Daphnet), else its trial name (SisFall). `single`:
// the only file (--start/--end apply). Throws gw::Error / UsageError.
ScoredFile load_file(const EvalOptions& o, const config::DeviceProfile& device,
                     const std::string& file, bool single);

// `gaitwatch eval` with these options: prints the tables (or JSON), returns
// the exit code.
int run_eval(const EvalOptions& o);

}  // namespace gw::cli
