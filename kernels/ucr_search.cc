#include "kernels/ucr_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kernels/dtw.h"

namespace gw::kernels {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The sliding window sums are recomputed from scratch this often (in windows)
// so rounding cannot accumulate across a long series.
constexpr int kStatsRefreshInterval = 64;

// Below this std (relative to |mean| + 1) the sliding statistics are not
// trusted to decide "constant or not" (the rule's own limit is 1e-8, see
// is_constant_window); such windows get the exact two-pass mean_std().
constexpr double kSlidingStdTrustLimit = 1e-6;

inline double squared_difference(double a, double b) {
  const double diff = a - b;
  return diff * diff;
}

// Squared distance from x to the interval [low, high] (0 inside it), without
// branches (which side x falls on is unpredictable). Bit-equal to
// squared_difference(x, high) above the interval and (x, low) below it, since
// exactly one of the two terms is non-zero and adding +0 is exact.
inline double distance_to_interval(double x, double low, double high) {
  const double outside = std::max(x - high, 0.0) + std::max(low - x, 0.0);
  return outside * outside;
}

// Normalises one raw sample. Every place that needs a normalised window value
// goes through this one expression, so a lower bound and the DTW it bounds see
// bit-identical inputs.
inline double normalized(double raw, double mean, double inv_std) { return (raw - mean) * inv_std; }

// LB_Kim hierarchy. Every warping path visits each "layer" max(row, col) == a
// at the start and each layer max(m-1-row, m-1-col) == a at the end, so the
// cheapest cell of each layer bounds the path's cost; layers are added while
// the running bound stays at or below `prune_above`. Cell costs are computed
// as the DTW computes them: (query - window)^2.
double lb_kim(const PreparedQuery& query, const float* raw, double mean, double inv_std,
              double prune_above) {
  const int m = query.length;
  const double* q = query.values.data();
  const double t0 = normalized(raw[0], mean, inv_std);
  const double te = normalized(raw[m - 1], mean, inv_std);
  double bound = squared_difference(q[0], t0) + squared_difference(q[m - 1], te);
  if (bound > prune_above || query.kim_layers < 2) return bound;

  const double t1 = normalized(raw[1], mean, inv_std);
  const double te1 = normalized(raw[m - 2], mean, inv_std);
  bound += std::min(
      {squared_difference(q[0], t1), squared_difference(q[1], t0), squared_difference(q[1], t1)});
  bound += std::min({squared_difference(q[m - 1], te1), squared_difference(q[m - 2], te),
                     squared_difference(q[m - 2], te1)});
  if (bound > prune_above || query.kim_layers < 3) return bound;

  const double t2 = normalized(raw[2], mean, inv_std);
  const double te2 = normalized(raw[m - 3], mean, inv_std);
  bound += std::min({squared_difference(q[0], t2), squared_difference(q[1], t2),
                     squared_difference(q[2], t2), squared_difference(q[2], t1),
                     squared_difference(q[2], t0)});
  bound += std::min({squared_difference(q[m - 1], te2), squared_difference(q[m - 2], te2),
                     squared_difference(q[m - 3], te2), squared_difference(q[m - 3], te1),
                     squared_difference(q[m - 3], te)});
  return bound;
}

// Banded DTW (rows = query, columns = window) in O(m * (2r+1)) with two rows.
// After each row the cheapest cell of the row plus cumulative[min(row+r+1, m)]
// bounds every completion (the path still has to cross every row and column
// beyond row + r); the computation stops once that bound exceeds
// `abandon_above`. `cumulative` has m+1 entries, the last 0. Rows hold m+2
// doubles: entry j+1 is column j, entry 0 is the column -1 sentinel. The cell
// recurrence is dtw_reference()'s, so equal inputs give bit-equal results.
double banded_dtw(const double* q, const double* t, int m, int r, const double* cumulative,
                  double abandon_above, double* prev, double* cur, std::uint64_t* cells,
                  bool* abandoned) {
  // Row -1: only the virtual cell (-1, -1) is reachable, with cost 0.
  prev[0] = 0;
  for (int j = 0; j <= std::min(m - 1, r); ++j) prev[j + 1] = kInf;
  std::uint64_t evaluated = 0;
  for (int i = 0; i < m; ++i) {
    const int lo = std::max(0, i - r);
    const int hi = std::min(m - 1, i + r);
    const double qi = q[i];
    cur[lo] = kInf;  // column lo-1 is outside the band (or column -1)
    double left = kInf;
    double row_min = kInf;
    for (int j = lo; j <= hi; ++j) {
      const double diff = qi - t[j];
      const double best_above = std::min(prev[j], prev[j + 1]);
      const double value = diff * diff + std::min(best_above, left);
      cur[j + 1] = value;
      left = value;
      row_min = std::min(row_min, value);
    }
    if (hi + 1 < m) cur[hi + 2] = kInf;  // the next row reads it as "above"
    evaluated += static_cast<std::uint64_t>(hi - lo + 1);
    const double bound = row_min + cumulative[std::min(i + r + 1, m)];
    if (bound > abandon_above) {
      *cells += evaluated;
      *abandoned = true;
      return bound;
    }
    std::swap(prev, cur);
  }
  *cells += evaluated;
  *abandoned = false;
  return prev[m];
}

struct HitOrder {
  bool operator()(const WindowHit& a, const WindowHit& b) const {
    if (a.distance_sq != b.distance_sq) return a.distance_sq < b.distance_sq;
    return a.end < b.end;
  }
};

}  // namespace

template <typename T>
void sliding_envelope(const T* x, int n, int radius, T* upper, T* lower,
                      std::vector<int>* scratch) {
  if (n <= 0) return;
  // Two deques of indices, each in its own n-slot array: every index is
  // pushed once, so the tail never passes n and nothing wraps.
  scratch->resize(2 * static_cast<std::size_t>(n));
  int* max_deque = scratch->data();
  int* min_deque = max_deque + n;
  int max_head = 0, max_tail = 0, min_head = 0, min_tail = 0;
  for (int i = 0; i < n + radius; ++i) {
    if (i < n) {
      while (max_tail > max_head && x[max_deque[max_tail - 1]] <= x[i]) --max_tail;
      max_deque[max_tail++] = i;
      while (min_tail > min_head && x[min_deque[min_tail - 1]] >= x[i]) --min_tail;
      min_deque[min_tail++] = i;
    }
    const int k = i - radius;  // the position whose window [k-r, k+r] is now complete
    if (k < 0) continue;
    while (max_deque[max_head] < k - radius) ++max_head;
    while (min_deque[min_head] < k - radius) ++min_head;
    upper[k] = x[max_deque[max_head]];
    lower[k] = x[min_deque[min_head]];
  }
}

template void sliding_envelope<float>(const float*, int, int, float*, float*, std::vector<int>*);
template void sliding_envelope<double>(const double*, int, int, double*, double*,
                                       std::vector<int>*);

PreparedQuery prepare_query(const float* raw, int m, int band, bool znorm) {
  PreparedQuery query;
  query.length = m;
  query.band = band;
  query.znorm = znorm;
  if (znorm) {
    query.values = znormalize(raw, m);
  } else {
    query.values.assign(raw, raw + m);
  }
  query.upper.resize(m);
  query.lower.resize(m);
  std::vector<int> scratch;
  sliding_envelope(query.values.data(), m, band, query.upper.data(), query.lower.data(), &scratch);

  query.order.resize(m);
  std::iota(query.order.begin(), query.order.end(), 0);
  std::stable_sort(query.order.begin(), query.order.end(), [&](int a, int b) {
    return std::fabs(query.values[a]) > std::fabs(query.values[b]);
  });
  query.sorted_values.resize(m);
  query.sorted_upper.resize(m);
  query.sorted_lower.resize(m);
  for (int k = 0; k < m; ++k) {
    query.sorted_values[k] = query.values[query.order[k]];
    query.sorted_upper[k] = query.upper[query.order[k]];
    query.sorted_lower[k] = query.lower[query.order[k]];
  }
  query.kim_layers = 1;
  while (query.kim_layers < 3 && 2 * query.kim_layers < m - 1) ++query.kim_layers;
  return query;
}

void WindowSearcher::search(const PreparedQuery& query, const float* series, int n, int first_end,
                            double threshold, int max_hits, const PruningOptions& pruning,
                            std::vector<WindowHit>* hits, SearchStats* stats,
                            const float* envelope_upper, const float* envelope_lower) {
  const int m = query.length;
  const int r = query.band;
  if (m < 2 || n < m || max_hits < 1) return;
  if (!(threshold >= 0)) return;  // negative or NaN: nothing can qualify
  const int first = std::max(first_end, m - 1);
  if (first > n - 1) return;
  const double threshold_sq = threshold * threshold;

  // The searched span: the samples of the first window through the last one.
  // Samples before it are never looked at, not even by the envelope.
  const int span_begin = first - m + 1;
  const int span = n - span_begin;
  const float* span_data = series + span_begin;
  // Envelope values of the span's samples (a shared envelope of the whole
  // series may also cover samples before the span: a wider envelope is still
  // a valid, slightly looser bound).
  const float* span_upper = nullptr;
  const float* span_lower = nullptr;
  if (pruning.lb_keogh_ec) {
    if (envelope_upper != nullptr && envelope_lower != nullptr) {
      span_upper = envelope_upper + span_begin;
      span_lower = envelope_lower + span_begin;
    } else {
      env_upper_.resize(span);
      env_lower_.resize(span);
      sliding_envelope(span_data, span, r, env_upper_.data(), env_lower_.data(), &deque_scratch_);
      span_upper = env_upper_.data();
      span_lower = env_lower_.data();
    }
  }
  window_.resize(m);
  bound_eq_.resize(m);
  bound_ec_.resize(m);
  cumulative_.assign(m + 1, 0.0);
  row_a_.resize(m + 2);
  row_b_.resize(m + 2);
  heap_.clear();
  const HitOrder hit_order;
  double* window = window_.data();
  double* bound_eq_by_index = bound_eq_.data();
  double* bound_ec_by_index = bound_ec_.data();
  double* cumulative = cumulative_.data();
  const double inv_m = 1.0 / m;
  SearchStats counts;  // local, so the hot loop keeps them in registers

  double cutoff = threshold_sq;  // min(threshold^2, worst kept hit once max_hits are kept)
  double window_sum = 0;         // sliding sum of the window's samples (znorm only)
  double window_m2 = 0;          // sliding sum of squared deviations from the mean
  const double* q_sorted = query.sorted_values.data();
  const double* q_upper = query.sorted_upper.data();
  const double* q_lower = query.sorted_lower.data();
  const int* order = query.order.data();

  for (int start = 0; start + m <= span; ++start) {
    const float* raw = span_data + start;
    const std::int64_t end = static_cast<std::int64_t>(span_begin) + start + m - 1;
    ++counts.windows;

    double mean = 0;
    double inv_std = 1;
    if (query.znorm) {
      if (start % kStatsRefreshInterval == 0) {
        window_sum = 0;
        for (int k = 0; k < m; ++k) window_sum += raw[k];
        const double fresh_mean = window_sum * inv_m;
        window_m2 = 0;
        for (int k = 0; k < m; ++k) window_m2 += squared_difference(raw[k], fresh_mean);
      } else {
        // Sliding update of the sum and of the sum of squared deviations
        // (Welford's add/remove form): its rounding scales with the window's
        // spread, not with its mean, unlike a plain sum of squares.
        const double incoming = raw[m - 1];
        const double outgoing = raw[-1];
        const double old_mean = window_sum * inv_m;
        window_sum += incoming - outgoing;
        const double new_mean = window_sum * inv_m;
        window_m2 += (incoming - outgoing) * ((incoming - new_mean) + (outgoing - old_mean));
      }
      mean = window_sum * inv_m;
      double std = std::sqrt(std::max(window_m2 * inv_m, 0.0));
      bool constant = false;
      if (!(std >= kSlidingStdTrustLimit * (std::fabs(mean) + 1))) {
        // Near the constant rule's limit: decide exactly as znormalize() does.
        const MeanStd exact = mean_std(raw, m);
        mean = exact.mean;
        std = exact.std;
        constant = exact.constant;
      }
      inv_std = constant ? 0.0 : 1.0 / std;  // a constant window normalises to zeros
    }

    const double prune_above = cutoff + cutoff * kPruneMargin;
    const bool can_prune = prune_above < kInf;

    if (can_prune && pruning.lb_kim &&
        lb_kim(query, raw, mean, inv_std, prune_above) > prune_above) {
      ++counts.pruned_kim;
      continue;
    }

    double bound_eq = 0;
    const bool use_eq = can_prune && pruning.lb_keogh_eq;
    if (use_eq) {
      // Normalises only the points it visits: most windows that get here stop
      // long before the last point.
      for (int k = 0; k < m && bound_eq <= prune_above; ++k) {
        const int index = order[k];
        const double contribution =
            distance_to_interval(normalized(raw[index], mean, inv_std), q_lower[k], q_upper[k]);
        bound_eq_by_index[index] = contribution;
        bound_eq += contribution;
      }
      if (bound_eq > prune_above) {
        ++counts.pruned_keogh_eq;
        continue;
      }
    }

    for (int k = 0; k < m; ++k) window[k] = normalized(raw[k], mean, inv_std);

    double bound_ec = 0;
    const bool use_ec = can_prune && pruning.lb_keogh_ec;
    if (use_ec) {
      const float* env_upper = span_upper + start;
      const float* env_lower = span_lower + start;
      for (int k = 0; k < m && bound_ec <= prune_above; ++k) {
        const int index = order[k];
        const double contribution =
            distance_to_interval(q_sorted[k], normalized(env_lower[index], mean, inv_std),
                                 normalized(env_upper[index], mean, inv_std));
        bound_ec_by_index[index] = contribution;
        bound_ec += contribution;
      }
      if (bound_ec > prune_above) {
        ++counts.pruned_keogh_ec;
        continue;
      }
    }

    double abandon_above = kInf;
    if (can_prune && pruning.early_abandon) {
      abandon_above = prune_above;
      // The tighter of the two bounds, as suffix sums (cumulative_[m] stays 0;
      // with neither bound it stays all zeros and only the row minimum counts).
      const double* contributions = nullptr;
      if (use_eq && use_ec) {
        contributions = bound_eq > bound_ec ? bound_eq_by_index : bound_ec_by_index;
      } else if (use_eq) {
        contributions = bound_eq_by_index;
      } else if (use_ec) {
        contributions = bound_ec_by_index;
      }
      if (contributions != nullptr) {
        for (int k = m - 1; k >= 0; --k) cumulative[k] = cumulative[k + 1] + contributions[k];
      }
    }

    bool abandoned = false;
    const double distance_sq =
        banded_dtw(query.values.data(), window, m, r, cumulative, abandon_above, row_a_.data(),
                   row_b_.data(), &counts.cells, &abandoned);
    if (abandoned) {
      ++counts.dtw_abandoned;
      continue;
    }
    ++counts.dtw_full;
    if (!(distance_sq <= threshold_sq)) continue;

    const WindowHit hit{end, distance_sq};
    if (static_cast<int>(heap_.size()) < max_hits) {
      heap_.push_back(hit);
      std::push_heap(heap_.begin(), heap_.end(), hit_order);
    } else if (hit_order(hit, heap_.front())) {
      std::pop_heap(heap_.begin(), heap_.end(), hit_order);
      heap_.back() = hit;
      std::push_heap(heap_.begin(), heap_.end(), hit_order);
    }
    if (static_cast<int>(heap_.size()) == max_hits) {
      cutoff = std::min(threshold_sq, heap_.front().distance_sq);
    }
  }

  stats->add(counts);
  std::sort_heap(heap_.begin(), heap_.end(), hit_order);
  hits->insert(hits->end(), heap_.begin(), heap_.end());
}

}  // namespace gw::kernels
