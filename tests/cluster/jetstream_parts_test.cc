// The JetStream parts a worker is made of, against a real nats-server with
// JetStream on loopback: the partition leases (fair shares, release at stop,
// takeover after a silent holder's TTL) and the frame consumer (stream
// order, acknowledgement retain_s after receipt, unacknowledged frames read
// again by the partition's next consumer).
#include <catch2/catch.hpp>

#include <nats/nats.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "cluster/frame_consumer.h"
#include "cluster/frame_publisher.h"
#include "cluster/nats_client.h"
#include "cluster/partition.h"
#include "cluster/partition_leases.h"
#include "tests/common/nats_server.h"
#include "tests/common/temp_dir.h"

namespace {

using gw::cluster::FrameConsumer;
using gw::cluster::FrameConsumerOptions;
using gw::cluster::NatsClient;
using gw::cluster::NatsClientOptions;
using gw::cluster::PartitionLeases;
using gw::cluster::PartitionLeasesOptions;
using namespace std::chrono_literals;

template <typename Predicate>
bool eventually(Predicate pred, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

std::unique_ptr<NatsClient> client_of(const gw::test::TempNatsServer& server) {
  NatsClientOptions options;
  options.url = server.url();
  return std::make_unique<NatsClient>(options);
}

// A worker's leases with its gained/lost calls recorded.
struct LeaseHolder {
  std::mutex mu;
  std::set<std::uint32_t> held;  // from the callbacks
  std::uint64_t gained = 0, lost = 0;
  std::unique_ptr<PartitionLeases> leases;

  LeaseHolder(const NatsClient& client, const std::string& id, std::uint32_t partitions, double ttl_s) {
    PartitionLeasesOptions options;
    options.bucket = "TEST_LEASES";
    options.worker_id = id;
    options.partitions = partitions;
    options.ttl_s = ttl_s;
    leases = std::make_unique<PartitionLeases>(
        client, options,
        [this](std::uint32_t p) {
          std::lock_guard<std::mutex> lock(mu);
          CHECK(held.insert(p).second);
          ++gained;
        },
        [this](std::uint32_t p) {
          std::lock_guard<std::mutex> lock(mu);
          CHECK(held.erase(p) == 1);
          ++lost;
        });
  }
  std::set<std::uint32_t> partitions() {
    std::lock_guard<std::mutex> lock(mu);
    return held;
  }
};

std::set<std::uint32_t> all_partitions(std::uint32_t n) {
  std::set<std::uint32_t> all;
  for (std::uint32_t p = 0; p < n; ++p) all.insert(p);
  return all;
}

std::set<std::uint32_t> united(const std::set<std::uint32_t>& a, const std::set<std::uint32_t>& b) {
  std::set<std::uint32_t> u = a;
  u.insert(b.begin(), b.end());
  return u;
}

std::uint64_t stream_messages(const NatsClient& client, const std::string& stream) {
  jsStreamInfo* info = nullptr;
  jsErrCode code;
  REQUIRE(js_GetStreamInfo(&info, client.jetstream(), stream.c_str(), nullptr, &code) == NATS_OK);
  const std::uint64_t n = info->State.Msgs;
  jsStreamInfo_Destroy(info);
  return n;
}

}  // namespace

TEST_CASE("partition leases: workers split the partitions fairly, a stopped worker's move at once, a silent "
          "worker's after the lease TTL",
          "[integration][cluster]") {
  if (gw::test::nats_server_missing()) return;
  const gw::test::TempNatsServer server("gw_leases");
  constexpr std::uint32_t kPartitions = 8;
  // Long enough that a starved test machine (the process tests beside it on
  // two cores) still renews in time.
  constexpr double kTtl = 3;
  const auto client_a = client_of(server), client_b = client_of(server), client_c = client_of(server);

  LeaseHolder a(*client_a, "a", kPartitions, kTtl);
  // Alone, the first round (in the constructor) takes everything.
  CHECK(a.partitions() == all_partitions(kPartitions));
  CHECK(a.leases->held().size() == kPartitions);

  {
    LeaseHolder b(*client_b, "b", kPartitions, kTtl);
    // Within a few rounds (ttl / 3 each): 4 and 4, disjoint, all covered.
    REQUIRE(eventually(
        [&] { return a.partitions().size() == kPartitions / 2 && b.partitions().size() == kPartitions / 2; }, 5s));
    CHECK(united(a.partitions(), b.partitions()) == all_partitions(kPartitions));
    INFO(a.leases->counters_json().dump() << " " << b.leases->counters_json().dump());
    CHECK(a.leases->counters().released >= kPartitions / 2);
    CHECK(a.leases->counters_json()["live_workers"] == 2);
    // A stop releases: the other takes them at its next round, not after the TTL.
    const auto stopped = std::chrono::steady_clock::now();
    b.leases->stop();
    CHECK(b.partitions().empty());
    REQUIRE(eventually([&] { return a.partitions().size() == kPartitions; }, 5s));
    CHECK(std::chrono::steady_clock::now() - stopped < std::chrono::duration<double>(kTtl));
  }

  // A worker that goes silent (its connection closed, as if killed) keeps
  // its keys until they expire; then the other claims them.
  LeaseHolder c(*client_c, "c", kPartitions, kTtl);
  REQUIRE(eventually(
      [&] { return a.partitions().size() == kPartitions / 2 && c.partitions().size() == kPartitions / 2; }, 5s));
  const std::set<std::uint32_t> silent = c.partitions();
  natsConnection_Close(client_c->connection());
  const auto silenced = std::chrono::steady_clock::now();
  REQUIRE(eventually([&] { return a.partitions().size() == kPartitions; }, 10s));
  const double moved_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - silenced).count();
  INFO("moved after " << moved_s << " s");
  // Not before the last renewal expired (at least ttl - ttl/3 after the
  // silence), and within ttl + ttl/3 (the claiming round) plus slack.
  CHECK(moved_s > kTtl * 2 / 3 - 0.1);
  CHECK(moved_s < kTtl * 4 / 3 + 1.0);
  CHECK(a.leases->counters().lost == 0);  // it lost none: it only released and claimed
  c.leases.reset();  // its releases fail quietly: the connection is closed
}

TEST_CASE("frame consumer: a partition's frames in stream order, acknowledged retain_s after receipt, what was "
          "not acknowledged is read again by the partition's next consumer",
          "[integration][cluster]") {
  if (gw::test::nats_server_missing()) return;
  const gw::test::TempNatsServer server("gw_consumer");
  constexpr std::uint32_t kPartitions = 2;
  constexpr std::uint32_t kWearer = 7, kOtherWearer = 8;
  const std::uint32_t partition = gw::cluster::partition_of(kWearer, kPartitions);
  REQUIRE(gw::cluster::partition_of(kOtherWearer, kPartitions) != partition);

  gw::cluster::FramePublisherOptions publisher_options;
  publisher_options.url = server.url();
  publisher_options.stream = "TEST_FRAMES";
  publisher_options.subject = "test.frames";
  publisher_options.partitions = kPartitions;
  gw::cluster::FramePublisher publisher(publisher_options);
  constexpr std::uint32_t kFrames = 300;
  for (std::uint32_t i = 0; i < kFrames; ++i) {
    std::uint8_t bytes[4];
    std::memcpy(bytes, &i, 4);
    REQUIRE(publisher.publish(kWearer, bytes, 4));
    REQUIRE(publisher.publish(kOtherWearer, bytes, 4));
  }
  REQUIRE(publisher.flush(10));
  const auto client = client_of(server);
  REQUIRE(stream_messages(*client, "TEST_FRAMES") == 2 * kFrames);

  struct Received {
    std::mutex mu;
    std::vector<std::uint32_t> values;
    std::size_t size() {
      std::lock_guard<std::mutex> lock(mu);
      return values.size();
    }
  };
  const auto consumer_of = [&](Received& into, const char* worker, double retain_s) {
    FrameConsumerOptions options;
    options.worker_id = worker;
    options.stream = "TEST_FRAMES";
    options.subject = "test.frames";
    options.retain_s = retain_s;
    options.batch = 64;
    return std::make_unique<FrameConsumer>(*client, options,
                                           [&into, partition](std::uint32_t p, const std::uint8_t* data, std::size_t size) {
                                             CHECK(p == partition);
                                             REQUIRE(size == 4);
                                             std::uint32_t value;
                                             std::memcpy(&value, data, 4);
                                             std::lock_guard<std::mutex> lock(into.mu);
                                             into.values.push_back(value);
                                           });
  };
  std::vector<std::uint32_t> in_order(kFrames);
  for (std::uint32_t i = 0; i < kFrames; ++i) in_order[i] = i;

  // A first holder reads them all, in order, and acknowledges none within
  // its long retain_s; stopping it leaves them in the stream.
  Received first;
  {
    auto consumer = consumer_of(first, "first", 60);
    consumer->start(partition);
    REQUIRE(eventually([&] { return first.size() == kFrames; }, 10s));
    std::this_thread::sleep_for(200ms);  // nothing more comes
    CHECK(first.values == in_order);
    CHECK(consumer->counters().acks == 0);
    consumer->stop(partition);
    CHECK(consumer->counters().stopped == 1);
  }
  CHECK(stream_messages(*client, "TEST_FRAMES") == 2 * kFrames);

  // The next holder reads them again from the first, in order, and
  // acknowledges them 0.5 s after receipt: the work-queue stream deletes
  // them; the other partition's frames stay.
  Received second;
  auto consumer = consumer_of(second, "second", 0.5);
  consumer->start(partition);
  REQUIRE(eventually([&] { return second.size() == kFrames; }, 10s));
  CHECK(second.values == in_order);
  REQUIRE(eventually([&] { return consumer->counters().acks == kFrames; }, 10s));
  CHECK(eventually([&] { return stream_messages(*client, "TEST_FRAMES") == kFrames; }, 5s));
  CHECK(consumer->counters().errors == 0);
  CHECK(consumer->counters_json()["partitions"] == 1);
}

TEST_CASE("frame consumer: a holder that lost its partition can neither read nor disturb the new holder's consumer",
          "[integration][cluster]") {
  if (gw::test::nats_server_missing()) return;
  const gw::test::TempNatsServer server("gw_consumer_lost");
  gw::cluster::FramePublisherOptions publisher_options;
  publisher_options.url = server.url();
  publisher_options.stream = "TEST_FRAMES";
  publisher_options.subject = "test.frames";
  publisher_options.partitions = 1;
  gw::cluster::FramePublisher publisher(publisher_options);
  const auto client_a = client_of(server), client_b = client_of(server);
  std::atomic<std::uint64_t> a_frames{0}, b_frames{0};
  FrameConsumerOptions options;
  options.stream = "TEST_FRAMES";
  options.subject = "test.frames";
  options.retain_s = 60;
  options.worker_id = "a";
  FrameConsumer a(*client_a, options, [&](std::uint32_t, const std::uint8_t*, std::size_t) { ++a_frames; });
  options.worker_id = "b";
  FrameConsumer b(*client_b, options, [&](std::uint32_t, const std::uint8_t*, std::size_t) { ++b_frames; });
  CHECK(a.consumer_name(0) == "TEST_FRAMES_p0_a");
  const std::uint8_t byte = 1;
  a.start(0);
  REQUIRE(publisher.publish(7, &byte, 1));
  REQUIRE(eventually([&] { return a_frames == 1; }, 5s));
  // A's lease expires while A still runs and fetches (it has not noticed
  // yet); B takes the partition over and reads what A never acknowledged.
  b.start(0);
  REQUIRE(eventually([&] { return b_frames == 1; }, 5s));
  // New frames go to B alone, although A keeps fetching meanwhile.
  REQUIRE(publisher.publish(7, &byte, 1));
  REQUIRE(eventually([&] { return b_frames == 2; }, 5s));
  std::this_thread::sleep_for(300ms);
  CHECK(a_frames == 1);
  // A's leases notice; stopping A leaves B's consumer be.
  a.stop(0);
  REQUIRE(publisher.publish(7, &byte, 1));
  CHECK(eventually([&] { return b_frames == 3; }, 5s));
  CHECK(a_frames == 1);
  CHECK(b.counters().errors == 0);
}
