// History search: "find the k windows most like this example over wearers W
// in time range T" over the raw-stream history (history/history_store.h),
// with the search backend live detection uses (window mode) and the
// pattern's own channel transforms, z-normalisation, band and neighbour range
// (compiled by compile_library, as the engine does).
//
// Semantics (docs/design.md, "History search"):
// * A window is m consecutive samples of one run (no gap, restart or clock
//   jump inside; history_store.h) of a (wearer, device) stream of the
//   pattern's device; all m samples lie in [from, to) by device time (the
//   transforms' lead-in may precede `from`).
// * Its distance to one positive example is the synchronous MD-DTW: the
//   minimum, over assignments of every pattern dim j to a distinct view
//   channel i within nr of j's home channel (same group), of the sum of
//   f * DTW(j, i), DTW as the backend computes it for windows ending at the
//   same sample, f = 1 on the home channel and alpha on a switched one (with
//   nr = 0: the sum over dims of the per-dim distance). Its distance to the
//   pattern is that of the nearest positive example. Negatives, threshold,
//   min_dims and the gating do not apply: this ranks windows, it does not
//   alert.
// * The result is the greedy top k under an exclusion zone: windows in
//   ascending (distance, wearer, device, t_end, example) order; a window is
//   taken unless a taken window of the same stream ends within m/2 samples
//   of it (by sample index within a run, by device time across runs: the
//   trivial-match exclusion of the matrix-profile / UCR literature). So no
//   two results overlap by more than half a window.
// * A pattern that normalises per wearer (normalise:) learns each stream's
//   view baseline from the stream's first view samples at or after `from`
//   (its first active ones, with active_above; computed with the
//   transforms' lead-in before `from`), in time order across the stream's
//   runs; windows ending before the last sample it learned from are not
//   searched, the others are normalised with it. A range that starts where
//   the stream did is searched as the daemon searched the stream (but a
//   device restart inside the range does not learn it again).
// * Exact: the result equals a brute-force scan's. The per-pair threshold
//   given to the backend is a bound that a window in the final top k can
//   never exceed (docs/design.md proves it), so pruning only skips work.
//
// Resources: the history is read chunk by chunk and searched in slices of
// at most `slice_samples` samples (whole chunks), so memory is bounded by a
// slice plus the candidates within the current bound, whatever the range.
//
// Thread safety: search_history() uses the store and the backend it is
// given, one call at a time on each; it replaces the backend's pattern
// library, so it must not be the live engine's backend. Run it on a job
// thread with its own read-only HistoryStore and its own backend.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "kernels/search.h"
#include "pipeline/detector.h"
#include "history/history_store.h"
#include "sensors/recording.h"

namespace gw::pipeline {

// The example searched for: one compiled window-mode pattern.
struct HistoryPattern {
  CompiledLibrary library;  // exactly one pattern, its view and kernel patterns
  int device_channels = 0;  // channels of the device profile (of a stored chunk)

  const CompiledPattern& pattern() const { return library.patterns.front(); }
  const ChannelView& view() const { return library.views[pattern().view]; }
  int length() const { return pattern().config.length; }
};

// A pattern of the config, by name. Throws gw::Error when there is none or
// it is a streaming-mode pattern.
HistoryPattern history_pattern_from_config(const config::Config& config,
                                           const std::string& pattern_name);

struct ExampleOptions {
  double band = 0.1;  // R; r = floor(R * m)
  bool znorm = true;
  int nr = 0;
  double alpha = 1.0;
};
// A window of a recording as the example, on raw channels of a device
// profile of the config: `example` holds exactly the window (Recording::slice)
// and its channels are the profile's channel names the pattern uses (a
// subset, any order). Throws gw::Error for an unknown device or channel, a
// window shorter than 2 samples or a sample rate other than the device's.
HistoryPattern history_pattern_from_example(const config::Config& config,
                                            const std::string& device_name,
                                            const sensors::Recording& example,
                                            const ExampleOptions& options);

struct HistorySearchRequest {
  // Wearers to search; empty = every wearer the store holds a stream of the
  // pattern's device for.
  std::vector<std::uint32_t> wearers;
  double from = -std::numeric_limits<double>::infinity();  // device time [s]
  double to = std::numeric_limits<double>::infinity();
  int k = 10;  // >= 1
  // Most samples per backend batch (whole chunks, at least one): the memory
  // bound, and how often progress is reported and cancellation checked.
  std::size_t slice_samples = std::size_t{1} << 18;
};

struct HistoryProgress {
  double fraction = 0;        // samples searched / samples to search: 0..1, never decreasing
  std::uint64_t windows = 0;  // window ends searched (each against every positive example)
  std::uint64_t samples = 0;
  std::uint64_t samples_total = 0;
};
// Called on the searching thread after every slice, and with fraction 1
// when the search completes (not when it is cancelled).
using HistoryProgressFn = std::function<void(const HistoryProgress&)>;
// Polled between slices; true stops the search there.
using HistoryCancelFn = std::function<bool()>;

struct HistoryMatchDim {
  int pattern_dim = 0;
  int stream_dim = 0;     // channel of the pattern's view (a device channel without transforms)
  std::string channel;    // its name
  double distance = 0;    // DTW distance of this dim (unweighted)
  bool switched = false;  // stream_dim is not the pattern dim's home channel (weight alpha)
};

struct HistoryMatch {
  std::uint32_t wearer = 0;
  std::uint16_t device = 0;
  double t_start = 0;  // device time of the window's first sample
  double t_end = 0;    // device time of its last sample
  double distance = 0;
  int example = 0;                    // which positive example of the pattern (0-based)
  std::vector<HistoryMatchDim> dims;  // one per pattern dim
};

struct HistorySearchResult {
  std::vector<HistoryMatch> matches;  // best first, at most k
  // Stopped early by the cancel function: `matches` are the best among the
  // samples searched until then (progress says how many).
  bool cancelled = false;
  HistoryProgress progress;  // at the end
  std::uint64_t slices = 0;
  std::uint64_t chunks = 0;
  int exclusion_samples = 0;          // m / 2
  kernels::SearchStats stats;         // backend work counters
  // Streams skipped (channel count differs from the profile) and chunks
  // skipped (deleted by retention during the search, or damaged).
  std::vector<std::string> warnings;
};

// Throws gw::Error for k < 1 and when the store cannot be read; backend
// errors propagate.
HistorySearchResult search_history(const HistoryStore& store, const HistoryPattern& pattern,
                                   kernels::SearchBackend& backend,
                                   const HistorySearchRequest& request,
                                   const HistoryProgressFn& progress = {},
                                   const HistoryCancelFn& cancelled = {});

// The JSON form shared by `gaitwatch search --history` and the control
// interface: rank (1-based), wearer, device, t_start, t_end, distance,
// example, dims [{pattern_dim, stream_dim, channel, distance, switched}].
nlohmann::json history_match_json(const HistoryMatch& match, std::size_t rank);
// All of a search's matches in that form, ranked 1.. in their order.
nlohmann::json history_matches_json(const std::vector<HistoryMatch>& matches);

}  // namespace gw::pipeline
