// Engine::warm_up: synthetic batches before the first frame (engine.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iterator>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/error.h"
#include "kernels/multi_device_backend.h"
#include "pipeline/engine.h"

namespace gw::pipeline {
namespace {

// Stream keys of the synthetic streams: real keys use bits 0-47 for (wearer,
// device) and bits 48-62 for the view, never bit 63.
constexpr std::uint64_t kWarmUpKeyBit = std::uint64_t{1} << 63;

// The warm-up's batches, by how many ticks of new samples each holds: every
// stream's first contact (whole slices, as the first batch of a station
// that starts with its wearers sending holds), the same again after the
// backend was told to forget them, one tick's new samples (the steady
// batch) and three ticks' (a batch after a deferral). The backend's uploads
// alternate between two staging slots, and the engine's batches between two
// batch buffers: the whole-slice batches go to one of each, the others too.
constexpr int kRoundTicks[] = {1, 1, 1, 3};
constexpr std::size_t kRoundForgottenBefore = 1;  // the round that starts afresh

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A synthetic sample: a smooth wave read at a rate and phase of its own per
// (stream, dim), with a little noise. A function of its absolute index, so
// that samples a backend holds from an earlier round are the ones that would
// travel again. Smooth signals match smooth patterns often, more often than
// real streams: the backend's match buffers grow here rather than in the
// first real batches (noise would match nothing and leave them to grow
// there; docs/design.md). From a table:
// the first batch holds every stream's whole slice (W1: ~27,000 values a
// stream).
constexpr std::size_t kWaveSize = 4096;
const std::vector<float>& wave_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(kWaveSize);
    for (std::size_t k = 0; k < kWaveSize; ++k) {
      const double x = 2 * 3.14159265358979 * static_cast<double>(k) / kWaveSize;
      t[k] = static_cast<float>(std::sin(x) + 0.5 * std::sin(5 * x + 1));
    }
    return t;
  }();
  return table;
}

float synthetic_sample(const std::vector<float>& wave, std::uint64_t seed, std::int64_t index) {
  const std::uint64_t step = 8 + (seed & 63);  // a wave period of 58..512 samples
  const std::uint64_t at = (seed >> 8) + static_cast<std::uint64_t>(index) * step;
  const double noise =
      static_cast<double>(mix(seed ^ static_cast<std::uint64_t>(index)) % 2001) * 1e-4 - 0.1;
  return wave[at % kWaveSize] + static_cast<float>(noise);
}

}  // namespace

Engine::WarmUp Engine::warm_up(std::size_t streams, const std::function<double()>& now) {
  if (searching_.active || searched_.active)
    throw Error("engine: warm-up while a batch is in flight or waits for its phase 2");
  WarmUp report;
  // One synthetic stream per (stream, view with patterns); every device's
  // views get `streams` streams, as a station of that many wearers per
  // device kind would send.
  struct SyntheticView {
    std::size_t view;
    int new_per_tick;  // samples a tick brings at the device's rate
  };
  std::vector<SyntheticView> views;
  for (std::size_t v = 0; v < library_.views.size(); ++v) {
    const ChannelView& view = library_.views[v];
    const config::DeviceProfile* device = config_.device_by_id(view.device);
    if (view.longest_pattern == 0 || device == nullptr) continue;
    const int per_tick = static_cast<int>(
        std::ceil(device->sample_rate_hz * static_cast<double>(tick_ms_) / 1000.0));
    views.push_back({v, std::max(1, per_tick)});
  }
  if (streams == 0 || views.empty()) return report;
  const double warm_up_start = now();

  const std::size_t slices = streams * views.size();
  std::vector<std::uint64_t> keys(slices);
  for (std::size_t i = 0; i < slices; ++i) keys[i] = kWarmUpKeyBit | i;
  try {
    int ticks_before = 0;  // of the rounds before
    for (std::size_t round = 0; round < std::size(kRoundTicks); ++round) {
      if (round == kRoundForgottenBefore) backend_->forget_streams(keys);
      // Each round into the other batch buffer, as end_search() swaps them.
      std::swap(searching_, searched_);
      kernels::SearchBatch& batch = searching_.batch;
      kernels::SearchResult& result = searching_.result;
      const double started = now();
      batch.streams.clear();
      std::size_t data_size = 0;
      for (std::size_t i = 0; i < slices; ++i) {
        const SyntheticView& synthetic = views[i % views.size()];
        const ChannelView& view = library_.views[synthetic.view];
        const std::int64_t history = view.longest_pattern - 1;
        kernels::StreamSlice slice;
        slice.profile = view.profile;
        slice.dims = static_cast<int>(view.channel_names.size());
        slice.first_new =
            history + static_cast<std::int64_t>(ticks_before) * synthetic.new_per_tick;
        slice.first_index = slice.first_new - history;
        slice.length = static_cast<int>(history) + kRoundTicks[round] * synthetic.new_per_tick;
        slice.stream_key = keys[i];
        slice.offset = data_size;
        slice.omitted = backend_->held_samples(slice);
        data_size += slice.data_size();
        batch.streams.push_back(slice);
      }
      if (batch.data.size() < data_size) batch.data.resize(data_size);
      const std::vector<float>& wave = wave_table();
      for_each_stream_item(batch.streams.size(), [&](std::size_t s, int) {
        const kernels::StreamSlice& slice = batch.streams[s];
        const int present = slice.length - slice.omitted;
        float* out = batch.data.data() + slice.offset;
        for (int d = 0; d < slice.dims; ++d) {
          const std::uint64_t seed =
              mix(slice.stream_key * 1315423911ULL + static_cast<std::uint64_t>(d));
          for (int k = 0; k < present; ++k)
            out[static_cast<std::size_t>(d) * static_cast<std::size_t>(present) +
                static_cast<std::size_t>(k)] =
                synthetic_sample(wave, seed, slice.first_index + slice.omitted + k);
        }
      });
      const double searched_from = now();
      backend_->search_into(batch, result);
      const double ended = now();
      report.buffer_growths += result.stats.buffer_growths;
      report.matches = std::max(report.matches, result.matches.size());
      if (report.batches == 0) report.first_ms = (ended - started) * 1000.0;
      report.last_ms = (ended - started) * 1000.0;
      ++report.batches;
      ticks_before += kRoundTicks[round];
      // GW_ENGINE_BATCH_LOG: a comment line per warm-up batch (start, slices,
      // values sent, ms in all, search ms, matches, buffer growths).
      if (batch_log_)
        batch_log_.write(fmt::format("# warm-up {:.3f} {} {} {:.2f} {:.2f} {} {}\n", started,
                                     batch.streams.size(), data_size, (ended - started) * 1000.0,
                                     (ended - searched_from) * 1000.0, result.matches.size(),
                                     result.stats.buffer_growths));
    }
  } catch (const kernels::SearchDeviceLost& lost) {
    // The GPU is gone from the multi-device backend: counted and noted as a
    // real batch's loss is; the warm-up ends here.
    note_devices_lost(lost.what(), lost.devices());
    abandon_warm_up(keys);
    throw;
  } catch (...) {
    abandon_warm_up(keys);
    throw;
  }
  report.slices = slices;
  clear_warm_up_batches();
  backend_->forget_streams(keys);
  report.seconds = now() - warm_up_start;
  warm_up_report_ = report;
  return report;
}

void Engine::clear_warm_up_batches() {
  for (BatchState* state : {&searching_, &searched_}) {
    state->batch.streams.clear();
    state->result.matches.clear();
    state->result.stats = {};
  }
}

void Engine::abandon_warm_up(const std::vector<std::uint64_t>& keys) {
  // Nothing of the synthetic streams stays behind, whatever the backend
  // does next.
  clear_warm_up_batches();
  try {
    backend_->forget_streams(keys);
  } catch (...) {
  }
}

}  // namespace gw::pipeline
