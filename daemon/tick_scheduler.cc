#include "daemon/tick_scheduler.h"

#include <algorithm>
#include <utility>

namespace gw::daemon {

TickScheduler::TickScheduler(TickNow now, int tick_ms) : now_(std::move(now)) {
  const TickClock::time_point start = now_();
  next_tick_ = start + std::chrono::milliseconds(tick_ms);
  flight_start_ = start;
  slots_due_since_ = start;
}

TickClock::duration TickScheduler::frame_wait(TickClock::time_point turn_start,
                                              bool batch_in_flight) const {
  const auto longest_wait = std::chrono::milliseconds(batch_in_flight ? 1 : 50);
  return std::min(next_tick_ - turn_start, TickClock::duration(longest_wait));
}

SearchEnd TickScheduler::search_end(TickClock::time_point now, const BatchState& batch,
                                    int tick_ms) const {
  if (!batch.in_flight) return SearchEnd::kKeepRunning;
  if (batch.search_done) return SearchEnd::kDone;
  if (now >= flight_start_ + std::chrono::milliseconds(kHungSearchTicks * std::max(tick_ms, 100)))
    return SearchEnd::kHung;
  return SearchEnd::kKeepRunning;
}

AfterSearch TickScheduler::after_search(TickClock::time_point ended, double last_phase2_ms,
                                        bool reconfigure_pending) const {
  const auto phase2_takes = std::chrono::duration_cast<TickClock::duration>(
      std::chrono::duration<double, std::milli>(last_phase2_ms));
  if (ended + phase2_takes >= next_tick_ && !reconfigure_pending)
    return AfterSearch::kNextBatchFirst;
  return AfterSearch::kPhase2First;
}

bool TickScheduler::batch_due(TickClock::time_point now, bool batch_in_flight) const {
  return now >= next_tick_ && !batch_in_flight;
}

void TickScheduler::on_batch_started(TickClock::time_point tick_time, int tick_ms) {
  flight_start_ = tick_time;
  next_tick_ += std::chrono::milliseconds(tick_ms);
  if (next_tick_ < tick_time) next_tick_ = tick_time + std::chrono::milliseconds(tick_ms);
}

void TickScheduler::on_phase2_started() {
  if (!slots_due_) slots_due_since_ = now_();
}

bool TickScheduler::slot_step_due(bool batch_in_flight) const {
  if (!slots_due_) return false;
  const TickClock::time_point now = now_();
  // Room for twice what a full step would take at the last step's pace.
  const double room_ms = std::chrono::duration<double, std::milli>(next_tick_ - now).count();
  const double full_step_ms = slot_second_ms_ * static_cast<double>(kSlotSecondsPerStep);
  return batch_in_flight || room_ms > 2 * full_step_ms + 1 ||
         now - slots_due_since_ > kSlotStepLatest;
}

void TickScheduler::on_slot_step(std::size_t seconds_recorded, double step_ms, bool final) {
  if (seconds_recorded > 0) slot_second_ms_ = step_ms / static_cast<double>(seconds_recorded);
  slots_due_ = !final && seconds_recorded == kSlotSecondsPerStep;
}

StopLimits StopLimits::from(std::optional<TickClock::time_point> stop_requested,
                            double stop_timeout_s, TickClock::time_point now) {
  const TickClock::time_point start = stop_requested.value_or(now);
  const auto limit = std::chrono::duration_cast<TickClock::duration>(
      std::chrono::duration<double>(stop_timeout_s));
  return {start + std::chrono::duration_cast<TickClock::duration>(limit * kSearchShareOfStop),
          start + limit};
}

DrainStep StopDrain::next() {
  switch (stage_) {
    case Stage::kStart:
      stage_ = Stage::kFrames;
      return DrainStep::kEndBatchInFlight;
    case Stage::kFrames:
      if (!queue_empty_ && now_() < limits_.searches_end) return DrainStep::kTakeQueuedFrames;
      stage_ = Stage::kFirstBatch;
      return DrainStep::kAbandonQueuedFrames;
    case Stage::kFirstBatch:
      stage_ = Stage::kBatches;
      return DrainStep::kFinalBatch;
    case Stage::kBatches:
      if (pending_windows_ > 0 && now_() < limits_.searches_end) return DrainStep::kFinalBatch;
      stage_ = Stage::kDone;
      return DrainStep::kDone;
    case Stage::kDone:
      break;
  }
  return DrainStep::kDone;
}

}  // namespace gw::daemon
