// The detection engine: stream states, the batcher, the search backend and
// the phase-2 trackers. The daemon's pipeline thread drives it with frames and
// ticks; `gaitwatch detect` drives the same object offline from a recording,
// so both produce the same alerts for the same samples.
//
// Thread safety: none; one thread owns an Engine (run_batch spreads its
// per-stream work over the engine's own pool and returns when that is done;
// between start_batch and finish_batch the search runs, on a thread of its
// own unless deferred, and touches only the batch, its result and the
// backend).
// Clock: `now` is passed in (an Env-like seam so tests control time).
#pragma once

#include <chrono>
#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/diagnostics.h"
#include "config/config.h"
#include "kernels/multi_device_backend.h"
#include "kernels/search.h"
#include "sinks/alert.h"
#include "sinks/event.h"
#include "pipeline/baseline.h"
#include "pipeline/cost_model.h"
#include "pipeline/detector.h"
#include "pipeline/stream_clock.h"
#include "pipeline/stream_state.h"

namespace gw {
class WorkerPool;
}

namespace gw::pipeline {

// A detection episode that raised alerts and has ended (its decision stopped
// holding, or a gap in the stream cut it; PatternTracker::EndedEpisode), of
// a published pattern whose alerts go out as detected (no `agree`). Times
// are device times, the clock of the alerts' t_start and t_end.
struct EpisodeEnd {
  std::uint32_t wearer = 0;
  std::uint16_t device = 0;
  std::string pattern, kind, severity;
  // The episode's first alert, as its Alert has them (end_index, t_end):
  // what names it before the store gives it a seq.
  std::int64_t first_alert_end_index = 0;
  double first_alert_t_end = 0;
  double t_start = 0;  // the first alert's t_start
  double t_end = 0;    // the last sample the episode held at
  int alerts = 0;      // raised during the episode (the first and the "still" ones)
};

// The episode_ended event of `end` at unix time `at_s` (sinks/event.h;
// details as docs/interfaces.md lists them). Its alert_seq is left 0: the
// store resolves it from details.first_alert when the row is written.
Event episode_ended_event(const EpisodeEnd& end, double at_s);

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
  // Alerts stored without their window (AlertWindow): the stream's ring no
  // longer held the window with its transforms' lead-in (a stream that just
  // started, a gap or a restart inside it, or samples overwritten). Such an
  // alert cannot be marked into an example.
  std::uint64_t alert_windows_unavailable = 0;
  // Alerts whose window was not cut because the store was behind
  // (set_alert_windows_paused): cutting and storing windows gives way to
  // detection. Such an alert cannot be marked either.
  std::uint64_t alert_windows_paused = 0;
  // Alerts whose window was not cut because marks.window_budget_mb_per_s
  // was spent: which alerts of a batch get the budget depends on the pool's
  // order. Such an alert cannot be marked either.
  std::uint64_t alert_windows_over_budget = 0;
  // Soft-deadline scheduling (search.overload_policy, docs/design.md): what
  // was not searched in the batch it was due in, by reason.
  std::uint64_t deferred_streams = 0;   // defer: stream left for a later batch
  std::uint64_t shed_streams = 0;       // shed: stream's new samples skipped
  std::uint64_t shed_windows = 0;       //   their (window end x pair) items
  std::uint64_t dropped_windows = 0;    // drop_patterns: items of lower-priority patterns skipped
  // The accounting of those items: every item a batch finds due is counted
  // once in due_windows and ends in exactly one of searched_windows (given to
  // the backend), shed_windows, dropped_windows, lost_windows (deferred, then
  // skipped before a batch took it: its samples left the ring or a gap/restart
  // moved the stream's window floor; a reload also moves what was pending
  // here) or pending_windows (deferred and still due: a gauge). So
  // due = searched + shed + dropped + lost + pending at every moment
  // (a batch's items count as searched from its start).
  std::uint64_t due_windows = 0;
  std::uint64_t searched_windows = 0;
  std::uint64_t lost_windows = 0;
  std::uint64_t pending_windows = 0;
  std::uint64_t backend_failovers = 0;  // search backend errors that switched to the CPU backend
  // GPUs of a multi-device search (search.devices) lost: their streams moved
  // to the GPUs left and the batch was searched again there.
  std::uint64_t search_devices_lost = 0;
  // Detections of a pattern with `agree` (docs/detection.md §7) dropped
  // because a named view had no confirmed detection within its window once
  // that window had been searched.
  std::uint64_t unagreed_detections = 0;
  // Alerts not raised because another publishing pattern of the same kind
  // had alerted on the same stream within the earlier alert's cooldown_s
  // (docs/detection.md §7, "One alert per event").
  std::uint64_t merged_alerts = 0;
  // The engine's own host work per batch, cumulative wall seconds on the
  // calling thread (its pool's work included): finding what is due (and the
  // stream clocks), laying out the slices, filling them, phase 2.
  struct HostSeconds {
    double due = 0, slices = 0, fill = 0, phase2 = 0;
  } host_s;
  // Batches the cost model did not learn from: the backend allocated or
  // grew buffers for them (SearchStats::buffer_growths), so their time
  // holds one-off work (a stream's first history upload, a larger batch
  // than any before) that the next batch of that size will not pay. Until
  // it has learnt from enough other batches, batches are planned with a
  // model of every batch.
  std::uint64_t cost_model_skipped = 0;
  double last_predicted_ms = 0;         // cost model's prediction for the last batch
  double last_batch_ms = 0;
  double last_phase2_ms = 0;  // of the last batch (its share of last_batch_ms)
  double max_batch_ms = 0;
  double max_latency_ms = 0;  // newest sample arrival -> alerts ready, worst batch
  std::uint64_t streams = 0;
  std::uint64_t streams_refused = 0;  // frames that would have opened a stream past ingest.max_streams
  std::uint64_t streams_evicted = 0;  // removed after ingest.stream_idle_s without a frame
  // As of the last sweep_streams(): live streams by the age of their last
  // frame (ingest.stream_stale_s, stream_offline_s), and the oldest age.
  struct ByState {
    std::uint64_t online = 0, stale = 0, offline = 0;
  } streams_by_state;
  double oldest_frame_age_s = 0;
};

class Engine {
 public:
  // Throws gw::Error when the config's patterns cannot be compiled.
  Engine(const config::Config& config, std::unique_ptr<kernels::SearchBackend> backend);
  ~Engine();

  // Applies a reloaded config: patterns, search.tick_ms/deadline_ms and the
  // per-pair cap. Phase-2 state restarts; stream rings are kept.
  void reconfigure(const config::Config& config);

  // Validates the frame against its device profile and appends it. Returns
  // whether it was accepted (false: counted under its drop reason).
  bool on_frame(const sensors::Frame& frame, double arrival_s);

  // on_frame for many frames at once, as the daemon takes them off its
  // queue: the same verdicts, counters, new streams and observer calls (in
  // `frames` order) as on_frame on each in turn, but different streams'
  // frames are appended on the engine's pool. accepted[i] = what
  // on_frame(frames[i]) would have returned. May be called while a batch is
  // in flight (the pool is idle then).
  struct ArrivedFrame {
    const sensors::Frame* frame;
    double arrival_s;
  };
  void on_frames(const std::vector<ArrivedFrame>& frames, std::vector<char>& accepted);

  // The engine's host pool, lent to the caller's own per-frame or per-alert
  // work between engine calls (on the thread that makes them, as on_frames
  // uses it), or nullptr when the engine would do such work on the calling
  // thread now: a pool of one worker, or the CPU backend's search running
  // (its own pool has the cores). The work must be done before the next
  // engine call.
  WorkerPool* spare_host_pool();

  // Called from on_frame() for every frame accepted into its stream, with
  // the stream's verdict (the raw-stream history records through it). Runs
  // on the engine's thread; must not block for long. Empty = none.
  using FrameObserver =
      std::function<void(const sensors::Frame& frame, FrameVerdict verdict, double arrival_s)>;
  void set_frame_observer(FrameObserver observer) { frame_observer_ = std::move(observer); }

  // Walks the streams once: counts them by state (counters().streams_by_state,
  // oldest_frame_age_s) from the age of their last frame at `now_s` (unix
  // seconds, the frames' arrival clock), and removes every stream with no
  // frame for ingest.stream_idle_s (ring, trackers, caches; the backend is
  // told at the next start_batch()), except one a batch in flight or waiting
  // for its phase 2 still references: it goes at a later sweep. Returns how
  // many were removed. May be called while a batch is in flight; cost linear
  // in the streams (the daemon calls it about once a second).
  std::size_t sweep_streams(double now_s);

  // Before the first frame (search.warm_up_streams): searches four
  // synthetic batches of `streams` streams of every device the library
  // searches, then forgets those streams: every stream's first contact (whole
  // slices) twice, one tick's new samples, and three ticks'
  // (pipeline/engine_warm_up.cc). So the backend allocates its buffers and
  // device rings for that many streams now, the engine sizes both its batch
  // buffers, and neither happens in the first real batches of a station
  // that starts with its wearers already sending: those batches then take
  // their steady time, and the cost model, which learns only from batches
  // that allocated nothing, is ready after three of them instead of planning
  // with the first batches' one-off times. The warm-up's own times teach it
  // nothing (its synthetic streams match more often than real ones). The
  // engine's batch buffers keep the size of N whole slices (as after any
  // such batch). Streams, alerts and counters stay as they were; the
  // matches are discarded. Takes the time of the four batches; `now` is the
  // clock batches are timed with, as for start_batch(). Precondition: no
  // batch in flight. Throws what the backend throws, after telling it the
  // synthetic streams are gone (the engine is then as before the call, but
  // that a GPU a multi-device backend lost is counted in
  // search_devices_lost and noted, as in a real batch; the first real batch
  // meets any other failure of the backend as any batch does).
  struct WarmUp {
    std::size_t slices = 0;            // synthetic streams x views searched
    std::size_t batches = 0;
    std::uint64_t buffer_growths = 0;  // the backend's, summed over the batches
    std::size_t matches = 0;           // single-dim matches of the largest batch (discarded)
    double first_ms = 0, last_ms = 0;  // the first and the last batch
    double seconds = 0;                // all of it, by `now`
  };
  WarmUp warm_up(std::size_t streams, const std::function<double()>& now);

  // Searches every window end not yet searched and returns the alerts (seq 0;
  // the sink assigns it). `now` gives the wall clock for detected_at/latency.
  std::vector<Alert> run_batch(const std::function<double()>& now);

  // run_batch in steps, for a caller that takes frames while the search runs
  // and starts the next batch before the last one's phase 2 (the daemon):
  // start_batch() does the work before the search (due streams, soft
  // deadlines, slices; the streams are marked searched up to their newest
  // sample) and starts the search, on a thread of its own with
  // std::launch::async (`now` is then also called there: it must be safe to
  // call from another thread) or in end_search() on the caller's thread with
  // std::launch::deferred (= run_batch). It returns false when nothing was
  // due (nothing in flight then). end_search() waits for the search if need
  // be and keeps the batch for its phase 2; detect_searched() runs that phase
  // 2 and returns what run_batch() would have returned at the start ({} when
  // no batch waits), whatever the frames taken in between overwrote in the
  // rings. Between end_search() and detect_searched() the next batch may be
  // started: its search then runs during the phase 2 (docs/design.md,
  // "Pipelined batches"). While a search is in flight, only on_frame(),
  // on_frames(), search_done(), batch_in_flight(), detect_searched() and the
  // const accessors may be called; frames taken meanwhile belong to the next
  // batch. Throws gw::Error when a batch is started while a search is in
  // flight, or end_search() finds a searched batch still waiting for its
  // phase 2 (phase 2 runs in batch order: the trackers carry state).
  bool start_batch(const std::function<double()>& now,
                   std::launch search_on = std::launch::async);
  bool batch_in_flight() const { return searching_.active; }
  // Items (window end x dim pair) of the batches started whose phase 2 has
  // not returned yet: counted in searched_windows, their alerts still to
  // come. Zero with pending_windows zero and every frame taken means every
  // window due so far has given its alerts.
  std::uint64_t unfinished_windows() const;
  // The search in flight (if any) has returned; a deferred one runs only in
  // end_search(), so it is never done before.
  bool search_done() const;
  // Returns false when no search was in flight.
  bool end_search(const std::function<double()>& now);
  bool batch_searched() const { return searched_.active; }
  std::vector<Alert> detect_searched(const std::function<double()>& now);
  // end_search() then detect_searched(): the batch in flight, finished
  // ({} when none). Throws gw::Error when a searched batch still waits.
  std::vector<Alert> finish_batch(const std::function<double()>& now);
  // The episodes that ended in the phase 2 runs since the last call, in
  // slice order (each once). A stream removed or reset by a reload drops its
  // running episode unreported.
  std::vector<EpisodeEnd> take_episode_ends() { return std::exchange(episode_ends_, {}); }

  // The device time of the newest sample of every stream (the clock its
  // alerts' t_start/t_end are on).
  std::vector<StreamClock> stream_clocks() const;
  // stream_clocks() as it was when the batch of the last end_search()
  // started: what the alerts of its phase 2 are to be compared with (frames
  // taken while its search ran are not theirs).
  const std::vector<StreamClock>& batch_stream_clocks() const { return searched_.clocks; }

  const EngineCounters& counters() const { return counters_; }
  // While paused, alerts are raised without their windows (counted in
  // alert_windows_paused), whatever marks.alert_windows says: the daemon
  // pauses them while its writer is behind. Any thread; applies to the
  // phase 2 runs that start after it.
  void set_alert_windows_paused(bool paused) { alert_windows_paused_.store(paused, std::memory_order_relaxed); }
  // The config in effect (the last reconfigure()'s).
  const config::Config& config() const { return config_; }
  nlohmann::json stats_json() const;
  const std::string& backend_name() const { return backend_name_; }
  // The cost model of the batches that allocated nothing (see cost_model_).
  const BatchCostModel& cost_model() const { return cost_model_; }
  // A line saying the search backend failed and the engine switched to the
  // CPU backend, once (empty otherwise); the daemon logs it.
  std::string take_backend_note() { return std::exchange(backend_note_, std::string()); }

  // Offline training: every tracker, of streams present and to come, records
  // its decisions (PatternTracker::record_decisions). take_decision_trace
  // returns and clears what one (wearer, device)'s tracker of library
  // pattern `pattern` (config order) recorded; empty for an unknown stream.
  void record_decisions(bool on);
  std::vector<PatternTracker::TracedDecision> take_decision_trace(std::uint32_t wearer,
                                                                  std::uint16_t device,
                                                                  std::size_t pattern);
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
  // Per-wearer normalisation of one normalised view for a stream
  // (pipeline/baseline.h): learned from the stream's first view samples (its
  // own wearer's), then frozen; learned afresh after a device restart. The
  // view's window ends are not searched before it is learned.
  struct ViewBaseline {
    BaselineLearner learner;
    std::int64_t fed_until = 0;    // the next stream sample to learn from
    std::int64_t learned_at = -1;  // after its last learned sample; -1: still learning
    std::uint64_t restarts = 0;    // the stream's restarts() it was learned after
    config::ChannelBaseline baseline;
    bool learned() const { return learned_at >= 0; }
  };
  // Agreement of views (docs/detection.md §7), per stream and library
  // pattern: the confirmed detections of a pattern others agree with (window
  // end, arrival of the sample that confirmed it), and the detections of a
  // pattern with `agree` still waiting for its views.
  struct ConfirmedEnd {
    std::int64_t end;
    double arrival;
  };
  struct HeldDetection {
    Alert alert;
    double completing_arrival;
  };
  struct KindLastAlert {
    std::int64_t end = 0;        // its window end
    std::int64_t cooldown = -1;  // its pattern's cooldown_s in samples; -1: no alert yet
    std::size_t pattern = 0;
  };
  struct PatternAgreement {
    std::vector<ConfirmedEnd> confirmed;
    std::vector<HeldDetection> pending;  // in the order detected
  };
  struct Stream {
    std::uint32_t wearer;
    std::uint16_t device;
    double sample_rate_hz;
    StreamState state;
    std::vector<PatternTracker> trackers;  // one per library pattern
    std::vector<ViewCache> views;          // one per library view
    // Per view: the window ends counted in due_windows and not yet searched,
    // shed or dropped, [first, second).
    std::vector<std::pair<std::int64_t, std::int64_t>> pending;
    double last_frame_s = 0;  // arrival of its newest frame (any verdict)
    std::vector<ViewBaseline> baselines;  // one per library view; used by normalised views
    // Per library pattern when some pattern has `agree`, else empty.
    std::vector<PatternAgreement> agreement;
    // Per library pattern (sized at its first phase 2): the first alerts of
    // its running episodes not yet ended, for their EpisodeEnd.
    std::vector<std::vector<EpisodeEnd>> open_episodes;
    // Per kind group (kind_group_), sized at its first alert: the group's
    // last alert on this stream.
    std::vector<KindLastAlert> kind_last_alert;
  };
  // Fresh baselines for a stream of `device`, one per library view.
  std::vector<ViewBaseline> fresh_baselines(std::uint16_t device) const;
  // Feeds the stream's new samples of normalised view `v` to its learner
  // until it has learned (restarting it after a device restart). `rows` and
  // `values` are scratch. Streams may advance at once on different threads.
  void advance_baseline(Stream& stream, std::size_t v, std::vector<float>& rows,
                        std::vector<float>& values) const;
  // Counts the view's due ends [first, end) of `stream`: those new since the
  // last batch into tally.due (due_windows), pending ones now before `first`
  // into tally.lost (lost_windows); the stream's pending range becomes
  // [first, end). Streams may be accounted at once on different threads,
  // each with its own tally.
  struct DueTally {
    std::uint64_t due = 0, lost = 0;
  };
  void account_due(Stream& stream, std::size_t view, std::int64_t first, std::int64_t end,
                   DueTally& tally) const;
  // Appends the shape of the slice of `view` for `stream` to searching_.batch
  // .streams (its samples at data_size, which grows by their count) when it has window
  // ends to search; returns false when it has none.
  bool plan_view_slice(Stream& stream, std::uint64_t key, std::size_t view, std::size_t& data_size);
  // Writes the samples of a planned slice into searching_.batch.data (a
  // transformed
  // view through the stream's cache), from its first sample not omitted on.
  // Different slices may be filled at once from different threads, each
  // with its own `scratch`.
  void fill_view_slice(Stream& stream, std::size_t view, const kernels::StreamSlice& slice,
                       std::vector<float>& scratch);
  // start_batch's steps, in order. A stream with window ends due now: its
  // work per view (window end x dim pair items, the cost model's unit; 0
  // where nothing is due) and the arrival of its oldest unsearched sample
  // (its deadline runs from there).
  struct DueStream {
    std::uint64_t key = 0;
    Stream* stream = nullptr;
    double oldest_arrival = 0;
    const double* view_work = nullptr;  // into due_view_work_
    double work = 0;
  };
  // What the overload policy leaves for the batch: due[0, take) are searched
  // now, except their views in view_dropped; pending_work is the deferred
  // streams' work.
  struct BatchPlan {
    std::size_t take = 0;
    double pending_work = 0;
    std::vector<bool> view_dropped;
  };
  // The due streams in key order; counts due and lost windows. Worked out per
  // stream on the host pool, then gathered.
  void collect_due(std::vector<DueStream>& due);
  // Soft deadlines: when the cost model predicts that searching everything
  // would finish after the most urgent stream's deadline, applies
  // search.overload_policy (which may reorder `due`, most urgent first, and
  // mark shed streams searched).
  BatchPlan plan_within_deadline(std::vector<DueStream>& due, double batch_start);
  // Lays out searching_.batch: one slice per (taken stream, view not
  // dropped) with window ends to search, filled on the host pool.
  void lay_out_batch(const std::vector<DueStream>& due, const BatchPlan& plan);
  // A stream's pending window ranges emptied (searched, or shed).
  static void clear_pending(Stream& stream);
  // Calls body(i, worker) for every i in [0, count) on the host pool (worker
  // in [0, pool size)); returns when all calls have.
  void for_each_stream_item(std::size_t count, const std::function<void(std::size_t, int)>& body);
  // One host worker's phase-2 storage, kept for its capacity: the slice's
  // matches per kernel pattern, one pattern's candidates per example (only
  // the first pattern.examples.size() entries are its own) and its
  // detections.
  struct Phase2Scratch {
    std::vector<std::vector<DimCandidate>> by_kernel;
    std::vector<std::vector<DimCandidate>> fresh;
    std::vector<PatternTracker::Detection> detections;
    std::vector<float> window_rows;
  };
  struct SliceAlerts {
    std::vector<Alert> alerts;  // every detection, views' (publish: false) included
    std::vector<double> completing_arrival;  // per alert: arrival of the sample that completed it
    std::vector<std::size_t> pattern;        // per alert: its library pattern
    std::uint64_t windows_unavailable = 0;   // alerts whose window the ring no longer held
    std::uint64_t windows_paused = 0;        // alerts whose window was not cut (paused)
    std::uint64_t windows_over_budget = 0;   // ... (marks.window_budget_mb_per_s spent)
    std::vector<EpisodeEnd> episode_ends;
  };
  // The raw window of an alert of library pattern `p` ending at `end`, cut
  // from the stream's ring (pipeline/marks.h window_from_rows); null when
  // the ring no longer holds all of it, lead-in included. `rows` is scratch.
  std::shared_ptr<const AlertWindow> cut_alert_window(const Stream& stream, std::size_t p,
                                                      std::int64_t end,
                                                      std::vector<float>& rows) const;
  // Phase 2 of batch slice `s`: its matches through its stream's trackers of
  // the slice's view, into `out` (replaced). Slices of different (stream,
  // view) may run at once, each with its own `scratch`.
  void detect_in_slice(std::size_t s, const kernels::SearchResult& result,
                       Phase2Scratch& scratch, SliceAlerts& out);
  // agreement_rules_, agreed_with_ and agreement_order_ from library_.
  // Throws gw::Error for a name that is not another pattern of the same
  // device, or a cycle (load_config reports both with their key paths).
  void compile_agreement_rules();
  // A batch's detections of slices [0, slices) as alerts, in slice order:
  // those of patterns without `agree` that publish at once; those with
  // `agree` are held in their stream's agreement state and the ones this
  // batch confirmed follow.
  void collect_alerts(std::size_t slices, std::vector<Alert>& alerts,
                      std::vector<double>& completing_arrival);
  // Decides the held detections of `stream` whose views have been searched
  // up to `frontier` (exclusive): confirmed ones are appended to `alerts`
  // (when their pattern publishes), those no view can confirm any more are
  // dropped (counted), the rest wait. Then forgets confirmed ends that no
  // held or future detection can reach.
  void resolve_agreement(Stream& stream, std::int64_t frontier, std::vector<Alert>& alerts,
                         std::vector<double>& completing_arrival);
  // The window ends of `view` the stream has not searched yet: [first, end).
  std::pair<std::int64_t, std::int64_t> unsearched_ends(const Stream& stream,
                                                        std::size_t view) const;
  // After a multi-device search lost a GPU: the batch searched again, whole,
  // on the GPUs left (counted, noted for the log).
  void search_again_without(const kernels::SearchDeviceLost& lost);
  // Called from the handler of the search's `error`: rethrows it for the CPU
  // backend; otherwise switches to the CPU backend (counted, noted) and
  // searches searching_.batch again.
  void search_again_on_cpu(const std::exception& error);
  // Puts the samples the last backend held (StreamSlice::omitted) back into
  // searching_.batch, for a backend that holds none. A raw slice whose omitted samples
  // have left the ring since the batch started is not searched: its window
  // ends move from searched_windows to lost_windows.
  void restore_omitted_samples();
  // The frame's stream, opened if new; null when opening it would exceed
  // ingest.max_streams (counted).
  Stream* stream_for(const sensors::Frame& frame, const config::DeviceProfile& profile);
  // Both batch buffers emptied of warm_up()'s slices and matches (their
  // storage kept).
  void clear_warm_up_batches();
  // After warm_up() failed: clear_warm_up_batches(), and the backend told its
  // streams are gone (its own failure there ignored).
  void abandon_warm_up(const std::vector<std::uint64_t>& keys);
  // `devices` GPUs a multi-device backend lost (`note` says which): counted,
  // the backend's new name taken, and noted for the log.
  void note_devices_lost(const std::string& note, std::size_t devices);
  // Removes one stream (sweep_streams): its pending window ends count as
  // lost, its sequence counters move to retired_, its backend keys to
  // forgotten_keys_.
  void evict_stream(std::map<std::uint64_t, Stream>::iterator it);
  // stream_clocks() into `clocks` (replaced; its storage reused).
  void collect_stream_clocks(std::vector<StreamClock>& clocks) const;
  // on_frame's steps around the append: the frame's stream, or null when its
  // device or profile refuses it (counted); then the verdict's counters and
  // the observer. Returns on_frame's result.
  Stream* admit_frame(const sensors::Frame& frame, double arrival_s);
  bool count_verdict(const sensors::Frame& frame, FrameVerdict verdict, double arrival_s);

  config::Config config_;
  std::unique_ptr<kernels::SearchBackend> backend_;
  struct SliceOwner {
    Stream* stream;
    std::size_t view;
    std::size_t times_at;  // its new samples' times in BatchState::times
  };
  // One batch's own storage and times, from start_batch() to the end of its
  // phase 2. There are two: the next batch's search fills one while the phase
  // 2 of the batch before it reads the other; end_search() swaps them, so
  // their storage is reused (a W1 batch holds ~110 KB of samples per wearer,
  // and fresh storage every tick costs page faults: docs/benchmarks.md,
  // "Engine host path").
  struct BatchState {
    bool active = false;
    kernels::SearchBatch batch;
    kernels::SearchResult result;
    std::vector<SliceOwner> owners;  // per slice of `batch`
    // Device time and arrival of every slice's new samples [first_new, end),
    // copied when the batch starts: frames taken while the search runs may
    // overwrite those ring slots before phase 2 reads them.
    std::vector<std::pair<double, double>> times;
    std::vector<StreamClock> clocks;  // stream_clocks() as of the start
    double batch_start = 0;     // now() at the start
    double newest_arrival = 0;  // of the samples searched
    double searched_work = 0;   // items given to the backend
    std::chrono::steady_clock::time_point started;  // search start
    // Written by the search task, read after its future is ready.
    double search_end_s = 0;
    std::chrono::steady_clock::time_point search_ended;
  };
  BatchState searching_;  // start_batch() .. end_search()
  BatchState searched_;   // end_search() .. detect_searched()
  std::vector<SliceAlerts> slice_alerts_;  // per slice of a phase 2; storage reused
  // The batch's host work per stream (slice filling, phase 2) runs on this
  // pool: search.threads workers (0 = all cores), so that a GPU search is not
  // left waiting for one core (docs/design.md, "Engine host work").
  std::unique_ptr<WorkerPool> host_pool_;
  // GW_ENGINE_BATCH_LOG=PATH: a line per batch appended there (start unix s,
  // slices, work, predicted ms, observed ms = start to search end as the cost
  // model sees it, search ms, phase 2 ms, matches, deferred streams so far,
  // the backend's buffer growths), to see where a slow batch lost its time;
  // warm_up() writes a "# warm-up" comment line per batch. Diagnostics only.
  DiagnosticLog batch_log_;
  std::vector<std::vector<float>> scratch_;                          // per worker
  std::vector<std::vector<float>> baseline_scratch_;                 // per worker
  std::vector<Phase2Scratch> phase2_scratch_;  // per worker
  // The batch cost models: cost_model_ learns from the batches for which the
  // backend allocated nothing (SearchStats::buffer_growths), start_cost_model_
  // from every batch. Batches are planned with cost_model_ once it is ready,
  // before that with start_cost_model_: without any bound at the start, a
  // backlog makes each batch longer than the one before (the batches of the
  // first seconds all allocate), with the one-off batches in the fit for
  // good, it bounds batches to a fraction of what fits for seconds.
  BatchCostModel cost_model_;
  BatchCostModel start_cost_model_;
  WarmUp warm_up_report_;
  const BatchCostModel& planning_cost_model() const {
    return cost_model_.ready() ? cost_model_ : start_cost_model_;
  }
  std::vector<double> work_per_end_;  // per view: dim pairs searched per window end
  std::vector<int> view_priority_;    // per view: highest severity of its patterns (0..2)
  std::string backend_note_;
  std::vector<EpisodeEnd> episode_ends_;  // take_episode_ends()
  bool record_decisions_ = false;
  std::string backend_name_;
  CompiledLibrary library_;
  // Per library pattern: its device and the device channel of each of its
  // channels, for cutting alert windows.
  struct PatternChannels {
    const config::DeviceProfile* device = nullptr;
    std::vector<int> columns;
    std::int64_t window_bytes = 0;  // of an alert window's samples
  };
  std::vector<PatternChannels> pattern_channels_;
  // Per library pattern: the patterns whose confirmed detections it needs
  // (its `agree`, by index) and how near, in seconds; whether some pattern
  // needs its own (its confirmed ends are kept per stream). agreement_order_
  // lists the patterns with `agree`, each after those it names (config
  // validation rules out cycles), so one pass decides chains.
  struct AgreementRule {
    std::vector<std::size_t> with;
    double within_s = 0;
  };
  std::vector<AgreementRule> agreement_rules_;
  // Per pattern: its kind's group when two or more publishing patterns share
  // the kind (not "other"), else -1 (its alerts are never merged).
  std::vector<int> kind_group_;
  std::size_t kind_group_count_ = 0;
  void compile_kind_groups();
  // Whether `alert` of pattern p repeats the last alert of another pattern
  // of its kind on `stream` (its window end within that alert's cooldown,
  // before or after): then it is counted in merged_alerts and the caller
  // drops it, and the episode it opened (if any) is not reported. Otherwise
  // it becomes the group's last alert.
  bool merged_into_kind(Stream& stream, std::size_t p, const Alert& alert);
  std::vector<char> agreed_with_;
  std::vector<std::size_t> agreement_order_;
  std::map<std::uint64_t, Stream> streams_;  // key: wearer << 16 | device
  // The same streams by hash, for the per-frame lookup (thousands of
  // streams: a map walk was a cache miss per level); streams_ keeps the
  // order batches and clocks go in. Idle streams are removed by
  // sweep_streams().
  std::unordered_map<std::uint64_t, Stream*> stream_index_;
  // The per-stream sequence counters of removed streams, so that the totals
  // (counters().gaps etc.) never go back.
  struct RetiredCounts {
    std::uint64_t overrun = 0, gaps = 0, missing = 0, restarts = 0;
  } retired_;
  // Backend stream keys of removed streams, for forget_streams() at the next
  // start_batch() (the backend is not touched while a search runs).
  std::vector<std::uint64_t> forgotten_keys_;
  bool stream_order_stale_ = true;  // streams were added or removed since stream_order_
  // streams_ in key order for the per-stream passes on the pool (rebuilt
  // when streams were added), and start_batch's per-stream scratch: work
  // per view (flat, stream-major), total work, oldest unsearched arrival.
  std::vector<std::pair<std::uint64_t, Stream*>> stream_order_;
  std::vector<double> due_view_work_, due_work_, due_oldest_;
  int tick_ms_ = 100;
  int deadline_ms_ = 250;
  EngineCounters counters_;
  std::atomic<bool> alert_windows_paused_{false};
  // marks.window_budget_mb_per_s: bytes left in the bucket after the last
  // phase 2 and when it was refilled (the phase 2's `now`; < 0: never), and
  // during a phase 2 what its workers may still claim.
  double window_budget_bytes_ = 0;
  double window_budget_refilled_s_ = -1;
  std::atomic<std::int64_t> window_bytes_left_{0};
  // Takes `bytes` of this phase 2's window budget; false when it is spent.
  bool claim_window_bytes(std::int64_t bytes);
  void refund_window_bytes(std::int64_t bytes);
  FrameObserver frame_observer_;
  // on_frames' scratch: each frame's stream (null: refused), the admitted
  // frames grouped by stream and their verdicts.
  std::vector<Stream*> frame_streams_;
  std::vector<std::size_t> frames_by_stream_;
  std::vector<std::pair<std::size_t, std::size_t>> stream_runs_;  // [begin, end) of frames_by_stream_
  std::vector<FrameVerdict> frame_verdicts_;
  // The search in flight. Last member: a search still running when the
  // engine goes is waited for (std::future from std::async) before the
  // members it uses are destroyed.
  std::future<void> search_;
};

}  // namespace gw::pipeline
