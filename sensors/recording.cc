#include "sensors/recording.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string_view>
#include <type_traits>

#include <zlib.h>

#include "common/error.h"

namespace gw::sensors {
namespace {

[[noreturn]] void fail_at(const std::string& path, std::size_t line, const std::string& what) {
  throw Error(path + ":" + std::to_string(line) + ": " + what);
}

constexpr unsigned char kGzipMagic[2] = {0x1f, 0x8b};

bool starts_with_gzip_magic(const std::string& bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == kGzipMagic[0] &&
         static_cast<unsigned char>(bytes[1]) == kGzipMagic[1];
}

// The uncompressed bytes of a gzip file (every member, as gzip -d writes them).
std::string gunzip(const std::string& path, const std::string& compressed) {
  z_stream stream{};
  // 15 + 16: the largest window, gzip header and trailer expected.
  if (inflateInit2(&stream, 15 + 16) != Z_OK)
    throw Error("cannot read recording " + path + ": zlib would not start");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&stream, &inflateEnd);
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = static_cast<uInt>(compressed.size());
  std::string text;
  char buffer[1 << 16];
  while (true) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof buffer;
    const int status = inflate(&stream, Z_NO_FLUSH);
    text.append(buffer, sizeof buffer - stream.avail_out);
    if (status == Z_STREAM_END) {
      if (stream.avail_in == 0) return text;
      if (inflateReset(&stream) != Z_OK)
        throw Error("cannot read recording " + path + ": zlib would not restart");
      continue;  // the next gzip member
    }
    if (status == Z_OK) continue;
    if (status == Z_BUF_ERROR && stream.avail_in == 0)
      throw Error("cannot read recording " + path + ": the gzip data ends early");
    throw Error("cannot read recording " + path + ": corrupt gzip data" +
                (stream.msg ? std::string(" (") + stream.msg + ")" : std::string()));
  }
}

// The text of a recording: the file's bytes, decompressed when they start
// with the gzip magic bytes (whatever the file is called). Every reader
// reads through here.
std::string read_recording_text(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  if (!file) throw Error("cannot open recording " + path + ": " + std::strerror(errno));
  std::string bytes;
  char buffer[1 << 16];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, file.get())) > 0) bytes.append(buffer, n);
  if (std::ferror(file.get())) throw Error("cannot read recording " + path + ": read error");
  if (!starts_with_gzip_magic(bytes)) return bytes;
  if (bytes.size() > std::numeric_limits<uInt>::max())
    throw Error("cannot read recording " + path + ": the gzip file is too large");
  return gunzip(path, bytes);
}

// Blanks separate fields; '\r', '\v' and '\f' count too so that stray
// carriage returns and form feeds never end up inside a number.
// Spreadsheet exports often start with a UTF-8 byte order mark; it is no data.
std::string_view without_bom(std::string_view text) {
  constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";
  if (text.substr(0, kUtf8Bom.size()) == kUtf8Bom) text.remove_prefix(kUtf8Bom.size());
  return text;
}

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// Walks the lines of a text, 1-based, without their "\n" or "\r\n" ending.
class LineCursor {
 public:
  explicit LineCursor(std::string_view text) : rest_(text) {}
  bool next(std::string_view& line) {
    if (rest_.empty()) return false;
    const std::size_t end = rest_.find('\n');
    line = rest_.substr(0, end);
    rest_ = end == std::string_view::npos ? std::string_view() : rest_.substr(end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++number_;
    return true;
  }
  std::size_t number() const { return number_; }

 private:
  std::string_view rest_;
  std::size_t number_ = 0;
};

// Splits `line` into `fields`. A ' ' delimiter splits on runs of blanks and
// tabs; any other delimiter splits on each occurrence, trims blanks around
// fields and ignores separators at the end of the line. A blank line yields no
// fields.
void split_fields(std::string_view line, char delimiter, std::vector<std::string_view>& fields) {
  fields.clear();
  if (delimiter == ' ') {
    std::size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && is_blank(line[i])) ++i;
      const std::size_t start = i;
      while (i < line.size() && !is_blank(line[i])) ++i;
      if (i > start) fields.push_back(line.substr(start, i - start));
    }
    return;
  }
  auto is_padding = [delimiter](char c) { return c != delimiter && is_blank(c); };
  while (!line.empty() && (line.back() == delimiter || is_blank(line.back())))
    line.remove_suffix(1);
  if (line.empty()) return;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = std::min(line.find(delimiter, start), line.size());
    std::string_view field = line.substr(start, end - start);
    while (!field.empty() && is_padding(field.front())) field.remove_prefix(1);
    while (!field.empty() && is_padding(field.back())) field.remove_suffix(1);
    fields.push_back(field);
    if (end == line.size()) return;
    start = end + 1;
  }
}

// std::from_chars over a whole field, which may also start with '+' (from_chars
// accepts '-' but not '+'); locale independent.
template <typename Number>
bool parse_whole_field(std::string_view field, Number& value) {
  const char* begin = field.data();
  const char* end = begin + field.size();
  if (begin != end && *begin == '+') {
    ++begin;
    if (begin != end && *begin == '-') return false;
  }
  const auto [stop, error] = std::from_chars(begin, end, value);
  return error == std::errc() && stop == end && begin != end;
}

// Parses a whole field as a finite decimal number.
bool parse_number(std::string_view field, double& value) {
  return parse_whole_field(field, value) && std::isfinite(value);
}

bool parse_int(std::string_view field, int& value) {
  const char* end = field.data() + field.size();
  const auto [stop, error] = std::from_chars(field.data(), end, value);
  return error == std::errc() && stop == end && !field.empty();
}

std::string quoted(std::string_view field) { return "'" + std::string(field) + "'"; }

// read_delimited plus what the fixed formats need on top of it.
struct TableSpec {
  DelimitedOptions options;
  int label_column = -1;             // 0-based column parsed into Recording::labels
  int expected_fields = 0;           // 0 = as many as the header (or the first data line) has
  char line_terminator = '\0';       // when set, one at the end of a line (before blanks) is dropped
  bool integer_values = false;       // value columns must hold integers
  std::vector<double> column_scales; // per kept column, replacing options.scale; empty = none
};

// `line` without blanks at its end and without one `terminator` there.
std::string_view without_terminator(std::string_view line, char terminator) {
  while (!line.empty() && is_blank(line.back())) line.remove_suffix(1);
  if (!line.empty() && line.back() == terminator) line.remove_suffix(1);
  return line;
}

// Parses a whole field as a decimal integer that a double holds exactly.
bool parse_integer_number(std::string_view field, double& value) {
  long long integer = 0;
  if (!parse_whole_field(field, integer)) return false;
  constexpr long long kExactInDouble = 1LL << 53;
  if (integer > kExactInDouble || integer < -kExactInDouble) return false;
  value = static_cast<double>(integer);
  return true;
}

void check_options(const std::string& path, const DelimitedOptions& o) {
  auto fail = [&path](const std::string& what) {
    throw Error("cannot read " + path + ": " + what);
  };
  if (!std::isfinite(o.sample_rate_hz) || o.sample_rate_hz <= 0) {
    fail("sample rate must be a positive number of Hz");
  }
  if (!std::isfinite(o.time_scale) || !std::isfinite(o.scale)) fail("scales must be finite");
  if (o.header_lines < 0) fail("header_lines must not be negative");
  if (o.time_column < -1) fail("time_column must be a 0-based column or -1 for none");
  if (o.delimiter == '\n' || o.delimiter == '\r' || o.delimiter == '\0') {
    fail("the delimiter cannot be a line ending or NUL");
  }
  for (int c : o.columns) {
    if (c < 0) fail("column indices are 0-based and must not be negative");
  }
  if (!o.names.empty() && !o.columns.empty() && o.names.size() != o.columns.size()) {
    fail(std::to_string(o.names.size()) + " names for " + std::to_string(o.columns.size()) +
         " columns");
  }
}

// Fixes which columns are kept and their names once the field count is known.
// `line` is the first data line, named by errors.
void resolve_columns(const std::string& path, std::size_t line, const TableSpec& spec,
                     int field_count, const std::vector<std::string>& header,
                     std::vector<int>& columns, std::vector<std::string>& names) {
  const DelimitedOptions& o = spec.options;
  columns = o.columns;
  if (columns.empty()) {
    for (int c = 0; c < field_count; ++c) {
      if (c != o.time_column && c != spec.label_column) columns.push_back(c);
    }
  }
  if (columns.empty()) fail_at(path, line, "no value columns");
  // Options count columns from 0; messages about a line count them from 1.
  auto check_column = [&](int c, const char* what) {
    if (c >= field_count) {
      fail_at(path, line,
              std::string(what) + " column index " + std::to_string(c) +
                  " (0-based) does not exist: lines have " + std::to_string(field_count) +
                  " fields");
    }
  };
  for (int c : columns) check_column(c, "value");
  check_column(o.time_column, "time");
  check_column(spec.label_column, "label");
  if (!o.names.empty() && o.names.size() != columns.size()) {
    fail_at(path, line,
            std::to_string(o.names.size()) + " names for " + std::to_string(columns.size()) +
                " value columns");
  }
  names.clear();
  for (std::size_t k = 0; k < columns.size(); ++k) {
    if (!o.names.empty()) {
      names.push_back(o.names[k]);
    } else if (!header.empty()) {
      names.push_back(header[static_cast<std::size_t>(columns[k])]);
    } else {
      names.push_back("c" + std::to_string(columns[k]));
    }
  }
}

Recording read_table(const std::string& path, const TableSpec& spec) {
  const DelimitedOptions& o = spec.options;
  check_options(path, o);
  const std::string text = read_recording_text(path);

  Recording rec;
  rec.source = path;
  rec.sample_rate_hz = o.sample_rate_hz;
  const std::size_t line_estimate = std::count(text.begin(), text.end(), '\n') + 1;

  std::vector<std::string> header;
  std::vector<int> columns;
  int field_count = 0;
  bool seen_data = false;
  std::vector<std::string_view> fields;
  LineCursor cursor(without_bom(text));
  std::string_view line;
  while (cursor.next(line)) {
    const std::size_t number = cursor.number();
    if (number <= static_cast<std::size_t>(o.header_lines)) {
      if (number == static_cast<std::size_t>(o.header_lines)) {
        split_fields(line, o.delimiter, fields);
        header.assign(fields.begin(), fields.end());
      }
      continue;
    }
    if (spec.line_terminator != '\0') line = without_terminator(line, spec.line_terminator);
    split_fields(line, o.delimiter, fields);
    if (fields.empty()) continue;
    if (!seen_data) {
      seen_data = true;
      field_count = spec.expected_fields != 0 ? spec.expected_fields
                    : !header.empty()         ? static_cast<int>(header.size())
                                              : static_cast<int>(fields.size());
      resolve_columns(path, number, spec, field_count, header, columns, rec.channel_names);
      rec.values.reserve(line_estimate * columns.size());
      rec.time_s.reserve(line_estimate);
      if (spec.label_column >= 0) rec.labels.reserve(line_estimate);
    }
    if (fields.size() != static_cast<std::size_t>(field_count)) {
      fail_at(path, number,
              std::to_string(fields.size()) + " fields, expected " + std::to_string(field_count));
    }
    double value;
    for (std::size_t k = 0; k < columns.size(); ++k) {
      const int c = columns[k];
      const std::string_view field = fields[static_cast<std::size_t>(c)];
      if (spec.integer_values ? !parse_integer_number(field, value) : !parse_number(field, value)) {
        fail_at(path, number,
                "column " + std::to_string(c + 1) + ": " + quoted(field) +
                    (spec.integer_values ? " is not an integer" : " is not a finite number"));
      }
      const double scale = spec.column_scales.empty() ? o.scale : spec.column_scales[k];
      const auto scaled = static_cast<float>(value * scale);
      if (!std::isfinite(scaled)) {
        fail_at(path, number,
                "column " + std::to_string(c + 1) + ": " + quoted(field) +
                    " is out of the float range");
      }
      rec.values.push_back(scaled);
    }
    if (o.time_column >= 0) {
      const std::string_view field = fields[static_cast<std::size_t>(o.time_column)];
      if (!parse_number(field, value)) {
        fail_at(path, number,
                "time column " + std::to_string(o.time_column + 1) + ": " + quoted(field) +
                    " is not a finite number");
      }
      rec.time_s.push_back(value * o.time_scale);
    } else {
      rec.time_s.push_back(static_cast<double>(rec.time_s.size()) / o.sample_rate_hz);
    }
    if (spec.label_column >= 0) {
      const std::string_view field = fields[static_cast<std::size_t>(spec.label_column)];
      int label;
      if (!parse_int(field, label)) {
        fail_at(path, number,
                "label column " + std::to_string(spec.label_column + 1) + ": " + quoted(field) +
                    " is not an integer");
      }
      rec.labels.push_back(label);
    }
  }
  if (!seen_data) throw Error("cannot read " + path + ": no data lines");
  return rec;
}

}  // namespace

std::vector<float> Recording::channel(std::size_t c) const {
  if (c >= channels()) {
    throw Error("channel " + std::to_string(c) + " does not exist in " + source + " (" +
                std::to_string(channels()) + " channels)");
  }
  const std::size_t n = samples();
  std::vector<float> out(n);
  for (std::size_t s = 0; s < n; ++s) out[s] = values[s * channels() + c];
  return out;
}

// A name takes precedence over an index, so a channel named "3" stays reachable.
std::size_t Recording::channel_index(const std::string& name_or_index) const {
  const auto by_name = std::find(channel_names.begin(), channel_names.end(), name_or_index);
  if (by_name != channel_names.end())
    return static_cast<std::size_t>(by_name - channel_names.begin());
  std::size_t index = 0;
  const char* end = name_or_index.data() + name_or_index.size();
  const auto [stop, error] = std::from_chars(name_or_index.data(), end, index);
  if (!name_or_index.empty() && error == std::errc() && stop == end && index < channels()) {
    return index;
  }
  std::string known;
  constexpr std::size_t kNamesListed = 20;
  for (std::size_t c = 0; c < channels() && c < kNamesListed; ++c) {
    known += (c ? ", " : "") + channel_names[c];
  }
  if (channels() > kNamesListed) known += ", ...";
  throw Error("no channel '" + name_or_index + "' in " + source + " (channels " +
              (known.empty() ? "none" : known) + "; or an index below " +
              std::to_string(channels()) + ")");
}

Recording Recording::select(const std::vector<std::string>& wanted) const {
  if (wanted.empty()) throw Error("select from " + source + ": no channels given");
  std::vector<std::size_t> indices;
  for (const std::string& w : wanted) indices.push_back(channel_index(w));
  Recording out;
  out.source = source;
  out.sample_rate_hz = sample_rate_hz;
  out.time_s = time_s;
  out.labels = labels;
  for (std::size_t c : indices) out.channel_names.push_back(channel_names[c]);
  const std::size_t n = samples();
  out.values.reserve(n * indices.size());
  for (std::size_t s = 0; s < n; ++s) {
    for (std::size_t c : indices) out.values.push_back(values[s * channels() + c]);
  }
  return out;
}

Recording Recording::slice(std::size_t begin, std::size_t end) const {
  const std::size_t n = samples();
  if (begin > end || end > n) {
    throw Error("slice [" + std::to_string(begin) + ", " + std::to_string(end) + ") of " + source +
                " is outside its " + std::to_string(n) + " samples");
  }
  auto per_sample = [&](const auto& v, const char* what) {
    using Vector = std::decay_t<decltype(v)>;
    if (v.empty()) return Vector();
    if (v.size() != n) {
      throw Error(std::string("slice of ") + source + ": " + what + " has " +
                  std::to_string(v.size()) + " entries for " + std::to_string(n) + " samples");
    }
    return Vector(v.begin() + static_cast<std::ptrdiff_t>(begin),
                  v.begin() + static_cast<std::ptrdiff_t>(end));
  };
  Recording out;
  out.source = source;
  out.sample_rate_hz = sample_rate_hz;
  out.channel_names = channel_names;
  out.time_s = per_sample(time_s, "time_s");
  out.labels = per_sample(labels, "labels");
  out.values.assign(values.begin() + static_cast<std::ptrdiff_t>(begin * channels()),
                    values.begin() + static_cast<std::ptrdiff_t>(end * channels()));
  return out;
}

Recording read_gaitpdb(const std::string& path) {
  TableSpec spec;
  spec.options.delimiter = '\t';
  spec.options.time_column = 0;
  spec.options.sample_rate_hz = 100.0;
  spec.expected_fields = 19;
  for (int c = 1; c <= 18; ++c) spec.options.columns.push_back(c);
  for (const char* foot : {"L", "R"}) {
    for (int sensor = 1; sensor <= 8; ++sensor) {
      spec.options.names.push_back(foot + std::to_string(sensor));
    }
  }
  spec.options.names.insert(spec.options.names.end(), {"L_total", "R_total"});
  return read_table(path, spec);
}

Recording read_daphnet(const std::string& path) {
  TableSpec spec;
  spec.options.delimiter = ' ';
  spec.options.time_column = 0;
  spec.options.time_scale = 0.001;  // milliseconds
  spec.options.sample_rate_hz = 64.0;
  spec.options.columns = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  spec.options.names = {"ankle_fwd", "ankle_vert", "ankle_lat",  "thigh_fwd", "thigh_vert",
                        "thigh_lat", "trunk_fwd",  "trunk_vert", "trunk_lat"};
  spec.label_column = 10;
  spec.expected_fields = 11;
  return read_table(path, spec);
}

Recording read_sisfall(const std::string& path) {
  TableSpec spec;
  spec.options.delimiter = ',';
  spec.options.sample_rate_hz = 200.0;
  spec.options.columns = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  spec.options.names = {"adxl_x", "adxl_y", "adxl_z", "gyro_x", "gyro_y",
                        "gyro_z", "mma_x",  "mma_y",  "mma_z"};
  spec.expected_fields = 9;
  spec.line_terminator = ';';
  spec.integer_values = true;
  for (double scale : {kSisfallAdxlGPerCount, kSisfallGyroDegPerSecondPerCount,
                       kSisfallMmaGPerCount}) {
    spec.column_scales.insert(spec.column_scales.end(), 3, scale);
  }
  return read_table(path, spec);
}

Recording read_delimited(const std::string& path, const DelimitedOptions& options) {
  TableSpec spec;
  spec.options = options;
  return read_table(path, spec);
}

Recording read_values(const std::string& path, double sample_rate_hz) {
  if (!std::isfinite(sample_rate_hz) || sample_rate_hz <= 0) {
    throw Error("cannot read " + path + ": sample rate must be a positive number of Hz");
  }
  const std::string text = read_recording_text(path);
  Recording rec;
  rec.source = path;
  rec.sample_rate_hz = sample_rate_hz;
  rec.channel_names = {"value"};
  std::vector<std::string_view> fields;
  LineCursor cursor(without_bom(text));
  std::string_view line;
  double value;
  while (cursor.next(line)) {
    split_fields(line, ' ', fields);
    for (std::string_view field : fields) {
      if (!parse_number(field, value) || !std::isfinite(static_cast<float>(value))) {
        fail_at(path, cursor.number(), quoted(field) + " is not a finite number");
      }
      rec.time_s.push_back(static_cast<double>(rec.values.size()) / sample_rate_hz);
      rec.values.push_back(static_cast<float>(value));
    }
  }
  if (rec.values.empty()) throw Error("cannot read " + path + ": no values");
  return rec;
}

Recording read_recording(const std::string& path, const std::string& format) {
  if (format == "gaitpdb") return read_gaitpdb(path);
  if (format == "daphnet") return read_daphnet(path);
  if (format == "sisfall") return read_sisfall(path);
  if (format == "values") return read_values(path);
  if (format == "csv") {
    DelimitedOptions options;
    options.delimiter = ',';
    options.header_lines = 1;
    return read_delimited(path, options);
  }
  throw Error("unknown recording format '" + format + "' for " + path +
              " (gaitpdb, daphnet, sisfall, csv or values)");
}

}  // namespace gw::sensors
