#include "cluster/partition.h"

#include <catch2/catch.hpp>

#include <vector>

namespace gw::cluster {
namespace {

TEST_CASE("a wearer's partition is in range, the same every time, and wearers spread evenly", "[cluster]") {
  constexpr std::uint32_t kPartitions = 64;
  std::vector<int> per_partition(kPartitions, 0);
  for (std::uint32_t wearer = 1; wearer <= 64000; ++wearer) {
    const std::uint32_t p = partition_of(wearer, kPartitions);
    REQUIRE(p < kPartitions);
    REQUIRE(partition_of(wearer, kPartitions) == p);
    ++per_partition[p];
  }
  // 1,000 a partition on average; a plain modulo would give exactly that,
  // the mix within a few standard deviations (about 31).
  for (const int n : per_partition) {
    CHECK(n > 850);
    CHECK(n < 1150);
  }
  // Consecutive ids do not walk through the partitions in order.
  int in_order = 0;
  for (std::uint32_t wearer = 1; wearer < 1000; ++wearer)
    in_order += partition_of(wearer + 1, kPartitions) == (partition_of(wearer, kPartitions) + 1) % kPartitions;
  CHECK(in_order < 100);
  // One partition takes everyone.
  CHECK(partition_of(12345, 1) == 0);
}

TEST_CASE("a frame's subject names the prefix, the partition and the wearer", "[cluster]") {
  CHECK(frame_subject("gw.frames", 17, 4021) == "gw.frames.17.4021");
  CHECK(frame_subject("site-a.frames", 0, 0) == "site-a.frames.0.0");
}

TEST_CASE("worker ids and the lease bucket are plain names: letters, digits, '-' and '_'", "[cluster]") {
  CHECK(is_plain_name("w1"));
  CHECK(is_plain_name("ward-b_host-4021"));
  CHECK_FALSE(is_plain_name(""));
  for (const char* bad : {"w.1", "w 1", "w*", "w>", "w/1", "wörker"}) {
    INFO(bad);
    CHECK_FALSE(is_plain_name(bad));
  }
}

}  // namespace
}  // namespace gw::cluster
