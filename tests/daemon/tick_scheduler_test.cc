// The pipeline thread's decisions (daemon/tick_scheduler.h) on a stepped
// clock: overlap, deferral, slot steps, reload and marks ordering, and the
// drain at stop.

#include "daemon/tick_scheduler.h"

#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace gw::daemon {
namespace {

using std::chrono::milliseconds;

// A clock that moves only when the test says.
struct SteppedClock {
  TickClock::time_point t = TickClock::time_point(std::chrono::hours(1));
  TickNow fn() {
    return [this] { return t; };
  }
  void advance(TickClock::duration d) { t += d; }
};

// The daemon's loop in miniature: an engine whose searches take the times of
// `searches` in turn (the last one repeats), a phase 2 that is instant, and a
// reload or a marks change that may be pending (both are a pending
// reconfiguration to after_search). Each turn is 1 ms; the events are logged
// in order.
struct MiniPipeline {
  SteppedClock clock;
  TickScheduler schedule;
  int tick_ms;
  std::vector<milliseconds> searches;
  std::size_t searches_started = 0;
  bool in_flight = false, searched = false, reconfigure_pending = false;
  TickClock::time_point search_ends;
  std::vector<std::string> events;
  // Whether every reconfiguration came with no batch searching or waiting.
  bool reconfigured_during_batch = false;

  MiniPipeline(int tick, std::vector<milliseconds> search_times)
      : schedule(clock.fn(), tick), tick_ms(tick), searches(std::move(search_times)) {}

  BatchState state() const { return {in_flight, in_flight && clock.t >= search_ends, searched}; }

  void start_tick(TickClock::time_point now) {
    if (TickScheduler::may_reconfigure(state()) && reconfigure_pending) {
      reconfigured_during_batch = reconfigured_during_batch || in_flight || searched;
      reconfigure_pending = false;
      events.push_back("reconfigure");
    }
    in_flight = true;
    search_ends = now + searches[std::min(searches_started++, searches.size() - 1)];
    events.push_back("start");
    schedule.on_batch_started(now, tick_ms);
  }

  void turn() {
    clock.advance(milliseconds(1));
    const auto now = clock.t;
    if (schedule.search_end(now, state(), tick_ms) != SearchEnd::kKeepRunning) {
      in_flight = false;
      searched = true;
      events.push_back("end");
      if (schedule.after_search(now, 0.0, reconfigure_pending) == AfterSearch::kNextBatchFirst)
        start_tick(now);
      searched = false;
      events.push_back("phase2");
    }
    if (schedule.batch_due(now, in_flight)) start_tick(now);
  }

  std::size_t count(const std::string& event) const {
    std::size_t n = 0;
    for (const auto& e : events) n += e == event;
    return n;
  }
};

TEST_CASE("tick scheduler: a search past its tick starts the next batch when it ends",
          "[tick_scheduler]") {
  SteppedClock clock;
  const auto t0 = clock.t;
  TickScheduler s(clock.fn(), 100);
  CHECK(s.next_tick() == t0 + milliseconds(100));
  CHECK_FALSE(s.batch_due(t0 + milliseconds(99), false));
  REQUIRE(s.batch_due(t0 + milliseconds(100), false));
  s.on_batch_started(t0 + milliseconds(100), 100);
  CHECK(s.next_tick() == t0 + milliseconds(200));

  // The search runs past the next tick: not waited for, no batch meanwhile.
  const BatchState searching{true, false, false};
  CHECK(s.search_end(t0 + milliseconds(250), searching, 100) == SearchEnd::kKeepRunning);
  CHECK_FALSE(s.batch_due(t0 + milliseconds(250), true));
  // It ends after the tick: that tick's batch starts before its phase 2.
  const BatchState done{true, true, false};
  CHECK(s.search_end(t0 + milliseconds(260), done, 100) == SearchEnd::kDone);
  CHECK(s.after_search(t0 + milliseconds(260), 5.0, false) == AfterSearch::kNextBatchFirst);
  s.on_batch_started(t0 + milliseconds(260), 100);
  // The ticks keep their pace; they do not slip by the late search.
  CHECK(s.next_tick() == t0 + milliseconds(300));
}

TEST_CASE("tick scheduler: phase 2 first unless the tick falls inside it", "[tick_scheduler]") {
  SteppedClock clock;
  const auto t0 = clock.t;
  TickScheduler s(clock.fn(), 100);
  // Next tick at t0 + 100; the last phase 2 took 10 ms.
  CHECK(s.after_search(t0 + milliseconds(50), 10.0, false) == AfterSearch::kPhase2First);
  CHECK(s.after_search(t0 + milliseconds(89), 10.0, false) == AfterSearch::kPhase2First);
  CHECK(s.after_search(t0 + milliseconds(90), 10.0, false) == AfterSearch::kNextBatchFirst);
  CHECK(s.after_search(t0 + milliseconds(95), 10.0, false) == AfterSearch::kNextBatchFirst);
}

TEST_CASE("tick scheduler: waits for a hung search only", "[tick_scheduler]") {
  SteppedClock clock;
  const auto t0 = clock.t;
  const BatchState searching{true, false, false};
  TickScheduler s(clock.fn(), 20);
  s.on_batch_started(t0, 20);  // the search's batch started at t0; next tick t0 + 40
  CHECK(s.search_end(t0 + milliseconds(30), searching, 20) == SearchEnd::kKeepRunning);
  // A hung search: kHungSearchTicks ticks of at least 100 ms since its batch started.
  CHECK(s.search_end(t0 + milliseconds(4999), searching, 20) == SearchEnd::kKeepRunning);
  CHECK(s.search_end(t0 + milliseconds(5000), searching, 20) == SearchEnd::kHung);
  CHECK(s.search_end(t0 + milliseconds(5000), searching, 200) == SearchEnd::kKeepRunning);
  CHECK(s.search_end(t0 + milliseconds(10000), searching, 200) == SearchEnd::kHung);
  // Nothing in flight: nothing to end.
  CHECK(s.search_end(t0 + milliseconds(10000), BatchState{}, 200) == SearchEnd::kKeepRunning);
}

TEST_CASE("tick scheduler: how long a turn waits for frames", "[tick_scheduler]") {
  SteppedClock clock;
  const auto t0 = clock.t;
  TickScheduler s(clock.fn(), 100);
  CHECK(s.frame_wait(t0, false) == milliseconds(50));
  CHECK(s.frame_wait(t0, true) == milliseconds(1));
  CHECK(s.frame_wait(t0 + milliseconds(80), false) == milliseconds(20));
  CHECK(s.frame_wait(t0 + milliseconds(100), false) == milliseconds(0));
}

TEST_CASE("tick scheduler: a batch with nothing to search is finished at its start",
          "[tick_scheduler]") {
  CHECK(TickScheduler::finish_at_start(false));
  CHECK_FALSE(TickScheduler::finish_at_start(true));
}

TEST_CASE("tick scheduler: a tick during a search is deferred, not caught up",
          "[tick_scheduler]") {
  // Searches of 250 ms at a 100 ms tick: each batch starts as the one before
  // ends, one at a time, never two in flight and never a burst of missed ticks.
  MiniPipeline p(100, {milliseconds(250)});
  for (int i = 0; i < 2000; ++i) {
    const bool was_in_flight = p.in_flight;
    const std::size_t starts = p.count("start");
    p.turn();
    // A batch starts during a turn only when its search ended in that turn
    // or none was in flight.
    if (was_in_flight && p.count("start") > starts) CHECK(p.events.end()[-3] == "end");
    CHECK(p.count("start") - starts <= 1);
  }
  // 2 s of 250 ms searches back to back: 8 batches, not the 20 ticks.
  CHECK(p.count("start") == 8);
  CHECK(p.count("end") == 7);

  // The ticks fell behind: the next one is a tick after the late start.
  SteppedClock clock;
  const auto t0 = clock.t;
  TickScheduler s(clock.fn(), 100);
  s.on_batch_started(t0 + milliseconds(450), 100);
  CHECK(s.next_tick() == t0 + milliseconds(550));
}

TEST_CASE("tick scheduler: slot steps while a search runs or the tick is far", "[tick_scheduler]") {
  SteppedClock clock;
  const auto t0 = clock.t;
  TickScheduler s(clock.fn(), 100);
  // Nothing due before a phase 2.
  CHECK_FALSE(s.slot_step_due(true));
  s.on_phase2_started();
  s.on_phase2_done();
  REQUIRE(s.slots_due());
  CHECK(s.slot_step_due(true));
  // No pace known yet: any room will do.
  CHECK(s.slot_step_due(false));

  // A full step (2048 seconds) that took 20.48 ms: another is due, and without
  // a search in flight it needs twice a full step (+1 ms) of room to the tick.
  s.on_slot_step(TickScheduler::kSlotSecondsPerStep, 20.48, false);
  REQUIRE(s.slots_due());
  clock.t = t0 + milliseconds(60);  // 40 ms to the tick: too close
  CHECK_FALSE(s.slot_step_due(false));
  CHECK(s.slot_step_due(true));
  clock.t = t0 + milliseconds(55);  // 45 ms of room
  CHECK(s.slot_step_due(false));

  // A partial step leaves nothing due.
  s.on_slot_step(100, 1.0, false);
  CHECK_FALSE(s.slots_due());
  CHECK_FALSE(s.slot_step_due(true));
  // The final step records everything.
  s.on_phase2_done();
  s.on_slot_step(TickScheduler::kSlotSecondsPerStep, 20.48, true);
  CHECK_FALSE(s.slots_due());
}

TEST_CASE("tick scheduler: slot seconds wait a second at most", "[tick_scheduler]") {
  SteppedClock clock;
  TickScheduler s(clock.fn(), 100);
  s.on_phase2_started();
  const auto due_since = clock.t;
  s.on_phase2_done();
  // A slow pace: a full step takes 2048 ms, so the tick is never far enough.
  s.on_slot_step(TickScheduler::kSlotSecondsPerStep, 2048.0, false);
  // Later phase 2s do not restart the wait while seconds are still due.
  clock.t = due_since + milliseconds(600);
  s.on_phase2_started();
  s.on_phase2_done();
  clock.t = due_since + milliseconds(1000);
  CHECK_FALSE(s.slot_step_due(false));
  clock.t = due_since + milliseconds(1001);
  CHECK(s.slot_step_due(false));
}

TEST_CASE("tick scheduler: a reload is applied between batches, before the next one",
          "[tick_scheduler]") {
  CHECK(TickScheduler::may_reconfigure(BatchState{}));
  CHECK_FALSE(TickScheduler::may_reconfigure(BatchState{true, false, false}));
  CHECK_FALSE(TickScheduler::may_reconfigure(BatchState{true, true, false}));
  CHECK_FALSE(TickScheduler::may_reconfigure(BatchState{false, false, true}));

  SteppedClock clock;
  const auto t0 = clock.t;
  TickScheduler s(clock.fn(), 100);
  // A search that ends past its tick would start the next batch first; with
  // a reload pending the phase 2 goes first, so that the next batch starts
  // with no batch waiting and applies it.
  CHECK(s.after_search(t0 + milliseconds(150), 1.0, false) == AfterSearch::kNextBatchFirst);
  CHECK(s.after_search(t0 + milliseconds(150), 1.0, true) == AfterSearch::kPhase2First);

  // Under overload (searches longer than the tick) a reload still comes in,
  // at a batch start with nothing in flight, right before that batch.
  MiniPipeline p(100, {milliseconds(130)});
  for (int i = 0; i < 1000; ++i) p.turn();
  const std::size_t before = p.events.size();
  p.reconfigure_pending = true;
  for (int i = 0; i < 1000 && p.reconfigure_pending; ++i) p.turn();
  CHECK_FALSE(p.reconfigure_pending);
  CHECK_FALSE(p.reconfigured_during_batch);
  REQUIRE(p.count("reconfigure") == 1);
  for (std::size_t i = before; i < p.events.size(); ++i)
    if (p.events[i] == "reconfigure") {
      REQUIRE(i + 1 < p.events.size());
      CHECK(p.events[i + 1] == "start");
      CHECK(p.events[i - 1] == "phase2");
    }
}

TEST_CASE("tick scheduler: marks changed under overload apply after the next phase 2",
          "[tick_scheduler]") {
  // Every search ends past its tick, so without a pending reconfiguration
  // each next batch starts before the ended one's phase 2 and no batch start
  // ever finds nothing waiting: a carer's mark would wait for the load to
  // drop. Changed marks keep phase 2 first, as a reload does.
  MiniPipeline p(100, {milliseconds(130)});
  for (int i = 0; i < 250; ++i) p.turn();
  REQUIRE(p.in_flight);
  p.reconfigure_pending = true;  // a mark arrives mid-search
  int turns = 0;
  while (p.reconfigure_pending && turns++ < 1000) p.turn();
  CHECK_FALSE(p.reconfigure_pending);
  CHECK(p.count("reconfigure") == 1);
  CHECK_FALSE(p.reconfigured_during_batch);
  // Applied at the first batch start after the search in flight ended: its
  // phase 2 first, then the marks, then the batch.
  CHECK(turns < 200);
  CHECK(p.events.end()[-3] == "phase2");
  CHECK(p.events.end()[-2] == "reconfigure");
  CHECK(p.events.end()[-1] == "start");
}

TEST_CASE("stop limits: the searches get three quarters of the stop timeout",
          "[tick_scheduler]") {
  const TickClock::time_point stop = TickClock::time_point(std::chrono::hours(2));
  const TickClock::time_point now = stop + std::chrono::seconds(1);
  const StopLimits from_signal = StopLimits::from(stop, 8.0, now);
  CHECK(from_signal.searches_end == stop + std::chrono::seconds(6));
  CHECK(from_signal.commits_end == stop + std::chrono::seconds(8));
  const StopLimits from_now = StopLimits::from(std::nullopt, 8.0, now);
  CHECK(from_now.searches_end == now + std::chrono::seconds(6));
  CHECK(from_now.commits_end == now + std::chrono::seconds(8));
}

TEST_CASE("stop drain: the batch in flight, the queued frames, then batches until none pending",
          "[tick_scheduler]") {
  SteppedClock clock;
  const StopLimits limits = StopLimits::from(clock.t, 4.0, clock.t);
  StopDrain d(clock.fn(), limits);
  CHECK(d.next() == DrainStep::kEndBatchInFlight);
  CHECK(d.next() == DrainStep::kTakeQueuedFrames);
  d.on_frames_taken(100);
  CHECK(d.next() == DrainStep::kTakeQueuedFrames);
  d.on_frames_taken(0);
  CHECK(d.next() == DrainStep::kAbandonQueuedFrames);
  CHECK(d.next() == DrainStep::kFinalBatch);
  d.on_final_batch(3);  // overload_policy defer left windows
  CHECK(d.next() == DrainStep::kFinalBatch);
  d.on_final_batch(0);
  CHECK(d.next() == DrainStep::kDone);
  CHECK(d.next() == DrainStep::kDone);
}

TEST_CASE("stop drain: the stop timeout ends the searches", "[tick_scheduler]") {
  SteppedClock clock;
  const StopLimits limits = StopLimits::from(clock.t, 4.0, clock.t);  // searches until +3 s
  StopDrain d(clock.fn(), limits);
  CHECK(d.next() == DrainStep::kEndBatchInFlight);
  CHECK(d.next() == DrainStep::kTakeQueuedFrames);
  d.on_frames_taken(100);
  clock.advance(std::chrono::seconds(3));  // the searches' time is up, frames still queued
  CHECK(d.next() == DrainStep::kAbandonQueuedFrames);
  // One batch over what was taken, however late; no more while windows wait.
  CHECK(d.next() == DrainStep::kFinalBatch);
  d.on_final_batch(5);
  CHECK(d.next() == DrainStep::kDone);

  // Time enough: the pending windows are searched.
  SteppedClock clock2;
  StopDrain d2(clock2.fn(), StopLimits::from(clock2.t, 4.0, clock2.t));
  CHECK(d2.next() == DrainStep::kEndBatchInFlight);
  d2.on_frames_taken(0);
  CHECK(d2.next() == DrainStep::kAbandonQueuedFrames);
  CHECK(d2.next() == DrainStep::kFinalBatch);
  d2.on_final_batch(5);
  CHECK(d2.next() == DrainStep::kFinalBatch);
  clock2.advance(std::chrono::seconds(3));
  d2.on_final_batch(4);
  CHECK(d2.next() == DrainStep::kDone);
}

}  // namespace
}  // namespace gw::daemon
