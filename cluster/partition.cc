#include "cluster/partition.h"

#include <algorithm>
#include <cctype>

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

bool is_plain_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

bool is_plain_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), is_plain_name_char);
}

}  // namespace gw::cluster
