#include "bench/w1_workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

#include "common/error.h"
#include "sensors/synthetic.h"

namespace gw::bench {

std::vector<DimGroup> w1_layout(int dims) {
  if (dims < 9) return {{0, dims, 2}};
  const int insoles = dims - 3;
  const int left = insoles / 2;
  return {{0, left, 3}, {left, insoles, 3}, {insoles, dims, 2}};
}

std::vector<kernels::DimPair> w1_pairs(int dims) {
  std::vector<kernels::DimPair> pairs;
  for (const DimGroup& group : w1_layout(dims)) {
    for (int j = group.begin; j < group.end; ++j) {
      for (int i = std::max(group.begin, j - group.neighbour_range);
           i <= std::min(group.end - 1, j + group.neighbour_range); ++i) {
        pairs.push_back({static_cast<std::uint16_t>(j), static_cast<std::uint16_t>(i)});
      }
    }
  }
  return pairs;
}

std::vector<float> random_walks(int dims, int length, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> gauss(0.0, 1.0);
  std::vector<double> level(dims, 0.0);
  std::vector<float> out(static_cast<std::size_t>(dims) * length);
  for (int s = 0; s < length; ++s) {
    for (int d = 0; d < dims; ++d) {
      level[d] += gauss(rng);
      out[static_cast<std::size_t>(s) * dims + d] = static_cast<float>(level[d] + 0.5 * gauss(rng));
    }
  }
  return out;
}

std::vector<float> random_walk_pattern(int dims, int m, std::uint64_t seed, int index) {
  const std::vector<float> source = random_walks(dims, 3 * m, seed * 7919 + 100000 + index);
  std::vector<float> out(static_cast<std::size_t>(dims) * m);
  for (int d = 0; d < dims; ++d) {
    for (int s = 0; s < m; ++s) {
      out[static_cast<std::size_t>(d) * m + s] = source[static_cast<std::size_t>(m + s) * dims + d];
    }
  }
  return out;
}

std::vector<int> parse_counts(const std::string& text, const std::string& option) {
  std::vector<int> counts;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    std::size_t used = 0;
    int count = 0;
    try {
      count = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || count < 1)
      throw std::invalid_argument(option + ": \"" + item + "\" is not a count >= 1");
    counts.push_back(count);
  }
  if (counts.empty()) throw std::invalid_argument(option + ": no counts given");
  return counts;
}

std::string w1_channel_name(int c) {
  using sensors::kW1InsoleChannels;
  if (c < kW1InsoleChannels) return "l" + std::to_string(c);
  if (c < 2 * kW1InsoleChannels) return "r" + std::to_string(c - kW1InsoleChannels);
  static const char* axes[] = {"ax", "ay", "az"};
  return axes[c - 2 * kW1InsoleChannels];
}

std::string w1_name_list(int first, int end) {
  std::string out = "[";
  for (int c = first; c < end; ++c) out += (c > first ? ", " : "") + w1_channel_name(c);
  return out + "]";
}

W1PatternSet w1_patterns(const sensors::Recording& base, const std::string& source,
                         std::uint64_t seed) {
  static_assert(kW1Dims == sensors::kW1Channels);
  W1PatternSet set;
  if (source == "random-walk") {
    for (int p = 0; p < kW1Patterns; ++p)
      set.values.push_back(random_walk_pattern(kW1Dims, kW1Length, seed, p));
    set.threshold = 2.0;  // search_bench's default
    set.min_dims = 1;
    return set;
  }
  if (source != "synthetic") throw std::invalid_argument("unknown pattern source " + source);
  sensors::SyntheticW1Source wearers(base, kW1Patterns, seed + 1000);
  for (int p = 0; p < kW1Patterns; ++p) {
    std::vector<float> rows;
    wearers.next(p, kW1Length, rows);
    std::vector<float> dim_major(rows.size());
    for (int s = 0; s < kW1Length; ++s)
      for (int d = 0; d < kW1Dims; ++d)
        dim_major[static_cast<std::size_t>(d) * kW1Length + s] =
            rows[static_cast<std::size_t>(s) * kW1Dims + d];
    set.values.push_back(std::move(dim_major));
  }
  set.threshold = 4.0;
  set.min_dims = 1;
  return set;
}

void write_w1_templates(const W1PatternSet& set, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  for (std::size_t p = 0; p < set.values.size(); ++p) {
    std::ofstream out(dir / fmt::format("w1_p{:02}.csv", p));
    for (int d = 0; d < kW1Dims; ++d) out << (d ? "," : "") << w1_channel_name(d);
    out << "\n";
    for (int s = 0; s < kW1Length; ++s) {
      for (int d = 0; d < kW1Dims; ++d)
        out << (d ? "," : "") << set.values[p][static_cast<std::size_t>(d) * kW1Length + s];
      out << "\n";
    }
    if (!out) throw Error("cannot write pattern templates in " + dir.string());
  }
}

std::string w1_devices_yaml(int device_id) {
  using sensors::kW1Channels;
  using sensors::kW1InsoleChannels;
  return fmt::format(
      R"(devices:
  - id: {device}
    name: w1
    kind: generic
    sample_rate_hz: {rate}
    channels: {channels}
    groups:
      - {{name: left_insole, first: 0, last: {left_last}}}
      - {{name: right_insole, first: {right_first}, last: {right_last}}}
      - {{name: accelerometer, first: {acc_first}, last: {acc_last}}}
    status:
      accel: [ax, ay, az]
      vertical: ay
      gravity: 1
      left_load: {left}
      right_load: {right}
)",
      fmt::arg("device", device_id), fmt::arg("rate", kSampleRateHz),
      fmt::arg("channels", w1_name_list(0, kW1Channels)),
      fmt::arg("left_last", kW1InsoleChannels - 1), fmt::arg("right_first", kW1InsoleChannels),
      fmt::arg("right_last", 2 * kW1InsoleChannels - 1),
      fmt::arg("acc_first", 2 * kW1InsoleChannels), fmt::arg("acc_last", kW1Channels - 1),
      fmt::arg("left", w1_name_list(0, kW1InsoleChannels)),
      fmt::arg("right", w1_name_list(kW1InsoleChannels, 2 * kW1InsoleChannels)));
}

std::string w1_patterns_yaml(std::size_t patterns, const std::filesystem::path& templates,
                             double threshold, int min_dims) {
  // One channel list for every pattern: a YAML anchor keeps the file small.
  std::string yaml = "patterns:\n";
  for (std::size_t p = 0; p < patterns; ++p) {
    const std::string channels =
        p == 0 ? "&all " + w1_name_list(0, sensors::kW1Channels) : std::string("*all");
    yaml += fmt::format(R"(  - name: w1_p{p:02}
    device: w1
    channels: {channels}
    length: {m}
    band: 0.1
    znorm: true
    mode: window
    nr: 3
    threshold: {threshold}
    min_dims: {min_dims}
    template: {dir}/w1_p{p:02}.csv
)",
                        fmt::arg("p", p), fmt::arg("channels", channels), fmt::arg("m", kW1Length),
                        fmt::arg("threshold", threshold), fmt::arg("min_dims", min_dims),
                        fmt::arg("dir", templates.string()));
  }
  return yaml;
}

}  // namespace gw::bench
