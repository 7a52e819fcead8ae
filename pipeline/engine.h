// The detection engine: stream states, the batcher, the search backend and
// the phase-2 trackers. The daemon's pipeline thread drives it with frames and
// ticks; `gaitwatch detect` drives the same object offline from a recording,
// so both produce the same alerts for the same samples.
//
// Thread safety: none; one thread owns an Engine. Clock: `now` is passed in
// (an Env-like seam so tests control time).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "kernels/search.h"
#include "pipeline/alert.h"
#include "pipeline/detector.h"
#include "pipeline/stream_state.h"

namespace gw::pipeline {

struct EngineCounters {
  std::uint64_t frames_accepted = 0;
  std::uint64_t frames_out_of_order = 0;
  std::uint64_t frames_unknown_device = 0;  // device id not configured (normally caught by ingest)
  std::uint64_t frames_profile_mismatch = 0;
  std::uint64_t gaps = 0;
  std::uint64_t missing_frames = 0;
  std::uint64_t restarts = 0;
  std::uint64_t samples = 0;
  std::uint64_t overrun_samples = 0;  // overwritten in a ring before being searched
  std::uint64_t batches = 0;
  std::uint64_t deadline_misses = 0;
  std::uint64_t windows = 0;
  std::uint64_t single_dim_matches = 0;
  std::uint64_t alerts = 0;
  double last_batch_ms = 0;
  double max_batch_ms = 0;
  double max_latency_ms = 0;  // newest sample arrival -> alerts ready, worst batch
  std::uint64_t streams = 0;
};

class Engine {
 public:
  // Throws gw::Error when the config's patterns cannot be compiled.
  Engine(const config::Config& config, std::unique_ptr<kernels::SearchBackend> backend);

  // Applies a reloaded config: patterns, search.tick_ms/deadline_ms and the
  // per-pair cap. Phase-2 state restarts; stream rings are kept.
  void reconfigure(const config::Config& config);

  // Validates the frame against its device profile and appends it.
  void on_frame(const sensors::Frame& frame, double arrival_s);

  // Called from on_frame() for every frame accepted into its stream, with
  // the stream's verdict (the raw-stream history records through it). Runs
  // on the engine's thread; must not block for long. Empty = none.
  using FrameObserver =
      std::function<void(const sensors::Frame& frame, FrameVerdict verdict, double arrival_s)>;
  void set_frame_observer(FrameObserver observer) { frame_observer_ = std::move(observer); }

  // Searches every window end not yet searched and returns the alerts (seq 0;
  // the sink assigns it). `now` gives the wall clock for detected_at/latency.
  std::vector<Alert> run_batch(const std::function<double()>& now);

  const EngineCounters& counters() const { return counters_; }
  nlohmann::json stats_json() const;
  const std::string& backend_name() const { return backend_name_; }
  int tick_ms() const { return tick_ms_; }

 private:
  // Transformed samples of one view already computed for a stream: indices
  // [begin, end), sample-major. A transformed sample is a function of the raw
  // samples before it only (pipeline/transforms.h), so it is computed once.
  struct ViewCache {
    std::int64_t begin = 0;
    std::int64_t end = 0;
    std::vector<float> values;
  };
  struct Stream {
    std::uint32_t wearer;
    std::uint16_t device;
    double sample_rate_hz;
    StreamState state;
    std::vector<PatternTracker> trackers;  // one per library pattern
    std::vector<ViewCache> views;          // one per library view
  };
  // Appends the slice of `view` for `stream` to the batch when it has window
  // ends to search; returns false when it has none.
  bool add_view_slice(Stream& stream, std::uint64_t key, std::size_t view,
                      kernels::SearchBatch& batch);
  Stream& stream_for(const sensors::Frame& frame, const config::DeviceProfile& profile);

  config::Config config_;
  std::unique_ptr<kernels::SearchBackend> backend_;
  std::string backend_name_;
  CompiledLibrary library_;
  std::map<std::uint64_t, Stream> streams_;  // key: wearer << 16 | device
  int tick_ms_ = 100;
  int deadline_ms_ = 250;
  EngineCounters counters_;
  FrameObserver frame_observer_;
};

}  // namespace gw::pipeline
