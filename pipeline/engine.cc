#include "pipeline/engine.h"

#include <algorithm>
#include <chrono>

#include "common/error.h"

namespace gw::pipeline {

Engine::Engine(const config::Config& config, std::unique_ptr<kernels::SearchBackend> backend)
    : backend_(std::move(backend)) {
  if (!backend_) throw Error("engine: no search backend");
  backend_name_ = backend_->name();
  reconfigure(config);
}

void Engine::reconfigure(const config::Config& config) {
  CompiledLibrary compiled = compile_library(config);
  backend_->set_library(compiled.kernel_library);
  library_ = std::move(compiled);
  config_ = config;
  tick_ms_ = config.search.tick_ms;
  deadline_ms_ = config.search.deadline_ms;
  for (auto& [key, stream] : streams_)
    stream.trackers.assign(library_.patterns.size(), PatternTracker{});
}

Engine::Stream& Engine::stream_for(const sensors::Frame& frame,
                                   const config::DeviceProfile& profile) {
  const std::uint64_t key = (static_cast<std::uint64_t>(frame.wearer_id) << 16) | frame.device_id;
  auto it = streams_.find(key);
  if (it == streams_.end()) {
    Stream stream{frame.wearer_id, frame.device_id, profile.sample_rate_hz,
                  StreamState(static_cast<int>(profile.channels.size()),
                              config_.ingest.ring_capacity_samples, profile.sample_rate_hz),
                  std::vector<PatternTracker>(library_.patterns.size())};
    it = streams_.emplace(key, std::move(stream)).first;
    counters_.streams = streams_.size();
  }
  return it->second;
}

void Engine::on_frame(const sensors::Frame& frame, double arrival_s) {
  const config::DeviceProfile* profile = config_.device_by_id(frame.device_id);
  if (!profile) {
    ++counters_.frames_unknown_device;
    return;
  }
  if (profile->kind != frame.kind || profile->channels.size() != frame.channels) {
    ++counters_.frames_profile_mismatch;
    return;
  }
  Stream& stream = stream_for(frame, *profile);
  const FrameVerdict verdict = stream.state.apply(frame, arrival_s);
  if (verdict == FrameVerdict::kOutOfOrder) {
    ++counters_.frames_out_of_order;
    return;
  }
  ++counters_.frames_accepted;
  counters_.samples += frame.samples;
}

std::vector<Alert> Engine::run_batch(const std::function<double()>& now) {
  // Cut one slice per stream that has unsearched window ends and a pattern.
  kernels::SearchBatch batch;
  std::vector<Stream*> slice_stream;
  double newest_arrival = 0;
  for (auto& [key, stream] : streams_) {
    StreamState& st = stream.state;
    const int longest = library_.max_length_for(stream.device);
    if (longest == 0 || st.searched_until() >= st.next_index()) continue;
    const std::int64_t first_new = std::max(st.searched_until(), st.window_floor());
    const std::int64_t first_index = std::max(st.window_floor(), first_new - (longest - 1));
    const std::int64_t end = st.next_index();
    std::vector<float> samples;
    st.copy(first_index, end, samples);
    batch.add_slice(stream.device, st.channels(), samples.data(),
                    static_cast<int>(end - first_index), first_index, first_new, key);
    slice_stream.push_back(&stream);
    newest_arrival = std::max(newest_arrival, st.arrival_s(end - 1));
  }
  if (batch.streams.empty()) return {};

  const auto started = std::chrono::steady_clock::now();
  kernels::SearchResult result = backend_->search(batch);
  ++counters_.batches;
  counters_.windows += result.stats.windows;
  counters_.single_dim_matches += result.matches.size();

  // Group matches per (slice, pattern); the backend sorts by slice then pattern.
  std::vector<Alert> alerts;
  std::vector<double> completing_arrival;  // per alert: arrival of the sample that completed it
  std::size_t at = 0;
  for (std::size_t s = 0; s < batch.streams.size(); ++s) {
    Stream& stream = *slice_stream[s];
    const std::int64_t searched_until = stream.state.next_index();
    for (std::size_t p = 0; p < library_.patterns.size(); ++p) {
      if (library_.kernel_library->patterns[p].profile != stream.device) continue;
      std::vector<DimCandidate> fresh;
      while (at < result.matches.size() && result.matches[at].slice == s &&
             result.matches[at].pattern == p) {
        const kernels::Match& m = result.matches[at++];
        fresh.push_back({m.end, m.pattern_dim, m.stream_dim, m.distance, m.start});
      }
      const auto& pattern = library_.patterns[p];
      auto detections = stream.trackers[p].update(std::move(fresh), searched_until, pattern,
                                                  library_.home_channel[p], stream.sample_rate_hz);
      for (auto& [end, combination] : detections) {
        Alert a;
        a.wearer = stream.wearer;
        a.device = stream.device;
        a.pattern = pattern.name;
        a.kind = pattern.kind;
        a.severity = pattern.severity;
        a.end_index = end;
        a.t_end = stream.state.device_time_s(end);
        std::int64_t first_start = end;
        for (const auto& e : combination.edges) first_start = std::min(first_start, e.start);
        a.t_start = a.t_end - static_cast<double>(end - first_start) / stream.sample_rate_hz;
        a.distance = combination.distance;
        a.matched_dims = static_cast<int>(combination.edges.size());
        a.pattern_dims = static_cast<int>(pattern.channels.size());
        for (const auto& e : combination.edges)
          a.dims.push_back({e.pattern_dim, e.stream_dim, e.distance, e.end});
        completing_arrival.push_back(stream.state.arrival_s(end));
        alerts.push_back(std::move(a));
      }
    }
    stream.state.mark_searched(searched_until);
    // Skip matches of patterns that no longer apply (cannot happen; keeps `at` in step).
    while (at < result.matches.size() && result.matches[at].slice == s) ++at;
  }

  const double finished = now();
  for (std::size_t i = 0; i < alerts.size(); ++i) {
    alerts[i].detected_at = finished;
    alerts[i].latency_ms = (finished - completing_arrival[i]) * 1000.0;
  }
  counters_.alerts += alerts.size();
  counters_.last_batch_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  counters_.max_batch_ms = std::max(counters_.max_batch_ms, counters_.last_batch_ms);
  const double latency_ms = (finished - newest_arrival) * 1000.0;
  counters_.max_latency_ms = std::max(counters_.max_latency_ms, latency_ms);
  if (latency_ms > deadline_ms_) ++counters_.deadline_misses;
  std::uint64_t overrun = 0, gaps = 0, missing = 0, restarts = 0;
  for (const auto& [key, stream] : streams_) {
    overrun += stream.state.overrun_samples();
    gaps += stream.state.gaps();
    missing += stream.state.missing_frames();
    restarts += stream.state.restarts();
  }
  counters_.overrun_samples = overrun;
  counters_.gaps = gaps;
  counters_.missing_frames = missing;
  counters_.restarts = restarts;
  return alerts;
}

nlohmann::json Engine::stats_json() const {
  const EngineCounters& c = counters_;
  return {{"backend", backend_name_},
          {"streams", c.streams},
          {"frames_accepted", c.frames_accepted},
          {"frames_out_of_order", c.frames_out_of_order},
          {"frames_unknown_device", c.frames_unknown_device},
          {"frames_profile_mismatch", c.frames_profile_mismatch},
          {"gaps", c.gaps},
          {"missing_frames", c.missing_frames},
          {"restarts", c.restarts},
          {"samples", c.samples},
          {"overrun_samples", c.overrun_samples},
          {"batches", c.batches},
          {"deadline_misses", c.deadline_misses},
          {"windows", c.windows},
          {"single_dim_matches", c.single_dim_matches},
          {"alerts", c.alerts},
          {"last_batch_ms", c.last_batch_ms},
          {"max_batch_ms", c.max_batch_ms},
          {"max_latency_ms", c.max_latency_ms}};
}

}  // namespace gw::pipeline
