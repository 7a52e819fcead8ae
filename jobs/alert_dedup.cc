#include "jobs/alert_dedup.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <utility>

#include "common/error.h"
#include "kernels/hashtable/hash_functions.h"
#include "kernels/hashtable/hash_table_views.h"  // kMaxNodeCapacity

namespace gw::pipeline {

namespace ht = kernels::hashtable;

namespace {

// FNV-1a 64: a hash of the pattern name that is the same in every build and
// process (std::hash is not), so keys are reproducible in tests and tools.
std::uint64_t fnv1a64(const std::string& text) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

}  // namespace

std::uint64_t delete_keys(ht::HashTableBackend& table, const std::vector<ht::HashKey>& keys) {
  if (keys.empty()) return 0;
  std::vector<ht::HashOp> ops(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ops[i].key = keys[i];
    ops[i].kind = ht::OpKind::kDelete;
  }
  std::uint64_t deleted = 0;
  for (const ht::HashResult& result : table.run_batch(ops))
    if (result.status == ht::OpStatus::kDeleted) ++deleted;
  return deleted;
}

std::vector<ht::HashResult> run_inserts_growing_pool(ht::HashTableBackend& table,
                                                     const std::vector<ht::HashOp>& ops,
                                                     std::uint64_t* growths,
                                                     double* growth_seconds) {
  std::vector<ht::HashResult> results = table.run_batch(ops);
  std::vector<std::size_t> pending;
  for (;;) {
    pending.clear();
    for (std::size_t i = 0; i < results.size(); ++i) {
      if (results[i].status == ht::OpStatus::kInvalidOp)
        throw Error("hash table: insert returned invalid_op (internal error)");
      if (results[i].status == ht::OpStatus::kPoolExhausted) pending.push_back(i);
    }
    if (pending.empty()) return results;

    // Room for every pending insert, at least doubling so a stream of small
    // batches does not reserve once per batch.
    const std::uint64_t capacity = table.node_capacity();
    if (capacity >= ht::kMaxNodeCapacity)
      throw Error("hash table: node pool is full at the 32-bit limit of " +
                  std::to_string(ht::kMaxNodeCapacity) + " nodes");
    std::uint64_t wanted = std::max<std::uint64_t>(capacity * 2, table.size() + pending.size());
    wanted = std::max<std::uint64_t>(wanted, 64);
    const auto growth_start = std::chrono::steady_clock::now();
    table.reserve(std::min<std::uint64_t>(wanted, ht::kMaxNodeCapacity));
    if (growths) ++*growths;
    if (growth_seconds)
      *growth_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - growth_start).count();

    // Resubmit only the failed inserts. They changed nothing, so running them
    // in a later batch is still a valid linearization: one that may now find
    // a key another insert of the first batch put in (kDuplicate).
    std::vector<ht::HashOp> retry;
    retry.reserve(pending.size());
    for (std::size_t i : pending) retry.push_back(ops[i]);
    const std::vector<ht::HashResult> retried = table.run_batch(retry);
    for (std::size_t j = 0; j < pending.size(); ++j) results[pending[j]] = retried[j];
  }
}

AlertDeduplicator::AlertDeduplicator(std::unique_ptr<ht::HashTableBackend> table,
                                     const AlertDedupOptions& options)
    : table_(std::move(table)), options_(options) {
  if (!table_) throw Error("alert dedup: no hash table backend");
  if (!(options_.bucket_s > 0) || !std::isfinite(options_.bucket_s))
    throw Error("alert dedup: bucket_s must be a positive number of seconds");
  if (!(options_.retention_s >= 0) || !std::isfinite(options_.retention_s))
    throw Error("alert dedup: retention_s must be >= 0 seconds");
}

std::int64_t AlertDeduplicator::event_bucket(double t_end) const {
  const double bucket = std::floor(t_end / options_.bucket_s);
  // A non-finite or absurd t_end cannot come from a real stream; it gets a
  // fixed bucket rather than undefined behaviour in the conversion.
  if (!std::isfinite(bucket) || std::fabs(bucket) > 9.0e18) return 0;
  return static_cast<std::int64_t>(bucket);
}

ht::HashKey AlertDeduplicator::event_key(const Alert& candidate) const {
  std::uint64_t key = ht::mix64(fnv1a64(candidate.pattern));
  key = ht::mix64(key ^ (0x9e3779b97f4a7c15ull + candidate.wearer));
  key = ht::mix64(key ^ static_cast<std::uint64_t>(event_bucket(candidate.t_end)));
  return key;
}

std::vector<bool> AlertDeduplicator::admit(const std::vector<Alert>& candidates) {
  std::vector<ht::HashOp> ops(candidates.size());
  std::vector<std::int64_t> buckets(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    buckets[i] = event_bucket(candidates[i].t_end);
    ops[i].key = event_key(candidates[i]);
    ops[i].value = static_cast<ht::HashValue>(buckets[i]);
    ops[i].kind = ht::OpKind::kInsert;
  }
  std::vector<bool> admitted(candidates.size(), false);
  if (ops.empty()) return admitted;

  const std::vector<ht::HashResult> results =
      run_inserts_growing_pool(*table_, ops, &counters_.pool_growths, &counters_.pool_growth_s);
  // A key that some op of this batch inserted was absent before the batch,
  // so every candidate with it belongs to one new event: the first of them in
  // batch order is the one admitted.
  std::unordered_map<ht::HashKey, std::size_t> first_of_new_key;
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (results[i].status != ht::OpStatus::kInserted &&
        results[i].status != ht::OpStatus::kDuplicate)
      throw Error(std::string("alert dedup: unexpected insert status ") +
                  ht::to_string(results[i].status));
    if (results[i].status == ht::OpStatus::kInserted) first_of_new_key.emplace(ops[i].key, i);
  }
  for (std::size_t i = 0; i < results.size(); ++i) {
    auto it = first_of_new_key.find(ops[i].key);
    if (it != first_of_new_key.end() && it->second > i) it->second = i;
  }
  for (const auto& [key, i] : first_of_new_key) {
    admitted[i] = true;
    const Alert& c = candidates[i];
    const std::uint64_t stream = std::uint64_t{c.wearer} << 16 | c.device;
    keys_by_stream_[stream].by_bucket[buckets[i]].push_back(key);
  }
  counters_.admitted += first_of_new_key.size();
  counters_.duplicates += candidates.size() - first_of_new_key.size();
  return admitted;
}

void AlertDeduplicator::take_expired(BucketKeys& buckets, double horizon,
                                     std::vector<ht::HashKey>& out, std::size_t max_keys) const {
  auto it = buckets.begin();
  // Bucket b covers [b * bucket_s, (b + 1) * bucket_s); it expires once its
  // end is at or before the horizon.
  while (it != buckets.end() && out.size() < max_keys &&
         static_cast<double>(it->first + 1) * options_.bucket_s <= horizon) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    it = buckets.erase(it);
  }
}

std::uint64_t AlertDeduplicator::expire(double now_s) {
  std::vector<ht::HashKey> expired;
  for (auto& [stream, keys] : keys_by_stream_)
    take_expired(keys.by_bucket, now_s - options_.retention_s, expired);
  const std::uint64_t deleted = delete_keys(*table_, expired);
  counters_.expired += deleted;
  return deleted;
}

std::uint64_t AlertDeduplicator::expire_streams(const std::vector<StreamClock>& clocks,
                                                std::size_t max_keys) {
  std::vector<ht::HashKey> expired;
  for (const StreamClock& clock : clocks) {
    const std::uint64_t stream = std::uint64_t{clock.wearer} << 16 | clock.device;
    auto it = keys_by_stream_.find(stream);
    if (it == keys_by_stream_.end()) continue;
    StreamKeys& keys = it->second;
    if (clock.now_s < keys.last_now_s) {
      for (const auto& bucket : keys.by_bucket)
        expired.insert(expired.end(), bucket.second.begin(), bucket.second.end());
      keys.by_bucket.clear();
    } else {
      take_expired(keys.by_bucket, clock.now_s - options_.retention_s, expired, max_keys);
    }
    keys.last_now_s = clock.now_s;
  }
  const std::uint64_t deleted = delete_keys(*table_, expired);
  counters_.expired += deleted;
  return deleted;
}

}  // namespace gw::pipeline
