// The synthetic MD-DTW query the pipeline tests plant in noise series
// (md_search_test.cc, recall_options_test.cc): its per-dim shapes, a template
// file of it with a config that searches for it, and the engine fed a
// sample-major series in frames as the daemon would receive them.
#pragma once

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/config.h"
#include "kernels/search.h"
#include "pipeline/engine.h"

namespace gw::test {

constexpr int kQueryLength = 64;
constexpr double kQueryRate = 100;  // Hz; frames carry device time in us

// Sample s of query dim `dim` (0..3): four shapes unlike each other.
inline double query_shape(int dim, int s) {
  const double x = static_cast<double>(s) / kQueryLength;
  switch (dim) {
    case 0:
      return std::sin(2 * M_PI * 2 * x);
    case 1:
      return std::exp(-std::pow((x - 0.3) / 0.08, 2)) - std::exp(-std::pow((x - 0.75) / 0.12, 2));
    case 2:
      return std::tanh(12 * (x - 0.5));
    default:
      return std::sin(20 * x * x);
  }
}

// A temporary folder with query.csv (the first `dims` shapes, channels a, b,
// ...) and configs of one pattern `query` on a generic device `synthetic` of
// those channels at threshold 3, searched by the CPU backend.
class SyntheticQuery {
 public:
  SyntheticQuery(const std::string& tag, int dims) : dims_(dims) {
    dir = std::filesystem::temp_directory_path() / (tag + "_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::ofstream csv(dir / "query.csv");
    for (int d = 0; d < dims_; ++d) csv << (d ? "," : "") << channel(d);
    csv << "\n";
    for (int s = 0; s < kQueryLength; ++s) {
      for (int d = 0; d < dims_; ++d) csv << (d ? "," : "") << query_shape(d, s);
      csv << "\n";
    }
  }
  ~SyntheticQuery() { std::filesystem::remove_all(dir); }
  SyntheticQuery(const SyntheticQuery&) = delete;
  SyntheticQuery& operator=(const SyntheticQuery&) = delete;

  // `pattern_keys`: more keys of the pattern, each line "    key: value\n".
  gw::config::Config config(const std::string& pattern_keys) const {
    std::string channels;
    for (int d = 0; d < dims_; ++d) channels += (d ? ", " : "") + channel(d);
    const std::string yaml =
        "devices:\n"
        "  - {id: 1, name: synthetic, kind: generic, sample_rate_hz: 100, channels: [" +
        channels +
        "]}\n"
        "search: {backend: cpu, threads: 2}\n"
        "patterns:\n"
        "  - name: query\n"
        "    device: synthetic\n"
        "    channels: [" +
        channels +
        "]\n"
        "    template: query.csv\n"
        "    threshold: 3.0\n"
        "    cooldown_s: 2\n" +
        pattern_keys;
    return gw::config::parse_config(yaml, "synthetic_query.yaml", dir.string());
  }

  std::filesystem::path dir;

 private:
  static std::string channel(int d) { return std::string(1, static_cast<char>('a' + d)); }
  int dims_;
};

// The engine's alerts for a sample-major series of `dims` channels, fed in
// frames of `frame` samples (a trailing part frame is left out) with one
// batch run after each.
inline std::vector<gw::pipeline::Alert> detect_in_frames(const gw::config::Config& config,
                                                         const std::vector<float>& v, int dims,
                                                         int frame = 10) {
  gw::pipeline::Engine engine(config, gw::kernels::make_cpu_backend(2));
  std::vector<gw::pipeline::Alert> alerts;
  const auto now = [] { return 0.0; };
  const int samples = static_cast<int>(v.size()) / dims;
  for (int first = 0; first + frame <= samples; first += frame) {
    gw::sensors::Frame f;
    f.kind = gw::sensors::DeviceKind::kGeneric;
    f.wearer_id = 1;
    f.device_id = 1;
    f.channels = static_cast<std::uint16_t>(dims);
    f.samples = static_cast<std::uint16_t>(frame);
    f.sample_rate_hz = static_cast<float>(kQueryRate);
    f.sequence = static_cast<std::uint32_t>(first / frame);
    f.device_time_us = static_cast<std::uint64_t>(first) * 1000000 / static_cast<int>(kQueryRate);
    f.values.assign(v.begin() + first * dims, v.begin() + (first + frame) * dims);
    engine.on_frame(f, 0);
    for (auto& a : engine.run_batch(now)) alerts.push_back(a);
  }
  return alerts;
}

}  // namespace gw::test
