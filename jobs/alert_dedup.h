// Alert de-duplication on the lock-free parallel hash table (Moazeni 2013,
// chapter 4; docs/design.md, "Alert de-duplication"): a candidate alert is
// published only if its event key (wearer, pattern, event bucket) inserts
// into the table as new.
//
// Why a table insert and not a host-side set: the engine hands over all
// candidates of one detection round at once, and one run_batch() of inserts
// decides every one of them, on the GPU when there is one. The table's batch
// linearizability (kernels/hashtable/hash_table.h) is what makes "two
// candidates of one event in the same batch: exactly one is admitted" hold.
//
// Event key: mix(wearer, FNV-1a-64(pattern name), bucket) where
//   bucket = floor(t_end / bucket_s)
// and t_end is the alert's device time. Consequences the caller must know:
//   * Candidates of one event whose t_end fall on both sides of a bucket
//     boundary are admitted once per bucket (at most two alerts for an event
//     shorter than bucket_s).
//   * The key is a 64-bit hash, not an exact packing (a pattern name does
//     not fit in bits): two distinct events collide with probability about
//     n^2 / 2^65 for n live keys, and a collision suppresses the later one.
//   * A bucket's keys live until expire() or expire_stream() removes them; a
//     late candidate of an expired bucket is admitted again.
//   * Device clocks differ between streams (docs/design.md), so expiry can
//     run per stream, each on its own t_end clock (expire_stream()).
//
// Threads: none inside this class; one thread at a time (the table's rule).
// Every call blocks until its batch is done. Errors: gw::Error for invalid
// options and for table failures (a CUDA error, a pool that cannot grow past
// the 32-bit node limit, an unexpected status); data-path outcomes are the
// returned flags and the counters.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/hashtable/hash_table.h"
#include "sinks/alert.h"
#include "pipeline/stream_clock.h"

namespace gw::pipeline {

struct AlertDedupOptions {
  // Length of an event bucket [s]; candidates of one (wearer, pattern) whose
  // t_end fall in the same bucket are one event. > 0.
  double bucket_s = 10.0;
  // How long [s] a bucket's keys stay after the bucket ends, on the t_end
  // clock; expire(now_s) removes buckets that ended before now_s - retention_s.
  // >= 0.
  double retention_s = 600.0;
};

struct AlertDedupCounters {
  std::uint64_t admitted = 0;      // candidates whose key inserted as new
  std::uint64_t duplicates = 0;    // candidates whose key was already present
  std::uint64_t expired = 0;       // keys deleted by expire()
  std::uint64_t pool_growths = 0;  // reserve() calls after kPoolExhausted
  double pool_growth_s = 0;        // wall time of those reserve() calls
};

class AlertDeduplicator {
 public:
  // Takes ownership of `table`, which must be non-null and should be empty:
  // keys already in it count as seen events. Throws gw::Error on bad options.
  AlertDeduplicator(std::unique_ptr<kernels::hashtable::HashTableBackend> table,
                    const AlertDedupOptions& options);

  // Decides every candidate with ONE batch of inserts (plus a resubmission of
  // just the inserts that found the pool exhausted, after growing it: no
  // candidate is dropped for lack of nodes). Returns, per candidate in order,
  // true when it is the first of its event key (publish it) and false when
  // the key was already present or is admitted to an earlier candidate of
  // this batch (suppress it). Within one batch the admitted candidate of a
  // new key is always the first in `candidates` order, whichever insert won
  // inside the table, so the outcome does not depend on thread timing (the
  // daemon and `gaitwatch detect` must publish the same alert). Throws
  // gw::Error on table failure.
  std::vector<bool> admit(const std::vector<Alert>& candidates);

  // Deletes, in ONE batched delete, the keys of every bucket that ended at or
  // before now_s - retention_s (now_s on the t_end clock, e.g. the latest
  // t_end the engine has seen), whatever stream admitted them. Returns the
  // number of keys deleted.
  std::uint64_t expire(double now_s);

  // Per-stream expiry in ONE batched delete: the keys a stream admitted
  // expire on that stream's clock as in expire(). A stream whose clock went
  // back since the previous call (a device restart resets its clock) loses
  // all its keys: buckets of the old clock say nothing about the new one.
  // Streams not listed keep their keys. Returns the number deleted.
  // `max_keys` bounds the routine expiry of one call: whole buckets, oldest
  // first, until at least `max_keys` keys are taken (so at least one
  // bucket). With many streams on one clock a bucket's keys all expire at
  // once (~60,000 at 10,000 W1 wearers); the rest goes in the next calls, a
  // little after its time, never before. A restarted stream's keys always
  // go at once.
  std::uint64_t expire_streams(const std::vector<StreamClock>& clocks,
                               std::size_t max_keys = std::numeric_limits<std::size_t>::max());

  // The key admit() uses for a candidate; exposed for tests and tools.
  kernels::hashtable::HashKey event_key(const Alert& candidate) const;
  std::int64_t event_bucket(double t_end) const;

  const AlertDedupCounters& counters() const { return counters_; }
  const AlertDedupOptions& options() const { return options_; }
  // Keys held now (admitted and not yet expired).
  std::uint64_t live_keys() const { return table_->size(); }
  const kernels::hashtable::HashTableBackend& table() const { return *table_; }

 private:
  std::unique_ptr<kernels::hashtable::HashTableBackend> table_;
  AlertDedupOptions options_;
  AlertDedupCounters counters_;
  using BucketKeys = std::map<std::int64_t, std::vector<kernels::hashtable::HashKey>>;
  struct StreamKeys {
    BucketKeys by_bucket;
    double last_now_s = -std::numeric_limits<double>::infinity();
  };
  // Moves the keys of buckets that ended at or before `horizon` to `out`,
  // whole buckets, oldest first, while `out` holds fewer than `max_keys`.
  void take_expired(BucketKeys& buckets, double horizon, std::vector<kernels::hashtable::HashKey>& out,
                    std::size_t max_keys = std::numeric_limits<std::size_t>::max()) const;

  // Host-side record of the keys inserted, per stream (wearer << 16 |
  // device) and bucket: the table cannot be scanned by bucket, and expiry
  // needs the exact keys to delete.
  std::map<std::uint64_t, StreamKeys> keys_by_stream_;
};

// Deletes `keys` in one batch; returns how many were present.
std::uint64_t delete_keys(kernels::hashtable::HashTableBackend& table,
                          const std::vector<kernels::hashtable::HashKey>& keys);

// Runs `ops` (inserts only) as one batch and resubmits those that returned
// kPoolExhausted after growing the pool, until none does; returns the final
// result of every op. Shared by AlertDeduplicator and SlotIndex. Counts each
// growth in *growths and its wall time in *growth_seconds (either may be
// null). Throws gw::Error when the pool cannot grow further or an op returns
// kInvalidOp.
std::vector<kernels::hashtable::HashResult> run_inserts_growing_pool(
    kernels::hashtable::HashTableBackend& table,
    const std::vector<kernels::hashtable::HashOp>& ops, std::uint64_t* growths,
    double* growth_seconds = nullptr);

}  // namespace gw::pipeline
