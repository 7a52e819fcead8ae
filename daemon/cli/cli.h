// The gaitwatch command-line tool: one function per subcommand, each
// registering its flags on a CLI11 subcommand and returning its exit code.
// Errors are reported as "gaitwatch <cmd>: message" on stderr with exit 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "sensors/frame.h"
#include "sensors/recording.h"

namespace gw::cli {

// How a recording is read: --file, --format and the csv options.
struct RecordingSource {
  std::string file;
  std::string format = "daphnet";
  std::string columns;      // comma-separated names or indices; empty = all
  char delimiter = ',';
  int header_lines = 1;
  int time_column = -1;
  double time_scale = 1.0;
  double scale = 1.0;
  double rate_hz = 0;       // 0 = the format's rate (csv/values: 100 Hz)
  void add_flags(CLI::App& cmd, bool with_columns = true);
  sensors::Recording read() const;  // throws gw::Error
};

std::vector<std::string> split_list(const std::string& comma_separated);

// Cuts samples [begin, end) of `rec` into frames of `frame_samples` samples
// with consecutive sequence numbers from 0 and device times from the
// recording's time column. The same framing feeds the daemon (replay) and the
// offline engine (detect), so both see identical samples.
std::vector<sensors::Frame> frames_from_recording(const sensors::Recording& rec,
                                                  std::uint32_t wearer, std::uint16_t device,
                                                  sensors::DeviceKind kind, int frame_samples,
                                                  std::size_t begin, std::size_t end,
                                                  bool int16);
sensors::DeviceKind parse_device_kind(const std::string& name);
int default_frame_samples(double rate_hz);

void add_replay(CLI::App& app, int& exit_code);
void add_subscribe(CLI::App& app, int& exit_code);
void add_search(CLI::App& app, int& exit_code);
void add_hits(CLI::App& app, int& exit_code);
void add_detect(CLI::App& app, int& exit_code);

}  // namespace gw::cli
