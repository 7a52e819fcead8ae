#include "bench/w1_workload.h"

#include <algorithm>
#include <random>
#include <sstream>
#include <stdexcept>

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

}  // namespace gw::bench
