// The one search interface (faiss-style): a CPU implementation and, when built
// with CUDA, a GPU implementation that must return the same results.
//
// Semantics (docs/search.md, "Window mode"):
// for every searched window end t of a stream slice and every (pattern dim j,
// stream dim i) pair of a pattern that applies to the slice's profile, the
// window is the m samples ending at t of stream dim i; optionally both the
// query and each window are z-normalised with population mean and std (a window
// with std 0 normalises to all zeros); distance = sqrt of the minimal sum of
// squared differences over warping paths inside the Sakoe-Chiba band r.
// Of all windows of one (slice, pattern, j, i) with distance <= threshold the
// backend returns the best `max_matches_per_pair` ordered by (distance, end);
// lower bounds and early abandoning only skip work and never change that set.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace gw::kernels {

// kWindow: Moazeni's sliding windows of length m (Moazeni 2013, §7.4.1;
// docs/search.md).
// kStreaming: open-begin subsequence DTW (SPRING, Sakurai et al. 2007; cell
// arithmetic in kernels/spring.h): per (stream, pattern dim, stream dim) one
// column of m cells is kept between batches and advanced by each new sample;
// the match ending at sample t is the best subsequence ending there (any
// length, start reported), distance = sqrt of its path sum. No band and no
// z-normalisation in this mode.
enum class SearchMode : std::uint8_t { kWindow = 0, kStreaming = 1 };

struct DimPair {
  std::uint16_t pattern_dim = 0;  // j
  std::uint16_t stream_dim = 0;   // i
};

// A Sakoe-Chiba band ratio R as samples for length m: r = floor(R * m),
// at most m - 1 (docs/search.md).
inline int band_samples(double ratio, int length) {
  return std::min(static_cast<int>(std::floor(ratio * length)), length - 1);
}

struct Pattern {
  std::uint32_t profile = 0;  // applies to slices with this profile id
  int length = 0;             // m >= 2
  int band = 0;               // r in samples, 0 <= r < m (floor(R * m))
  bool znorm = true;
  SearchMode mode = SearchMode::kWindow;
  float threshold = std::numeric_limits<float>::infinity();  // per-pair distance cutoff
  int max_matches_per_pair = 64;                               // p >= 1
  int dim_count = 0;                                           // k
  std::vector<float> dims;       // dim-major: dims[j * length + s]; raw (the backend normalises)
  std::vector<DimPair> pairs;    // which (j, i) to compare; i < slice dims
};

struct PatternLibrary {
  std::vector<Pattern> patterns;
  int max_length() const;
};

// One stream's samples in a batch. Windows end at every absolute index t with
// max(first_new, first_index + m - 1) <= t <= first_index + length - 1.
struct StreamSlice {
  std::uint32_t profile = 0;
  int dims = 0;
  int length = 0;               // samples in this slice
  std::int64_t first_index = 0; // absolute sample index of the slice's sample 0
  std::int64_t first_new = 0;   // first window end to search (earlier ones were searched before)
  std::size_t offset = 0;       // slice sample s of dim d is batch.data[offset + d * length + s]
  // Names the stream across batches (streaming mode keeps state per stream):
  // the state continues when first_new is the sample after the last one
  // searched, and restarts at first_new otherwise (new stream, gap).
  std::uint64_t stream_key = 0;
  // Leading samples of the slice left out of the batch data because the
  // backend already holds them (SearchBackend::held_samples); 0 = every
  // sample present. Sample s >= omitted of dim d is at
  // data[offset + d * (length - omitted) + s - omitted]. At most
  // first_new - first_index: new samples always travel.
  int omitted = 0;
  // Values of this slice in SearchBatch::data.
  std::size_t data_size() const {
    return static_cast<std::size_t>(dims) * static_cast<std::size_t>(length - omitted);
  }
};

struct SearchBatch {
  std::vector<StreamSlice> streams;
  std::vector<float> data;
  // Appends a slice; `sample_major` holds length x dims values (values[s * dims + d]).
  void add_slice(std::uint32_t profile, int dims, const float* sample_major, int length,
                 std::int64_t first_index, std::int64_t first_new, std::uint64_t stream_key = 0);
};

// Writes `length` x `dims` sample-major values (values[s * dims + d]) to
// `dim_major` in a slice's layout (dim_major[d * length + s]). What add_slice
// does after sizing; a caller that lays out the slices itself (offsets, then
// data sized once) fills different slices from different threads with it.
void transpose_to_dim_major(const float* sample_major, int length, int dims, float* dim_major);

struct Match {
  std::uint32_t slice = 0;    // index into SearchBatch::streams
  std::uint32_t pattern = 0;  // index into PatternLibrary::patterns
  std::uint16_t pattern_dim = 0;
  std::uint16_t stream_dim = 0;
  std::int64_t end = 0;       // absolute index of the window's last sample
  std::int64_t start = 0;     // absolute index of the first sample (window mode: end - m + 1)
  float distance = 0;
};

// Work counters; they describe effort, not results, and may differ by backend.
struct SearchStats {
  std::uint64_t windows = 0;          // windows considered
  std::uint64_t pruned_kim = 0;
  std::uint64_t pruned_keogh_eq = 0;  // query envelope vs window
  std::uint64_t pruned_keogh_ec = 0;  // window envelope vs query
  std::uint64_t dtw_full = 0;         // DTWs run to the end
  std::uint64_t dtw_abandoned = 0;
  std::uint64_t cells = 0;            // DTW cells evaluated
  // Non-zero when the backend allocated or grew buffers for this search
  // (since its last one: preparing this batch's upload included; a search
  // run again for a full result buffer allocates too): the search's time
  // holds one-off work and says little about the next batch of its size.
  // Only zero against non-zero means anything: the count comes from a
  // process-wide allocation counter (another user of the GPUs allocating
  // meanwhile adds to it; a multi-device backend sums its members' counts),
  // so it may over-count, never under-counts. Always 0 on the CPU backend,
  // whose buffers are plain host vectors.
  std::uint64_t buffer_growths = 0;
  void add(const SearchStats& o);
};

struct SearchResult {
  // Sorted by (slice, pattern, pattern_dim, stream_dim, distance, end).
  std::vector<Match> matches;
  SearchStats stats;
};

// Which pruning steps run; all on by default. Turning any off must not change
// the matches (tests rely on it).
struct PruningOptions {
  bool lb_kim = true;
  bool lb_keogh_eq = true;
  bool lb_keogh_ec = true;
  bool early_abandon = true;
};

// Throws gw::Error naming the pattern when the library breaks a Pattern
// contract (see SearchBackend::set_library). Shared by every backend.
void validate_library(const PatternLibrary& library);

// The SearchResult order: (slice, pattern, pattern dim, stream dim, distance, end).
bool match_result_order(const Match& a, const Match& b);
// Puts matches in SearchResult order and keeps the best max_matches_per_pair
// of every (slice, pattern, pattern dim, stream dim). Shared by every backend.
void sort_and_cap_matches(std::vector<Match>& matches, const PatternLibrary& library);
// The capping step alone, for matches already in SearchResult order.
void cap_sorted_matches(std::vector<Match>& matches, const PatternLibrary& library);

class SearchBackend {
 public:
  virtual ~SearchBackend() = default;
  virtual std::string name() const = 0;
  // Replaces the pattern library; takes effect for the next search().
  // Not thread-safe against a concurrent search().
  // Throws gw::Error naming the pattern when the library breaks a Pattern
  // contract (length < 2, band outside [0, m), p < 1, NaN threshold,
  // dim_count < 1, dims not dim_count * length values, pattern_dim >=
  // dim_count); the previous library then stays in effect. nullptr means an
  // empty library.
  virtual void set_library(std::shared_ptr<const PatternLibrary> library) = 0;
  // Searches one batch; synchronous; callable from one thread at a time.
  // A pair whose stream_dim is not below a slice's dims is skipped for that
  // slice (no match, no error). Throws gw::Error when a slice does not fit
  // the batch's data (only possible if it was not built by add_slice).
  virtual SearchResult search(const SearchBatch& batch) = 0;
  // The same into `result` (its contents are replaced). A caller that keeps
  // one SearchResult across batches lets a backend reuse the storage of
  // result.matches: W1 batches return millions of matches, and a fresh
  // allocation of that size costs page faults every batch.
  virtual void search_into(const SearchBatch& batch, SearchResult& result) {
    result = search(batch);
  }
  // Resident history (optional). A backend that keeps every stream's latest
  // samples between batches (by stream_key, in the order its batches were
  // searched) returns how many leading samples of a planned `slice` (its
  // shape and stream_key; offset and data are not read) it already holds
  // from earlier batches, so the caller may leave them out
  // (StreamSlice::omitted). The default holds nothing (0). The answer stays
  // true until the next search_into() or prepare(), which must come from the
  // same thread; held samples must have the values they had when they
  // travelled. A batch that omits samples the backend does not hold makes
  // search() throw gw::Error.
  virtual int held_samples(const StreamSlice& slice) const {
    (void)slice;
    return 0;
  }
  // Optional pipelining: starts moving `next`'s data toward the device (the
  // CUDA backend: host staging and the host->device copy on a second stream)
  // while another thread runs search() / search_into() of the batch before
  // it, so the copy of batch k+1 overlaps the compute of batch k. The caller
  // then passes the same `next` object, unchanged, to search_into(). At most
  // one batch ahead, in batch order; a prepared batch that is never searched
  // only costs a full upload of the next one. Backends without a device do
  // nothing.
  virtual void prepare(const SearchBatch& next) { (void)next; }
  // The streams of `stream_keys` are gone (their keys may name new streams
  // later): state kept for them between batches may be freed, and
  // held_samples() says 0 for them from now on. Called between searches,
  // not beside search_into() (the engine calls it while planning its next
  // batch). The default keeps nothing to free.
  virtual void forget_streams(const std::vector<std::uint64_t>& stream_keys) { (void)stream_keys; }
};

// threads <= 0 means std::thread::hardware_concurrency(). The backend keeps a
// pool of threads - 1 workers for its lifetime; the thread calling search()
// works as the last one.
std::unique_ptr<SearchBackend> make_cpu_backend(int threads, PruningOptions pruning = {});

// kind: "cpu", "cuda" or "auto" (CUDA when built and a GPU is present, else
// CPU). `note` receives a one-line explanation of the choice. Throws gw::Error
// for "cuda" when no CUDA backend is available.
// `devices`: the GPUs to search on (search.devices); empty = every visible
// one. Two or more make one backend over all of them
// (kernels/multi_device_backend.h). Throws gw::Error naming a device that is
// not visible. The CPU backend ignores it.
std::unique_ptr<SearchBackend> make_backend(const std::string& kind, int threads,
                                            const std::vector<int>& devices, std::string* note);
// The same on the first visible GPU only (one-off searches: `gaitwatch
// search`, history searches).
std::unique_ptr<SearchBackend> make_backend(const std::string& kind, int threads, std::string* note);

}  // namespace gw::kernels
