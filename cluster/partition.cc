#include "cluster/partition.h"

namespace gw::cluster {

std::uint32_t partition_of(std::uint32_t wearer, std::uint32_t partitions) {
  std::uint32_t h = wearer;
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return partitions > 0 ? h % partitions : 0;
}

std::string frame_subject(const std::string& prefix, std::uint32_t partition, std::uint32_t wearer) {
  return prefix + "." + std::to_string(partition) + "." + std::to_string(wearer);
}

}  // namespace gw::cluster
