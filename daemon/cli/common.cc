#include <algorithm>
#include <cmath>
#include <sstream>

#include "common/error.h"
#include "daemon/cli/cli.h"

namespace gw::cli {

std::vector<std::string> split_list(const std::string& comma_separated) {
  std::vector<std::string> out;
  std::stringstream in(comma_separated);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

void RecordingSource::add_flags(CLI::App& cmd, bool with_columns, bool file_required) {
  cmd.add_option("--file", file, "recording to read")->required(file_required);
  cmd.add_option("--format", format, "gaitpdb | daphnet | csv | values")
      ->check(CLI::IsMember({"gaitpdb", "daphnet", "csv", "values"}));
  if (with_columns)
    cmd.add_option("--columns", columns, "comma-separated channel names or indices (default all)");
  cmd.add_option("--delimiter", delimiter, "csv: field delimiter (' ' = any blanks)");
  cmd.add_option("--header-lines", header_lines, "csv: lines to skip; the last names the columns");
  cmd.add_option("--time-column", time_column, "csv: 0-based time column (-1 = none)");
  cmd.add_option("--time-scale", time_scale, "csv: time column * this = seconds");
  cmd.add_option("--scale", scale, "csv: multiply every value by this");
  cmd.add_option("--rate", rate_hz, "csv/values: sample rate in Hz (default 100)");
}

sensors::Recording RecordingSource::read() const {
  sensors::Recording rec;
  if (format == "csv") {
    sensors::DelimitedOptions options;
    options.delimiter = delimiter;
    options.header_lines = header_lines;
    options.time_column = time_column;
    options.time_scale = time_scale;
    options.scale = scale;
    if (rate_hz > 0) options.sample_rate_hz = rate_hz;
    rec = sensors::read_delimited(file, options);
  } else if (format == "values") {
    rec = sensors::read_values(file, rate_hz > 0 ? rate_hz : 100.0);
  } else {
    rec = sensors::read_recording(file, format);
  }
  if (!columns.empty()) rec = rec.select(split_list(columns));
  return rec;
}

sensors::DeviceKind parse_device_kind(const std::string& name) {
  if (name == "pressure_insole_left") return sensors::DeviceKind::kPressureInsoleLeft;
  if (name == "pressure_insole_right") return sensors::DeviceKind::kPressureInsoleRight;
  if (name == "force_insole_8") return sensors::DeviceKind::kForceInsole8;
  if (name == "accelerometer_3") return sensors::DeviceKind::kAccelerometer3;
  if (name == "generic") return sensors::DeviceKind::kGeneric;
  throw Error("unknown device kind '" + name + "'");
}

int default_frame_samples(double rate_hz) {
  return std::max(1, static_cast<int>(std::lround(rate_hz / 10.0)));
}

}  // namespace gw::cli
