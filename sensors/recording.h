// Readers for real recordings on disk. All readers return the same in-memory
// form so the replay tool, the offline search and the tests share one path.
//
// Every reader takes gzip-compressed files as well: a file whose first two
// bytes are the gzip magic bytes (1f 8b) is decompressed, whatever its name.
//
// Errors: a file that cannot be opened or decompressed, or a line that cannot
// be parsed, throws gw::Error naming the file (and the 1-based line of the
// uncompressed text).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace gw::sensors {

struct Recording {
  std::string source;                       // file path it came from
  double sample_rate_hz = 0;
  std::vector<std::string> channel_names;   // one per channel
  std::vector<double> time_s;               // one per sample, from the file's time column (or index / rate)
  std::vector<float> values;                // sample-major: values[s * channels() + c]
  std::vector<int> labels;                  // per sample annotation when the format has one (Daphnet col 11), else empty

  std::size_t channels() const { return channel_names.size(); }
  std::size_t samples() const { return channels() ? values.size() / channels() : 0; }
  float at(std::size_t sample, std::size_t channel) const { return values[sample * channels() + channel]; }
  std::vector<float> channel(std::size_t c) const;
  // Index of a channel by name (case-sensitive) or by a decimal index string; throws gw::Error.
  std::size_t channel_index(const std::string& name_or_index) const;
  // A copy with only these channels (names or indices), in this order.
  Recording select(const std::vector<std::string>& channels) const;
  // A copy of samples [begin, end).
  Recording slice(std::size_t begin, std::size_t end) const;
};

// PhysioNet gaitpdb: 19 tab-separated columns at 100 Hz. Channels L1..L8,
// R1..R8, L_total, R_total (time is kept in time_s).
Recording read_gaitpdb(const std::string& path);

// Daphnet FoG: 11 space-separated columns at 64 Hz. Channels ankle_fwd,
// ankle_vert, ankle_lat, thigh_fwd, thigh_vert, thigh_lat, trunk_fwd,
// trunk_vert, trunk_lat [mg]; column 11 goes to labels (0, 1, 2 = freeze).
Recording read_daphnet(const std::string& path);

// SisFall (Sucerquia, López, Vargas-Bonilla, Sensors 17(1):198, 2017): 9
// comma-separated integers per line, each line ending in ';' (optional here),
// blank lines and blanks around fields tolerated, 200 Hz, no time column
// (time = index / rate). Channels, scaled from the raw counts:
//   adxl_x, adxl_y, adxl_z  ADXL345 acceleration [g]  = raw * 32 / 8192
//   gyro_x, gyro_y, gyro_z  ITG3200 rotation [deg/s]  = raw * 4000 / 65536
//   mma_x,  mma_y,  mma_z   MMA8451Q acceleration [g] = raw * 16 / 16384
// A field that is not an integer, or a line without 9 fields, throws.
constexpr double kSisfallAdxlGPerCount = 32.0 / 8192.0;
constexpr double kSisfallGyroDegPerSecondPerCount = 4000.0 / 65536.0;
constexpr double kSisfallMmaGPerCount = 16.0 / 16384.0;
Recording read_sisfall(const std::string& path);

struct DelimitedOptions {
  char delimiter = ',';             // ' ' also means "any run of blanks or tabs"
  int header_lines = 0;             // lines skipped at the top; if >= 1 the last one names the columns
  int time_column = -1;             // 0-based, -1 = none (time = index / rate)
  double time_scale = 1.0;          // time column * time_scale = seconds
  std::vector<int> columns;         // 0-based columns to keep; empty = all but the time column
  std::vector<std::string> names;   // names for kept columns; empty = header names or c<index>
  double scale = 1.0;               // every value is multiplied by it
  double sample_rate_hz = 100.0;
};
// Generic delimited text. Trailing separators and blank lines are tolerated.
Recording read_delimited(const std::string& path, const DelimitedOptions& options);

// Whitespace-separated numbers of one channel (any layout of lines).
Recording read_values(const std::string& path, double sample_rate_hz = 100.0);

// Reads by format name: "gaitpdb", "daphnet", "sisfall", "csv" (comma, one
// header line with names) or "values". Throws gw::Error for an unknown format.
Recording read_recording(const std::string& path, const std::string& format);

}  // namespace gw::sensors
