// Batches of frames in one JetStream message (cluster/frame_batch.h): the
// records come back whole and in order, and a batch cut short hands over
// what came before the fault and says so.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "cluster/frame_batch.h"

namespace gw::cluster {
namespace {

using Bytes = std::vector<std::uint8_t>;

std::vector<Bytes> records_of(const Bytes& batch, bool& malformed) {
  std::vector<Bytes> out;
  const std::size_t n = for_each_frame_record(
      batch.data(), batch.size(), [&](const std::uint8_t* data, std::size_t size) { out.emplace_back(data, data + size); },
      malformed);
  CHECK(n == out.size());
  // Counting (the publisher's acknowledgements) agrees with the walk.
  CHECK(count_frame_records(batch.data(), batch.size()) == n);
  return out;
}

TEST_CASE("a batch's records come back whole and in order", "[cluster]") {
  const std::vector<Bytes> frames = {{1, 2, 3}, {4}, Bytes(300, 7), {9, 9}};
  Bytes batch;
  for (const Bytes& f : frames) append_frame_record(batch, f.data(), f.size());
  CHECK(batch.size() == 3 + 1 + 300 + 2 + kRecordLengthBytes * frames.size());
  bool malformed = true;
  CHECK(records_of(batch, malformed) == frames);
  CHECK_FALSE(malformed);
  // The length is little-endian, as the TCP ingest's.
  CHECK(batch[3 + 4 + 1 + 4] == 300 % 256);
  CHECK(batch[3 + 4 + 1 + 4 + 1] == 300 / 256);
  Bytes empty;
  CHECK(records_of(empty, malformed).empty());
  CHECK_FALSE(malformed);
}

TEST_CASE("a batch cut short hands over the records before the fault and reports it", "[cluster]") {
  Bytes batch;
  const Bytes a = {1, 2, 3}, b = {4, 5, 6, 7};
  append_frame_record(batch, a.data(), a.size());
  append_frame_record(batch, b.data(), b.size());
  bool malformed = false;
  SECTION("the last record's bytes cut") {
    batch.pop_back();
    CHECK(records_of(batch, malformed) == std::vector<Bytes>{a});
    CHECK(malformed);
  }
  SECTION("a length cut") {
    batch.resize(4 + a.size() + 2);
    CHECK(records_of(batch, malformed) == std::vector<Bytes>{a});
    CHECK(malformed);
  }
  SECTION("a zero length") {
    const Bytes zero = {0, 0, 0, 0};
    batch.insert(batch.begin(), zero.begin(), zero.end());
    CHECK(records_of(batch, malformed).empty());
    CHECK(malformed);
  }
}

TEST_CASE("batch subjects sit inside the partition's filter and are told from wearers' subjects", "[cluster]") {
  CHECK(batch_subject("gw.frames", 17) == "gw.frames.17.b");
  CHECK(is_batch_subject("gw.frames.17.b"));
  CHECK_FALSE(is_batch_subject("gw.frames.17.4021"));
  CHECK_FALSE(is_batch_subject("b"));
  CHECK_FALSE(is_batch_subject(nullptr));
}

}  // namespace
}  // namespace gw::cluster
