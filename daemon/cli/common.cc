#include <algorithm>
#include <charconv>
#include <fstream>
#include <atomic>
#include <csignal>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <regex>
#include <sstream>

#include <pwd.h>
#include <unistd.h>

#include "common/error.h"
#include "common/time_text.h"
#include "daemon/cli/cli.h"
#include "sensors/resample.h"

namespace gw::cli {

namespace {
volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void gw_cli_on_interrupt(int) { g_interrupted = 1; }
}  // namespace

InterruptScope::InterruptScope() {
  g_interrupted = 0;
  previous_ = std::signal(SIGINT, gw_cli_on_interrupt);
}
InterruptScope::~InterruptScope() { std::signal(SIGINT, previous_); }
bool InterruptScope::interrupted() { return g_interrupted != 0; }

std::vector<std::string> split_list(const std::string& comma_separated) {
  std::vector<std::string> out;
  std::stringstream in(comma_separated);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

void RecordingSource::add_flags(CLI::App& cmd, bool with_columns, bool file_required,
                                std::vector<std::string>* many_files) {
  if (many_files)
    cmd.add_option("--file", *many_files, "recording to read (repeat for several)")
        ->required(file_required);
  else
    cmd.add_option("--file", file, "recording to read")->required(file_required);
  cmd.add_option("--format", format,
                 "gaitpdb | daphnet | sisfall | csv | values (any of them may be gzipped); "
                 "required unless the file name implies it (a trailing .gz aside): *.csv is "
                 "csv, S<NN>R<NN>.txt daphnet, {Ga,Ju,Si}{Co,Pt}<NN>_<NN>.txt gaitpdb, "
                 "<D|F><NN>_<SA|SE><NN>_R<NN>.txt sisfall")
      ->check(CLI::IsMember({"gaitpdb", "daphnet", "sisfall", "csv", "values"}));
  if (with_columns)
    cmd.add_option("--columns", columns, "comma-separated channel names or indices (default all)");
  cmd.add_option("--delimiter", delimiter, "csv: field delimiter (' ' = any blanks)");
  cmd.add_option("--header-lines", header_lines, "csv: lines to skip; the last names the columns");
  cmd.add_option("--time-column", time_column, "csv: 0-based time column (-1 = none)");
  cmd.add_option("--time-scale", time_scale, "csv: time column * this = seconds");
  cmd.add_option("--scale", scale, "csv: multiply every value by this");
  cmd.add_option("--rate", rate_hz, "csv/values: sample rate in Hz (default 100)");
}

std::string format_from_file_name(const std::string& file) {
  std::string name = std::filesystem::path(file).filename().string();
  static const std::regex gz(R"(.+\.gz)", std::regex::icase);
  if (std::regex_match(name, gz)) name.resize(name.size() - 3);
  static const std::regex csv(R"(.*\.csv)", std::regex::icase);
  static const std::regex daphnet(R"(S\d\dR\d\d\.txt)");
  static const std::regex gaitpdb(R"((Ga|Ju|Si)(Co|Pt)\d\d_\d\d\.txt)");
  static const std::regex sisfall(R"([DF]\d\d_S[AE]\d\d_R\d\d\.txt)");
  if (std::regex_match(name, csv)) return "csv";
  if (std::regex_match(name, daphnet)) return "daphnet";
  if (std::regex_match(name, gaitpdb)) return "gaitpdb";
  if (std::regex_match(name, sisfall)) return "sisfall";
  return {};
}

std::string RecordingSource::format_for(const std::string& path) const {
  if (!format.empty()) return format;
  const std::string implied = format_from_file_name(path);
  if (implied.empty())
    throw UsageError("--format is required for " + path +
                     " (gaitpdb | daphnet | sisfall | csv | values): its name implies none");
  return implied;
}

sensors::Recording RecordingSource::read() const {
  sensors::Recording rec;
  const std::string format = format_for(file);
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

std::vector<std::string> default_device_channels(const std::string& format,
                                                 sensors::DeviceKind kind) {
  struct DefaultMapping {
    const char* format;
    sensors::DeviceKind kind;
    std::vector<std::string> channels;
  };
  static const std::vector<DefaultMapping> kDefaults = {
      // SisFall's waist sensor: the ADXL345 (the dataset's main accelerometer).
      {"sisfall", sensors::DeviceKind::kAccelerometer3, {"adxl_x", "adxl_y", "adxl_z"}},
  };
  for (const DefaultMapping& mapping : kDefaults)
    if (format == mapping.format && kind == mapping.kind) return mapping.channels;
  return {};
}

sensors::Recording fit_to_device(sensors::Recording rec, const std::string& format,
                                 const config::DeviceProfile& device, bool channels_chosen) {
  if (!channels_chosen) {
    const auto has_channel = [&rec](const std::string& name) {
      return std::find(rec.channel_names.begin(), rec.channel_names.end(), name) !=
             rec.channel_names.end();
    };
    if (!device.channels.empty() &&
        std::all_of(device.channels.begin(), device.channels.end(), has_channel)) {
      if (rec.channel_names != device.channels) rec = rec.select(device.channels);
    } else if (rec.channels() > device.channels.size()) {
      const std::vector<std::string> defaults = default_device_channels(format, device.kind);
      if (!defaults.empty()) {
        rec = rec.select(defaults);
        if (rec.channels() == device.channels.size()) rec.channel_names = device.channels;
      }
    }
  }
  if (rec.sample_rate_hz != device.sample_rate_hz) {
    const double from_hz = rec.sample_rate_hz;
    rec = sensors::resample(rec, device.sample_rate_hz);
    std::cerr << "resampled " << from_hz << " Hz -> " << device.sample_rate_hz
              << " Hz for device '" << device.name << "'\n";
  }
  return rec;
}

sensors::Recording RecordingSource::read_for(const config::DeviceProfile& device) const {
  return fit_to_device(read(), format_for(file), device, !columns.empty());
}

namespace {
template <typename T>
std::string shortest_text(T value) {
  char buffer[32];
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
  if (error != std::errc()) throw Error("cannot format a number");
  return std::string(buffer, end);
}
}  // namespace

std::string exact_text(float value) { return shortest_text(value); }
std::string exact_text(double value) { return shortest_text(value); }

void write_template_csv(const std::string& file, const config::PatternConfig& pattern,
                        const config::PatternExample& example) {
  const std::size_t dims = pattern.channels.size();
  const std::size_t rows = dims == 0 ? 0 : example.raw.size() / dims;
  std::ofstream out(file, std::ios::trunc);
  if (!out) throw Error("cannot write " + file);
  for (std::size_t d = 0; d < dims; ++d) out << (d ? "," : "") << pattern.channels[d];
  out << "\n";
  for (std::size_t s = 0; s < rows; ++s) {
    for (std::size_t d = 0; d < dims; ++d)
      out << (d ? "," : "") << exact_text(example.raw[d * rows + s]);
    out << "\n";
  }
  out.close();
  if (!out) throw Error("cannot write " + file);
}

std::string baseline_yaml(const config::NormaliseConfig& normalise,
                          const config::ChannelBaseline& baseline) {
  const auto list = [](const std::vector<float>& values) {
    std::string out = "[";
    for (std::size_t i = 0; i < values.size(); ++i) {
      char text[32];
      std::snprintf(text, sizeof text, "%.9g", static_cast<double>(values[i]));
      out += (i == 0 ? "" : ", ") + std::string(text);
    }
    return out + "]";
  };
  std::string out = "{learn_s: " + exact_text(normalise.learn_s) +
                    ", statistic: " + config::NormaliseConfig::name(normalise.statistic) +
                    ", scale: " + config::NormaliseConfig::name(normalise.scale);
  if (normalise.gated()) out += ", active_above: " + exact_text(normalise.active_above);
  out += ", center: " + list(baseline.center);
  if (normalise.scale != config::NormaliseConfig::Scale::kNone)
    out += ", spread: " + list(baseline.spread);
  return out + "}";
}

std::string example_item_yaml(const std::string& template_path, const std::string& subject,
                              const config::ChannelBaseline* baseline,
                              const config::NormaliseConfig& normalise,
                              const std::optional<config::ExampleSource>& source) {
  std::string item = "{template: " + template_path;
  if (!subject.empty()) item += ", subject: " + subject;
  if (baseline) item += ", baseline: " + baseline_yaml(normalise, *baseline);
  item += "}";
  if (source)
    item += "  # " + std::filesystem::path(source->file).filename().string() + ":" +
            std::to_string(source->start) + ":" + std::to_string(source->end);
  return item;
}

std::string client_config_path(const std::string& explicit_path) {
  if (!explicit_path.empty()) return explicit_path;
  std::error_code error;
  if (std::filesystem::is_regular_file(GW_INSTALLED_CONFIG, error)) return GW_INSTALLED_CONFIG;
  return {};
}

std::string public_key_file_of(const std::string& secret_key_file) {
  return std::filesystem::path(secret_key_file).replace_extension(".pub").string();
}

double unix_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string local_time_text(double unix_s) {
  const auto t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  localtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm);
  return text;
}

std::string login_name() {
  if (const char* user = std::getenv("USER"); user != nullptr && *user != '\0') return user;
  if (const passwd* entry = ::getpwuid(::geteuid()); entry != nullptr && entry->pw_name != nullptr)
    return entry->pw_name;
  return "uid " + std::to_string(::geteuid());
}

std::string readable_time_text(const nlohmann::json& message, const char* at_key) {
  const auto at = message.find(at_key);
  if (at == message.end() || !at->is_number()) return "?";
  const auto zone = message.find("zone");
  try {
    if (zone != message.end() && zone->is_string())
      return TimeZone::named(zone->get<std::string>()).readable_text(at->get<double>());
  } catch (const Error&) {
    // A zone this machine's database lacks: its own zone then.
  }
  return TimeZone::system().readable_text(at->get<double>());
}

sensors::DeviceKind parse_device_kind(const std::string& name) {
  if (const auto kind = sensors::device_kind_from_name(name)) return *kind;
  throw Error("unknown device kind '" + name + "'");
}

int default_frame_samples(double rate_hz) {
  return std::max(1, static_cast<int>(std::lround(rate_hz / 10.0)));
}

}  // namespace gw::cli
