#include "history/history_search.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <tuple>

#include "common/error.h"
#include "pipeline/baseline.h"

namespace gw::pipeline {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Window ends of different runs are compared in samples computed from device
// times; this absorbs the rounding of those times.
constexpr double kSampleSlack = 1e-6;
// The first slice holds about this many window lengths per result wanted:
// enough for k well-separated windows and a first bound.
constexpr int kFirstSliceWindows = 4;

HistoryPattern compile_single(const config::Config& config, const config::PatternConfig& pc) {
  if (pc.mode != config::PatternMode::kWindow)
    throw Error("pattern '" + pc.name + "' runs in " + config::name(pc.mode) +
                " mode; the history search needs a window-mode pattern");
  const config::DeviceProfile* device = config.device_by_name(pc.device);
  if (!device) throw Error("pattern '" + pc.name + "': unknown device '" + pc.device + "'");
  bool positive = false;
  for (const auto& e : pc.examples) positive = positive || !e.negative;
  if (!positive) throw Error("pattern '" + pc.name + "' has no positive example");
  config::Config single = config;
  single.patterns = {pc};
  HistoryPattern out;
  out.library = compile_library(single);
  out.device_channels = static_cast<int>(device->channels.size());
  return out;
}

// One window that may still make the top k.
struct Candidate {
  double distance;
  std::uint32_t wearer;
  std::uint16_t device;
  double t_end;
  double t_start;
  double rate;
  int example;
  std::int64_t run;
  std::int64_t end;  // index of the last sample in its run
  std::vector<DimCandidate> edges;
};

// Whether two windows lie within `zone` samples of each other: by sample
// index within one run, by device time across runs of one stream (a gap, a
// restart or a clock jump lies between them); never across streams.
bool within(const Candidate& a, const Candidate& b, double zone) {
  if (a.wearer != b.wearer || a.device != b.device) return false;
  if (a.run == b.run) return static_cast<double>(std::llabs(a.end - b.end)) <= zone;
  return std::abs(a.t_end - b.t_end) * a.rate <= zone + kSampleSlack;
}

bool candidate_order(const Candidate& a, const Candidate& b) {
  return std::tie(a.distance, a.wearer, a.device, a.t_end, a.example) <
         std::tie(b.distance, b.wearer, b.device, b.t_end, b.example);
}

// Greedy selection over candidates in candidate_order: a candidate is taken
// unless a taken one of the same stream ends within `zone` samples of it.
// Stops after `k` are taken. Returns indices into `sorted`.
std::vector<std::size_t> greedy_select(const std::vector<Candidate>& sorted, int k, double zone) {
  std::vector<std::size_t> taken;
  for (std::size_t i = 0; i < sorted.size() && static_cast<int>(taken.size()) < k; ++i) {
    const Candidate& c = sorted[i];
    const bool excluded = std::any_of(taken.begin(), taken.end(),
                                      [&](std::size_t t) { return within(sorted[t], c, zone); });
    if (!excluded) taken.push_back(i);
  }
  return taken;
}

// Where a slice of the batch came from.
struct SliceSource {
  std::uint32_t wearer;
  std::uint16_t device;
  HistoryChunk chunk;  // metadata only: the window times are computed from it
  std::int64_t first_index;
  int length;
  // A normalised pattern: window ends before this (an index of the chunk's
  // run) are not searched, the baseline being learned from later samples.
  std::int64_t first_end = std::numeric_limits<std::int64_t>::min();
};

// A normalised pattern's baseline of the stream being searched: learned from
// the stream's view samples from the range's start on, in time order, as a
// stream replayed from there into a daemon learns it.
struct StreamBaseline {
  BaselineLearner learner;
  config::ChannelBaseline baseline;
  std::int64_t learned_run = -1;  // the run and index after its last learned sample
  std::int64_t learned_at = 0;
  std::int64_t fed_run = -1;  // the run and index after the last view sample read
  std::int64_t fed_until = 0;
  std::int64_t begun_run = -1;  // the relearning run this learning began with, if any
  bool learned() const { return learned_run >= 0; }
};

// The last samples of the previous chunk of the stream being searched, so
// windows (and the transforms' history) continue across chunk boundaries.
struct Carry {
  std::int64_t run = -1;
  std::int64_t next_offset = 0;
  int rows = 0;
  std::vector<float> raw;  // rows x device channels
};

class Search {
 public:
  Search(const HistoryStore& store, const HistoryPattern& pattern, kernels::SearchBackend& backend,
         const HistorySearchRequest& request, const HistoryProgressFn& progress,
         const HistoryCancelFn& cancelled)
      : store_(store),
        pattern_(pattern),
        backend_(backend),
        request_(request),
        progress_fn_(progress),
        cancelled_fn_(cancelled),
        view_(pattern.view()),
        m_(pattern.length()),
        dims_(static_cast<int>(pattern.pattern().home_channel.size())) {
    const CompiledPattern& cp = pattern.pattern();
    for (const auto& e : cp.examples)
      if (!e.negative) positives_.push_back(e.kernel);
    const auto& pairs = pattern.library.kernel_library->patterns[positives_.front()].pairs;
    one_pair_per_dim_ = static_cast<int>(pairs.size()) == dims_;
    exclusion_ = m_ / 2;
    lead_ = view_.history + m_ - 1;
    slice_limit_ = std::min(request_.slice_samples, static_cast<std::size_t>(kFirstSliceWindows) *
                                                        static_cast<std::size_t>(request_.k) *
                                                        static_cast<std::size_t>(m_));
    result_.exclusion_samples = exclusion_;
  }

  HistorySearchResult run() {
    if (request_.k < 1) throw Error("history search: k must be >= 1");
    std::vector<HistoryStreamSummary> streams;
    for (const auto& s : store_.streams()) {
      if (s.device != view_.device) continue;
      if (!request_.wearers.empty() && std::find(request_.wearers.begin(), request_.wearers.end(),
                                                 s.wearer) == request_.wearers.end())
        continue;
      if (s.channels != pattern_.device_channels) {
        result_.warnings.push_back("wearer " + std::to_string(s.wearer) + " device " +
                                   std::to_string(s.device) + ": the history holds " +
                                   std::to_string(s.channels) + " channels, the device profile " +
                                   std::to_string(pattern_.device_channels) + "; skipped");
        continue;
      }
      streams.push_back(s);
    }
    // The samples to search, for progress: a listing per stream (metadata only).
    for (const auto& s : streams)
      for (const auto& c : store_.list_chunks(s.wearer, s.device, range_from(s), request_.to))
        progress_.samples_total += static_cast<std::uint64_t>(c.samples);

    if (request_.from < request_.to) {
      for (const auto& s : streams) {
        carry_ = Carry{};
        baseline_ = fresh_baseline(s.sample_rate_hz);
        for (HistoryChunk& chunk :
             store_.list_chunks(s.wearer, s.device, range_from(s), request_.to)) {
          if (pending_samples_ >= slice_limit_ && !run_slice()) return finish();
          add_chunk(s, std::move(chunk));
        }
      }
      if (!run_slice()) return finish();
    }
    progress_.fraction = 1.0;
    if (progress_fn_ && !reported_complete_) progress_fn_(progress_);
    return finish();
  }

 private:
  StreamBaseline fresh_baseline(double sample_rate_hz) const {
    StreamBaseline b;
    if (view_.normalise.enabled)
      b.learner = BaselineLearner(view_.normalise, static_cast<int>(view_.channel_names.size()),
                                  sample_rate_hz);
    return b;
  }

  // The earliest time whose samples a window in range may read (lead-in).
  double range_from(const HistoryStreamSummary& s) const {
    return request_.from - static_cast<double>(lead_) / s.sample_rate_hz;
  }

  void add_chunk(const HistoryStreamSummary& s, HistoryChunk chunk) {
    try {
      store_.load_values(chunk);
    } catch (const Error& e) {
      // Deleted by retention since the listing, or damaged: hours of search
      // do not fail for it. It counts as searched; no window spans it.
      result_.warnings.push_back(std::string(e.what()) + "; skipped");
      pending_samples_ += static_cast<std::size_t>(chunk.samples);
      carry_ = Carry{};
      return;
    }
    ++result_.chunks;
    const auto width = static_cast<std::size_t>(chunk.channels);
    const bool continues = carry_.run == chunk.run && carry_.next_offset == chunk.run_offset;
    const int carried = continues ? carry_.rows : 0;
    std::vector<float> raw;
    raw.reserve((static_cast<std::size_t>(carried) + static_cast<std::size_t>(chunk.samples)) *
                width);
    if (carried > 0) raw = carry_.raw;
    raw.insert(raw.end(), chunk.values.begin(), chunk.values.end());
    const int rows = carried + chunk.samples;

    // The next chunk's carry: the last lead_ raw rows.
    const int keep = std::min(lead_, rows);
    carry_.run = chunk.run;
    carry_.next_offset = chunk.run_offset + chunk.samples;
    carry_.rows = keep;
    carry_.raw.assign(
        raw.end() - static_cast<std::ptrdiff_t>(static_cast<std::size_t>(keep) * width), raw.end());

    pending_samples_ += static_cast<std::size_t>(chunk.samples);
    std::vector<float> view_values;
    view_samples(view_, raw.data(), rows, chunk.channels, view_values);
    const int length = rows - view_.history;
    const std::int64_t first_index = chunk.run_offset - carried + view_.history;
    std::int64_t first_end = std::numeric_limits<std::int64_t>::min();
    // A normalised pattern learns from every view sample, also those of a
    // chunk (or run) too short for a window.
    if (view_.normalise.enabled) {
      // Where the daemon's engine learned the stream's baseline again (a
      // device restart, a daemon start), so does the search.
      if (chunk.run_relearns && baseline_.begun_run != chunk.run) {
        baseline_ = fresh_baseline(chunk.sample_rate_hz);
        baseline_.begun_run = chunk.run;
      }
      if (length <= 0 || !learn_baseline(chunk, view_values, first_index, length)) return;
      apply_baseline(baseline_.baseline, view_values.data(), static_cast<std::size_t>(length));
      if (baseline_.learned_run == chunk.run) first_end = baseline_.learned_at;
    }
    if (length < m_) return;  // no window ends in this chunk
    batch_.add_slice(view_.profile, static_cast<int>(view_.channel_names.size()),
                     view_values.data(), length, first_index, chunk.run_offset);
    chunk.values.clear();
    chunk.values.shrink_to_fit();
    sources_.push_back({s.wearer, s.device, std::move(chunk), first_index, length, first_end});
  }

  // Feeds the learner the view samples of the chunk it has not read yet
  // (a chunk repeats the end of its run's previous one) whose device time is
  // at or after the range's start. True once learned.
  bool learn_baseline(const HistoryChunk& chunk, const std::vector<float>& view_values,
                      std::int64_t first_index, int length) {
    if (baseline_.learned()) return true;
    const auto width = static_cast<std::int64_t>(view_.channel_names.size());
    const std::int64_t end = first_index + length;
    std::int64_t from =
        baseline_.fed_run == chunk.run ? std::max(first_index, baseline_.fed_until) : first_index;
    baseline_.fed_run = chunk.run;
    baseline_.fed_until = std::max(from, end);
    while (from < end && chunk.time_of(from - chunk.run_offset) < request_.from) ++from;
    if (from >= end) return false;
    const int read = baseline_.learner.add(
        view_values.data() + static_cast<std::size_t>((from - first_index) * width),
        static_cast<int>(end - from));
    if (!baseline_.learner.learned()) return false;
    baseline_.baseline = baseline_.learner.finish();
    baseline_.learned_run = chunk.run;
    baseline_.learned_at = from + read;
    return true;
  }

  // Searches the pending slice; false when cancelled first.
  bool run_slice() {
    if (cancelled_fn_ && cancelled_fn_()) {
      result_.cancelled = true;
      return false;
    }
    if (!batch_.streams.empty()) search_batch();
    progress_.samples += pending_samples_;
    pending_samples_ = 0;
    // Nothing to search (no stream, empty range) is done at once.
    progress_.fraction = progress_.samples_total == 0
                             ? 1.0
                             : std::min(1.0, static_cast<double>(progress_.samples) /
                                                 static_cast<double>(progress_.samples_total));
    ++result_.slices;
    reported_complete_ = progress_.samples == progress_.samples_total;
    if (progress_fn_) progress_fn_(progress_);
    // Slices grow from small to slice_samples: the first ones establish a
    // bound early, so the backend can prune the rest of the history.
    slice_limit_ = std::min(request_.slice_samples, slice_limit_ * 2);
    return true;
  }

  void search_batch() {
    int longest = 1;
    for (const auto& s : sources_) {
      longest = std::max(longest, s.length);
      const std::int64_t first_end =
          std::max<std::int64_t>(s.chunk.run_offset, s.first_index + m_ - 1);
      progress_.windows += static_cast<std::uint64_t>(
          std::max<std::int64_t>(0, s.first_index + s.length - first_end));
    }
    auto library = std::make_shared<kernels::PatternLibrary>();
    for (const std::size_t kernel : positives_) {
      kernels::Pattern p = pattern_.library.kernel_library->patterns[kernel];
      // Every edge of a window within the bound is within it too (f >= 1);
      // the slack keeps float rounding in the backend from cutting one.
      p.threshold = std::isfinite(bound_) ? static_cast<float>(bound_ * (1 + 1e-4) + 1e-6)
                                          : std::numeric_limits<float>::infinity();
      p.max_matches_per_pair = longest;  // never binds: at most one match per window end
      library->patterns.push_back(std::move(p));
    }
    backend_.set_library(library);
    kernels::SearchResult found = backend_.search(batch_);
    result_.stats.add(found.stats);

    // Regroup the single-dim matches by (slice, example, window end).
    std::sort(found.matches.begin(), found.matches.end(),
              [](const kernels::Match& a, const kernels::Match& b) {
                return std::tie(a.slice, a.pattern, a.end, a.pattern_dim, a.stream_dim) <
                       std::tie(b.slice, b.pattern, b.end, b.pattern_dim, b.stream_dim);
              });
    const CompiledPattern& cp = pattern_.pattern();
    std::vector<DimCandidate> group;
    for (std::size_t at = 0; at < found.matches.size();) {
      const kernels::Match& head = found.matches[at];
      std::size_t next = at;
      group.clear();
      for (; next < found.matches.size() && found.matches[next].slice == head.slice &&
             found.matches[next].pattern == head.pattern && found.matches[next].end == head.end;
           ++next) {
        const kernels::Match& x = found.matches[next];
        group.push_back({x.end, x.pattern_dim, x.stream_dim, x.distance, x.start});
      }
      at = next;
      if (static_cast<int>(group.size()) < dims_)
        continue;  // some dim had no window within the bound
      Combination best;
      if (one_pair_per_dim_) {
        // nr = 0 (or a dim without neighbours): the assignment is forced and
        // the group holds each dim's home edge once, in dim order.
        for (const auto& e : group) best.distance += e.distance;
        best.edges = group;
      } else {
        best = combine_matches(group, cp.home_channel, cp.config.alpha);
      }
      if (static_cast<int>(best.edges.size()) < dims_ || best.distance > bound_) continue;
      const SliceSource& source = sources_[head.slice];
      if (head.end < source.first_end) continue;  // before the baseline was learned
      const double t_end = source.chunk.time_of(head.end - source.chunk.run_offset);
      const double t_start = source.chunk.time_of(head.end - m_ + 1 - source.chunk.run_offset);
      if (t_start < request_.from || t_end >= request_.to) continue;
      pool_.push_back({best.distance, source.wearer, source.device, t_end, t_start,
                       source.chunk.sample_rate_hz, static_cast<int>(head.pattern),
                       source.chunk.run, head.end, std::move(best.edges)});
    }
    batch_ = kernels::SearchBatch{};
    sources_.clear();
    tighten();
  }

  // A bound no window of the final top k exceeds: the k-th distance of a
  // greedy selection with twice the exclusion zone (plus a sample for the
  // difference between sample index and device time within a run). Such a
  // selection Q has no two windows of one stream within 2z of each other,
  // so one window of the final selection excludes at most one of Q;
  // processing windows by distance, the final greedy has therefore taken at
  // least |Q| = k windows by the time it reaches Q's k-th distance.
  // (docs/design.md)
  void tighten() {
    std::sort(pool_.begin(), pool_.end(), candidate_order);
    const auto taken = greedy_select(pool_, request_.k, 2.0 * exclusion_ + 1);
    if (static_cast<int>(taken.size()) == request_.k)
      bound_ = std::min(bound_, pool_[taken.back()].distance);
    while (!pool_.empty() && pool_.back().distance > bound_) pool_.pop_back();
  }

  HistorySearchResult finish() {
    std::sort(pool_.begin(), pool_.end(), candidate_order);
    const CompiledPattern& cp = pattern_.pattern();
    for (const std::size_t i : greedy_select(pool_, request_.k, exclusion_)) {
      const Candidate& c = pool_[i];
      HistoryMatch match;
      match.wearer = c.wearer;
      match.device = c.device;
      match.t_start = c.t_start;
      match.t_end = c.t_end;
      match.distance = c.distance;
      match.example = c.example;
      for (const auto& e : c.edges)
        match.dims.push_back(
            {e.pattern_dim, e.stream_dim,
             view_.channel_names[static_cast<std::size_t>(e.stream_dim)], e.distance,
             e.stream_dim != cp.home_channel[static_cast<std::size_t>(e.pattern_dim)]});
      result_.matches.push_back(std::move(match));
    }
    result_.progress = progress_;
    return std::move(result_);
  }

  const HistoryStore& store_;
  const HistoryPattern& pattern_;
  kernels::SearchBackend& backend_;
  const HistorySearchRequest& request_;
  const HistoryProgressFn& progress_fn_;
  const HistoryCancelFn& cancelled_fn_;
  const ChannelView& view_;
  const int m_;
  const int dims_;
  int exclusion_ = 0;
  int lead_ = 0;
  std::vector<std::size_t> positives_;  // kernel pattern of each positive example
  bool one_pair_per_dim_ = false;

  Carry carry_;
  StreamBaseline baseline_;  // a normalised pattern's, of the stream being searched
  kernels::SearchBatch batch_;
  std::vector<SliceSource> sources_;
  std::size_t pending_samples_ = 0;
  std::size_t slice_limit_ = 0;
  bool reported_complete_ = false;
  double bound_ = kInf;
  std::vector<Candidate> pool_;
  HistoryProgress progress_;
  HistorySearchResult result_;
};

}  // namespace

HistoryPattern history_pattern_from_config(const config::Config& config,
                                           const std::string& pattern_name) {
  for (const auto& pc : config.patterns)
    if (pc.name == pattern_name) return compile_single(config, pc);
  std::string known;
  for (const auto& pc : config.patterns) known += (known.empty() ? "" : ", ") + pc.name;
  throw Error("no pattern '" + pattern_name + "' in " + config.source_file +
              " (patterns: " + (known.empty() ? "none" : known) + ")");
}

HistoryPattern history_pattern_from_example(const config::Config& config,
                                            const std::string& device_name,
                                            const sensors::Recording& example,
                                            const ExampleOptions& options) {
  const config::DeviceProfile* device = config.device_by_name(device_name);
  if (!device) throw Error("no device '" + device_name + "' in " + config.source_file);
  if (std::abs(example.sample_rate_hz - device->sample_rate_hz) > 1e-6 * device->sample_rate_hz)
    throw Error("the example " + example.source + " is sampled at " +
                std::to_string(example.sample_rate_hz) + " Hz, device '" + device->name + "' at " +
                std::to_string(device->sample_rate_hz) + " Hz");
  if (example.samples() < 2) throw Error("the example must have at least 2 samples");
  if (!(options.band >= 0 && options.band <= 1)) throw Error("band must be in [0, 1]");
  if (options.nr < 0) throw Error("nr must be >= 0");
  if (!(options.alpha >= 1)) throw Error("alpha must be >= 1");
  for (const auto& name : example.channel_names)
    if (std::find(device->channels.begin(), device->channels.end(), name) == device->channels.end())
      throw Error("device '" + device->name + "' has no channel '" + name + "'");

  config::PatternConfig pc;
  pc.name = "example " + example.source;
  pc.kind = "other";
  pc.severity = "info";
  pc.device = device->name;
  pc.channels = example.channel_names;
  pc.dim_count = static_cast<int>(example.channels());
  pc.length = static_cast<int>(example.samples());
  pc.band = options.band;
  pc.znorm = options.znorm;
  pc.nr = options.nr;
  pc.alpha = options.alpha;
  pc.threshold = 1;  // unused: the history search sets its own bound
  pc.min_dims = pc.dim_count;
  config::PatternExample e;
  e.template_file = example.source;
  const std::size_t n = example.samples();
  e.raw.resize(example.channels() * n);
  for (std::size_t d = 0; d < example.channels(); ++d)
    for (std::size_t s = 0; s < n; ++s) e.raw[d * n + s] = example.at(s, d);
  pc.examples.push_back(std::move(e));
  return compile_single(config, pc);
}

HistorySearchResult search_history(const HistoryStore& store, const HistoryPattern& pattern,
                                   kernels::SearchBackend& backend,
                                   const HistorySearchRequest& request,
                                   const HistoryProgressFn& progress,
                                   const HistoryCancelFn& cancelled) {
  return Search(store, pattern, backend, request, progress, cancelled).run();
}

nlohmann::json history_match_json(const HistoryMatch& match, std::size_t rank) {
  nlohmann::json dims = nlohmann::json::array();
  for (const auto& d : match.dims)
    dims.push_back({{"pattern_dim", d.pattern_dim},
                    {"stream_dim", d.stream_dim},
                    {"channel", d.channel},
                    {"distance", d.distance},
                    {"switched", d.switched}});
  return {{"rank", rank},
          {"wearer", match.wearer},
          {"device", match.device},
          {"t_start", match.t_start},
          {"t_end", match.t_end},
          {"distance", match.distance},
          {"example", match.example},
          {"dims", dims}};
}

nlohmann::json history_matches_json(const std::vector<HistoryMatch>& matches) {
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < matches.size(); ++i) out.push_back(history_match_json(matches[i], i + 1));
  return out;
}

}  // namespace gw::pipeline
