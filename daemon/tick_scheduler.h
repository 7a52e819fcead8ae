#pragma once

// The pipeline thread's decisions (daemon/daemon.cc, the pipeline loop): when
// a tick starts a batch, when the search in flight is ended, whether the next
// batch starts before the ended one's phase 2, when a slot-index step runs,
// when a reload or carers' marks may be applied, and the order of the drain
// at stop. The loop does the I/O (frames, the engine, the sink, the tables);
// this class only decides, from the times of an injected clock and the
// engine's batch state that the loop passes in, so that unit tests can step
// time (tests/daemon/tick_scheduler_test.cc).
//
// Thread-safety: none. It belongs to the pipeline thread, which alone calls it.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

namespace gw::daemon {

using TickClock = std::chrono::steady_clock;
// The clock the scheduler reads; steady_clock::now in the daemon, a stepped
// one in tests.
using TickNow = std::function<TickClock::time_point()>;

// Where the engine's batches stand when a decision is asked for. Two batches
// can be live at once: one searched and waiting for its phase 2, and the next
// one searching.
struct BatchState {
  bool in_flight = false;    // Engine::batch_in_flight: a search runs or has not been ended
  bool search_done = false;  // Engine::search_done: that search has finished
  bool searched = false;     // Engine::batch_searched: a batch waits for its phase 2
};

// Why the search in flight is ended now (or not).
enum class SearchEnd {
  kKeepRunning,  // not done and not hung
  kDone,         // the search has finished
  kHung,         // it has run for kHungSearchTicks ticks: waited for, so that a
                 // hung device stops the watchdog pings
};

// What follows the end of a search.
enum class AfterSearch {
  kPhase2First,     // the ended batch's phase 2, then the next batch at its tick
  kNextBatchFirst,  // the next tick's batch starts now; the ended batch's phase 2
                    // runs while its search runs
};

class TickScheduler {
 public:
  // A search in flight this many ticks (of at least 100 ms) is waited for.
  static constexpr int kHungSearchTicks = 50;
  // Wearer-seconds a slot step records at the most.
  static constexpr std::size_t kSlotSecondsPerStep = 2048;
  // Slot seconds due for this long are recorded whatever the load.
  static constexpr std::chrono::seconds kSlotStepLatest{1};

  // The first tick is `tick_ms` after the clock's time now.
  TickScheduler(TickNow now, int tick_ms);

  TickClock::time_point now() const { return now_(); }
  TickClock::time_point next_tick() const { return next_tick_; }

  // How long a turn that began at `turn_start` may wait for a frame: until
  // the next tick, and at most 1 ms while a search is in flight (the loop
  // looks at it after each bunch of frames) or 50 ms otherwise.
  TickClock::duration frame_wait(TickClock::time_point turn_start, bool batch_in_flight) const;

  // Whether the search in flight is ended at `now`, and why. A search still
  // running at its tick is not waited for (the next batch starts as soon as
  // it ends, and frames go on being taken meanwhile) unless it has run for
  // kHungSearchTicks ticks of at least 100 ms (`tick_ms`: the engine's, it
  // may change on reload).
  SearchEnd search_end(TickClock::time_point now, const BatchState& batch, int tick_ms) const;

  // What follows a search that `ended` then: the next tick's batch first when
  // the tick falls before the ended batch's phase 2 would be over (it takes
  // `last_phase2_ms`, as long as the last one took), so that the device is
  // not idle during that phase 2.
  // A pending reconfiguration (a reload, or carers' marks that changed)
  // keeps phase 2 first, so that a tick without a batch waiting for phase 2
  // comes and applies it even under load.
  AfterSearch after_search(TickClock::time_point ended, double last_phase2_ms,
                           bool reconfigure_pending) const;

  // Whether a tick starts its batch at `now`: the tick has come and no search
  // is in flight (a tick that falls during a search starts its batch when
  // that search ends).
  bool batch_due(TickClock::time_point now, bool batch_in_flight) const;

  // Whether a pending reload or changed marks may be applied as a batch
  // starts: only with no batch searching or waiting for its phase 2 (the
  // waiting phase 2 reads the patterns; the engine refuses to reconfigure
  // during a batch). Otherwise it waits for a later tick.
  static bool may_reconfigure(const BatchState& batch) { return !batch.in_flight && !batch.searched; }

  // Whether a batch that has just started is finished (phase 2) right there:
  // when its search is already over (nothing to search). Otherwise its search
  // runs on the engine's thread while this one goes on taking frames.
  static bool finish_at_start(bool batch_in_flight) { return !batch_in_flight; }

  // A tick's batch started at `tick_time`: the hung-search clock starts, and
  // the next tick is `tick_ms` later than the last one, or `tick_ms` after
  // `tick_time` when the ticks fell behind (missed ticks are not caught up).
  void on_batch_started(TickClock::time_point tick_time, int tick_ms);

  // Slot steps. A phase 2 makes the wearer-seconds completed so far due
  // (on_phase2_started stamps when, unless some were due already;
  // on_phase2_done makes them due). A step runs while a search is in flight,
  // or with the next tick at least twice a full step away at the last step's
  // pace, or once they have been due for kSlotStepLatest; never between a
  // phase 2 and the next batch's start when that tick is near.
  void on_phase2_started();
  void on_phase2_done() { slots_due_ = true; }
  bool slot_step_due(bool batch_in_flight) const;
  // A step recorded `seconds_recorded` wearer-seconds in `step_ms`. A full
  // step may have left complete seconds: another is due. The final one (at
  // stop) records everything.
  void on_slot_step(std::size_t seconds_recorded, double step_ms, bool final);
  bool slots_due() const { return slots_due_; }

 private:
  TickNow now_;
  TickClock::time_point next_tick_;
  TickClock::time_point flight_start_;
  bool slots_due_ = false;
  TickClock::time_point slots_due_since_;
  double slot_second_ms_ = 0;  // the last step's time per wearer-second
};

// When the stop's searches and its final commits must end: `stop_timeout_s`
// (daemon.stop_timeout_s) from the stop signal, or from `now` when the loop
// ended otherwise; the searches get kSearchShareOfStop of it, the final
// commits (with their retries on a failing store) the rest.
struct StopLimits {
  static constexpr double kSearchShareOfStop = 0.75;
  TickClock::time_point searches_end, commits_end;
  static StopLimits from(std::optional<TickClock::time_point> stop_requested,
                         double stop_timeout_s, TickClock::time_point now);
};

// The steps of the drain at stop, in order.
enum class DrainStep {
  kEndBatchInFlight,     // the batch in flight (if any) is searched and
                         // finished; the queue is closed
  kTakeQueuedFrames,     // a bunch of the frames still queued is taken
  kAbandonQueuedFrames,  // what is still queued is counted, not searched
  kFinalBatch,           // a batch over everything taken (slots: all recorded)
  kDone,                 // the searches are over; commits follow
};

// The drain's order: the batch in flight first, then the queued frames
// while the searches' time lasts and frames come, then batches until no
// window is pending (overload_policy defer may leave some; each batch takes
// at least one stream) or the time is up, with at least one batch.
// Pipeline thread only.
class StopDrain {
 public:
  StopDrain(TickNow now, StopLimits limits) : now_(std::move(now)), limits_(limits) {}

  DrainStep next();
  // What the last kTakeQueuedFrames took (0: the queue is empty).
  void on_frames_taken(std::size_t frames) { queue_empty_ = frames == 0; }
  // What the last kFinalBatch left pending.
  void on_final_batch(std::uint64_t pending_windows) { pending_windows_ = pending_windows; }

 private:
  enum class Stage { kStart, kFrames, kFirstBatch, kBatches, kDone };
  TickNow now_;
  StopLimits limits_;
  Stage stage_ = Stage::kStart;
  bool queue_empty_ = false;
  std::uint64_t pending_windows_ = 0;
};

}  // namespace gw::daemon
