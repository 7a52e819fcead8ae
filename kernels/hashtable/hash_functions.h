// Hash functions h(k) and table-assignment functions TA(k) of the parallel hash
// table PH[n] (Moazeni 2013, §4.5, §4.6.2.4). Plain functions of a 64-bit key,
// callable from host code and from CUDA device code, so the CPU and GPU
// implementations place every key in the same (table, bucket).
//
// h hashes the 8 bytes of the key in memory order, least significant byte
// first (the byte order of a double key on x86-64 and on the GPU), with the
// classic string hashes DEK (Knuth), SDBM and PJW (Weinberger), giving 32 bits
// that the table reduces modulo its bucket count m. TA picks one of the n
// sub-tables and must not depend on h (requirement 2 of §4.5.3):
//   * kScaledUnitDouble: the thesis's TA(k) = floor(k * 10^6) mod n, for keys
//     that are the bit patterns of doubles in [0, 1) (|k| is used for
//     negative doubles, NaN maps to table 0);
//   * kMix: the murmur3 64-bit finaliser of the key, high 32 bits mod n, for
//     integer keys (e.g. the daemon's packed time-slot keys).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define GW_HT_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GW_HT_HOST_DEVICE inline
#endif

namespace gw::kernels::hashtable {

enum class HashFunction : std::uint32_t { kDek = 0, kSdbm = 1, kPjw = 2 };
enum class TableAssignment : std::uint32_t { kScaledUnitDouble = 0, kMix = 1 };

GW_HT_HOST_DEVICE std::uint32_t key_byte(std::uint64_t key, int i) {
  return static_cast<std::uint32_t>((key >> (8 * i)) & 0xffu);
}

// DEK (Knuth, TAOCP vol. 3): start from the length, rotate-like shift, xor.
GW_HT_HOST_DEVICE std::uint32_t dek_hash(std::uint64_t key) {
  std::uint32_t hash = 8;
  for (int i = 0; i < 8; ++i) hash = ((hash << 5) ^ (hash >> 27)) ^ key_byte(key, i);
  return hash;
}

// SDBM (from the sdbm database library): hash * 65599 + c.
GW_HT_HOST_DEVICE std::uint32_t sdbm_hash(std::uint64_t key) {
  std::uint32_t hash = 0;
  for (int i = 0; i < 8; ++i) hash = key_byte(key, i) + (hash << 6) + (hash << 16) - hash;
  return hash;
}

// PJW (P. J. Weinberger, as in Aho/Sethi/Ullman) with 32-bit words.
GW_HT_HOST_DEVICE std::uint32_t pjw_hash(std::uint64_t key) {
  constexpr std::uint32_t kHighBits = 0xF0000000u;
  std::uint32_t hash = 0;
  for (int i = 0; i < 8; ++i) {
    hash = (hash << 4) + key_byte(key, i);
    const std::uint32_t high = hash & kHighBits;
    if (high != 0) hash = (hash ^ (high >> 24)) & ~kHighBits;
  }
  return hash;
}

GW_HT_HOST_DEVICE std::uint32_t hash_key(HashFunction function, std::uint64_t key) {
  switch (function) {
    case HashFunction::kSdbm:
      return sdbm_hash(key);
    case HashFunction::kPjw:
      return pjw_hash(key);
    case HashFunction::kDek:
    default:
      return dek_hash(key);
  }
}

// murmur3's fmix64: every key bit affects every output bit.
GW_HT_HOST_DEVICE std::uint64_t mix64(std::uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  key *= 0xc4ceb9fe1a85ec53ull;
  key ^= key >> 33;
  return key;
}

GW_HT_HOST_DEVICE double key_as_double(std::uint64_t key) {
  double value;
  std::memcpy(&value, &key, sizeof value);
  return value;
}

GW_HT_HOST_DEVICE std::uint64_t double_as_key(double value) {
  std::uint64_t key;
  std::memcpy(&key, &value, sizeof key);
  return key;
}

// TA(k) in [0, tables). tables >= 1.
GW_HT_HOST_DEVICE std::uint32_t assign_table(TableAssignment assignment, std::uint64_t key,
                                             std::uint32_t tables) {
  if (tables <= 1) return 0;
  if (assignment == TableAssignment::kMix)
    return static_cast<std::uint32_t>((mix64(key) >> 32) % tables);
  double scaled = key_as_double(key);
  if (scaled < 0) scaled = -scaled;
  scaled *= 1e6;
  // NaN and values beyond 2^63 (not keys in [0, 1)) all go to table 0.
  if (!(scaled < 9.2e18)) return 0;
  return static_cast<std::uint32_t>(static_cast<std::uint64_t>(scaled) % tables);
}

// h(k) mod m: the bucket inside the key's sub-table. buckets >= 1.
GW_HT_HOST_DEVICE std::uint32_t assign_bucket(HashFunction function, std::uint64_t key,
                                              std::uint32_t buckets) {
  return hash_key(function, key) % buckets;
}

}  // namespace gw::kernels::hashtable
