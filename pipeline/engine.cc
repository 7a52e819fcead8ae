#include "pipeline/engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <limits>
#include <unordered_set>

#include <fmt/format.h>

#include "common/diagnostics.h"
#include "common/error.h"
#include "common/thread_name.h"
#include "common/worker_pool.h"
#include "pipeline/marks.h"

namespace gw::pipeline {

Event episode_ended_event(const EpisodeEnd& end, double at_s) {
  Event event;
  event.type = EventType::kEpisodeEnded;
  event.wearer = end.wearer;
  event.actor = "gaitwatchd";
  event.at = at_s;
  event.details = {{"pattern", end.pattern},
                   {"kind", end.kind},
                   {"severity", end.severity},
                   {"device", end.device},
                   {"t_start", end.t_start},
                   {"t_end", end.t_end},
                   {"duration_s", end.t_end - end.t_start},
                   {"alerts", end.alerts},
                   {"first_alert",
                    {{"end_index", end.first_alert_end_index}, {"t_end", end.first_alert_t_end}}}};
  return event;
}

Engine::Engine(const config::Config& config, std::unique_ptr<kernels::SearchBackend> backend)
    : backend_(std::move(backend)),
      batch_log_(diagnostics().engine_batch_log, "GW_ENGINE_BATCH_LOG") {
  if (!backend_) throw Error("engine: no search backend");
  backend_name_ = backend_->name();
  reconfigure(config);
}

Engine::~Engine() = default;

void Engine::reconfigure(const config::Config& config) {
  if (searching_.active || searched_.active)
    throw Error("engine: reconfigure while a batch is in flight or waits for its phase 2");
  CompiledLibrary compiled = compile_library(config);
  backend_->set_library(compiled.kernel_library);
  const std::vector<ChannelView> old_views = std::move(library_.views);
  library_ = std::move(compiled);
  config_ = config;
  pattern_channels_.clear();
  for (const CompiledPattern& p : library_.patterns) {
    PatternChannels channels;
    channels.device = config_.device_by_name(p.config.device);
    if (!channels.device)
      throw Error("pattern '" + p.config.name + "': no device '" + p.config.device + "'");
    for (const std::string& name : p.config.channels) {
      const auto& names = channels.device->channels;
      channels.columns.push_back(
          static_cast<int>(std::find(names.begin(), names.end(), name) - names.begin()));
    }
    channels.window_bytes = static_cast<std::int64_t>(channels.columns.size()) *
                            (example_lead_in(p.config, *channels.device) + p.config.length) *
                            static_cast<std::int64_t>(sizeof(float));
    pattern_channels_.push_back(std::move(channels));
  }
  compile_agreement_rules();
  compile_kind_groups();
  work_per_end_.assign(library_.views.size(), 0.0);
  view_priority_.assign(library_.views.size(), 0);
  for (std::size_t v = 0; v < library_.views.size(); ++v)
    for (const kernels::Pattern& k : library_.kernel_library->patterns)
      if (k.profile == library_.views[v].profile) work_per_end_[v] += static_cast<double>(k.pairs.size());
  for (const CompiledPattern& p : library_.patterns) {
    const int rank = p.config.severity == "critical" ? 2 : p.config.severity == "warning" ? 1 : 0;
    view_priority_[p.view] = std::max(view_priority_[p.view], rank);
  }
  const int host_threads = worker_count(config.search.threads);
  if (!host_pool_ || host_pool_->size() != host_threads)
    host_pool_ = std::make_unique<WorkerPool>(host_threads, "gw-engine");
  scratch_.resize(static_cast<std::size_t>(host_threads));
  baseline_scratch_.resize(static_cast<std::size_t>(host_threads));
  phase2_scratch_.assign(static_cast<std::size_t>(host_threads), Phase2Scratch{});
  for (Phase2Scratch& scratch : phase2_scratch_)
    scratch.by_kernel.resize(library_.kernel_library->patterns.size());
  tick_ms_ = config.search.tick_ms;
  deadline_ms_ = config.search.deadline_ms;
  // A view that yields the same samples as before keeps its streams'
  // baselines (learned or being learned): a reload does not send every
  // wearer back to learning.
  std::vector<std::size_t> old_view_of(library_.views.size(), old_views.size());
  for (std::size_t v = 0; v < library_.views.size(); ++v)
    for (std::size_t o = 0; o < old_views.size(); ++o)
      if (library_.views[v].normalise.enabled && same_view_samples(library_.views[v], old_views[o]))
        old_view_of[v] = o;
  // Held detections belonged to the old patterns: dropped, not counted as
  // unagreed (docs/detection.md §7).
  for (auto& [key, stream] : streams_) {
    stream.trackers.assign(library_.patterns.size(), PatternTracker(stream.wearer));
    for (PatternTracker& tracker : stream.trackers) tracker.record_decisions(record_decisions_);
    stream.open_episodes.clear();
    stream.views.assign(library_.views.size(), ViewCache{});
    stream.pending.assign(library_.views.size(), {0, 0});
    std::vector<ViewBaseline> baselines = fresh_baselines(stream.device);
    for (std::size_t v = 0; v < baselines.size(); ++v)
      if (old_view_of[v] < stream.baselines.size())
        baselines[v] = std::move(stream.baselines[old_view_of[v]]);
    stream.baselines = std::move(baselines);
    stream.agreement.assign(agreement_order_.empty() ? 0 : library_.patterns.size(), {});
    stream.kind_last_alert.clear();
  }
  // What was pending belonged to the old views; the new ones count their
  // due ends afresh.
  counters_.lost_windows += counters_.pending_windows;
  counters_.pending_windows = 0;
}

void Engine::record_decisions(bool on) {
  record_decisions_ = on;
  for (auto& [key, stream] : streams_)
    for (PatternTracker& tracker : stream.trackers) tracker.record_decisions(on);
}

std::vector<PatternTracker::TracedDecision> Engine::take_decision_trace(std::uint32_t wearer,
                                                                        std::uint16_t device,
                                                                        std::size_t pattern) {
  const std::uint64_t key = (static_cast<std::uint64_t>(wearer) << 16) | device;
  const auto found = stream_index_.find(key);
  if (found == stream_index_.end() || pattern >= found->second->trackers.size()) return {};
  return found->second->trackers[pattern].take_decision_trace();
}

void Engine::compile_agreement_rules() {
  const std::size_t count = library_.patterns.size();
  std::map<std::string, std::size_t> index_of;
  for (std::size_t p = 0; p < count; ++p) index_of.emplace(library_.patterns[p].config.name, p);
  agreement_rules_.assign(count, AgreementRule{});
  agreed_with_.assign(count, 0);
  for (std::size_t p = 0; p < count; ++p) {
    const config::PatternConfig& pattern = library_.patterns[p].config;
    agreement_rules_[p].within_s = pattern.agree.within_s;
    for (const std::string& name : pattern.agree.with) {
      const auto found = index_of.find(name);
      if (found == index_of.end() || found->second == p ||
          library_.patterns[found->second].config.device != pattern.device)
        throw Error("pattern '" + pattern.name + "': agree.with names '" + name +
                    "', which is not another pattern of device '" + pattern.device + "'");
      agreement_rules_[p].with.push_back(found->second);
      agreed_with_[found->second] = 1;
    }
  }
  // Patterns with `agree`, each after those it names (depth-first).
  agreement_order_.clear();
  enum class Mark { kNew, kOnPath, kDone };
  std::vector<Mark> mark(count, Mark::kNew);
  const std::function<void(std::size_t)> visit = [&](std::size_t p) {
    if (mark[p] == Mark::kDone) return;
    if (mark[p] == Mark::kOnPath)
      throw Error("pattern '" + library_.patterns[p].config.name +
                  "': its agree.with leads back to itself");
    mark[p] = Mark::kOnPath;
    for (const std::size_t q : agreement_rules_[p].with) visit(q);
    mark[p] = Mark::kDone;
    if (!agreement_rules_[p].with.empty()) agreement_order_.push_back(p);
  };
  for (std::size_t p = 0; p < count; ++p) visit(p);
}

void Engine::compile_kind_groups() {
  const std::size_t count = library_.patterns.size();
  std::map<std::string, std::vector<std::size_t>> publishing_of_kind;
  // "other" (the default) says nothing about the event: never merged.
  for (std::size_t p = 0; p < count; ++p)
    if (library_.patterns[p].config.publish && library_.patterns[p].config.kind != "other")
      publishing_of_kind[library_.patterns[p].config.kind].push_back(p);
  kind_group_.assign(count, -1);
  kind_group_count_ = 0;
  for (const auto& [kind, patterns] : publishing_of_kind) {
    if (patterns.size() < 2) continue;
    for (const std::size_t p : patterns) kind_group_[p] = static_cast<int>(kind_group_count_);
    ++kind_group_count_;
  }
}

bool Engine::merged_into_kind(Stream& stream, std::size_t p, const Alert& alert) {
  const int group = kind_group_[p];
  if (group < 0) return false;
  stream.kind_last_alert.resize(kind_group_count_);
  KindLastAlert& last = stream.kind_last_alert[static_cast<std::size_t>(group)];
  // A pattern's own repeats are left to its cooldown: merging joins only
  // different patterns' alerts of one event.
  if (last.cooldown >= 0 && last.pattern != p && std::llabs(alert.end_index - last.end) <= last.cooldown) {
    ++counters_.merged_alerts;
    if (alert.window) refund_window_bytes(pattern_channels_[p].window_bytes);
    if (p < stream.open_episodes.size()) {
      auto& open = stream.open_episodes[p];
      open.erase(std::remove_if(open.begin(), open.end(),
                                [&](const EpisodeEnd& e) { return e.first_alert_end_index == alert.end_index; }),
                 open.end());
    }
    return true;
  }
  // An alert decided late (held for its views) that ended before the last
  // one leaves the last one in place.
  if (last.cooldown < 0 || alert.end_index >= last.end) {
    const double cooldown_s = library_.patterns[p].config.cooldown_s;
    last = {alert.end_index, static_cast<std::int64_t>(std::llround(cooldown_s * stream.sample_rate_hz)), p};
  }
  return false;
}

Engine::Stream* Engine::stream_for(const sensors::Frame& frame,
                                   const config::DeviceProfile& profile) {
  const std::uint64_t key = (static_cast<std::uint64_t>(frame.wearer_id) << 16) | frame.device_id;
  if (const auto known = stream_index_.find(key); known != stream_index_.end()) return known->second;
  if (streams_.size() >= config_.ingest.max_streams) {
    ++counters_.streams_refused;
    return nullptr;
  }
  Stream stream{frame.wearer_id,
                frame.device_id,
                profile.sample_rate_hz,
                StreamState(static_cast<int>(profile.channels.size()),
                            config_.ingest.ring_capacity_samples, profile.sample_rate_hz),
                std::vector<PatternTracker>(library_.patterns.size(),
                                            PatternTracker(frame.wearer_id)),
                std::vector<ViewCache>(library_.views.size()),
                std::vector<std::pair<std::int64_t, std::int64_t>>(library_.views.size()),
                0.0,
                fresh_baselines(frame.device_id),
                std::vector<PatternAgreement>(agreement_order_.empty() ? 0
                                                                       : library_.patterns.size()),
                {}, {}};
  for (PatternTracker& tracker : stream.trackers) tracker.record_decisions(record_decisions_);
  Stream& added = streams_.emplace(key, std::move(stream)).first->second;
  stream_index_.emplace(key, &added);
  counters_.streams = streams_.size();
  stream_order_stale_ = true;
  return &added;
}

std::vector<Engine::ViewBaseline> Engine::fresh_baselines(std::uint16_t device) const {
  std::vector<ViewBaseline> baselines(library_.views.size());
  for (std::size_t v = 0; v < library_.views.size(); ++v) {
    const ChannelView& view = library_.views[v];
    if (view.device != device || !view.normalise.enabled) continue;
    const config::DeviceProfile* profile = config_.device_by_id(device);
    if (!profile) continue;
    baselines[v].learner = BaselineLearner(view.normalise, view.chain->output_channels(),
                                           profile->sample_rate_hz);
  }
  return baselines;
}

void Engine::advance_baseline(Stream& stream, std::size_t v, std::vector<float>& rows,
                              std::vector<float>& values) const {
  const ChannelView& view = library_.views[v];
  ViewBaseline& b = stream.baselines[v];
  const StreamState& st = stream.state;
  if (b.restarts != st.restarts()) {
    // A device restart may mean another placement or another wearer: learn again.
    const std::uint64_t restarts = st.restarts();
    b = std::move(fresh_baselines(stream.device)[v]);
    b.restarts = restarts;
  }
  if (b.learned()) return;
  // The view's samples from where learning stopped, never across a gap (the
  // transforms' history restarts there) nor from samples the ring lost.
  const std::int64_t from = std::max(b.fed_until, st.window_floor() + view.history);
  const std::int64_t end = st.next_index();
  if (from >= end) return;
  rows.clear();
  values.clear();
  st.copy(from - view.history, end, rows);
  view_samples(view, rows.data(), static_cast<int>(end - (from - view.history)), st.channels(),
               values);
  const int taken = b.learner.add(values.data(), static_cast<int>(end - from));
  b.fed_until = from + taken;
  if (b.learner.learned()) {
    b.baseline = b.learner.finish();
    b.learned_at = b.fed_until;
  }
}

Engine::Stream* Engine::admit_frame(const sensors::Frame& frame, double arrival_s) {
  const config::DeviceProfile* profile = config_.device_by_id(frame.device_id);
  if (!profile) {
    ++counters_.frames_unknown_device;
    return nullptr;
  }
  if (profile->kind != frame.kind || profile->channels.size() != frame.channels) {
    ++counters_.frames_profile_mismatch;
    return nullptr;
  }
  Stream* stream = stream_for(frame, *profile);
  if (stream) stream->last_frame_s = std::max(stream->last_frame_s, arrival_s);
  return stream;
}

std::size_t Engine::sweep_streams(double now_s) {
  const config::IngestConfig& limits = config_.ingest;
  EngineCounters::ByState by_state;
  double oldest_age = 0;
  const auto count_live = [&](double age) {
    oldest_age = std::max(oldest_age, age);
    if (age < limits.stream_stale_s)
      ++by_state.online;
    else if (age < limits.stream_offline_s)
      ++by_state.stale;
    else
      ++by_state.offline;
  };
  std::vector<std::pair<std::map<std::uint64_t, Stream>::iterator, double>> idle;
  for (auto it = streams_.begin(); it != streams_.end(); ++it) {
    const double age = std::max(0.0, now_s - it->second.last_frame_s);
    if (limits.stream_idle_s > 0 && age >= limits.stream_idle_s)
      idle.emplace_back(it, age);
    else
      count_live(age);
  }
  std::size_t evicted = 0;
  if (!idle.empty()) {
    // A batch's slices point at their streams until its phase 2 is done.
    std::unordered_set<const Stream*> in_flight;
    for (const BatchState* batch : {&searching_, &searched_})
      if (batch->active)
        for (const SliceOwner& owner : batch->owners) in_flight.insert(owner.stream);
    for (const auto& [it, age] : idle) {
      if (in_flight.count(&it->second) > 0) {
        count_live(age);  // removed at a later sweep
        continue;
      }
      evict_stream(it);
      ++evicted;
    }
  }
  counters_.streams_by_state = by_state;
  counters_.oldest_frame_age_s = oldest_age;
  return evicted;
}

void Engine::evict_stream(std::map<std::uint64_t, Stream>::iterator it) {
  const std::uint64_t key = it->first;
  Stream& stream = it->second;
  for (std::size_t v = 0; v < stream.pending.size(); ++v) {
    const auto [from, until] = stream.pending[v];
    if (until <= from) continue;
    const auto items = static_cast<std::uint64_t>(until - from) *
                       static_cast<std::uint64_t>(work_per_end_[v]);
    counters_.lost_windows += items;
    counters_.pending_windows -= std::min(counters_.pending_windows, items);
  }
  retired_.overrun += stream.state.overrun_samples();
  retired_.gaps += stream.state.gaps();
  retired_.missing += stream.state.missing_frames();
  retired_.restarts += stream.state.restarts();
  // The keys plan_view_slice gives the backend for this stream's views.
  for (std::size_t v = 0; v < library_.views.size(); ++v)
    if (library_.views[v].device == stream.device)
      forgotten_keys_.push_back(library_.views[v].raw
                                    ? key
                                    : key | (static_cast<std::uint64_t>(v + 1) << 48));
  stream_index_.erase(key);
  streams_.erase(it);
  counters_.streams = streams_.size();
  ++counters_.streams_evicted;
  stream_order_stale_ = true;
}

bool Engine::count_verdict(const sensors::Frame& frame, FrameVerdict verdict, double arrival_s) {
  if (verdict == FrameVerdict::kOutOfOrder) {
    ++counters_.frames_out_of_order;
    return false;
  }
  ++counters_.frames_accepted;
  counters_.samples += frame.samples;
  if (frame_observer_) frame_observer_(frame, verdict, arrival_s);
  return true;
}

bool Engine::on_frame(const sensors::Frame& frame, double arrival_s) {
  Stream* stream = admit_frame(frame, arrival_s);
  return stream && count_verdict(frame, stream->state.apply(frame, arrival_s), arrival_s);
}

void Engine::on_frames(const std::vector<ArrivedFrame>& frames, std::vector<char>& accepted) {
  accepted.assign(frames.size(), 0);
  // Below this, waking the pool costs more than the appends.
  // While the CPU backend searches, its own pool has the cores.
  constexpr std::size_t kFramesForPool = 32;
  if (frames.size() < kFramesForPool || spare_host_pool() == nullptr) {
    for (std::size_t i = 0; i < frames.size(); ++i)
      accepted[i] = on_frame(*frames[i].frame, frames[i].arrival_s);
    return;
  }
  // In order on this thread: admission and new streams.
  frame_streams_.resize(frames.size());
  frames_by_stream_.clear();
  for (std::size_t i = 0; i < frames.size(); ++i) {
    frame_streams_[i] = admit_frame(*frames[i].frame, frames[i].arrival_s);
    if (frame_streams_[i]) frames_by_stream_.push_back(i);
  }
  // One stream's frames stay in arrival order, on one worker.
  std::stable_sort(frames_by_stream_.begin(), frames_by_stream_.end(),
                   [&](std::size_t a, std::size_t b) {
                     return std::less<const Stream*>()(frame_streams_[a], frame_streams_[b]);
                   });
  stream_runs_.clear();
  for (std::size_t begin = 0, end = 0; begin < frames_by_stream_.size(); begin = end) {
    end = begin + 1;
    while (end < frames_by_stream_.size() &&
           frame_streams_[frames_by_stream_[end]] == frame_streams_[frames_by_stream_[begin]])
      ++end;
    stream_runs_.emplace_back(begin, end);
  }
  frame_verdicts_.resize(frames.size());
  for_each_stream_item(stream_runs_.size(), [&](std::size_t r, int) {
    for (std::size_t k = stream_runs_[r].first; k < stream_runs_[r].second; ++k) {
      const std::size_t i = frames_by_stream_[k];
      frame_verdicts_[i] = frame_streams_[i]->state.apply(*frames[i].frame, frames[i].arrival_s);
    }
  });
  // In order on this thread: counters and the observer.
  for (std::size_t i = 0; i < frames.size(); ++i)
    if (frame_streams_[i])
      accepted[i] = count_verdict(*frames[i].frame, frame_verdicts_[i], frames[i].arrival_s);
}

WorkerPool* Engine::spare_host_pool() {
  const bool cpu_search_running = searching_.active && backend_name_.rfind("cpu", 0) == 0;
  if (host_pool_->size() == 1 || cpu_search_running) return nullptr;
  return host_pool_.get();
}

std::vector<StreamClock> Engine::stream_clocks() const {
  std::vector<StreamClock> clocks;
  collect_stream_clocks(clocks);
  return clocks;
}

void Engine::collect_stream_clocks(std::vector<StreamClock>& clocks) const {
  clocks.clear();
  clocks.reserve(streams_.size());
  for (const auto& [key, stream] : streams_) {
    const std::int64_t newest = stream.state.next_index() - 1;
    if (newest < stream.state.oldest_retained()) continue;  // no sample yet
    clocks.push_back({stream.wearer, stream.device, stream.state.device_time_s(newest)});
  }
}

std::pair<std::int64_t, std::int64_t> Engine::unsearched_ends(const Stream& stream,
                                                              std::size_t v) const {
  const ChannelView& view = library_.views[v];
  const StreamState& st = stream.state;
  // The first sample a window may start at: after a gap, and after the
  // samples the view's transforms read before it.
  const std::int64_t floor = st.window_floor() + view.history;
  const std::int64_t end = st.next_index();
  std::int64_t first_new = std::max(st.searched_until(), floor);
  if (view.normalise.enabled) {
    // A normalised view searches nothing before its baseline is learned;
    // from then on every window end, with all samples normalised alike.
    const ViewBaseline& baseline = stream.baselines[v];
    if (!baseline.learned()) return {end, end};
    first_new = std::max(first_new, baseline.learned_at);
  }
  if (view.longest_pattern == 0 || first_new >= end) return {end, end};
  return {first_new, end};
}

void Engine::account_due(Stream& stream, std::size_t v, std::int64_t first, std::int64_t end,
                         DueTally& tally) const {
  auto& [from, until] = stream.pending[v];
  const auto per_end = static_cast<std::uint64_t>(work_per_end_[v]);
  if (first > from && until > from)
    tally.lost += static_cast<std::uint64_t>(std::min(first, until) - from) * per_end;
  const std::int64_t fresh_from = std::max(first, until);
  if (end > fresh_from) tally.due += static_cast<std::uint64_t>(end - fresh_from) * per_end;
  from = first;
  until = std::max(first, end);
}

bool Engine::plan_view_slice(Stream& stream, std::uint64_t key, std::size_t v,
                             std::size_t& data_size) {
  const ChannelView& view = library_.views[v];
  const auto [first_new, end] = unsearched_ends(stream, v);
  if (first_new >= end) return false;
  const std::int64_t floor = stream.state.window_floor() + view.history;
  kernels::StreamSlice slice;
  slice.profile = view.profile;
  slice.dims = static_cast<int>(view.channel_names.size());
  slice.first_index = std::max(floor, first_new - (view.longest_pattern - 1));
  slice.first_new = first_new;
  slice.length = static_cast<int>(end - slice.first_index);
  slice.offset = data_size;
  // Streaming-mode state is kept per stream key: one per (stream, view).
  slice.stream_key = view.raw ? key : key | (static_cast<std::uint64_t>(v + 1) << 48);
  // A backend that holds the stream's earlier samples (the CUDA backend's
  // device rings) gets only the new ones: the m - 1 samples of history are
  // most of a W1 slice (docs/design.md, "Resident history").
  slice.omitted = backend_->held_samples(slice);
  data_size += slice.data_size();
  searching_.batch.streams.push_back(slice);
  return true;
}

void Engine::fill_view_slice(Stream& stream, std::size_t v, const kernels::StreamSlice& slice,
                             std::vector<float>& scratch) {
  const ChannelView& view = library_.views[v];
  const StreamState& st = stream.state;
  const std::int64_t first_index = slice.first_index;
  const std::int64_t end = first_index + slice.length;
  const float* samples = nullptr;  // from first_index + slice.omitted on
  scratch.clear();
  if (view.raw) {
    st.copy(first_index + slice.omitted, end, scratch);
    samples = scratch.data();
  } else {
    ViewCache& cache = stream.views[v];
    if (first_index < cache.begin || first_index > cache.end)
      cache = {first_index, first_index, {}};
    if (cache.end < end) {
      // Raw inputs of the new samples, with the history they read.
      st.copy(cache.end - view.history, end, scratch);
      const auto rows = static_cast<int>(end - (cache.end - view.history));
      const std::size_t appended_at = cache.values.size();
      view_samples(view, scratch.data(), rows, st.channels(), cache.values);
      // Slices of a normalised view are planned only once it is learned, so
      // every cached sample is normalised with the one frozen baseline.
      if (view.normalise.enabled)
        apply_baseline(stream.baselines[v].baseline, cache.values.data() + appended_at,
                       static_cast<std::size_t>(end - cache.end));
      cache.end = end;
    }
    const auto out_channels = static_cast<std::size_t>(view.chain->output_channels());
    cache.values.erase(cache.values.begin(),
                       cache.values.begin() +
                           static_cast<std::ptrdiff_t>(
                               static_cast<std::size_t>(first_index - cache.begin) * out_channels));
    cache.begin = first_index;
    samples = cache.values.data() + static_cast<std::size_t>(slice.omitted) * out_channels;
  }
  kernels::transpose_to_dim_major(samples, slice.length - slice.omitted, slice.dims,
                                  searching_.batch.data.data() + slice.offset);
}

void Engine::restore_omitted_samples() {
  bool any = false;
  for (const kernels::StreamSlice& slice : searching_.batch.streams)
    any = any || slice.omitted > 0;
  if (!any) return;
  kernels::SearchBatch& batch = searching_.batch;
  std::vector<float> present;
  present.swap(batch.data);
  std::size_t size = 0;
  for (const kernels::StreamSlice& slice : batch.streams)
    size += static_cast<std::size_t>(slice.dims) * static_cast<std::size_t>(slice.length);
  batch.data.assign(size, 0.0f);
  std::vector<float>& scratch = scratch_.front();
  std::size_t offset = 0;
  for (std::size_t s = 0; s < batch.streams.size(); ++s) {
    kernels::StreamSlice& slice = batch.streams[s];
    const SliceOwner& owner = searching_.owners[s];
    const ChannelView& view = library_.views[owner.view];
    const StreamState& state = owner.stream->state;
    const std::size_t present_at = slice.offset;
    const std::size_t stride = static_cast<std::size_t>(slice.length - slice.omitted);
    slice.offset = offset;
    offset += static_cast<std::size_t>(slice.dims) * static_cast<std::size_t>(slice.length);
    if (slice.omitted == 0) {
      std::copy_n(present.begin() + static_cast<std::ptrdiff_t>(present_at),
                  static_cast<std::ptrdiff_t>(slice.data_size()),
                  batch.data.begin() + static_cast<std::ptrdiff_t>(slice.offset));
      continue;
    }
    const std::int64_t held_end = slice.first_index + slice.omitted;
    // The omitted samples from where fill_view_slice read the rest: the
    // view's cache still covers the slice (only batches change it); a raw
    // ring may have been overwritten by frames taken during the search.
    const float* held = nullptr;
    if (view.raw) {
      if (slice.first_index >= state.oldest_retained()) {
        scratch.clear();
        state.copy(slice.first_index, held_end, scratch);
        held = scratch.data();
      }
    } else if (const ViewCache& cache = owner.stream->views[owner.view];
               cache.begin == slice.first_index && cache.end >= held_end) {
      held = cache.values.data();
    }
    if (!held) {
      // Not searchable any more: its window ends are lost, not searched.
      const auto items = static_cast<std::uint64_t>(
          static_cast<double>(slice.first_index + slice.length - slice.first_new) *
          work_per_end_[owner.view]);
      counters_.searched_windows -= items;
      counters_.lost_windows += items;
      searching_.searched_work -= static_cast<double>(items);
      slice.first_new = slice.first_index + slice.length;
      slice.omitted = 0;
      continue;
    }
    std::vector<float> held_by_dim(static_cast<std::size_t>(slice.dims) *
                                   static_cast<std::size_t>(slice.omitted));
    kernels::transpose_to_dim_major(held, slice.omitted, slice.dims, held_by_dim.data());
    for (int d = 0; d < slice.dims; ++d) {
      float* row = batch.data.data() + slice.offset +
                   static_cast<std::size_t>(d) * static_cast<std::size_t>(slice.length);
      std::copy_n(held_by_dim.begin() + static_cast<std::ptrdiff_t>(d) * slice.omitted,
                  slice.omitted, row);
      std::copy_n(present.begin() + static_cast<std::ptrdiff_t>(
                                        present_at + static_cast<std::size_t>(d) * stride),
                  static_cast<std::ptrdiff_t>(stride), row + slice.omitted);
    }
    slice.omitted = 0;
  }
}

void Engine::for_each_stream_item(std::size_t count,
                                  const std::function<void(std::size_t, int)>& body) {
  // Items differ in cost (a W1 slice far more than a quiet one), so workers
  // take small chunks in turn; a batch of one chunk stays on this thread.
  constexpr std::size_t kChunk = 8;
  host_pool_->for_ranges(count, kChunk, [&](std::size_t begin, std::size_t end, int worker) {
    for (std::size_t i = begin; i < end; ++i) body(i, worker);
  });
}

void Engine::detect_in_slice(std::size_t s, const kernels::SearchResult& result,
                             Phase2Scratch& scratch, SliceAlerts& out) {
  const SliceOwner& owner = searched_.owners[s];
  Stream& stream = *owner.stream;
  const kernels::StreamSlice& slice = searched_.batch.streams[s];
  const std::int64_t searched_until = slice.first_index + slice.length;
  // Every detection ends among the slice's new samples, whose times were
  // copied at the start; the ring is read only as a fallback.
  const auto sample_times = [&](std::int64_t end) -> std::pair<double, double> {
    if (end >= slice.first_new && end < searched_until)
      return searched_.times[owner.times_at + static_cast<std::size_t>(end - slice.first_new)];
    return {stream.state.device_time_s(end), stream.state.arrival_s(end)};
  };
  // The backend sorts matches by slice, then kernel pattern.
  const auto by_slice = [](const kernels::Match& m, std::size_t slice_index) {
    return m.slice < slice_index;
  };
  auto at = std::lower_bound(result.matches.begin(), result.matches.end(), s, by_slice);
  std::vector<std::vector<DimCandidate>>& by_kernel = scratch.by_kernel;
  for (auto& matches : by_kernel) matches.clear();
  for (; at != result.matches.end() && at->slice == s; ++at)
    by_kernel[at->pattern].push_back({at->end, at->pattern_dim, at->stream_dim, at->distance, at->start});
  out.alerts.clear();
  out.completing_arrival.clear();
  out.pattern.clear();
  out.windows_unavailable = 0;
  out.windows_paused = 0;
  out.windows_over_budget = 0;
  const bool windows_paused = alert_windows_paused_.load(std::memory_order_relaxed);
  out.episode_ends.clear();
  stream.open_episodes.resize(library_.patterns.size());
  std::vector<std::vector<DimCandidate>>& fresh = scratch.fresh;
  std::vector<PatternTracker::Detection>& detections = scratch.detections;
  for (std::size_t p = 0; p < library_.patterns.size(); ++p) {
    const CompiledPattern& pattern = library_.patterns[p];
    if (pattern.view != owner.view) continue;
    // The first window end searched for this pattern (shorter patterns
    // than the view's longest start later after a gap). Query segments
    // are shorter still: their matches before it are left out, so that
    // alerts do not depend on where batches split.
    const std::int64_t first_end =
        std::max(slice.first_new, slice.first_index + pattern.config.length - 1);
    // Alerts held for agreement may never go out: their episodes are not told.
    const bool reports_episodes = pattern.config.publish && agreement_rules_[p].with.empty();
    if (fresh.size() < pattern.examples.size()) fresh.resize(pattern.examples.size());
    for (std::size_t e = 0; e < pattern.examples.size(); ++e) {
      fresh[e].clear();
      // Other wearers' examples take no part in this stream's decisions.
      if (example_applies(pattern.examples[e], stream.wearer))
        example_candidates(pattern, pattern.examples[e], by_kernel, first_end, fresh[e]);
    }
    detections.clear();
    stream.trackers[p].update_into(fresh, first_end, searched_until, pattern,
                                   stream.sample_rate_hz, detections);
    for (auto& detection : detections) {
      const Combination& combination = detection.decision.positive.combination;
      const std::int64_t end = detection.end;
      Alert a;
      a.wearer = stream.wearer;
      a.device = stream.device;
      a.pattern = pattern.config.name;
      a.kind = pattern.config.kind;
      a.severity = pattern.config.severity;
      a.end_index = end;
      const auto [device_time, arrival] = sample_times(end);
      a.t_end = device_time;
      std::int64_t first_start = end;
      for (const auto& e : combination.edges) first_start = std::min(first_start, e.start);
      a.t_start = a.t_end - static_cast<double>(end - first_start) / stream.sample_rate_hz;
      a.distance = combination.distance;
      a.matched_dims = static_cast<int>(combination.edges.size());
      a.pattern_dims = static_cast<int>(pattern.home_channel.size());
      for (const auto& e : combination.edges)
        a.dims.push_back({e.pattern_dim, e.stream_dim, e.distance, e.end});
      // A view's detection never becomes an alert: no window to mark.
      if (config_.marks.alert_windows && pattern.config.publish) {
        const std::int64_t bytes = pattern_channels_[p].window_bytes;
        if (windows_paused) {
          ++out.windows_paused;
        } else if (!claim_window_bytes(bytes)) {
          ++out.windows_over_budget;
        } else {
          a.window = cut_alert_window(stream, p, end, scratch.window_rows);
          if (!a.window) {
            ++out.windows_unavailable;
            refund_window_bytes(bytes);
          }
        }
      }
      // Its end time and alert count are known when it ends.
      if (detection.opens_episode && reports_episodes)
        stream.open_episodes[p].push_back(
            {a.wearer, a.device, a.pattern, a.kind, a.severity, a.end_index, a.t_end, a.t_start,
             /*t_end=*/0, /*alerts=*/0});
      out.completing_arrival.push_back(arrival);
      out.pattern.push_back(p);
      out.alerts.push_back(std::move(a));
    }
    std::vector<EpisodeEnd>& open = stream.open_episodes[p];
    for (const PatternTracker::EndedEpisode& ended : stream.trackers[p].take_ended_episodes()) {
      const auto opened = std::find_if(open.begin(), open.end(), [&](const EpisodeEnd& e) {
        return e.first_alert_end_index == ended.first_alert_end;
      });
      if (opened == open.end()) continue;  // not reported (a view, or agreement)
      EpisodeEnd end = std::move(*opened);
      open.erase(opened);
      // The last end held is at most one search old: still in the ring,
      // unless a long gap let the ring wrap.
      end.t_end = ended.last_end >= stream.state.oldest_retained()
                      ? sample_times(ended.last_end).first
                      : end.first_alert_t_end;
      end.t_end = std::max(end.t_end, end.first_alert_t_end);
      end.alerts = ended.alerts;
      out.episode_ends.push_back(std::move(end));
    }
  }
}

bool Engine::claim_window_bytes(std::int64_t bytes) {
  if (config_.marks.window_budget_mb_per_s <= 0) return true;
  if (window_bytes_left_.fetch_sub(bytes, std::memory_order_relaxed) >= bytes) return true;
  window_bytes_left_.fetch_add(bytes, std::memory_order_relaxed);
  return false;
}

void Engine::refund_window_bytes(std::int64_t bytes) {
  if (config_.marks.window_budget_mb_per_s > 0) window_bytes_left_.fetch_add(bytes, std::memory_order_relaxed);
}

std::shared_ptr<const AlertWindow> Engine::cut_alert_window(const Stream& stream, std::size_t p,
                                                            std::int64_t end,
                                                            std::vector<float>& rows) const {
  const CompiledPattern& pattern = library_.patterns[p];
  const PatternChannels& channels = pattern_channels_[p];
  const std::int64_t first =
      end + 1 - pattern.config.length - example_lead_in(pattern.config, *channels.device);
  // Within one stretch of the stream (no gap or restart inside) and still in the ring.
  if (first < stream.state.window_floor() || first < stream.state.oldest_retained() ||
      end >= stream.state.next_index())
    return nullptr;
  rows.clear();
  stream.state.copy(first, end + 1, rows);
  AlertWindow window = window_from_rows(pattern.config, *channels.device, stream.wearer, rows.data(),
                                        stream.state.channels(), channels.columns);
  // A normalised pattern alerts only once its view's baseline is learned.
  if (library_.views[pattern.view].normalise.enabled) {
    const ViewBaseline& baseline = stream.baselines[pattern.view];
    if (!baseline.learned()) return nullptr;
    window.baseline_center = baseline.baseline.center;
    window.baseline_spread = baseline.baseline.spread;
  }
  return std::make_shared<const AlertWindow>(std::move(window));
}

std::vector<Alert> Engine::run_batch(const std::function<double()>& now) {
  if (!start_batch(now, std::launch::deferred)) return {};
  return finish_batch(now);
}

std::uint64_t Engine::unfinished_windows() const {
  double items = 0;
  for (const BatchState* batch : {&searching_, &searched_})
    if (batch->active) items += batch->searched_work;
  return static_cast<std::uint64_t>(items);
}

bool Engine::search_done() const {
  return !search_.valid() || search_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

void Engine::clear_pending(Stream& stream) {
  for (auto& range : stream.pending) range.first = range.second;
}

void Engine::collect_due(std::vector<DueStream>& due) {
  if (!forgotten_keys_.empty()) {
    backend_->forget_streams(forgotten_keys_);
    forgotten_keys_.clear();
  }
  if (stream_order_stale_) {
    stream_order_.clear();
    for (auto& [key, stream] : streams_) stream_order_.emplace_back(key, &stream);
    stream_order_stale_ = false;
  }
  const std::size_t views = library_.views.size();
  const std::size_t stream_count = stream_order_.size();
  due_view_work_.assign(stream_count * views, 0.0);
  due_work_.assign(stream_count, 0.0);
  due_oldest_.resize(stream_count);
  std::vector<DueTally> tallies(static_cast<std::size_t>(host_pool_->size()));
  for_each_stream_item(stream_count, [&](std::size_t i, int worker) {
    Stream& stream = *stream_order_[i].second;
    double* view_work = due_view_work_.data() + i * views;
    for (std::size_t v = 0; v < views; ++v) {
      if (library_.views[v].device != stream.device) continue;
      if (library_.views[v].normalise.enabled)
        advance_baseline(stream, v, scratch_[static_cast<std::size_t>(worker)],
                         baseline_scratch_[static_cast<std::size_t>(worker)]);
      const auto [first, end] = unsearched_ends(stream, v);
      account_due(stream, v, first, end, tallies[static_cast<std::size_t>(worker)]);
      view_work[v] = static_cast<double>(end - first) * work_per_end_[v];
      due_work_[i] += view_work[v];
    }
    if (due_work_[i] > 0) due_oldest_[i] = stream.state.arrival_s(stream.state.searched_until());
  });
  for (const DueTally& t : tallies) {
    counters_.due_windows += t.due;
    counters_.lost_windows += t.lost;
  }
  due.clear();
  for (std::size_t i = 0; i < stream_count; ++i)
    if (due_work_[i] > 0)
      due.push_back({stream_order_[i].first, stream_order_[i].second, due_oldest_[i],
                     due_view_work_.data() + i * views, due_work_[i]});
}

Engine::BatchPlan Engine::plan_within_deadline(std::vector<DueStream>& due, double batch_start) {
  BatchPlan plan;
  plan.view_dropped.assign(library_.views.size(), false);
  plan.take = due.size();
  const config::OverloadPolicy policy = config_.search.overload_policy;
  double total_work = 0;
  for (const DueStream& d : due) total_work += d.work;
  const BatchCostModel& cost_model = planning_cost_model();
  counters_.last_predicted_ms = cost_model.predict_ms(total_work);
  if (policy != config::OverloadPolicy::kNone && cost_model.ready()) {
    double oldest = due.front().oldest_arrival;
    for (const DueStream& d : due) oldest = std::min(oldest, d.oldest_arrival);
    // A batch that is late already still makes one and a half ticks of
    // progress. A deferred stream waits a whole batch more, so deferring
    // pays only when the search cannot keep pace with the samples; a floor
    // of one tick also cut batches that were searched as fast as their
    // samples came (a backlog then shrank only by what the cost model's
    // error left, and the stream-batches that waited one batch more set the
    // p99 latency; docs/benchmarks.md). Under
    // overload the batches stay within 1.5 ticks and the rest waits.
    const double budget_ms =
        std::max(deadline_ms_ - (batch_start - oldest) * 1000.0 - config_.search.deadline_safety_ms,
                 1.5 * tick_ms_);
    if (counters_.last_predicted_ms > budget_ms) {
      if (policy == config::OverloadPolicy::kDropPatterns) {
        // Lowest-priority views first, never the highest priority present.
        int top = 0;
        for (std::size_t v = 0; v < view_priority_.size(); ++v) top = std::max(top, view_priority_[v]);
        double work = total_work;
        for (int rank = 0; rank < top && cost_model.predict_ms(work) > budget_ms; ++rank)
          for (std::size_t v = 0; v < view_priority_.size(); ++v) {
            if (view_priority_[v] != rank) continue;
            plan.view_dropped[v] = true;
            for (DueStream& d : due) {
              work -= d.view_work[v];
              counters_.dropped_windows += static_cast<std::uint64_t>(d.view_work[v]);
            }
          }
        counters_.last_predicted_ms = cost_model.predict_ms(work);
      } else {  // defer | shed: the most urgent streams that fit (at least one)
        std::stable_sort(due.begin(), due.end(), [](const DueStream& a, const DueStream& b) {
          return a.oldest_arrival < b.oldest_arrival;
        });
        const double fits = cost_model.work_within(budget_ms);
        double work = 0;
        std::size_t& take = plan.take;
        take = 0;
        while (take < due.size() && (take == 0 || work + due[take].work <= fits))
          work += due[take++].work;
        counters_.last_predicted_ms = cost_model.predict_ms(work);
        for (std::size_t i = take; i < due.size(); ++i) {
          if (policy == config::OverloadPolicy::kShed) {
            ++counters_.shed_streams;
            counters_.shed_windows += static_cast<std::uint64_t>(due[i].work);
            due[i].stream->state.mark_searched(due[i].stream->state.next_index());
            clear_pending(*due[i].stream);
          } else {
            ++counters_.deferred_streams;
            plan.pending_work += due[i].work;
          }
        }
      }
    }
  }
  return plan;
}

void Engine::lay_out_batch(const std::vector<DueStream>& due, const BatchPlan& plan) {
  const auto slices_start = std::chrono::steady_clock::now();
  // Lay out one slice per (stream, view) that has unsearched window ends,
  // then fill them on the host pool (a W1 slice is ~110 KB of samples, or
  // its new samples when the backend holds the rest).
  BatchState& flight = searching_;
  kernels::SearchBatch& batch = flight.batch;
  batch.streams.clear();
  flight.owners.clear();
  flight.newest_arrival = 0;
  flight.searched_work = 0;
  std::size_t data_size = 0;
  std::size_t times_size = 0;
  for (std::size_t i = 0; i < plan.take; ++i) {
    Stream& stream = *due[i].stream;
    for (std::size_t v = 0; v < library_.views.size(); ++v) {
      if (library_.views[v].device != stream.device || plan.view_dropped[v]) continue;
      if (!plan_view_slice(stream, due[i].key, v, data_size)) continue;
      const kernels::StreamSlice& slice = batch.streams.back();
      flight.owners.push_back({&stream, v, times_size});
      times_size += static_cast<std::size_t>(slice.first_index + slice.length - slice.first_new);
      flight.searched_work += due[i].view_work[v];
    }
    flight.newest_arrival =
        std::max(flight.newest_arrival, stream.state.arrival_s(stream.state.next_index() - 1));
  }
  // Never shrunk: the slices' values are all written, and growing the size
  // zero-fills the new part, which with two batch buffers of varying sizes
  // taking turns a shrink-then-grow would do for most batches.
  if (batch.data.size() < data_size) batch.data.resize(data_size);
  flight.times.resize(times_size);
  const auto fill_start = std::chrono::steady_clock::now();
  counters_.host_s.slices += std::chrono::duration<double>(fill_start - slices_start).count();
  for_each_stream_item(batch.streams.size(), [&](std::size_t s, int worker) {
    const SliceOwner& owner = flight.owners[s];
    const kernels::StreamSlice& slice = batch.streams[s];
    fill_view_slice(*owner.stream, owner.view, slice, scratch_[static_cast<std::size_t>(worker)]);
    const StreamState& state = owner.stream->state;
    for (std::int64_t k = slice.first_new; k < slice.first_index + slice.length; ++k)
      flight.times[owner.times_at + static_cast<std::size_t>(k - slice.first_new)] = {
          state.device_time_s(k), state.arrival_s(k)};
  });
  counters_.host_s.fill +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - fill_start).count();
}

bool Engine::start_batch(const std::function<double()>& now, std::launch search_on) {
  if (searching_.active) throw Error("engine: a batch was started while another is in flight");
  const double batch_start = now();
  const auto stage_start = std::chrono::steady_clock::now();
  std::vector<DueStream> due;
  collect_due(due);
  counters_.pending_windows = 0;
  collect_stream_clocks(searching_.clocks);  // its storage reused
  const auto due_done = std::chrono::steady_clock::now();
  counters_.host_s.due += std::chrono::duration<double>(due_done - stage_start).count();
  if (due.empty()) return false;

  const BatchPlan plan = plan_within_deadline(due, batch_start);
  lay_out_batch(due, plan);

  BatchState& flight = searching_;
  flight.batch_start = batch_start;
  flight.started = std::chrono::steady_clock::now();
  search_ = {};
  // The search task touches searching_'s batch, result and search end, and
  // the backend only; `now` is copied, since the caller's function object
  // may not outlive this.
  if (!flight.batch.streams.empty())
    search_ = std::async(search_on, [this, now, search_on] {
      if (search_on == std::launch::async) set_thread_name("gw-search");
      backend_->search_into(searching_.batch, searching_.result);
      searching_.search_end_s = now();
      searching_.search_ended = std::chrono::steady_clock::now();
    });
  // Only now that nothing above can throw any more: the taken streams are
  // marked searched (those whose due views were all dropped too), now and not
  // when the batch finishes, so that samples taken meanwhile and lost to the
  // ring before a batch searched them count as overruns and these do not; and
  // the accounting moves, so that it adds up in stats sent during the search.
  for (std::size_t i = 0; i < plan.take; ++i) {
    Stream& stream = *due[i].stream;
    stream.state.mark_searched(stream.state.next_index());
    clear_pending(stream);
  }
  counters_.searched_windows += static_cast<std::uint64_t>(flight.searched_work);
  counters_.pending_windows = static_cast<std::uint64_t>(plan.pending_work);
  flight.active = true;
  return true;
}

bool Engine::end_search(const std::function<double()>& now) {
  if (!searching_.active) return false;
  if (searched_.active)
    throw Error("engine: a search ended while the batch before it still waits for its phase 2");
  BatchState& flight = searching_;
  flight.active = false;
  if (search_.valid()) {
    try {
      try {
        search_.get();
      } catch (const kernels::SearchDeviceLost& lost) {
        search_again_without(lost);
        flight.search_end_s = now();
        flight.search_ended = std::chrono::steady_clock::now();
      }
    } catch (const std::exception& e) {
      try {
        search_again_on_cpu(e);
      } catch (...) {
        // The CPU backend itself failed (a bug, surfaced): what the batch was
        // to search is lost, not searched.
        const auto lost = static_cast<std::uint64_t>(flight.searched_work);
        counters_.searched_windows -= lost;
        counters_.lost_windows += lost;
        throw;
      }
      flight.search_end_s = now();
      flight.search_ended = std::chrono::steady_clock::now();
    }
    const double batch_ms = (flight.search_end_s - flight.batch_start) * 1000.0;
    start_cost_model_.observe(flight.searched_work, batch_ms);
    if (flight.result.stats.buffer_growths == 0)
      cost_model_.observe(flight.searched_work, batch_ms);
    else
      ++counters_.cost_model_skipped;
  } else {
    flight.result = {};
    flight.search_ended = flight.started;  // no search: no search time
  }
  std::swap(searching_, searched_);
  searched_.active = true;
  return true;
}

std::vector<Alert> Engine::finish_batch(const std::function<double()>& now) {
  if (searched_.active)
    throw Error("engine: finish_batch while a searched batch waits for its phase 2");
  if (!end_search(now)) return {};
  return detect_searched(now);
}

std::vector<Alert> Engine::detect_searched(const std::function<double()>& now) {
  if (!searched_.active) return {};
  BatchState& done = searched_;  // stays as it is until the next end_search (its clocks)
  done.active = false;
  const kernels::SearchResult& result = done.result;
  const auto phase2_started = std::chrono::steady_clock::now();
  ++counters_.batches;
  counters_.windows += result.stats.windows;
  counters_.single_dim_matches += result.matches.size();

  // Phase 2 per slice on the host pool (a slice's trackers belong to its
  // stream and view alone); alerts in slice order, whatever the threads.
  // It reads the times of the slices' new samples from done.times, not
  // from the rings: frames taken while the search ran may have overwritten
  // those slots.
  const std::size_t slices = done.batch.streams.size();
  if (slice_alerts_.size() < slices) slice_alerts_.resize(slices);
  // The window budget: refilled for the time since the last phase 2, at
  // most one second's worth held (a full second at the first).
  const double budget_per_s = config_.marks.window_budget_mb_per_s * 1e6;
  if (budget_per_s > 0) {
    const double at = now();
    window_budget_bytes_ =
        window_budget_refilled_s_ < 0
            ? budget_per_s
            : std::min(budget_per_s,
                       window_budget_bytes_ + budget_per_s * std::max(0.0, at - window_budget_refilled_s_));
    window_budget_refilled_s_ = at;
    window_bytes_left_.store(static_cast<std::int64_t>(window_budget_bytes_), std::memory_order_relaxed);
  }
  for_each_stream_item(slices, [&](std::size_t s, int worker) {
    detect_in_slice(s, result, phase2_scratch_[static_cast<std::size_t>(worker)], slice_alerts_[s]);
  });
  if (budget_per_s > 0)
    window_budget_bytes_ =
        static_cast<double>(std::max<std::int64_t>(0, window_bytes_left_.load(std::memory_order_relaxed)));
  std::vector<Alert> alerts;
  std::vector<double> completing_arrival;  // per alert: arrival of the sample that completed it
  collect_alerts(slices, alerts, completing_arrival);
  counters_.host_s.phase2 +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - phase2_started).count();

  const double finished = now();
  for (std::size_t i = 0; i < alerts.size(); ++i) {
    alerts[i].detected_at = finished;
    alerts[i].latency_ms = (finished - completing_arrival[i]) * 1000.0;
  }
  counters_.alerts += alerts.size();
  // The batch's own time: the search, then phase 2 (not the caller's frames
  // in between, nor the next batch's start when it came first).
  const auto ms = [](auto from, auto to) {
    return std::chrono::duration<double, std::milli>(to - from).count();
  };
  const double search_ms = ms(done.started, done.search_ended);
  const double phase2_ms = ms(phase2_started, std::chrono::steady_clock::now());
  counters_.last_batch_ms = search_ms + phase2_ms;
  counters_.last_phase2_ms = phase2_ms;
  if (batch_log_)
    batch_log_.write(fmt::format(
        "{:.3f} {} {:.0f} {:.2f} {:.2f} {:.2f} {:.2f} {} {} {}\n", done.batch_start, slices,
        done.searched_work, counters_.last_predicted_ms,
        (done.search_end_s - done.batch_start) * 1000.0, search_ms, phase2_ms,
        result.matches.size(), counters_.deferred_streams, result.stats.buffer_growths));
  counters_.max_batch_ms = std::max(counters_.max_batch_ms, counters_.last_batch_ms);
  const double latency_ms = (finished - done.newest_arrival) * 1000.0;
  counters_.max_latency_ms = std::max(counters_.max_latency_ms, latency_ms);
  if (latency_ms > deadline_ms_) ++counters_.deadline_misses;
  std::uint64_t overrun = retired_.overrun, gaps = retired_.gaps, missing = retired_.missing,
                restarts = retired_.restarts;
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

void Engine::collect_alerts(std::size_t slices, std::vector<Alert>& alerts,
                            std::vector<double>& completing_arrival) {
  std::vector<Alert> agreed;
  std::vector<double> agreed_arrival;
  std::vector<std::pair<std::size_t, std::int64_t>> merged_ends;  // (pattern, first alert end)
  for (std::size_t s = 0; s < slices; ++s) {
    SliceAlerts& found = slice_alerts_[s];
    counters_.alert_windows_unavailable += found.windows_unavailable;
    counters_.alert_windows_paused += found.windows_paused;
    counters_.alert_windows_over_budget += found.windows_over_budget;
    Stream& stream = *searched_.owners[s].stream;
    merged_ends.clear();
    for (std::size_t i = 0; i < found.alerts.size(); ++i) {
      const std::size_t p = found.pattern[i];
      Alert& alert = found.alerts[i];
      if (!agreement_rules_[p].with.empty()) {
        stream.agreement[p].pending.push_back({std::move(alert), found.completing_arrival[i]});
        continue;
      }
      if (agreed_with_[p]) stream.agreement[p].confirmed.push_back({alert.end_index, found.completing_arrival[i]});
      if (!library_.patterns[p].config.publish) continue;
      if (merged_into_kind(stream, p, alert)) {
        merged_ends.emplace_back(p, alert.end_index);
        continue;
      }
      completing_arrival.push_back(found.completing_arrival[i]);
      alerts.push_back(std::move(alert));
    }
    // An episode that opened and ended in this search: not reported when its
    // first alert was merged.
    for (EpisodeEnd& end : found.episode_ends) {
      const bool merged = std::any_of(merged_ends.begin(), merged_ends.end(), [&](const auto& m) {
        return end.first_alert_end_index == m.second &&
               end.pattern == library_.patterns[m.first].config.name;
      });
      if (!merged) episode_ends_.push_back(std::move(end));
    }
    // A stream's slices (one per view) are adjacent and searched up to the
    // same sample: after its last one, every view has seen the frontier.
    const bool last_of_stream = s + 1 == slices || searched_.owners[s + 1].stream != &stream;
    if (last_of_stream && !stream.agreement.empty()) {
      const kernels::StreamSlice& slice = searched_.batch.streams[s];
      resolve_agreement(stream, slice.first_index + slice.length, agreed, agreed_arrival);
    }
  }
  for (std::size_t i = 0; i < agreed.size(); ++i) {
    alerts.push_back(std::move(agreed[i]));
    completing_arrival.push_back(agreed_arrival[i]);
  }
}

void Engine::resolve_agreement(Stream& stream, std::int64_t frontier, std::vector<Alert>& alerts,
                               std::vector<double>& completing_arrival) {
  const auto samples_of = [&](double seconds) {
    return static_cast<std::int64_t>(std::llround(seconds * stream.sample_rate_hz));
  };
  enum class Verdict { kConfirmed, kWaiting, kDropped };
  std::int64_t reach = 0;  // the widest window, in samples
  for (const std::size_t p : agreement_order_) {
    const AgreementRule& rule = agreement_rules_[p];
    const std::int64_t within = samples_of(rule.within_s);
    reach = std::max(reach, within);
    PatternAgreement& state = stream.agreement[p];
    std::size_t kept = 0;
    for (std::size_t h = 0; h < state.pending.size(); ++h) {
      HeldDetection& held = state.pending[h];
      const std::int64_t end = held.alert.end_index;
      const auto near = [&](std::int64_t other) { return std::llabs(other - end) <= within; };
      Verdict verdict = Verdict::kConfirmed;
      // Confirmed when the last of its views' nearest confirmations arrived.
      double confirmed_at = held.completing_arrival;
      for (const std::size_t q : rule.with) {
        const PatternAgreement& view = stream.agreement[q];
        double first_arrival = std::numeric_limits<double>::infinity();
        for (const ConfirmedEnd& c : view.confirmed)
          if (near(c.end)) first_arrival = std::min(first_arrival, c.arrival);
        if (first_arrival != std::numeric_limits<double>::infinity()) {
          confirmed_at = std::max(confirmed_at, first_arrival);
          continue;
        }
        // Its view may still confirm: the window reaches past what has been
        // searched, or a held detection of the view inside it is undecided.
        const bool may_come =
            frontier <= end + within ||
            std::any_of(view.pending.begin(), view.pending.end(),
                        [&](const HeldDetection& v) { return near(v.alert.end_index); });
        verdict = may_come ? Verdict::kWaiting : Verdict::kDropped;
        if (verdict == Verdict::kDropped) break;
      }
      if (verdict == Verdict::kWaiting) {
        if (kept != h) state.pending[kept] = std::move(held);
        ++kept;
        continue;
      }
      if (verdict == Verdict::kDropped) {
        ++counters_.unagreed_detections;
        continue;
      }
      if (agreed_with_[p]) state.confirmed.push_back({end, confirmed_at});
      if (library_.patterns[p].config.publish && !merged_into_kind(stream, p, held.alert)) {
        alerts.push_back(std::move(held.alert));
        completing_arrival.push_back(confirmed_at);
      }
    }
    state.pending.resize(kept);
  }
  // Detections still to come end at the frontier or later; held ones at
  // their own end: confirmed ends further back than the widest window from
  // both can confirm nothing any more.
  std::int64_t oldest_needed = frontier;
  for (const std::size_t p : agreement_order_)
    for (const HeldDetection& held : stream.agreement[p].pending)
      oldest_needed = std::min(oldest_needed, held.alert.end_index);
  for (PatternAgreement& state : stream.agreement) {
    auto& confirmed = state.confirmed;
    confirmed.erase(std::remove_if(confirmed.begin(), confirmed.end(),
                                   [&](const ConfirmedEnd& c) { return c.end < oldest_needed - reach; }),
                    confirmed.end());
  }
}

void Engine::search_again_without(const kernels::SearchDeviceLost& lost) {
  // The devices left search the batch again; one more lost device goes the
  // same way, the last one's error to the CPU fallback (the caller).
  std::string note = lost.what();
  std::size_t devices = lost.devices();
  for (;;) {
    note_devices_lost(note, devices);
    // The streams moved hold nothing on their new device: every sample
    // travels again.
    restore_omitted_samples();
    try {
      backend_->search_into(searching_.batch, searching_.result);
      return;
    } catch (const kernels::SearchDeviceLost& again) {
      note = again.what();
      devices = again.devices();
    }
  }
}

void Engine::note_devices_lost(const std::string& note, std::size_t devices) {
  counters_.search_devices_lost += devices;
  backend_name_ = backend_->name();
  backend_note_ = note + "; searching on " + backend_name_;
}

void Engine::search_again_on_cpu(const std::exception& error) {
  // The CPU backend is the fallback; its own errors are bugs to surface
  // (called from the handler of `error`, so this rethrows it as it was).
  if (backend_name_.rfind("cpu", 0) == 0) throw;
  backend_note_ = "search backend " + backend_name_ + " failed (" + error.what() +
                  "); switched to the CPU backend";
  ++counters_.backend_failovers;
  backend_ = kernels::make_cpu_backend(config_.search.threads);
  backend_->set_library(library_.kernel_library);
  backend_name_ = backend_->name();
  // The CPU backend holds no history: every sample travels again.
  restore_omitted_samples();
  backend_->search_into(searching_.batch, searching_.result);
}

nlohmann::json Engine::stats_json() const {
  const EngineCounters& c = counters_;
  return {{"backend", backend_name_},
          {"streams", c.streams},
          {"streams_refused", c.streams_refused},
          {"streams_evicted", c.streams_evicted},
          {"streams_by_state", {{"online", c.streams_by_state.online},
                                {"stale", c.streams_by_state.stale},
                                {"offline", c.streams_by_state.offline}}},
          {"oldest_frame_age_s", c.oldest_frame_age_s},
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
          {"alert_windows_unavailable", c.alert_windows_unavailable},
          {"alert_windows_paused", c.alert_windows_paused},
          {"alert_windows_over_budget", c.alert_windows_over_budget},
          {"deferred_streams", c.deferred_streams},
          {"shed_streams", c.shed_streams},
          {"shed_windows", c.shed_windows},
          {"dropped_windows", c.dropped_windows},
          {"due_windows", c.due_windows},
          {"searched_windows", c.searched_windows},
          {"lost_windows", c.lost_windows},
          {"pending_windows", c.pending_windows},
          {"unfinished_windows", unfinished_windows()},
          {"backend_failovers", c.backend_failovers},
          {"search_devices_lost", c.search_devices_lost},
          {"unagreed_detections", c.unagreed_detections},
          {"merged_alerts", c.merged_alerts},
          {"cost_model", {{"floor_ms", cost_model_.floor_ms()},
                          {"slope_ms_per_item", cost_model_.slope_ms()},
                          {"observations", cost_model_.observations()},
                          {"skipped_batches", c.cost_model_skipped},
                          // The model batches are planned with: "start" (every
                          // batch) until this one is ready, then "steady".
                          {"planning", cost_model_.ready() ? "steady" : "start"},
                          {"last_predicted_ms", c.last_predicted_ms}}},
          {"warm_up", {{"slices", warm_up_report_.slices},
                       {"batches", warm_up_report_.batches},
                       {"buffer_growths", warm_up_report_.buffer_growths},
                       {"matches", warm_up_report_.matches},
                       {"first_ms", warm_up_report_.first_ms},
                       {"last_ms", warm_up_report_.last_ms},
                       {"seconds", warm_up_report_.seconds}}},
          {"host_s", {{"due", c.host_s.due},
                      {"slices", c.host_s.slices},
                      {"fill", c.host_s.fill},
                      {"phase2", c.host_s.phase2}}},
          {"last_batch_ms", c.last_batch_ms},
          {"max_batch_ms", c.max_batch_ms},
          {"max_latency_ms", c.max_latency_ms}};
}

}  // namespace gw::pipeline
