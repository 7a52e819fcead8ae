// The CPU search backend: the UCR Suite window search (kernels/ucr_search.h)
// for every (slice, pattern, dim pair), spread over a persistent worker pool.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "common/error.h"
#include "kernels/search.h"
#include "kernels/spring.h"
#include "kernels/ucr_search.h"
#include "common/worker_pool.h"

namespace gw::kernels {
namespace {

// One independent piece of a search: all new windows of one stream dim of
// one slice against one pattern dim.
struct WorkItem {
  std::uint32_t slice = 0;
  std::uint32_t pattern = 0;
  std::uint32_t pair = 0;  // index into Pattern::pairs
  int first_end = 0;       // first window end, relative to the slice's sample 0
  int envelope = -1;       // index into Plan::envelopes, -1 without LB_Keogh EC
};

// The data envelope of one stream dim of one slice for one band. Every pair
// that reads this stream dim with this band shares it (in W1 that is 7
// pattern dims x 16 patterns), so it is computed once per search.
struct EnvelopeTask {
  std::uint32_t slice = 0;
  std::uint16_t stream_dim = 0;
  int band = 0;
  std::size_t offset = 0;  // into the backend's envelope buffers; slice.length values
};

// Streaming-mode state of one (stream, pattern, pair): the SPRING column.
struct SpringColumn {
  std::vector<SpringCell> cells;
  std::int64_t next = -1;  // first sample not yet consumed
};

// One (slice, streaming pattern, pair): advance its column over the new samples.
struct StreamingItem {
  std::uint32_t slice = 0;
  std::uint32_t pattern = 0;
  std::uint32_t pair = 0;
  int first_new = 0;  // relative to the slice's sample 0
  SpringColumn* column = nullptr;
};

struct Plan {
  std::vector<WorkItem> items;
  std::vector<StreamingItem> streaming;
  std::vector<EnvelopeTask> envelopes;
  std::size_t envelope_values = 0;
};

void validate(const SearchBatch& batch) {
  for (std::size_t s = 0; s < batch.streams.size(); ++s) {
    const StreamSlice& slice = batch.streams[s];
    const std::size_t count =
        static_cast<std::size_t>(std::max(slice.dims, 0)) * std::max(slice.length, 0);
    if (slice.dims < 0 || slice.length < 0 || slice.offset > batch.data.size() ||
        batch.data.size() - slice.offset < count) {
      throw Error("search batch: slice " + std::to_string(s) +
                  " does not fit the batch data (use SearchBatch::add_slice)");
    }
    // This backend keeps no history (held_samples() is 0): every sample travels.
    if (slice.omitted != 0)
      throw Error("search batch: slice " + std::to_string(s) + " omits " +
                  std::to_string(slice.omitted) + " samples the CPU backend does not hold");
  }
}

class CpuBackend : public SearchBackend {
 public:
  CpuBackend(int threads, PruningOptions pruning)
      : pruning_(pruning),
        pool_(threads, "gw-cpu-search"),
        searchers_(pool_.size()),
        envelope_scratch_(pool_.size()) {}

  std::string name() const override { return "cpu (" + std::to_string(pool_.size()) + " threads)"; }

  void set_library(std::shared_ptr<const PatternLibrary> library) override {
    std::vector<std::vector<PreparedQuery>> prepared;
    if (library) {
      validate_library(*library);
      prepared.reserve(library->patterns.size());
      for (const Pattern& pattern : library->patterns) {
        std::vector<PreparedQuery> dims;
        dims.reserve(pattern.dim_count);
        for (int j = 0; j < pattern.dim_count; ++j) {
          dims.push_back(
              prepare_query(pattern.dims.data() + static_cast<std::size_t>(j) * pattern.length,
                            pattern.length, pattern.band, pattern.znorm));
        }
        prepared.push_back(std::move(dims));
      }
    }
    library_ = std::move(library);
    prepared_ = std::move(prepared);
    spring_columns_.clear();
  }

  void forget_streams(const std::vector<std::uint64_t>& stream_keys) override {
    for (const std::uint64_t key : stream_keys)
      spring_columns_.erase(spring_columns_.lower_bound({key, 0, 0}),
                            spring_columns_.lower_bound({key + 1, 0, 0}));
  }

  SearchResult search(const SearchBatch& batch) override {
    SearchResult result;
    if (!library_) return result;
    validate(batch);
    const Plan plan = make_plan(batch);
    const std::vector<WorkItem>& items = plan.items;
    std::vector<std::vector<Match>> streaming_matches(plan.streaming.size());
    std::vector<SearchStats> streaming_stats(pool_.size());
    if (!plan.streaming.empty()) {
      std::atomic<std::size_t> next_streaming{0};
      pool_.run([&](int worker) {
        SearchStats stats;
        for (;;) {
          const std::size_t index = next_streaming.fetch_add(1, std::memory_order_relaxed);
          if (index >= plan.streaming.size()) break;
          advance_spring(batch, plan.streaming[index], &streaming_matches[index], &stats);
        }
        streaming_stats[worker] = stats;
      });
    }

    envelope_upper_.resize(plan.envelope_values);
    envelope_lower_.resize(plan.envelope_values);
    if (!plan.envelopes.empty()) {
      std::atomic<std::size_t> next_envelope{0};
      pool_.run([&](int worker) {
        for (;;) {
          const std::size_t index = next_envelope.fetch_add(1, std::memory_order_relaxed);
          if (index >= plan.envelopes.size()) break;
          const EnvelopeTask& task = plan.envelopes[index];
          const StreamSlice& slice = batch.streams[task.slice];
          const float* series = batch.data.data() + slice.offset +
                                static_cast<std::size_t>(task.stream_dim) * slice.length;
          sliding_envelope(series, slice.length, task.band, envelope_upper_.data() + task.offset,
                           envelope_lower_.data() + task.offset, &envelope_scratch_[worker]);
        }
      });
    }

    std::vector<std::vector<Match>> item_matches(items.size());
    std::vector<SearchStats> worker_stats(pool_.size());
    std::atomic<std::size_t> next_item{0};
    pool_.run([&](int worker) {
      WindowSearcher& searcher = searchers_[worker];
      // Counted locally: neighbouring entries of worker_stats share a cache line.
      SearchStats stats;
      std::vector<WindowHit> hits;
      for (;;) {
        const std::size_t index = next_item.fetch_add(1, std::memory_order_relaxed);
        if (index >= items.size()) break;
        const WorkItem& item = items[index];
        const StreamSlice& slice = batch.streams[item.slice];
        const Pattern& pattern = library_->patterns[item.pattern];
        const DimPair& pair = pattern.pairs[item.pair];
        const float* series = batch.data.data() + slice.offset +
                              static_cast<std::size_t>(pair.stream_dim) * slice.length;
        const float* upper = nullptr;
        const float* lower = nullptr;
        if (item.envelope >= 0) {
          upper = envelope_upper_.data() + plan.envelopes[item.envelope].offset;
          lower = envelope_lower_.data() + plan.envelopes[item.envelope].offset;
        }
        hits.clear();
        searcher.search(prepared_[item.pattern][pair.pattern_dim], series, slice.length,
                        item.first_end, pattern.threshold, pattern.max_matches_per_pair, pruning_,
                        &hits, &stats, upper, lower);
        std::vector<Match>& out = item_matches[index];
        out.reserve(hits.size());
        for (const WindowHit& hit : hits) {
          Match match;
          match.slice = item.slice;
          match.pattern = item.pattern;
          match.pattern_dim = pair.pattern_dim;
          match.stream_dim = pair.stream_dim;
          match.end = slice.first_index + hit.end;
          match.start = match.end - pattern.length + 1;
          match.distance = static_cast<float>(std::sqrt(hit.distance_sq));
          out.push_back(match);
        }
      }
      worker_stats[worker] = stats;
    });

    std::size_t total = 0;
    for (const auto& matches : item_matches) total += matches.size();
    for (const auto& matches : streaming_matches) total += matches.size();
    result.matches.reserve(total);
    for (const auto* group : {&item_matches, &streaming_matches})
      for (const auto& matches : *group)
        result.matches.insert(result.matches.end(), matches.begin(), matches.end());
    sort_and_cap_matches(result.matches, *library_);
    for (const SearchStats& stats : streaming_stats) result.stats.add(stats);
    for (const SearchStats& stats : worker_stats) result.stats.add(stats);
    return result;
  }

 private:
  // Every (slice, pattern of the slice's profile, pair on an existing stream
  // dim) that has at least one window end to search, and the envelopes they
  // need.
  Plan make_plan(const SearchBatch& batch) {
    Plan plan;
    std::vector<WorkItem>& items = plan.items;
    std::map<std::tuple<std::uint32_t, std::uint16_t, int>, int> envelope_index;
    for (std::size_t s = 0; s < batch.streams.size(); ++s) {
      const StreamSlice& slice = batch.streams[s];
      for (std::size_t p = 0; p < library_->patterns.size(); ++p) {
        const Pattern& pattern = library_->patterns[p];
        if (pattern.profile != slice.profile) continue;
        if (pattern.mode == SearchMode::kStreaming) {
          plan_streaming(slice, s, p, &plan);
          continue;
        }
        const std::int64_t first_end =
            std::max<std::int64_t>(slice.first_new - slice.first_index, pattern.length - 1);
        if (first_end > static_cast<std::int64_t>(slice.length) - 1) continue;
        for (std::size_t k = 0; k < pattern.pairs.size(); ++k) {
          if (pattern.pairs[k].stream_dim >= slice.dims) continue;
          WorkItem item;
          item.slice = static_cast<std::uint32_t>(s);
          item.pattern = static_cast<std::uint32_t>(p);
          item.pair = static_cast<std::uint32_t>(k);
          item.first_end = static_cast<int>(first_end);
          if (pruning_.lb_keogh_ec) {
            const auto key = std::make_tuple(item.slice, pattern.pairs[k].stream_dim, pattern.band);
            auto found = envelope_index.find(key);
            if (found == envelope_index.end()) {
              EnvelopeTask task;
              task.slice = item.slice;
              task.stream_dim = pattern.pairs[k].stream_dim;
              task.band = pattern.band;
              task.offset = plan.envelope_values;
              plan.envelope_values += static_cast<std::size_t>(slice.length);
              found = envelope_index.emplace(key, static_cast<int>(plan.envelopes.size())).first;
              plan.envelopes.push_back(task);
            }
            item.envelope = found->second;
          }
          items.push_back(item);
        }
      }
    }
    return plan;
  }

  // Streaming items of one slice and pattern; the columns are created here,
  // before the workers run, so the workers never touch the map.
  void plan_streaming(const StreamSlice& slice, std::size_t s, std::size_t p, Plan* plan) {
    const Pattern& pattern = library_->patterns[p];
    const std::int64_t first_new = std::max(slice.first_new, slice.first_index);
    const std::int64_t end = slice.first_index + slice.length;
    if (first_new >= end) return;
    for (std::size_t k = 0; k < pattern.pairs.size(); ++k) {
      if (pattern.pairs[k].stream_dim >= slice.dims) continue;
      SpringColumn& column = spring_columns_[{slice.stream_key, static_cast<std::uint32_t>(p),
                                              static_cast<std::uint32_t>(k)}];
      if (column.next != first_new)
        column.cells.assign(static_cast<std::size_t>(pattern.length),
                            SpringCell{std::numeric_limits<float>::infinity(), 0});
      column.next = end;
      plan->streaming.push_back({static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(p),
                                 static_cast<std::uint32_t>(k),
                                 static_cast<int>(first_new - slice.first_index), &column});
    }
  }

  // SPRING over the item's new samples (kernels/spring.h; the CUDA kernel
  // computes the same cells in another loop order, bit for bit).
  void advance_spring(const SearchBatch& batch, const StreamingItem& item,
                      std::vector<Match>* out, SearchStats* stats) const {
    const StreamSlice& slice = batch.streams[item.slice];
    const Pattern& pattern = library_->patterns[item.pattern];
    const DimPair& pair = pattern.pairs[item.pair];
    const float* x = batch.data.data() + slice.offset +
                     static_cast<std::size_t>(pair.stream_dim) * slice.length;
    const float* q = pattern.dims.data() + static_cast<std::size_t>(pair.pattern_dim) * pattern.length;
    const double t = pattern.threshold;
    const float cutoff_sq =
        std::isinf(t) ? std::numeric_limits<float>::infinity() : static_cast<float>(t * t);
    std::vector<SpringCell>& col = item.column->cells;
    for (int rel = item.first_new; rel < slice.length; ++rel) {
      const std::int64_t abs = slice.first_index + rel;
      const SpringCell fresh{0.f, abs};  // D(t, -1) = 0: a match may start here
      SpringCell left = fresh;
      SpringCell diag = fresh;
      for (int k = 0; k < pattern.length; ++k) {
        const SpringCell up = col[static_cast<std::size_t>(k)];
        const SpringCell cell = spring_cell(spring_cost(x[rel], q[k]), diag, left, up);
        diag = up;
        col[static_cast<std::size_t>(k)] = cell;
        left = cell;
      }
      if (left.d <= cutoff_sq) {
        Match match;
        match.slice = item.slice;
        match.pattern = item.pattern;
        match.pattern_dim = pair.pattern_dim;
        match.stream_dim = pair.stream_dim;
        match.end = abs;
        match.start = left.start;
        match.distance = std::sqrt(left.d);
        out->push_back(match);
      }
    }
    const auto samples = static_cast<std::uint64_t>(slice.length - item.first_new);
    stats->windows += samples;
    stats->cells += samples * static_cast<std::uint64_t>(pattern.length);
  }

  const PruningOptions pruning_;
  std::map<std::tuple<std::uint64_t, std::uint32_t, std::uint32_t>, SpringColumn> spring_columns_;
  std::shared_ptr<const PatternLibrary> library_;
  std::vector<std::vector<PreparedQuery>> prepared_;  // [pattern][pattern dim]
  WorkerPool pool_;
  std::vector<WindowSearcher> searchers_;               // one per worker
  std::vector<std::vector<int>> envelope_scratch_;      // one per worker
  std::vector<float> envelope_upper_, envelope_lower_;  // kept to reuse their memory
};

}  // namespace

std::unique_ptr<SearchBackend> make_cpu_backend(int threads, PruningOptions pruning) {
  return std::make_unique<CpuBackend>(worker_count(threads), pruning);
}

}  // namespace gw::kernels
