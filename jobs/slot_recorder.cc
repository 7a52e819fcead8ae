#include "jobs/slot_recorder.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "common/error.h"
#include "common/worker_pool.h"

namespace gw::pipeline {

ClassifyOptions classify_options(const SlotRecorderOptions& options,
                                 const SlotSources& accel_device) {
  ClassifyOptions classify;
  classify.vertical_axis = accel_device.vertical_axis;
  classify.gravity = accel_device.gravity;
  classify.still_max_std = options.still_max_std_g * accel_device.gravity;
  classify.light_max_std = options.light_max_std_g * accel_device.gravity;
  classify.walking_max_std = options.walking_max_std_g * accel_device.gravity;
  classify.posture_axis_min_g = options.posture_axis_min_g;
  classify.foot_loaded_min_force = options.foot_loaded_min;
  return classify;
}

namespace {

int highest_channel(const SlotSources& source) {
  int highest = -1;
  for (const std::vector<int>* list : {&source.accel, &source.left_load, &source.right_load})
    for (int c : *list) highest = std::max(highest, c);
  return highest;
}

std::size_t inputs_per_sample(const SlotSources& source) {
  return source.accel.size() + (source.left_load.empty() ? 0 : 1) +
         (source.right_load.empty() ? 0 : 1);
}

}  // namespace

void reduce_slot_inputs(const SlotSources& source, const sensors::Frame& frame,
                        SlotSampleInputs& out) {
  const std::size_t samples = frame.samples;
  const std::size_t channels = frame.channels;
  if (highest_channel(source) >= static_cast<int>(channels) ||
      frame.values.size() < samples * channels) {
    out.values.clear();
    return;
  }
  const std::size_t per_sample = inputs_per_sample(source);
  out.values.assign(samples * per_sample, 0.0f);
  const float* values = frame.values.data();
  for (std::size_t s = 0; s < samples; ++s)
    for (std::size_t a = 0; a < source.accel.size(); ++a)
      out.values[s * per_sample + a] = values[s * channels + static_cast<std::size_t>(source.accel[a])];
  // Channel by channel over all samples: each sample's total adds its
  // channels in list order from 0 (the same float result as one sample at a
  // time), but the samples' additions do not wait on each other.
  std::size_t at = source.accel.size();
  for (const std::vector<int>* load : {&source.left_load, &source.right_load}) {
    if (load->empty()) continue;
    for (int c : *load)
      for (std::size_t s = 0; s < samples; ++s)
        out.values[s * per_sample + at] += values[s * channels + static_cast<std::size_t>(c)];
    ++at;
  }
}

SlotRecorder::SlotRecorder(const SlotRecorderOptions& options,
                           std::map<std::uint16_t, SlotSources> sources)
    : options_(options) {
  if (!(options_.max_wait_s > 0) || !std::isfinite(options_.max_wait_s))
    throw Error("slot recorder: max_wait_s must be a positive number of seconds");
  for (auto& [device, source] : sources) {
    if (!source.accel.empty() && source.accel.size() != 3)
      throw Error("slot recorder: device " + std::to_string(device) +
                  ": accel needs exactly 3 channels (x, y, z)");
    for (const std::vector<int>* list : {&source.accel, &source.left_load, &source.right_load})
      for (int c : *list)
        if (c < 0)
          throw Error("slot recorder: device " + std::to_string(device) +
                      ": negative channel index");
    if (source.vertical_axis < 0 || source.vertical_axis > 2)
      throw Error("slot recorder: device " + std::to_string(device) +
                  ": vertical_axis must be 0, 1 or 2");
    if (!source.empty()) {
      const int highest = highest_channel(source);
      sources_.emplace(device, Source{std::move(source), highest});
    }
  }
}

const SlotRecorder::Source* SlotRecorder::admit(const sensors::Frame& frame) {
  const auto source_it = sources_.find(frame.device_id);
  if (source_it == sources_.end()) return nullptr;
  counters_.samples += frame.samples;
  if (frame.wearer_id > kMaxSlotWearer || source_it->second.highest_channel >= frame.channels) {
    counters_.out_of_range_samples += frame.samples;
    return nullptr;
  }
  return &source_it->second;
}

void SlotRecorder::on_frame(const sensors::Frame& frame, int zone, double arrival_s,
                            const SlotSampleInputs* inputs) {
  const Source* source = admit(frame);
  if (!source) return;
  record_frame(wearers_[frame.wearer_id], *source, frame, zone, arrival_s, inputs, counters_,
               scratch_);
}

void SlotRecorder::on_frames(const std::vector<FrameInput>& frames, WorkerPool* pool) {
  // Below this, handing the frames to the workers costs more than it saves.
  constexpr std::size_t kFramesForPool = 64;
  if (pool == nullptr || pool->size() == 1 || frames.size() < kFramesForPool) {
    for (const FrameInput& f : frames) on_frame(*f.frame, f.zone, f.arrival_s, f.inputs);
    return;
  }
  // In order on this thread: sources, counts and new wearers (map inserts).
  const auto workers = static_cast<std::size_t>(pool->size());
  bunch_.targets.assign(frames.size(), BunchTarget{nullptr, nullptr});
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const sensors::Frame& frame = *frames[i].frame;
    if (const Source* source = admit(frame))
      bunch_.targets[i] = {&wearers_[frame.wearer_id], source};
  }
  // A wearer belongs to one bucket, so its state is touched by one worker
  // and its frames keep their order; more buckets than workers even out
  // wearers of unequal cost.
  const std::size_t buckets = workers * 4;
  bunch_.by_bucket.resize(buckets);
  for (std::vector<std::size_t>& bucket : bunch_.by_bucket) bucket.clear();
  for (std::size_t i = 0; i < frames.size(); ++i)
    if (bunch_.targets[i].wearer) bunch_.by_bucket[frames[i].frame->wearer_id % buckets].push_back(i);
  bunch_.counts.assign(workers, SlotRecorderCounters{});
  bunch_.scratch.resize(workers);
  // The workers' counts are kept even when one of them throws (what the
  // others filed stays filed).
  const auto merge_counts = [this] {
    for (const SlotRecorderCounters& c : bunch_.counts) {
      counters_.late_samples += c.late_samples;
      counters_.out_of_range_samples += c.out_of_range_samples;
      counters_.anchors += c.anchors;
    }
  };
  try {
    pool->for_ranges(buckets, 1, [&](std::size_t begin, std::size_t end, int worker) {
      const auto w = static_cast<std::size_t>(worker);
      for (std::size_t b = begin; b < end; ++b)
        for (std::size_t i : bunch_.by_bucket[b]) {
          const FrameInput& f = frames[i];
          record_frame(*bunch_.targets[i].wearer, *bunch_.targets[i].source, *f.frame, f.zone,
                       f.arrival_s, f.inputs, bunch_.counts[w], bunch_.scratch[w]);
        }
    });
  } catch (...) {
    merge_counts();
    throw;
  }
  merge_counts();
}

void SlotRecorder::record_frame(WearerState& wearer, const Source& source_entry,
                                const sensors::Frame& frame, int zone, double arrival_s,
                                const SlotSampleInputs* inputs, SlotRecorderCounters& counters,
                                SlotSampleInputs& scratch) {
  const SlotSources& source = source_entry.sources;
  const std::size_t per_sample = inputs_per_sample(source);
  if (inputs == nullptr || inputs->values.size() != frame.samples * per_sample) {
    reduce_slot_inputs(source, frame, scratch);
    inputs = &scratch;
    if (scratch.values.size() != frame.samples * per_sample) {  // fewer values than it says
      counters.out_of_range_samples += frame.samples;
      return;
    }
  }
  StreamClockState& clock = wearer.streams[frame.device_id];
  // Division, not * 1e-6: exact for whole seconds.
  const double first_s = static_cast<double>(frame.device_time_us) / 1e6;
  if (options_.clock == SlotClock::kAnchored && (!clock.anchored || first_s < clock.last_device_s)) {
    clock.anchor_s = std::llround(arrival_s - first_s);
    clock.anchored = true;
    ++counters.anchors;
  }
  clock.last_arrival_s = arrival_s;

  const double rate = static_cast<double>(frame.sample_rate_hz);
  // The wearer-second and its device and zone entries are looked up once per
  // run of samples in the same second (a frame of 10 samples spans one or
  // two), not per sample: map nodes stay put while others are added.
  std::int64_t current_second = 0;
  DeviceSamples* samples = nullptr;
  std::size_t* zone_count = nullptr;
  for (std::size_t s = 0; s < frame.samples; ++s) {
    const double t = first_s + static_cast<double>(s) / rate;
    clock.last_device_s = t;
    const double floor_t = std::floor(t);
    const std::int64_t second =
        static_cast<std::int64_t>(floor_t) + (options_.clock == SlotClock::kAnchored ? clock.anchor_s : 0);
    if (!std::isfinite(floor_t) || second < 0 || second > kMaxSlotSecond) {
      ++counters.out_of_range_samples;
      continue;
    }
    clock.newest_second = std::max(clock.newest_second, second);
    if (wearer.any_returned && second <= wearer.returned_through) {
      ++counters.late_samples;
      continue;
    }
    if (samples == nullptr || second != current_second) {
      auto [it, inserted] = wearer.pending.try_emplace(second);
      PendingSecond& pending = it->second;
      if (inserted) pending.first_arrival_s = arrival_s;
      auto [device_it, new_device] = pending.devices.try_emplace(frame.device_id);
      samples = &device_it->second;
      if (new_device) {
        // A second's worth, so that a second's samples are not moved as they come.
        const auto per_second = static_cast<std::size_t>(std::ceil(rate)) + 1;
        samples->accel.reserve(source.accel.size() * per_second);
        if (!source.left_load.empty()) samples->left.reserve(per_second);
        if (!source.right_load.empty()) samples->right.reserve(per_second);
      }
      zone_count = &pending.zone_samples[zone];
      current_second = second;
    }
    const float* in = inputs->values.data() + s * per_sample;
    samples->accel.insert(samples->accel.end(), in, in + source.accel.size());
    in += source.accel.size();
    if (!source.left_load.empty()) samples->left.push_back(*in++);
    if (!source.right_load.empty()) samples->right.push_back(*in);
    ++*zone_count;
  }
}

bool SlotRecorder::complete(const WearerState& wearer, std::int64_t second,
                            const PendingSecond& pending, double now_s) const {
  if (now_s - pending.first_arrival_s > options_.max_wait_s) return true;
  for (const auto& [device, clock] : wearer.streams) {
    const bool alive = now_s - clock.last_arrival_s <= options_.max_wait_s;
    if (alive && clock.newest_second <= second) return false;
  }
  return true;
}

SlotEntry SlotRecorder::finish(std::uint32_t wearer, std::int64_t second,
                               const PendingSecond& pending) const {
  // The lowest device id that delivered each input (std::map is ordered).
  const std::vector<float>* accel = nullptr;
  const std::vector<float>* left = nullptr;
  const std::vector<float>* right = nullptr;
  std::uint16_t accel_device = 0;
  for (const auto& [device, samples] : pending.devices) {
    if (!accel && !samples.accel.empty()) {
      accel = &samples.accel;
      accel_device = device;
    }
    if (!left && !samples.left.empty()) left = &samples.left;
    if (!right && !samples.right.empty()) right = &samples.right;
  }
  SecondSignals signals;
  if (accel) {
    signals.accel = accel->data();
    signals.accel_samples = accel->size() / 3;
    signals.accel_stride = 3;
  }
  if (left || right) {
    signals.left_total = left ? left->data() : nullptr;
    signals.right_total = right ? right->data() : nullptr;
    signals.insole_samples = left && right ? std::min(left->size(), right->size())
                                           : (left ? left->size() : right->size());
    signals.insole_stride = 1;
  }
  const SlotSources defaults;
  const ClassifyOptions classify =
      classify_options(options_, accel ? sources_.at(accel_device).sources : defaults);

  SlotEntry entry;
  entry.wearer = wearer;
  entry.second = second;
  entry.status = classify_second(signals, classify);
  entry.summary = summarize_second(signals);
  std::size_t most = 0;
  for (const auto& [zone, count] : pending.zone_samples)
    if (count > most) {  // ascending zones: a tie keeps the lower one
      most = count;
      entry.zone = zone;
    }
  return entry;
}

std::vector<SlotEntry> SlotRecorder::take_complete(double now_s, std::size_t max_entries,
                                                   WorkerPool* pool) {
  if (max_entries == 0) throw Error("slot recorder: take_complete needs max_entries > 0");
  // In order on this thread: which seconds are complete (a second's
  // completeness does not depend on the seconds before it being taken).
  complete_runs_.clear();
  std::size_t taken = 0;
  for (auto& [id, wearer] : wearers_) {
    if (taken >= max_entries) break;
    std::size_t seconds = 0;
    for (auto it = wearer.pending.begin(); it != wearer.pending.end() && taken < max_entries &&
                                           complete(wearer, it->first, it->second, now_s);
         ++it, ++seconds, ++taken) {
    }
    if (seconds > 0) complete_runs_.push_back({id, &wearer, seconds, taken - seconds});
  }
  return finish_runs(taken, pool);
}

std::vector<SlotEntry> SlotRecorder::take_all() {
  complete_runs_.clear();
  std::size_t taken = 0;
  for (auto& [id, wearer] : wearers_) {
    if (wearer.pending.empty()) continue;
    complete_runs_.push_back({id, &wearer, wearer.pending.size(), taken});
    taken += wearer.pending.size();
  }
  return finish_runs(taken, nullptr);
}

std::vector<SlotEntry> SlotRecorder::finish_runs(std::size_t seconds, WorkerPool* pool) {
  // Each run touches its own wearer only.
  std::vector<SlotEntry> out(seconds);
  const auto finish_range = [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r) {
      const CompleteRun& run = complete_runs_[r];
      auto it = run.wearer->pending.begin();
      for (std::size_t k = 0; k < run.seconds; ++k) {
        out[run.first_entry + k] = finish(run.id, it->first, it->second);
        run.wearer->any_returned = true;
        run.wearer->returned_through = it->first;
        it = run.wearer->pending.erase(it);
      }
    }
  };
  // Below this, waking the pool costs more than it saves.
  constexpr std::size_t kSecondsForPool = 64;
  constexpr std::size_t kRunsPerChunk = 16;
  if (pool == nullptr || pool->size() == 1 || seconds < kSecondsForPool)
    finish_range(0, complete_runs_.size());
  else
    pool->for_ranges(complete_runs_.size(), kRunsPerChunk, finish_range);
  counters_.seconds += out.size();
  return out;
}

std::size_t SlotRecorder::pending_seconds() const {
  std::size_t n = 0;
  for (const auto& [id, wearer] : wearers_) n += wearer.pending.size();
  return n;
}

}  // namespace gw::pipeline
