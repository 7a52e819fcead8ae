// Shared checks of the hash table tests, run against any HashTableBackend
// (the CPU one in test_hashtable, the GPU one in test_hashtable_gpu): a
// sequential model, batch generators, the per-key linearizability check of
// the batch semantics in kernels/hashtable/hash_table.h, and whole scenarios.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/hashtable/hash_functions.h"
#include "kernels/hashtable/hash_table.h"

namespace gw::kernels::hashtable::testing {

using Factory = std::function<std::unique_ptr<HashTableBackend>(const HashTableConfig&)>;
using Pairs = std::vector<std::pair<HashKey, HashValue>>;

// The sequential semantics every batch must be explainable by.
class SequentialModel {
 public:
  HashResult apply(const HashOp& op) {
    auto found = map_.find(op.key);
    switch (op.kind) {
      case OpKind::kSearch:
        if (found == map_.end()) return {0, OpStatus::kNotFound};
        return {found->second, OpStatus::kFound};
      case OpKind::kInsert:
        if (found != map_.end()) return {found->second, OpStatus::kDuplicate};
        map_.emplace(op.key, op.value);
        return {0, OpStatus::kInserted};
      case OpKind::kDelete: {
        if (found == map_.end()) return {0, OpStatus::kNotFound};
        const HashValue removed = found->second;
        map_.erase(found);
        return {removed, OpStatus::kDeleted};
      }
    }
    return {0, OpStatus::kInvalidOp};
  }
  Pairs contents() const { return Pairs(map_.begin(), map_.end()); }
  std::size_t size() const { return map_.size(); }
  const std::map<HashKey, HashValue>& map() const { return map_; }
  void load(const Pairs& pairs) {
    map_.clear();
    for (const auto& pair : pairs) map_.emplace(pair.first, pair.second);
  }

 private:
  std::map<HashKey, HashValue> map_;
};

inline bool same_result(const HashResult& a, const HashResult& b) {
  return a.status == b.status && a.value == b.value;
}

inline std::string describe(const HashOp& op, const HashResult& result) {
  return std::string(to_string(op.kind)) + "(" + std::to_string(op.key) + ", " +
         std::to_string(op.value) + ") -> " + to_string(result.status) + " " +
         std::to_string(result.value);
}

inline HashKey unit_double_key(double value) { return double_as_key(value); }

// A batch in which every key occurs once: `fresh` draws new keys, existing
// keys come from `model` (so searches and deletes hit about half the time).
inline std::vector<HashOp> distinct_key_batch(std::mt19937_64& rng, const SequentialModel& model,
                                              std::size_t count,
                                              const std::function<HashKey()>& fresh) {
  std::vector<HashKey> existing;
  for (const auto& pair : model.map()) existing.push_back(pair.first);
  std::shuffle(existing.begin(), existing.end(), rng);
  std::set<HashKey> used;
  std::vector<HashOp> ops;
  std::uniform_int_distribution<int> kind(0, 2);
  std::bernoulli_distribution take_existing(0.5);
  std::size_t next_existing = 0;
  while (ops.size() < count) {
    HashOp op;
    op.kind = static_cast<OpKind>(kind(rng));
    if (take_existing(rng) && next_existing < existing.size()) {
      op.key = existing[next_existing++];
    } else {
      op.key = fresh();
    }
    if (!used.insert(op.key).second) continue;
    op.value = rng();
    ops.push_back(op);
  }
  return ops;
}

// Checks, key by key, that the batch's results and the table's final state
// are explainable by some order of the operations on that key. `before` is the
// table before the batch, `after` its contents afterwards.
//
// When the successful inserts of a key carry distinct values (the tests make
// every insert value unique) the check is exact and linear: a key's history
// is a sequence of "present periods" (initial value v0 until the delete that
// returns v0; each inserted value a from its insert to the delete that
// returns a; the one insert never deleted, lasting to the end), in any order,
// separated by absent periods. Otherwise a depth-first search over the orders
// of the key's operations decides (small groups only).
class LinearizabilityChecker {
 public:
  // Returns "" when every key is explainable, else why the first key is not.
  static std::string check(const std::map<HashKey, HashValue>& before,
                           const std::vector<HashOp>& ops, const std::vector<HashResult>& results,
                           const Pairs& after) {
    std::unordered_map<HashKey, std::vector<std::size_t>> by_key;
    for (std::size_t i = 0; i < ops.size(); ++i) by_key[ops[i].key].push_back(i);
    std::map<HashKey, HashValue> final_map(after.begin(), after.end());
    if (final_map.size() != after.size()) return "the final contents hold a key twice";
    // Keys not touched by the batch must be unchanged.
    for (const auto& pair : before)
      if (!by_key.count(pair.first)) {
        auto found = final_map.find(pair.first);
        if (found == final_map.end() || found->second != pair.second)
          return "untouched key " + std::to_string(pair.first) + " changed";
      }
    for (const auto& pair : final_map)
      if (!by_key.count(pair.first) && !before.count(pair.first))
        return "key " + std::to_string(pair.first) + " appeared from nowhere";
    for (const auto& entry : by_key) {
      KeyState start;
      auto initial = before.find(entry.first);
      if (initial != before.end()) start = {true, initial->second};
      KeyState end;
      auto final_entry = final_map.find(entry.first);
      if (final_entry != final_map.end()) end = {true, final_entry->second};
      std::string why;
      bool ok;
      if (distinct_insert_values(ops, results, entry.second)) {
        ok = explain_periods(ops, results, entry.second, start, end, why);
      } else {
        REQUIRE(entry.second.size() <= 12);  // the search below is exponential
        std::vector<char> done(entry.second.size(), 0);
        ok = explain(ops, results, entry.second, done, start, end);
        why = "no order of its operations explains the results";
      }
      if (!ok) {
        std::string message =
            "key " + std::to_string(entry.first) + " is not linearizable (" + why +
            "); before: " + (start.present ? std::to_string(start.value) : "absent") +
            ", after: " + (end.present ? std::to_string(end.value) : "absent") + ";";
        std::size_t shown = 0;
        for (std::size_t i : entry.second)
          if (shown++ < 40) message += " [" + describe(ops[i], results[i]) + "]";
        return message;
      }
    }
    return "";
  }

 private:
  struct KeyState {
    bool present = false;
    HashValue value = 0;
  };

  static bool distinct_insert_values(const std::vector<HashOp>& ops,
                                     const std::vector<HashResult>& results,
                                     const std::vector<std::size_t>& indices) {
    std::set<HashValue> values;
    for (std::size_t i : indices)
      if (results[i].status == OpStatus::kInserted && !values.insert(ops[i].value).second)
        return false;
    return true;
  }

  static bool explain_periods(const std::vector<HashOp>& ops,
                              const std::vector<HashResult>& results,
                              const std::vector<std::size_t>& indices, const KeyState& start,
                              const KeyState& end, std::string& why) {
    std::set<HashValue> inserted;         // values of successful inserts
    std::map<HashValue, int> deleted;     // value -> successful deletes returning it
    std::vector<HashValue> seen_present;  // Found / Duplicate values
    bool needs_absent = false;            // NotFound / PoolExhausted seen
    for (std::size_t i : indices) {
      const HashOp& op = ops[i];
      const HashResult& r = results[i];
      switch (op.kind) {
        case OpKind::kSearch:
          if (r.status == OpStatus::kFound) {
            seen_present.push_back(r.value);
          } else if (r.status == OpStatus::kNotFound) {
            needs_absent = true;
          } else {
            why = "search returned " + std::string(to_string(r.status));
            return false;
          }
          break;
        case OpKind::kInsert:
          if (r.status == OpStatus::kInserted) {
            inserted.insert(op.value);
          } else if (r.status == OpStatus::kDuplicate) {
            seen_present.push_back(r.value);
          } else if (r.status == OpStatus::kPoolExhausted) {
            needs_absent = true;
          } else {
            why = "insert returned " + std::string(to_string(r.status));
            return false;
          }
          break;
        case OpKind::kDelete:
          if (r.status == OpStatus::kDeleted) {
            ++deleted[r.value];
          } else if (r.status == OpStatus::kNotFound) {
            needs_absent = true;
          } else {
            why = "delete returned " + std::string(to_string(r.status));
            return false;
          }
          break;
        default:
          if (r.status != OpStatus::kInvalidOp) {
            why = "an invalid op did not return invalid_op";
            return false;
          }
      }
    }
    // Present periods: the initial value (if any) and every inserted value.
    std::set<HashValue> periods = inserted;
    if (start.present) {
      if (inserted.count(start.value)) {
        why = "an insert succeeded with the value already present";
        return false;
      }
      periods.insert(start.value);
    }
    // Every period but at most one (the last) ends with exactly one delete
    // returning its value; no delete returns anything else.
    std::size_t deletes = 0;
    for (const auto& d : deleted) {
      deletes += d.second;
      if (d.second != 1 || !periods.count(d.first)) {
        why = "a delete returned a value that was never present, or twice";
        return false;
      }
    }
    std::vector<HashValue> open;
    for (HashValue v : periods)
      if (!deleted.count(v)) open.push_back(v);
    if (open.size() > 1) {
      why = "more than one value still present at the end";
      return false;
    }
    if (!open.empty()) {
      if (!end.present || end.value != open[0]) {
        why = "the final state is not the value left present";
        return false;
      }
      // The initial value can only stay open if nothing was inserted.
      if (start.present && open[0] == start.value && !inserted.empty()) {
        why = "inserted while the initial value was never deleted";
        return false;
      }
    } else if (end.present) {
      why = "present at the end although every value was deleted";
      return false;
    }
    for (HashValue v : seen_present)
      if (!periods.count(v)) {
        why = "found or duplicate reported a value that was never present";
        return false;
      }
    // An absent period exists unless the key was present throughout.
    if (needs_absent && start.present && deletes == 0) {
      why = "not_found/pool_exhausted although the key was present throughout";
      return false;
    }
    return true;
  }

  // Applies `op` to `state` if `result` is what the sequential semantics give
  // there; returns false (state untouched) otherwise.
  static bool step(const HashOp& op, const HashResult& result, KeyState& state) {
    switch (op.kind) {
      case OpKind::kSearch:
        if (state.present) return result.status == OpStatus::kFound && result.value == state.value;
        return result.status == OpStatus::kNotFound;
      case OpKind::kInsert:
        if (state.present)
          return result.status == OpStatus::kDuplicate && result.value == state.value;
        if (result.status == OpStatus::kPoolExhausted) return true;  // absent, nothing changed
        if (result.status != OpStatus::kInserted) return false;
        state = {true, op.value};
        return true;
      case OpKind::kDelete:
        if (!state.present) return result.status == OpStatus::kNotFound;
        if (result.status != OpStatus::kDeleted || result.value != state.value) return false;
        state = {false, 0};
        return true;
    }
    return result.status == OpStatus::kInvalidOp;
  }

  static bool explain(const std::vector<HashOp>& ops, const std::vector<HashResult>& results,
                      const std::vector<std::size_t>& indices, std::vector<char>& done,
                      KeyState state, const KeyState& end) {
    bool all_done = true;
    for (std::size_t j = 0; j < indices.size(); ++j) {
      if (done[j]) continue;
      all_done = false;
      KeyState next = state;
      if (!step(ops[indices[j]], results[indices[j]], next)) continue;
      done[j] = 1;
      const bool ok = explain(ops, results, indices, done, next, end);
      done[j] = 0;
      if (ok) return true;
    }
    if (!all_done) return false;
    return state.present == end.present && (!end.present || state.value == end.value);
  }
};

inline std::size_t count_status(const std::vector<HashResult>& results, OpStatus status) {
  return static_cast<std::size_t>(std::count_if(
      results.begin(), results.end(), [&](const HashResult& r) { return r.status == status; }));
}

// Runs one batch and checks it against the batch semantics: linearizable per
// key, structure valid, size consistent. Returns the results.
inline std::vector<HashResult> run_and_check(HashTableBackend& table, SequentialModel& model,
                                             const std::vector<HashOp>& ops) {
  const std::map<HashKey, HashValue> before = model.map();
  const std::uint64_t size_before = table.size();
  std::vector<HashResult> results = table.run_batch(ops);
  REQUIRE(results.size() == ops.size());
  const std::string problems = table.validate();
  INFO(problems);
  REQUIRE(problems.empty());
  const Pairs after = table.contents();
  const std::string linearizability = LinearizabilityChecker::check(before, ops, results, after);
  INFO(linearizability);
  REQUIRE(linearizability.empty());
  REQUIRE(table.size() == after.size());
  REQUIRE(table.size() + count_status(results, OpStatus::kDeleted) ==
          size_before + count_status(results, OpStatus::kInserted));
  model.load(after);
  return results;
}

// ------------------------------------------------------------------ scenarios

// Distinct-key mixed batches give exactly the sequential model's results.
inline void check_distinct_key_batches(const Factory& make, HashTableConfig config, int batches,
                                       std::size_t batch_size, bool unit_double_keys,
                                       std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.5, 0.1);
  std::function<HashKey()> fresh;
  if (unit_double_keys) {
    fresh = [&] {
      double x;
      do x = normal(rng);
      while (!(x >= 0 && x < 1));
      return unit_double_key(x);
    };
  } else {
    fresh = [&] { return rng() >> 20; };  // integer keys, some sharing buckets
  }
  std::unique_ptr<HashTableBackend> table = make(config);
  SequentialModel model;
  for (int b = 0; b < batches; ++b) {
    const std::vector<HashOp> ops = distinct_key_batch(rng, model, batch_size, fresh);
    const std::vector<HashResult> results = table->run_batch(ops);
    REQUIRE(results.size() == ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const HashResult expected = model.apply(ops[i]);
      INFO("batch " << b << " op " << i << ": " << describe(ops[i], results[i]) << ", expected "
                    << to_string(expected.status) << " " << expected.value);
      REQUIRE(same_result(results[i], expected));
    }
    const std::string problems = table->validate();
    INFO(problems);
    REQUIRE(problems.empty());
    REQUIRE(table->size() == model.size());
  }
  REQUIRE(table->contents() == model.contents());
}

// Many threads on a few keys in ONE bucket (every CAS contended): every result
// explainable, no duplicates, counts consistent.
inline void check_same_bucket_contention(const Factory& make, HashTableConfig config, int batches,
                                         int keys, int ops_per_batch, std::uint64_t seed) {
  config.tables = 1;
  config.buckets_per_table = 1;
  std::unique_ptr<HashTableBackend> table = make(config);
  SequentialModel model;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> kind(0, 2);
  std::uniform_int_distribution<int> pick(0, keys - 1);
  HashValue next_value = 1;  // every insert carries a unique value
  for (int b = 0; b < batches; ++b) {
    std::vector<HashOp> ops;
    for (int i = 0; i < ops_per_batch; ++i)
      ops.push_back({static_cast<HashKey>(pick(rng)) * 7919 + 1, next_value++,
                     static_cast<OpKind>(kind(rng))});
    run_and_check(*table, model, ops);
  }
}

// insert / insert / delete / insert of each of many colliding keys in one
// batch: never a duplicate key, always explainable.
inline void check_insert_delete_insert(const Factory& make, HashTableConfig config, int batches,
                                       int keys, std::uint64_t seed) {
  config.tables = 1;
  config.buckets_per_table = 2;  // everything collides into two chains
  std::unique_ptr<HashTableBackend> table = make(config);
  SequentialModel model;
  std::mt19937_64 rng(seed);
  HashValue next_value = 1;
  for (int b = 0; b < batches; ++b) {
    std::vector<HashOp> ops;
    for (int k = 0; k < keys; ++k) {
      const HashKey key = static_cast<HashKey>(k) * 2654435761u + 17;
      ops.push_back({key, next_value++, OpKind::kInsert});
      ops.push_back({key, next_value++, OpKind::kInsert});
      ops.push_back({key, 0, OpKind::kDelete});
      ops.push_back({key, next_value++, OpKind::kInsert});
    }
    if (b % 2 == 1) std::shuffle(ops.begin(), ops.end(), rng);  // also the adjacent order
    const std::vector<HashResult> results = run_and_check(*table, model, ops);
    // Each key: at most one more insert than deletes succeeded.
    REQUIRE(count_status(results, OpStatus::kInserted) <=
            count_status(results, OpStatus::kDeleted) + static_cast<std::size_t>(keys));
  }
}

// An exhausted pool fails exactly the inserts it cannot hold, corrupts
// nothing, and the failed inserts succeed after reserve().
inline void check_pool_exhaustion(const Factory& make, HashTableConfig config, bool exact) {
  config.node_capacity = 100;
  std::unique_ptr<HashTableBackend> table = make(config);
  SequentialModel model;
  std::vector<HashOp> ops;
  for (int k = 0; k < 150; ++k)
    ops.push_back({static_cast<HashKey>(k * 31 + 5), static_cast<HashValue>(k), OpKind::kInsert});
  const std::vector<HashResult> results = run_and_check(*table, model, ops);
  const std::size_t inserted = count_status(results, OpStatus::kInserted);
  const std::size_t exhausted = count_status(results, OpStatus::kPoolExhausted);
  REQUIRE(inserted + exhausted == ops.size());
  REQUIRE(inserted <= 100);
  if (exact) REQUIRE(inserted == 100);
  REQUIRE(table->size() == inserted);
  REQUIRE(table->counters().count(OpStatus::kPoolExhausted) == exhausted);

  // Failed keys are absent; deleting frees nodes for the next batch.
  std::vector<HashOp> retry;
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (results[i].status == OpStatus::kPoolExhausted) retry.push_back(ops[i]);
  std::vector<HashOp> searches;
  for (const HashOp& op : retry) searches.push_back({op.key, 0, OpKind::kSearch});
  for (const HashResult& r : run_and_check(*table, model, searches))
    REQUIRE(r.status == OpStatus::kNotFound);

  table->reserve(200);
  REQUIRE(table->node_capacity() >= 200);
  REQUIRE(table->size() == inserted);
  REQUIRE(table->validate().empty());
  for (const HashResult& r : run_and_check(*table, model, retry))
    REQUIRE(r.status == OpStatus::kInserted);
  REQUIRE(table->size() == 150);
}

// Deleted nodes return to the pool between batches: a small pool sustains a
// long insert/delete churn.
inline void check_reclamation(const Factory& make, HashTableConfig config, int rounds) {
  config.node_capacity = 256;
  std::unique_ptr<HashTableBackend> table = make(config);
  SequentialModel model;
  HashKey next_key = 1;
  std::vector<HashKey> live;
  for (int round = 0; round < rounds; ++round) {
    std::vector<HashOp> ops;
    for (HashKey key : live) ops.push_back({key, 0, OpKind::kDelete});  // frees ~120 nodes
    live.clear();
    for (int k = 0; k < 120; ++k) {  // needs ~120 nodes: only fits if the last round's are back
      live.push_back(next_key);
      ops.push_back({next_key, next_key * 3, OpKind::kInsert});
      ++next_key;
    }
    const std::vector<HashResult> results = run_and_check(*table, model, ops);
    REQUIRE(count_status(results, OpStatus::kPoolExhausted) == 0);
    REQUIRE(table->size() == 120);
  }
}

// load / contents / reserve / clear.
inline void check_host_rebuild(const Factory& make, HashTableConfig config) {
  config.node_capacity = 16;
  std::unique_ptr<HashTableBackend> table = make(config);
  Pairs pairs;
  for (HashKey k = 0; k < 1000; ++k) pairs.emplace_back(k * 977 + 3, k);
  pairs.emplace_back(3, 12345);  // a duplicate of the first key: skipped
  REQUIRE(table->load(pairs) == 1);
  REQUIRE(table->node_capacity() >= 1000);
  REQUIRE(table->size() == 1000);
  REQUIRE(table->validate().empty());
  pairs.pop_back();
  Pairs sorted = pairs;
  std::sort(sorted.begin(), sorted.end());
  REQUIRE(table->contents() == sorted);
  table->reserve(5000);
  REQUIRE(table->node_capacity() == 5000);
  REQUIRE(table->contents() == sorted);
  REQUIRE(table->validate().empty());
  // The rebuilt table works like any other.
  SequentialModel model;
  model.load(pairs);
  std::vector<HashOp> ops;
  for (HashKey k = 0; k < 2000; ++k)
    ops.push_back({k * 977 + 3, k + 7, static_cast<OpKind>(k % 3)});
  run_and_check(*table, model, ops);
  table->clear();
  REQUIRE(table->size() == 0);
  REQUIRE(table->contents().empty());
  REQUIRE(table->validate().empty());
}

inline void check_invalid_op(const Factory& make, HashTableConfig config) {
  std::unique_ptr<HashTableBackend> table = make(config);
  HashOp bad{42, 1, static_cast<OpKind>(7)};
  const std::vector<HashResult> results = table->run_batch({bad, {42, 1, OpKind::kInsert}});
  REQUIRE(results[0].status == OpStatus::kInvalidOp);
  REQUIRE(results[1].status == OpStatus::kInserted);
  REQUIRE(table->counters().count(OpStatus::kInvalidOp) == 1);
  REQUIRE(table->run_batch(std::vector<HashOp>{}).empty());
  REQUIRE(table->size() == 1);
}

}  // namespace gw::kernels::hashtable::testing
