// Private to kernels/: the single-channel window search of the CPU backend,
// the UCR Suite design (Rakthanmanon et al., KDD 2012) for one query against
// one series with optional z-normalisation:
//   online z-normalisation of every window from sliding sums,
//   LB_Kim (first/last points, then up to two more "layers" at each end),
//   LB_Keogh of the window against the query envelope (EQ),
//   LB_Keogh of the query against the window envelope (EC),
//   banded DTW that abandons on the row minimum plus the cumulative bound.
// Every bound is a true lower bound of the DTW the search computes, and a
// window is skipped only when its bound is strictly greater than the cutoff
// (plus a rounding margin), so the hits are those of a brute-force search.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/search.h"

namespace gw::kernels {

// A query (one pattern dim) prepared once per library: normalised values, the
// envelope over +-band and the visiting order for the lower bounds.
struct PreparedQuery {
  int length = 0;  // m >= 2
  int band = 0;    // 0 <= r < m
  bool znorm = true;
  std::vector<double> values;  // znormalize()d when znorm, else the raw values
  std::vector<double> upper;   // upper[k] = max(values[k-r .. k+r]) (clipped to the query)
  std::vector<double> lower;   // lower[k] = min(values[k-r .. k+r])
  // Indices by decreasing |values| (ties by index): the points most likely to
  // contribute come first, so lower bounds cross the cutoff sooner.
  std::vector<int> order;
  std::vector<double> sorted_values;  // values[order[k]]
  std::vector<double> sorted_upper;   // upper[order[k]]
  std::vector<double> sorted_lower;   // lower[order[k]]
  // How many LB_Kim layers per end are valid for this length (1..3): layer a
  // is the set of cells with max(row, col) == a; start and end layers must not
  // share a cell, which needs 2 * (layers - 1) < m - 1.
  int kim_layers = 1;
};

// raw: m values; m >= 2, 0 <= band < m.
PreparedQuery prepare_query(const float* raw, int m, int band, bool znorm);

// Sliding envelope over +-radius (clipped to [0, n)): upper[k] = max(x[k-radius ..
// k+radius]), lower[k] = min(...). O(n) with monotonic deques; `scratch` is reused.
// Instantiated for float (stream data) and double (queries).
template <typename T>
void sliding_envelope(const T* x, int n, int radius, T* upper, T* lower, std::vector<int>* scratch);

struct WindowHit {
  std::int64_t end = 0;    // index of the window's last sample in the searched series
  double distance_sq = 0;  // squared DTW distance
};

// Scratch space plus the search loop. One per worker thread; not thread-safe.
class WindowSearcher {
 public:
  // Searches the windows of `series` (n samples) ending at every e in
  // [max(first_end, m-1), n-1] against `query`. Appends to `hits` the best
  // `max_hits` windows with distance <= threshold, ordered by (distance_sq,
  // end); adds the work done to `stats`. A negative or NaN threshold finds nothing.
  // `envelope_upper`/`envelope_lower`, when given, hold sliding_envelope() of
  // the whole series (n values each) with radius query.band, shared by every
  // query searched against this series; without them the searcher computes
  // the envelope of the searched span itself when LB_Keogh EC is on.
  void search(const PreparedQuery& query, const float* series, int n, int first_end,
              double threshold, int max_hits, const PruningOptions& pruning,
              std::vector<WindowHit>* hits, SearchStats* stats,
              const float* envelope_upper = nullptr, const float* envelope_lower = nullptr);

 private:
  std::vector<float> env_upper_, env_lower_;  // raw envelope of the searched span
  std::vector<int> deque_scratch_;
  std::vector<double> window_;               // the current window, normalised
  std::vector<double> bound_eq_, bound_ec_;  // per-point LB_Keogh contributions
  std::vector<double> cumulative_;           // suffix sums of the tighter one
  std::vector<double> row_a_, row_b_;        // DTW rows
  std::vector<WindowHit> heap_;              // current best hits (max-heap)
};

// The relative margin added to a cutoff before a bound may prune. A bound and
// the DTW it bounds sum the same per-cell costs in different orders, so they
// can differ by a few ulps times m; this margin (far above that) guarantees
// that rounding never prunes a window the full DTW would accept.
inline constexpr double kPruneMargin = 1e-9;

}  // namespace gw::kernels
