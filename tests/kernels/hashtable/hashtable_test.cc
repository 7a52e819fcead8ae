// CPU tests of the lock-free parallel hash table (kernels/hashtable): the
// hash and table-assignment functions, and every scenario of
// hashtable_test_support.h against the multi-threaded CPU implementation.
#include <catch2/catch.hpp>
#include <cstdint>
#include <set>
#include <vector>

#include "common/error.h"
#include "kernels/hashtable/hash_functions.h"
#include "kernels/hashtable/hash_table.h"
#include "tests/kernels/hashtable/hashtable_test_support.h"

namespace gw::kernels::hashtable {
namespace {

using testing::Factory;

// The textbook string hashes over a byte array (Partow's general hash
// function library), to check the 64-bit-key versions byte for byte.
std::uint32_t dek_bytes(const unsigned char* bytes, int length) {
  std::uint32_t hash = static_cast<std::uint32_t>(length);
  for (int i = 0; i < length; ++i) hash = ((hash << 5) ^ (hash >> 27)) ^ bytes[i];
  return hash;
}
std::uint32_t sdbm_bytes(const unsigned char* bytes, int length) {
  std::uint32_t hash = 0;
  for (int i = 0; i < length; ++i) hash = bytes[i] + (hash << 6) + (hash << 16) - hash;
  return hash;
}
std::uint32_t pjw_bytes(const unsigned char* bytes, int length) {
  const unsigned int bits = 32, three_quarters = 24, one_eighth = 4;
  const unsigned int high_bits = 0xFFFFFFFFu << (bits - one_eighth);
  std::uint32_t hash = 0, test = 0;
  for (int i = 0; i < length; ++i) {
    hash = (hash << one_eighth) + bytes[i];
    if ((test = hash & high_bits) != 0) hash = ((hash ^ (test >> three_quarters)) & (~high_bits));
  }
  return hash;
}

Factory cpu_factory(int threads) {
  return [threads](const HashTableConfig& config) {
    HashTableConfig with_threads = config;
    with_threads.cpu_threads = threads;
    return make_cpu_hash_table(with_threads);
  };
}

TEST_CASE("hash functions are DEK, SDBM and PJW over the key's 8 bytes, low byte first",
          "[hashtable]") {
  const std::vector<std::uint64_t> keys = {
      0, 1, 0x0123456789abcdefull, ~0ull, double_as_key(0.5), double_as_key(0.123456789)};
  for (std::uint64_t key : keys) {
    unsigned char bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(key >> (8 * i));
    CHECK(dek_hash(key) == dek_bytes(bytes, 8));
    CHECK(sdbm_hash(key) == sdbm_bytes(bytes, 8));
    CHECK(pjw_hash(key) == pjw_bytes(bytes, 8));
    CHECK(hash_key(HashFunction::kDek, key) == dek_hash(key));
    CHECK(hash_key(HashFunction::kSdbm, key) == sdbm_hash(key));
    CHECK(hash_key(HashFunction::kPjw, key) == pjw_hash(key));
  }
}

TEST_CASE("table assignment: the thesis's floor(k * 1e6) mod n, and a mixing TA", "[hashtable]") {
  CHECK(assign_table(TableAssignment::kScaledUnitDouble, double_as_key(0.1234567), 320) ==
        123456 % 320);
  CHECK(assign_table(TableAssignment::kScaledUnitDouble, double_as_key(0.0), 7) == 0);
  CHECK(assign_table(TableAssignment::kScaledUnitDouble, double_as_key(-0.0000055), 4) == 1);
  CHECK(assign_table(TableAssignment::kScaledUnitDouble, double_as_key(1e300), 4) == 0);
  CHECK(assign_table(TableAssignment::kMix, 12345, 1) == 0);
  for (std::uint64_t key = 0; key < 1000; ++key)
    CHECK(assign_table(TableAssignment::kMix, key, 5) < 5);
  // TA is independent of h: keys that share a bucket spread over the tables.
  for (TableAssignment ta : {TableAssignment::kScaledUnitDouble, TableAssignment::kMix}) {
    std::set<std::uint32_t> tables;
    int in_bucket = 0;
    for (int i = 0; i < 200000 && in_bucket < 200; ++i) {
      const std::uint64_t key = double_as_key(i / 200000.0);
      if (assign_bucket(HashFunction::kDek, key, 1024) != 7) continue;
      ++in_bucket;
      tables.insert(assign_table(ta, key, 16));
    }
    CHECK(in_bucket > 50);
    CHECK(tables.size() >= 12);
  }
}

TEST_CASE("invalid configs throw gw::Error", "[hashtable]") {
  HashTableConfig config;
  config.tables = 0;
  CHECK_THROWS_AS(make_cpu_hash_table(config), Error);
  config = {};
  config.buckets_per_table = 0;
  CHECK_THROWS_AS(make_cpu_hash_table(config), Error);
  config = {};
  config.node_capacity = 1ull << 33;
  CHECK_THROWS_AS(make_cpu_hash_table(config), Error);
  config = {};
  config.gpu_block_size = 100;
  CHECK_THROWS_AS(make_cpu_hash_table(config), Error);
  config = {};
  auto table = make_cpu_hash_table(config);
  CHECK_THROWS_AS(table->reserve(1ull << 33), Error);
}

TEST_CASE("cpu: distinct-key mixed batches match the sequential model", "[hashtable]") {
  HashTableConfig config;
  config.node_capacity = 1 << 14;
  SECTION("basic table, DEK, integer keys") {
    config.tables = 1;
    config.buckets_per_table = 64;
    testing::check_distinct_key_batches(cpu_factory(4), config, 8, 1500, false, 1);
  }
  SECTION("PH[4], SDBM, unit-double keys, the thesis's TA") {
    config.tables = 4;
    config.buckets_per_table = 32;
    config.hash_function = HashFunction::kSdbm;
    config.table_assignment = TableAssignment::kScaledUnitDouble;
    testing::check_distinct_key_batches(cpu_factory(4), config, 8, 1500, true, 2);
  }
  SECTION("PH[320], PJW, mixing TA") {
    config.tables = 320;
    config.buckets_per_table = 16;
    config.hash_function = HashFunction::kPjw;
    testing::check_distinct_key_batches(cpu_factory(3), config, 6, 2000, true, 3);
  }
  SECTION("one thread") {
    testing::check_distinct_key_batches(cpu_factory(1), config, 4, 1000, false, 4);
  }
}

TEST_CASE("cpu: heavy same-bucket contention stays linearizable", "[hashtable]") {
  HashTableConfig config;
  config.node_capacity = 4096;
  SECTION("16 keys") {
    testing::check_same_bucket_contention(cpu_factory(8), config, 200, 16, 4000, 11);
  }
  SECTION("400 keys") {
    testing::check_same_bucket_contention(cpu_factory(8), config, 100, 400, 4000, 13);
  }
}

TEST_CASE("cpu: insert/insert/delete/insert on colliding keys never leaves duplicates",
          "[hashtable]") {
  HashTableConfig config;
  config.node_capacity = 4096;
  testing::check_insert_delete_insert(cpu_factory(8), config, 80, 500, 12);
}

TEST_CASE("cpu: pool exhaustion gives kPoolExhausted and corrupts nothing", "[hashtable]") {
  HashTableConfig config;
  SECTION("one thread: exactly the capacity is inserted") {
    testing::check_pool_exhaustion(cpu_factory(1), config, true);
  }
  SECTION("many threads") { testing::check_pool_exhaustion(cpu_factory(6), config, false); }
}

TEST_CASE("cpu: deleted nodes are reclaimed between batches", "[hashtable]") {
  HashTableConfig config;
  config.buckets_per_table = 8;
  testing::check_reclamation(cpu_factory(4), config, 40);
}

TEST_CASE("cpu: load, contents, reserve and clear", "[hashtable]") {
  HashTableConfig config;
  config.tables = 3;
  config.buckets_per_table = 17;
  testing::check_host_rebuild(cpu_factory(4), config);
}

TEST_CASE("cpu: an unknown op kind gives kInvalidOp", "[hashtable]") {
  testing::check_invalid_op(cpu_factory(2), HashTableConfig{});
}

TEST_CASE("gpu factory fails cleanly without CUDA or a GPU", "[hashtable]") {
  if (gpu_hash_table_available()) {
    WARN("a GPU is available; test_hashtable_gpu covers the GPU table");
    return;
  }
  CHECK_THROWS_AS(make_gpu_hash_table(HashTableConfig{}), Error);
  CHECK_THROWS_AS(measure_gpu_random_access(1 << 20), Error);
}

}  // namespace
}  // namespace gw::kernels::hashtable
