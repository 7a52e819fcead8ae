// Turns configured patterns into kernel patterns, and single-dimension matches
// into multi-dimensional detections (seed 000 §7.4.2 phase 2, §7.4.6 ranking;
// first version: a greedy maximal matching, see combine_matches()).
//
// Thread safety: none; owned by the pipeline thread (or one offline caller).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "config/config.h"
#include "kernels/search.h"
#include "pipeline/alert.h"

namespace gw::pipeline {

// The patterns of one config, in config order, with their kernel form.
struct CompiledLibrary {
  std::vector<config::PatternConfig> patterns;
  // home_channel[p][j]: the stream channel pattern p's dim j is named after.
  std::vector<std::vector<int>> home_channel;
  std::shared_ptr<const kernels::PatternLibrary> kernel_library;
  // Longest pattern per device id (0 when a device has no pattern).
  int max_length_for(std::uint16_t device) const;
};

// Pairs: dim j on channel c is compared with channels c-nr..c+nr of the same
// channel group of the device. Throws gw::Error for inconsistent input
// (load_config has already validated a config, so that means a bug).
CompiledLibrary compile_library(const config::Config& config);

// One single-dimension match as the combiner sees it.
struct DimCandidate {
  std::int64_t end = 0;
  int pattern_dim = 0;
  int stream_dim = 0;
  double distance = 0;
  std::int64_t start = 0;  // first sample of the match (window mode: end - m + 1)
};

// The detection made at window end t from the candidates with t-m < end <= t:
// keep the best candidate per (j, i), weigh it f = 1 when i is j's home channel
// and alpha otherwise, then take edges by ascending weighted distance while
// neither their pattern dim nor their stream dim is used (a maximal set of
// independent edges). Returns the chosen edges; distance = sum of weighted d.
struct Combination {
  std::vector<DimCandidate> edges;
  double distance = 0;
};
Combination combine_matches(const std::vector<DimCandidate>& window_candidates,
                            const std::vector<int>& home_channel, double alpha);

// Per-(stream, pattern) phase-2 state across batches: recent single-dim
// matches and the cooldown. Results do not depend on how samples are split
// into batches.
class PatternTracker {
 public:
  // `fresh` are the new matches of one search of this stream and pattern
  // (any order); `searched_until` is the first window end not yet searched.
  // Returns the window ends (with their combinations) that raise an alert.
  std::vector<std::pair<std::int64_t, Combination>> update(
      std::vector<DimCandidate> fresh, std::int64_t searched_until,
      const config::PatternConfig& pattern, const std::vector<int>& home_channel,
      double sample_rate_hz);
  void reset();

 private:
  std::vector<DimCandidate> history_;  // sorted by end
  std::int64_t cooldown_until_ = 0;    // first end index allowed to alert again
};

}  // namespace gw::pipeline
