// GPU tests of the lock-free parallel hash table (ctest -L gpu): every
// scenario of hashtable_test_support.h against the CUDA implementation, the
// GPU against the CPU implementation on identical batches, and large
// contended batches. Each case prints WARN("skipped: ...") and CTest reports it skipped when
// gaitwatch was built without CUDA or no GPU is present.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/error.h"
#include "kernels/hashtable/hash_functions.h"
#include "kernels/hashtable/hash_table.h"
#include "tests/kernels/hashtable/hashtable_test_support.h"

namespace gw::kernels::hashtable {
namespace {

using testing::Factory;

bool skip_without_gpu() {
  if (gpu_hash_table_available()) return false;
#if defined(GW_HAVE_CUDA_HASHTABLE)
  WARN("skipped: no usable CUDA device");
#else
  WARN("skipped: gaitwatch was built without CUDA");
#endif
  return true;
}

Factory gpu_factory(int block_size = 256) {
  return [block_size](const HashTableConfig& config) {
    HashTableConfig with_block = config;
    with_block.gpu_block_size = block_size;
    return make_gpu_hash_table(with_block);
  };
}

TEST_CASE("gpu: distinct-key mixed batches match the sequential model", "[hashtable][gpu]") {
  if (skip_without_gpu()) return;
  HashTableConfig config;
  config.node_capacity = 1 << 16;
  SECTION("basic table, DEK, integer keys") {
    config.tables = 1;
    config.buckets_per_table = 64;
    testing::check_distinct_key_batches(gpu_factory(), config, 8, 4000, false, 1);
  }
  SECTION("PH[4], SDBM, unit-double keys, the thesis's TA") {
    config.tables = 4;
    config.buckets_per_table = 32;
    config.hash_function = HashFunction::kSdbm;
    config.table_assignment = TableAssignment::kScaledUnitDouble;
    testing::check_distinct_key_batches(gpu_factory(512), config, 8, 4000, true, 2);
  }
  SECTION("PH[320], PJW, mixing TA, small blocks") {
    config.tables = 320;
    config.buckets_per_table = 16;
    config.hash_function = HashFunction::kPjw;
    testing::check_distinct_key_batches(gpu_factory(64), config, 6, 6000, true, 3);
  }
}

TEST_CASE("gpu: heavy same-bucket contention stays linearizable", "[hashtable][gpu]") {
  if (skip_without_gpu()) return;
  HashTableConfig config;
  config.node_capacity = 1 << 15;
  SECTION("16 keys") {
    testing::check_same_bucket_contention(gpu_factory(), config, 20, 16, 20000, 11);
  }
  SECTION("2000 keys") {
    testing::check_same_bucket_contention(gpu_factory(), config, 10, 2000, 20000, 13);
  }
}

TEST_CASE("gpu: insert/insert/delete/insert on colliding keys never leaves duplicates",
          "[hashtable][gpu]") {
  if (skip_without_gpu()) return;
  HashTableConfig config;
  config.node_capacity = 1 << 15;
  testing::check_insert_delete_insert(gpu_factory(), config, 20, 2000, 12);
}

TEST_CASE("gpu: pool exhaustion gives kPoolExhausted exactly and corrupts nothing",
          "[hashtable][gpu]") {
  if (skip_without_gpu()) return;
  testing::check_pool_exhaustion(gpu_factory(), HashTableConfig{}, true);
}

TEST_CASE("gpu: deleted nodes are reclaimed between batches", "[hashtable][gpu]") {
  if (skip_without_gpu()) return;
  HashTableConfig config;
  config.buckets_per_table = 8;
  testing::check_reclamation(gpu_factory(), config, 40);
}

TEST_CASE("gpu: load, contents, reserve and clear", "[hashtable][gpu]") {
  if (skip_without_gpu()) return;
  HashTableConfig config;
  config.tables = 3;
  config.buckets_per_table = 17;
  testing::check_host_rebuild(gpu_factory(), config);
}

TEST_CASE("gpu: an unknown op kind gives kInvalidOp", "[hashtable][gpu]") {
  if (skip_without_gpu()) return;
  testing::check_invalid_op(gpu_factory(), HashTableConfig{});
}

TEST_CASE("gpu and cpu give identical results on identical batches", "[hashtable][gpu]") {
  if (skip_without_gpu()) return;
  HashTableConfig config;
  config.tables = 16;
  config.buckets_per_table = 128;
  config.node_capacity = 1 << 18;
  config.table_assignment = TableAssignment::kScaledUnitDouble;
  config.cpu_threads = 4;
  auto gpu = make_gpu_hash_table(config);
  auto cpu = make_cpu_hash_table(config);
  std::mt19937_64 rng(21);
  std::normal_distribution<double> normal(0.5, 0.05);
  auto fresh = [&] {
    double x;
    do x = normal(rng);
    while (!(x >= 0 && x < 1));
    return double_as_key(x);
  };
  testing::Pairs preload;
  for (int i = 0; i < 50000; ++i) preload.emplace_back(fresh(), rng());
  CHECK(gpu->load(preload) == cpu->load(preload));
  testing::SequentialModel model;
  model.load(cpu->contents());
  for (int b = 0; b < 5; ++b) {
    const std::vector<HashOp> ops = testing::distinct_key_batch(rng, model, 40000, fresh);
    const std::vector<HashResult> from_gpu = gpu->run_batch(ops);
    const std::vector<HashResult> from_cpu = cpu->run_batch(ops);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      INFO("batch " << b << " op " << i << ": gpu " << testing::describe(ops[i], from_gpu[i])
                    << ", cpu " << testing::describe(ops[i], from_cpu[i]));
      REQUIRE(testing::same_result(from_gpu[i], from_cpu[i]));
      model.apply(ops[i]);
    }
    REQUIRE(gpu->validate().empty());
    REQUIRE(gpu->contents() == cpu->contents());
    REQUIRE(gpu->size() == cpu->size());
  }
}

// reserve() grows the pool on the device (no host round trip); the grown
// table must be the one the CPU's host-side growth gives: same results for
// the same batches before and after, same contents, the whole new pool
// usable and nothing handed out twice (validate: free list and chains
// disjoint and together the pool).
TEST_CASE("gpu: a pool grown on the device while in use matches the cpu table",
          "[hashtable][gpu]") {
  if (skip_without_gpu()) return;
  HashTableConfig config;
  config.tables = 4;
  config.buckets_per_table = 64;
  config.node_capacity = 3000;
  // One CPU worker: several claim the free stack in chunks and may report
  // the pool exhausted while another holds unused nodes (hash_table_cpu.cc),
  // and this test fills the pool exactly.
  config.cpu_threads = 1;
  auto gpu = make_gpu_hash_table(config);
  auto cpu = make_cpu_hash_table(config);
  std::mt19937_64 rng(77);
  std::uniform_int_distribution<HashKey> any_key(1, 1u << 30);
  testing::SequentialModel model;
  const auto run_both = [&](const std::vector<HashOp>& ops, const char* stage) {
    const std::vector<HashResult> from_gpu = gpu->run_batch(ops);
    const std::vector<HashResult> from_cpu = cpu->run_batch(ops);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      INFO(stage << " op " << i << ": gpu " << testing::describe(ops[i], from_gpu[i]) << ", cpu "
                 << testing::describe(ops[i], from_cpu[i]));
      REQUIRE(testing::same_result(from_gpu[i], from_cpu[i]));
      if (from_gpu[i].status != OpStatus::kPoolExhausted) model.apply(ops[i]);
    }
    const std::string problems = gpu->validate();
    INFO(stage << ": " << problems);
    REQUIRE(problems.empty());
    REQUIRE(gpu->size() == cpu->size());
    REQUIRE(gpu->contents() == cpu->contents());
    return from_gpu;
  };
  // Churn so the free list is no longer in its initial order: deletes
  // return nodes through limbo between batches.
  for (int b = 0; b < 6; ++b)
    run_both(testing::distinct_key_batch(rng, model, 1500, [&] { return any_key(rng); }),
             "churn");
  // A growth while most of the pool is free: the old free entries move up
  // by the nodes added, and both tables count the same free nodes at once.
  REQUIRE(gpu->node_capacity() - gpu->size() > 1000);
  gpu->reserve(4000);
  cpu->reserve(4000);
  REQUIRE(gpu->node_capacity() == 4000);
  REQUIRE(gpu->size() == cpu->size());
  REQUIRE(gpu->validate().empty());
  REQUIRE(gpu->contents() == cpu->contents());
  run_both(testing::distinct_key_batch(rng, model, 1500, [&] { return any_key(rng); }),
           "churn after a growth with free nodes");
  // Fill the pool to its end, then a batch that finds it exhausted: every
  // insert of it fails (which ones fail when only some do is a race, so the
  // two tables are only compared where the outcome is decided).
  const auto new_inserts = [&](std::uint64_t count) {
    std::vector<HashOp> ops;
    while (ops.size() < count) {
      const HashKey key = any_key(rng) | (1ull << 40);  // never a key of the churn
      if (model.map().count(key)) continue;
      bool repeated = false;
      for (const HashOp& op : ops) repeated = repeated || op.key == key;
      if (!repeated) ops.push_back({key, rng(), OpKind::kInsert});
    }
    return ops;
  };
  for (const HashResult& r : run_both(new_inserts(gpu->node_capacity() - gpu->size()), "fill"))
    REQUIRE(r.status == OpStatus::kInserted);
  const std::vector<HashOp> refused = new_inserts(100);
  for (const HashResult& r : run_both(refused, "full"))
    REQUIRE(r.status == OpStatus::kPoolExhausted);

  // Not a doubling: the new indices must not depend on a power of two.
  gpu->reserve(7777);
  cpu->reserve(7777);
  REQUIRE(gpu->node_capacity() == 7777);
  REQUIRE(gpu->validate().empty());
  REQUIRE(gpu->contents() == cpu->contents());

  // The refused inserts and then exactly the rest of the new pool fit.
  for (const HashResult& r : run_both(refused, "retry")) REQUIRE(r.status == OpStatus::kInserted);
  const std::uint64_t room = gpu->node_capacity() - gpu->size();
  REQUIRE(room == 7777 - 4000 - refused.size());
  for (const HashResult& r : run_both(new_inserts(room), "rest"))
    REQUIRE(r.status == OpStatus::kInserted);
  for (const HashResult& r : run_both(new_inserts(10), "full again"))
    REQUIRE(r.status == OpStatus::kPoolExhausted);
  // A second growth, then churn: the grown pool keeps working (with room
  // for every insert, so that no batch depends on which claims lose a race
  // for the last nodes).
  gpu->reserve(20000);
  cpu->reserve(20000);
  REQUIRE(gpu->validate().empty());
  for (int b = 0; b < 4; ++b)
    run_both(testing::distinct_key_batch(rng, model, 3000, [&] { return any_key(rng); }),
             "after");
}

TEST_CASE("gpu: a 2^18-op contended batch over few keys stays consistent", "[hashtable][gpu]") {
  if (skip_without_gpu()) return;
  // 2^18 operations on 4096 keys in 64 buckets: ~64 ops per key, too many to
  // enumerate orders, so check the invariants that every order implies.
  HashTableConfig config;
  config.tables = 1;
  config.buckets_per_table = 64;
  config.node_capacity = 1 << 20;
  auto table = make_gpu_hash_table(config);
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int> kind(0, 2);
  std::uniform_int_distribution<std::uint64_t> key(1, 4096);
  for (int b = 0; b < 4; ++b) {
    const std::uint64_t size_before = table->size();
    const testing::Pairs before = table->contents();
    std::vector<HashOp> ops(1 << 18);
    for (std::size_t i = 0; i < ops.size(); ++i)
      ops[i] = {key(rng), (static_cast<std::uint64_t>(b) << 32) | i,
                static_cast<OpKind>(kind(rng))};
    const std::vector<HashResult> results = table->run_batch(ops);
    const std::string problems = table->validate();
    INFO(problems);
    REQUIRE(problems.empty());
    const std::size_t inserted = testing::count_status(results, OpStatus::kInserted);
    const std::size_t deleted = testing::count_status(results, OpStatus::kDeleted);
    REQUIRE(table->size() + deleted == size_before + inserted);
    REQUIRE(testing::count_status(results, OpStatus::kPoolExhausted) == 0);
    // Per key: successful inserts and deletes alternate, so their counts
    // differ by the change in presence; every value reported was the key's
    // value at some point (present before, or inserted in this batch).
    std::map<HashKey, HashValue> was(before.begin(), before.end());
    const testing::Pairs after = table->contents();
    std::map<HashKey, HashValue> now(after.begin(), after.end());
    std::map<HashKey, long> balance;
    std::map<HashKey, std::set<HashValue>> values;
    for (const auto& pair : was) values[pair.first].insert(pair.second);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (results[i].status == OpStatus::kInserted) {
        ++balance[ops[i].key];
        values[ops[i].key].insert(ops[i].value);
      }
      if (results[i].status == OpStatus::kDeleted) --balance[ops[i].key];
    }
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const OpStatus s = results[i].status;
      if (s == OpStatus::kFound || s == OpStatus::kDuplicate || s == OpStatus::kDeleted)
        REQUIRE(values[ops[i].key].count(results[i].value) == 1);
    }
    for (HashKey k = 1; k <= 4096; ++k) {
      const long change = static_cast<long>(now.count(k)) - static_cast<long>(was.count(k));
      REQUIRE(balance[k] == change);
      if (now.count(k)) REQUIRE(values[k].count(now[k]) == 1);
    }
  }
}

TEST_CASE("gpu: the random-access ceiling is measurable", "[hashtable][gpu]") {
  if (skip_without_gpu()) return;
  // How fast is for bench/ (docs/benchmarks.md); here only that it measures.
  const RandomAccessCeiling ceiling = measure_gpu_random_access(256ull << 20);
  CHECK(std::isfinite(ceiling.reads_per_s));
  CHECK(ceiling.reads_per_s > 0);
  CHECK(std::isfinite(ceiling.cas_per_s));
  CHECK(ceiling.cas_per_s > 0);
}

}  // namespace
}  // namespace gw::kernels::hashtable
