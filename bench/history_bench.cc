// history_bench: the raw-stream history's two costs, one JSON object per
// measurement on stdout.
// - "history_record": --wearers copies of a real Daphnet recording (9
//   channels at 64 Hz) recorded through the daemon's HistoryRecorder as fast
//   as the writer takes them (overflow policy block): samples/s, raw and
//   stored bytes.
// - "history_search": the history search over all of it with a pattern of
//   the config (default the shipped fog_freeze_index: 9 positive examples x
//   3 freeze-index dims), with one raw 3-channel z-normalised example window
//   (m = 128) and with its vertical channel alone: windows/s, slices,
//   backend work.
// Real sensor data (Daphnet, data/README.md), not synthetic.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "config/config.h"
#include "daemon/cli/usage.h"
#include "kernels/search.h"
#include "history/history_recorder.h"
#include "history/history_search.h"
#include "history/history_store.h"
#include "sensors/framing.h"
#include "sensors/recording.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Options {
  std::string history;
  std::string recording = "data/daphnet/S02R01.txt";
  std::string config = "config/gaitwatch.yaml";
  std::string pattern = "fog_freeze_index";
  int wearers = 4;
  double chunk_s = 10;
  gw::config::HistoryCompression compression = gw::config::HistoryCompression::kZlib;
  int k = 10;
  int threads = 0;
  gw::config::BackendKind backend = gw::config::BackendKind::kCpu;
};

void search(const Options& o, const gw::pipeline::HistoryStore& store,
            const gw::pipeline::HistoryPattern& pattern, const std::string& label,
            std::uint64_t samples) {
  std::string note;
  auto backend = gw::kernels::make_backend(gw::config::name(o.backend), o.threads, &note);
  gw::pipeline::HistorySearchRequest request;
  request.k = o.k;
  const auto start = Clock::now();
  const auto result = gw::pipeline::search_history(store, pattern, *backend, request);
  const double wall = seconds_since(start);
  nlohmann::ordered_json line;
  line["bench"] = "history_search";
  line["query"] = label;
  line["backend"] = backend->name();
  line["threads"] =
      o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
  line["wearers"] = o.wearers;
  line["samples"] = samples;
  line["windows"] = result.progress.windows;
  int positives = 0;
  for (const auto& e : pattern.pattern().examples) positives += e.negative ? 0 : 1;
  line["examples"] = positives;
  line["dims"] = pattern.pattern().home_channel.size();
  line["k"] = o.k;
  line["slices"] = result.slices;
  line["wall_s"] = wall;
  line["windows_per_s"] = static_cast<double>(result.progress.windows) / wall;
  line["dtw_full"] = result.stats.dtw_full;
  line["dtw_abandoned"] = result.stats.dtw_abandoned;
  line["pruned_kim"] = result.stats.pruned_kim;
  line["pruned_keogh"] = result.stats.pruned_keogh_eq + result.stats.pruned_keogh_ec;
  line["best_distance"] = result.matches.empty() ? -1.0 : result.matches.front().distance;
  std::cout << line.dump() << std::endl;
}

int run(Options o) {
  namespace fs = std::filesystem;
  const bool own_file = o.history.empty();
  if (own_file)
    o.history =
        (fs::temp_directory_path() / ("gw_history_bench_" + std::to_string(::getpid()) + ".db"))
            .string();
  const auto config = gw::config::load_config(o.config);
  const auto rec = gw::sensors::read_daphnet(o.recording);
  const auto& device = config.devices.front();

  gw::pipeline::HistoryOptions options;
  options.path = o.history;
  options.retention_hours = 0;
  options.chunk_s = o.chunk_s;
  options.zlib_level = o.compression == gw::config::HistoryCompression::kZlib ? 1 : 0;
  options.overflow = gw::OverflowPolicy::kBlock;
  options.config_path = config.source_file;
  std::vector<std::vector<gw::sensors::Frame>> frames;
  for (int w = 0; w < o.wearers; ++w)
    frames.push_back(gw::sensors::frames_from_recording(rec, static_cast<std::uint32_t>(w + 1),
                                                        device.id, device.kind, 6, 0, rec.samples(),
                                                        false));
  const auto start = Clock::now();
  gw::pipeline::HistoryCounters counters;
  {
    gw::pipeline::HistoryRecorder recorder(options);
    // Interleaved like live streams: frame i of every wearer, then i + 1.
    for (std::size_t i = 0; i < frames.front().size(); ++i)
      for (auto& wearer : frames)
        recorder.append(wearer[i], gw::pipeline::FrameVerdict::kAccepted, 0);
    recorder.stop();
    counters = recorder.counters();
  }
  const double wall = seconds_since(start);
  nlohmann::ordered_json line;
  line["bench"] = "history_record";
  line["wearers"] = o.wearers;
  line["channels"] = rec.channels();
  line["rate_hz"] = rec.sample_rate_hz;
  line["chunk_s"] = o.chunk_s;
  line["compression"] = gw::config::name(o.compression);
  line["samples"] = counters.samples_written;
  line["data_s"] = static_cast<double>(counters.samples_written) / rec.sample_rate_hz;
  line["chunks"] = counters.chunks_written;
  line["transactions"] = counters.transactions;
  line["wall_s"] = wall;
  line["samples_per_s"] = static_cast<double>(counters.samples_written) / wall;
  line["raw_mb_per_s"] = static_cast<double>(counters.raw_bytes) / wall / 1e6;
  line["raw_bytes"] = counters.raw_bytes;
  line["stored_bytes"] = counters.stored_bytes;
  line["stored_fraction"] =
      static_cast<double>(counters.stored_bytes) / static_cast<double>(counters.raw_bytes);
  std::cout << line.dump() << std::endl;

  const gw::pipeline::HistoryStore store(o.history, true);
  search(o, store, gw::pipeline::history_pattern_from_config(config, o.pattern), o.pattern,
         counters.samples_written);
  const auto example = rec.slice(54488, 54616).select({"ankle_fwd", "ankle_vert", "ankle_lat"});
  search(
      o, store,
      gw::pipeline::history_pattern_from_example(config, device.name, example, {0.1, true, 0, 1.0}),
      "ankle_xyz_znorm_m128", counters.samples_written);
  search(o, store,
         gw::pipeline::history_pattern_from_example(
             config, device.name, example.select({"ankle_vert"}), {0.1, true, 0, 1.0}),
         "ankle_vert_znorm_m128", counters.samples_written);
  if (own_file)
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(o.history + suffix);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"history_bench: record and search the raw-stream history"};
  Options o;
  app.add_option("--history", o.history, "history file (default: a temporary one, removed)");
  app.add_option("--recording", o.recording, "Daphnet recording to record as every wearer");
  app.add_option("--config", o.config, "config with the device and the pattern");
  app.add_option("--pattern", o.pattern, "pattern of the config to search for");
  app.add_option("--wearers", o.wearers, "copies of the recording, one per wearer");
  app.add_option("--chunk-s", o.chunk_s, "seconds per chunk");
  gw::cli::add_choice_option<gw::config::HistoryCompression>(app, "--compression", o.compression,
                                                             "chunk compression (default zlib)");
  app.add_option("-k", o.k, "results per search");
  app.add_option("--threads", o.threads, "CPU backend threads (0 = all cores)");
  gw::cli::add_choice_option<gw::config::BackendKind>(app, "--backend", o.backend,
                                                      "search backend (default cpu)");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::cerr << "history_bench: " << e.what() << "\n";
    return 1;
  }
}
