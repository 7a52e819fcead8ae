// The raw-stream history from the command line (docs/interfaces.md):
//   gaitwatch search --history FILE (--pattern NAME | --example F:S:E ...)
//       [--config FILE] [--wearers 1,2] [--from T] [--to T] [-k K] [--json]
//   gaitwatch history fill   --history FILE --config FILE --file REC ... --wearer W
//   gaitwatch history info   --history FILE [--json]
//   gaitwatch history export --history FILE --wearer W --device ID [--channels C]
//       [--from T] [--to T]
// The search is the library's (history/history_search.h), the one the
// daemon's control interface runs; fill records through the daemon's
// recorder (history/history_recorder.h).
#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <limits>
#include <sstream>

#include "common/error.h"
#include "common/time_text.h"
#include "daemon/cli/cli.h"
#include "kernels/search.h"
#include "history/history_recorder.h"
#include "history/history_search.h"
#include "history/history_store.h"

namespace gw::cli {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// `text` by the one time rule (common/time_text.h); empty = `open_end`.
// Errors name the flag.
double parse_time(const std::string& text, const char* flag, double open_end) {
  if (text.empty()) return open_end;
  try {
    return parse_time_text(text, unix_time_now());
  } catch (const Error& e) {
    throw Error(std::string(flag) + ": " + e.what());
  }
}

std::vector<std::uint32_t> parse_wearers(const std::string& list) {
  std::vector<std::uint32_t> out;
  for (const auto& item : split_list(list)) {
    try {
      std::size_t used = 0;
      const unsigned long value = std::stoul(item, &used);
      if (used != item.size() || value > 0xffffffffUL) throw Error("");
      out.push_back(static_cast<std::uint32_t>(value));
    } catch (const std::exception&) {
      throw Error("--wearers must be comma-separated wearer ids, got '" + list + "'");
    }
  }
  return out;
}

// The config given, or the one the daemon recorded in the history file.
config::Config history_config(const std::string& explicit_path,
                              const pipeline::HistoryStore& store) {
  if (!explicit_path.empty()) return config::load_config(explicit_path);
  const auto recorded = store.meta("config_path");
  if (!recorded)
    throw Error(store.path() + " does not name the config it was recorded with; pass --config");
  try {
    return config::load_config(*recorded);
  } catch (const std::exception& e) {
    throw Error("cannot load the config recorded in " + store.path() + " (" + *recorded +
                "); pass --config: " + e.what());
  }
}

// SIGINT during a history search cancels it at the next slice.

std::string describe_stream(std::uint32_t wearer, std::uint16_t device) {
  return "wearer " + std::to_string(wearer) + " device " + std::to_string(device);
}

// ---------------------------------------------------------------- history fill

struct FillOptions {
  std::string history;
  std::string config;
  RecordingSource source;
  std::string device;
  std::uint32_t wearer = 1;
  std::int64_t start = 0;
  std::int64_t end = -1;
  int frame_samples = 0;
  bool int16 = false;
  double chunk_s = 10;
  config::HistoryCompression compression = config::HistoryCompression::kZlib;
  double time_offset_s = 0;
};

int run_fill(const FillOptions& o) {
  const config::Config cfg = config::load_config(o.config);
  const config::DeviceProfile* profile =
      o.device.empty() ? (cfg.devices.empty() ? nullptr : &cfg.devices.front())
                       : cfg.device_by_name(o.device);
  if (!profile) throw Error("no device '" + o.device + "' in " + cfg.source_file);
  const sensors::Recording rec = o.source.read_for(*profile);
  if (rec.channels() != profile->channels.size())
    throw Error("the recording has " + std::to_string(rec.channels()) + " channels, device '" +
                profile->name + "' has " + std::to_string(profile->channels.size()) +
                " (use --columns)");
  if (o.start < 0 || (o.end >= 0 && o.end <= o.start))
    throw Error("--start/--end must give a non-empty range");
  const std::size_t stop = o.end < 0 ? rec.samples() : static_cast<std::size_t>(o.end);
  const int per_frame =
      o.frame_samples > 0 ? o.frame_samples : default_frame_samples(rec.sample_rate_hz);
  auto frames = frames_from_recording(rec, o.wearer, profile->id, profile->kind, per_frame,
                                      static_cast<std::size_t>(o.start), stop, o.int16);
  pipeline::HistoryOptions options;
  options.path = o.history;
  options.retention_hours = 0;  // an offline fill keeps what it writes
  options.chunk_s = o.chunk_s;
  options.zlib_level = o.compression == config::HistoryCompression::kZlib ? 1 : 0;
  options.overflow = OverflowPolicy::kBlock;  // offline: wait for the writer, lose nothing
  options.commit_interval_ms = 200;
  options.config_path = cfg.source_file;
  pipeline::HistoryRecorder recorder(options);
  const auto now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const auto offset_us = std::llround(o.time_offset_s * 1e6);
  for (auto& frame : frames) {
    const auto t = static_cast<std::int64_t>(frame.device_time_us) + offset_us;
    if (t < 0) throw Error("--time-offset moves samples before device time 0");
    frame.device_time_us = static_cast<std::uint64_t>(t);
    recorder.append(frame, pipeline::FrameVerdict::kAccepted, now);
  }
  recorder.stop();
  const auto c = recorder.counters();
  std::printf("wrote %llu chunks, %llu samples of %s (%s) to %s: %llu bytes stored for %llu raw\n",
              static_cast<unsigned long long>(c.chunks_written),
              static_cast<unsigned long long>(c.samples_written),
              describe_stream(o.wearer, profile->id).c_str(), profile->name.c_str(),
              o.history.c_str(), static_cast<unsigned long long>(c.stored_bytes),
              static_cast<unsigned long long>(c.raw_bytes));
  if (c.chunks_written != c.chunks_queued)
    throw Error(std::to_string(c.chunks_queued - c.chunks_written) + " chunks were not written");
  return 0;
}

// ---------------------------------------------------------------- history info

int run_info(const std::string& path, bool json) {
  const pipeline::HistoryStore store(path, true);
  const auto config_path = store.meta("config_path");
  const auto streams = store.streams();
  if (json) {
    for (const auto& s : streams) {
      const double raw = static_cast<double>(s.samples) * s.channels * sizeof(float);
      std::cout << nlohmann::json{{"wearer", s.wearer},
                                  {"device", s.device},
                                  {"chunks", s.chunks},
                                  {"samples", s.samples},
                                  {"t_first", s.t_first},
                                  {"t_end", s.t_end},
                                  {"sample_rate_hz", s.sample_rate_hz},
                                  {"channels", s.channels},
                                  {"stored_bytes", s.stored_bytes},
                                  {"raw_bytes", raw}}
                       .dump()
                << "\n";
    }
    return 0;
  }
  std::printf("%s: %zu streams; recorded with config %s\n", path.c_str(), streams.size(),
              config_path ? config_path->c_str() : "(unknown)");
  for (const auto& s : streams) {
    const double raw = static_cast<double>(s.samples) * s.channels * sizeof(float);
    std::printf(
        "  wearer %u device %u: %lld samples (%d channels at %g Hz) in %lld chunks, device time "
        "%.3f .. %.3f s, %lld bytes stored (%.2f of float32)\n",
        s.wearer, s.device, static_cast<long long>(s.samples), s.channels, s.sample_rate_hz,
        static_cast<long long>(s.chunks), s.t_first, s.t_end,
        static_cast<long long>(s.stored_bytes), raw > 0 ? s.stored_bytes / raw : 0.0);
  }
  return 0;
}

// -------------------------------------------------------------- history export

struct ExportOptions {
  std::string history;
  std::string config;
  std::uint32_t wearer = 0;
  std::uint16_t device = 0;
  std::string channels;
  std::string from, to;
};

int run_export(const ExportOptions& o) {
  const pipeline::HistoryStore store(o.history, true);
  std::vector<std::string> names;  // of the device's channels, when a config is at hand
  try {
    const config::Config cfg = history_config(o.config, store);
    if (const auto* profile = cfg.device_by_id(o.device)) names = profile->channels;
  } catch (const std::exception&) {
    if (!o.config.empty()) throw;  // an explicit config must load; a recorded one may be gone
  }
  std::vector<int> channels;
  for (const auto& item : split_list(o.channels)) {
    const auto it = std::find(names.begin(), names.end(), item);
    if (it != names.end()) {
      channels.push_back(static_cast<int>(it - names.begin()));
      continue;
    }
    try {
      std::size_t used = 0;
      channels.push_back(std::stoi(item, &used));
      if (used != item.size()) throw Error("");
    } catch (const std::exception&) {
      throw Error("--channels: no channel '" + item + "' on device " + std::to_string(o.device));
    }
  }
  const double from = parse_time(o.from, "--from", -kInf);
  const double to = parse_time(o.to, "--to", kInf);
  const pipeline::HistoryRead read = store.read(o.wearer, o.device, channels, from, to);
  if (channels.empty() && !read.segments.empty())
    for (int c = 0; c < read.segments.front().channels; ++c) channels.push_back(c);
  std::cout << "t_s";
  for (const int c : channels)
    std::cout << ","
              << (static_cast<std::size_t>(c) < names.size() ? names[static_cast<std::size_t>(c)]
                                                             : "c" + std::to_string(c));
  std::cout << "\n" << std::setprecision(9);
  for (const auto& segment : read.segments) {
    const auto width = static_cast<std::size_t>(segment.channels);
    for (std::size_t s = 0; s < segment.samples(); ++s) {
      std::cout << segment.t_start + static_cast<double>(s) / segment.sample_rate_hz;
      for (std::size_t c = 0; c < width; ++c) std::cout << "," << segment.values[s * width + c];
      std::cout << "\n";
    }
  }
  for (const auto& gap : read.gaps)
    std::fprintf(stderr, "gap %.6f .. %.6f s (%.3f s)\n", gap.begin, gap.end, gap.end - gap.begin);
  std::fprintf(stderr, "%zu segments, %zu gaps\n", read.segments.size(), read.gaps.size());
  return 0;
}

// --example F:START:END read with the recording flags; as `device` takes it
// when one is given (START and END then count at the device's rate).
sensors::Recording read_example(const HistorySearchOptions& h, const SearchFlags& f,
                                const config::DeviceProfile* device) {
  RecordingSource source = f.source;
  std::size_t start = 0, end = 0;
  parse_example_spec(h.example, source.file, start, end);
  sensors::Recording rec = device ? source.read_for(*device) : source.read();
  if (start >= end || end > rec.samples())
    throw Error("--example range " + std::to_string(start) + ":" + std::to_string(end) +
                " is outside " + source.file + " (" + std::to_string(rec.samples()) + " samples)");
  return rec.slice(start, end);
}

void print_progress(double fraction, std::uint64_t windows, std::uint64_t samples,
                    std::uint64_t total) {
  std::fprintf(stderr, "progress %.3f windows %llu samples %llu/%llu\n", fraction,
               static_cast<unsigned long long>(windows), static_cast<unsigned long long>(samples),
               static_cast<unsigned long long>(total));
}

// The closing line of a history search (stderr).
void print_search_summary(bool cancelled, std::uint64_t windows, std::uint64_t samples,
                          std::uint64_t slices, int exclusion_samples) {
  std::fprintf(stderr, "%s %llu windows of %llu samples in %llu slices; exclusion zone %d samples\n",
               cancelled ? "cancelled after" : "searched", static_cast<unsigned long long>(windows),
               static_cast<unsigned long long>(samples), static_cast<unsigned long long>(slices),
               exclusion_samples);
}

// The matches in history_match_json form, as JSON lines or a table.
void print_matches(const nlohmann::json& matches, bool json) {
  for (const nlohmann::json& m : matches) {
    if (json) {
      std::cout << m.dump() << "\n";
      continue;
    }
    std::string dims;
    for (const nlohmann::json& d : m["dims"]) {
      char part[96];
      std::snprintf(part, sizeof part, "%s%s %.4f", dims.empty() ? "" : ", ",
                    d["channel"].get<std::string>().c_str(), d["distance"].get<double>());
      dims += part;
    }
    std::printf("%3zu  wearer %u device %u  t %.3f .. %.3f s  distance %.5f  example %d  (%s)\n",
                m["rank"].get<std::size_t>(), m["wearer"].get<unsigned>(),
                m["device"].get<unsigned>(), m["t_start"].get<double>(), m["t_end"].get<double>(),
                m["distance"].get<double>(), m["example"].get<int>(), dims.c_str());
  }
}

// `search --daemon`: the running daemon's history.search job.
int run_daemon_history_search(const HistorySearchOptions& h, const SearchFlags& f) {
  nlohmann::json args = {{"k", f.top}, {"slice_samples", h.slice_samples}};
  if (!h.pattern.empty()) {
    args["pattern"] = h.pattern;
  } else {
    // The daemon holds the device profiles: the example goes as the file has it.
    const sensors::Recording rec = read_example(h, f, nullptr);
    nlohmann::json values = nlohmann::json::array();
    for (std::size_t s = 0; s < rec.samples(); ++s) {
      nlohmann::json row = nlohmann::json::array();
      for (std::size_t c = 0; c < rec.channels(); ++c) row.push_back(rec.at(s, c));
      values.push_back(std::move(row));
    }
    args["example"] = {{"channels", rec.channel_names}, {"values", std::move(values)},
                       {"band", f.band},      {"znorm", f.znorm},
                       {"nr", f.nr},          {"alpha", f.alpha},
                       {"source", rec.source}};
    if (!h.device.empty()) args["example"]["device"] = h.device;
  }
  const auto wearers = parse_wearers(h.wearers);
  if (!wearers.empty()) args["wearers"] = wearers;
  const double from = parse_time(h.from, "--from", -kInf);
  const double to = parse_time(h.to, "--to", kInf);
  if (std::isfinite(from)) args["from"] = from;  // JSON has no infinity: absent = open
  if (std::isfinite(to)) args["to"] = to;
  if (f.top < 1) throw Error("-k must be >= 1");
  const nlohmann::json final = control_request(
      h.control, "history.search", args, [](const nlohmann::json& message) {
        if (message.value("type", "") != "progress") return;
        const nlohmann::json& p = message["progress"];
        print_progress(p["fraction"].get<double>(), p["windows"].get<std::uint64_t>(),
                       p["samples"].get<std::uint64_t>(), p["samples_total"].get<std::uint64_t>());
      });
  if (final.value("type", "") == "error" && final["error"].value("code", "") == "cancelled") {
    std::fprintf(stderr, "cancelled: %s\n", final["error"].value("message", "").c_str());
    return 130;
  }
  const nlohmann::json result = control_result(final);
  std::cerr << "backend: " << result["backend"].get<std::string>() << " (in the daemon)\n";
  for (const auto& w : result["warnings"]) std::cerr << "warning: " << w.get<std::string>() << "\n";
  print_matches(result["matches"], f.json);
  print_search_summary(false, result["windows"].get<std::uint64_t>(),
                       result["samples"].get<std::uint64_t>(), result["slices"].get<std::uint64_t>(),
                       result["exclusion_samples"].get<int>());
  return 0;
}

}  // namespace

int run_history_search(const HistorySearchOptions& h, const SearchFlags& f) {
  if (h.daemon) return run_daemon_history_search(h, f);
  const pipeline::HistoryStore store(h.history, true);
  const config::Config cfg = history_config(h.config, store);
  pipeline::HistoryPattern pattern;
  if (!h.pattern.empty()) {
    pattern = pipeline::history_pattern_from_config(cfg, h.pattern);
  } else {
    if (cfg.devices.empty()) throw Error(cfg.source_file + " has no devices");
    const std::string device = h.device.empty() ? cfg.devices.front().name : h.device;
    const config::DeviceProfile* profile = cfg.device_by_name(device);
    if (!profile) throw Error("no device '" + device + "' in " + cfg.source_file);
    const sensors::Recording rec = read_example(h, f, profile);
    pattern =
        pipeline::history_pattern_from_example(cfg, device, rec, {f.band, f.znorm, f.nr, f.alpha});
  }
  pipeline::HistorySearchRequest request;
  request.wearers = parse_wearers(h.wearers);
  request.from = parse_time(h.from, "--from", -kInf);
  request.to = parse_time(h.to, "--to", kInf);
  request.k = f.top;
  request.slice_samples = std::max<std::size_t>(1, h.slice_samples);
  if (request.k < 1) throw Error("-k must be >= 1");

  std::string note;
  auto backend = kernels::make_backend(config::name(f.backend), f.threads, &note);
  std::cerr << "backend: " << note << "\n";
  pipeline::HistorySearchResult result;
  {
    const InterruptScope ctrl_c;
    result = pipeline::search_history(
        store, pattern, *backend, request,
        [](const pipeline::HistoryProgress& p) {
          print_progress(p.fraction, p.windows, p.samples, p.samples_total);
        },
        [] { return InterruptScope::interrupted(); });
  }
  for (const auto& w : result.warnings) std::cerr << "warning: " << w << "\n";

  print_matches(pipeline::history_matches_json(result.matches), f.json);
  print_search_summary(result.cancelled, result.progress.windows, result.progress.samples,
                       result.slices, result.exclusion_samples);
  return result.cancelled ? 130 : 0;
}

void add_history(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("history", "the daemon's raw-stream history file");
  cmd->require_subcommand(1);

  auto fill = std::make_shared<FillOptions>();
  auto* fill_cmd =
      cmd->add_subcommand("fill", "record a recording into a history file, as the daemon would");
  fill_cmd->add_option("--history", fill->history, "history file (created if missing)")->required();
  fill_cmd->add_option("--config", fill->config, "config with the device profile")->required();
  fill->source.add_flags(*fill_cmd);
  fill_cmd->add_option("--device", fill->device, "device profile name (default: the first)");
  fill_cmd->add_option("--wearer", fill->wearer, "wearer id (default 1)");
  fill_cmd->add_option("--start", fill->start, "first sample index");
  fill_cmd->add_option("--end", fill->end, "end sample index, exclusive");
  fill_cmd->add_option("--frame-samples", fill->frame_samples,
                       "samples per frame (default rate/10)");
  fill_cmd->add_flag("--int16", fill->int16, "quantise like replay --int16");
  fill_cmd->add_option("--chunk-s", fill->chunk_s, "seconds per chunk (default 10)");
  add_choice_option<config::HistoryCompression>(*fill_cmd, "--compression", fill->compression,
                                                "chunk compression (default zlib)");
  fill_cmd->add_option("--time-offset", fill->time_offset_s,
                       "add this many seconds to the recording's device times");
  on_run(*fill_cmd, exit_code, [fill] { return run_fill(*fill); });

  auto info_path = std::make_shared<std::string>();
  auto info_json = std::make_shared<bool>(false);
  auto* info_cmd = cmd->add_subcommand("info", "the streams a history file holds");
  info_cmd->add_option("--history", *info_path, "history file")->required();
  info_cmd->add_flag("--json", *info_json, "one JSON object per stream");
  on_run(*info_cmd, exit_code, [info_path, info_json] { return run_info(*info_path, *info_json); });

  auto ex = std::make_shared<ExportOptions>();
  auto* export_cmd = cmd->add_subcommand(
      "export", "print a stream's samples in a time range as CSV (gaps on stderr)");
  export_cmd->add_option("--history", ex->history, "history file")->required();
  export_cmd->add_option("--config", ex->config, "config naming the channels (default: recorded)");
  export_cmd->add_option("--wearer", ex->wearer, "wearer id")->required();
  export_cmd->add_option("--device", ex->device, "device id")->required();
  export_cmd->add_option("--channels", ex->channels,
                         "comma-separated names or indices (default all)");
  export_cmd->add_option("--from", ex->from, "device time in seconds or ISO 8601 UTC");
  export_cmd->add_option("--to", ex->to, "end, exclusive");
  on_run(*export_cmd, exit_code, [ex] { return run_export(*ex); });
}

}  // namespace gw::cli
