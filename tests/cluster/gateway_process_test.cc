// gaitwatchd --gateway against a real nats-server with JetStream on loopback:
// frames replayed for three wearers are all published, acknowledged and
// stored in the stream, each wearer's on its own subject under its
// partition, or gathered per partition into batches (cluster/frame_batch.h)
// that hold every frame once, each wearer's in order; stopped just after
// its TCP senders finish, with a queue of a few frames, it still publishes
// every frame they sent; an unreachable server or a config without `nats:`
// stops it at start with the reason.
#include <catch2/catch.hpp>

#include <nats/nats.h>

#include <chrono>
#include <map>
#include <memory>
#include <thread>

#include "cluster/frame_batch.h"
#include "cluster/partition.h"
#include "sensors/frame.h"
#include "tests/common/nats_server.h"
#include "tests/common/temp_dir.h"
#include "tests/daemon/daemon_fixture.h"

namespace {

using gw::test::DaemonFixture;
using gw::test::json;
using gw::test::kDaemon;
using gw::test::replayed_frames;

constexpr std::uint32_t kPartitions = 4;

gw::Process start_gateway(const DaemonFixture& fx) {
  return gw::Process({kDaemon, "--gateway", "--config", fx.config_path.string()}, fx.dir / "gateway.out",
                     fx.dir / "gateway.err");
}

// The fixture's config publishing to `nats` in kPartitions partitions (the
// caller writes it, after its own changes).
void publish_to(DaemonFixture& fx, const gw::test::TempNatsServer& nats) {
  fx.config["nats"]["url"] = nats.url();
  fx.config["nats"]["partitions"] = kPartitions;
}

void wait_ready(const gw::Process& gateway) {
  REQUIRE(gw::test::eventually([&] { return gateway.err().find("gaitwatchd gateway ready") != std::string::npos; },
                               std::chrono::seconds(20)));
}

// Stops the gateway (SIGTERM) and returns its final counters, having checked
// that it exited cleanly and that all `sent` frames were queued, published
// and acknowledged.
json stop_with_every_frame_acked(gw::Process& gateway, std::uint64_t sent) {
  gateway.signal(SIGTERM);
  const auto code = gateway.wait(std::chrono::seconds(20));
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  json final_counters;
  for (const json& line : gw::test::json_lines(gateway.out()))
    if (line.contains("gateway")) final_counters = line["gateway"];
  INFO(final_counters.dump());
  REQUIRE(final_counters.is_object());
  CHECK(final_counters["ingest"]["queued"] == sent);
  CHECK(final_counters["publisher"]["published"] == sent);
  CHECK(final_counters["publisher"]["acked"] == sent);
  return final_counters;
}

// A JetStream client of the test's own, to read the stream back.
struct JetStreamReader {
  natsConnection* connection = nullptr;
  jsCtx* js = nullptr;
  explicit JetStreamReader(const std::string& url) {
    REQUIRE(natsConnection_ConnectTo(&connection, url.c_str()) == NATS_OK);
    REQUIRE(natsConnection_JetStream(&js, connection, nullptr) == NATS_OK);
  }
  ~JetStreamReader() {
    jsCtx_Destroy(js);
    natsConnection_Destroy(connection);
  }
  std::uint64_t messages(const std::string& stream) {
    jsStreamInfo* info = nullptr;
    jsErrCode code;
    REQUIRE(js_GetStreamInfo(&info, js, stream.c_str(), nullptr, &code) == NATS_OK);
    const std::uint64_t n = info->State.Msgs;
    CHECK(info->Config->Retention == js_WorkQueuePolicy);
    jsStreamInfo_Destroy(info);
    return n;
  }
  // The last frame stored on `subject`; false when there is none.
  bool last_frame(const std::string& stream, const std::string& subject, gw::sensors::Frame& frame) {
    natsMsg* msg = nullptr;
    jsErrCode code;
    const natsStatus s = js_GetLastMsg(&msg, js, stream.c_str(), subject.c_str(), nullptr, &code);
    if (s != NATS_OK) return false;
    const auto* data = reinterpret_cast<const std::uint8_t*>(natsMsg_GetData(msg));
    const auto status = gw::sensors::decode_frame(data, static_cast<std::size_t>(natsMsg_GetDataLength(msg)), frame);
    natsMsg_Destroy(msg);
    return status == gw::sensors::DecodeStatus::kOk;
  }
  // Every frame the stream holds, in stream order, taken out of batches;
  // `batches` counts the batch messages.
  std::vector<gw::sensors::Frame> all_frames(const std::string& stream, std::uint64_t& batches) {
    jsStreamInfo* info = nullptr;
    jsErrCode code;
    REQUIRE(js_GetStreamInfo(&info, js, stream.c_str(), nullptr, &code) == NATS_OK);
    const std::uint64_t first = info->State.FirstSeq, last = info->State.LastSeq;
    jsStreamInfo_Destroy(info);
    std::vector<gw::sensors::Frame> frames;
    batches = 0;
    for (std::uint64_t seq = first; seq <= last && seq > 0; ++seq) {
      natsMsg* msg = nullptr;
      REQUIRE(js_GetMsg(&msg, js, stream.c_str(), seq, nullptr, &code) == NATS_OK);
      const auto* data = reinterpret_cast<const std::uint8_t*>(natsMsg_GetData(msg));
      const auto size = static_cast<std::size_t>(natsMsg_GetDataLength(msg));
      const auto take = [&](const std::uint8_t* bytes, std::size_t n) {
        gw::sensors::Frame frame;
        CHECK(gw::sensors::decode_frame(bytes, n, frame) == gw::sensors::DecodeStatus::kOk);
        frames.push_back(frame);
      };
      if (gw::cluster::is_batch_subject(natsMsg_GetSubject(msg))) {
        ++batches;
        bool malformed = true;
        CHECK(gw::cluster::for_each_frame_record(data, size, take, malformed) >= 2);
        CHECK_FALSE(malformed);
      } else {
        take(data, size);
      }
      natsMsg_Destroy(msg);
    }
    return frames;
  }
};

}  // namespace

TEST_CASE("gaitwatchd --gateway publishes every accepted frame to JetStream, each wearer on its subject under "
          "its partition",
          "[integration][cluster]") {
  if (gw::test::nats_server_missing()) return;
  const gw::test::TempNatsServer nats("gw_nats");
  DaemonFixture fx;
  publish_to(fx, nats);
  fx.config["nats"]["frames_per_message"] = 1;
  fx.write_config(fx.config);

  gw::Process gateway = start_gateway(fx);
  INFO(gateway.err());
  wait_ready(gateway);

  const std::vector<std::uint32_t> wearers = {3, 4, 5};
  std::uint64_t sent = 0;
  for (const std::uint32_t w : wearers)
    sent += replayed_frames(gw::test::replay(fx, fx.udp(), {"--wearer", std::to_string(w)}).err);
  REQUIRE(sent > 100);

  const json final_counters = stop_with_every_frame_acked(gateway, sent);
  INFO(final_counters.dump());
  const json& publisher = final_counters["publisher"];
  CHECK(publisher["failed"] == 0);
  CHECK(publisher["dropped"] == 0);
  CHECK(publisher["pending"] == 0);

  // The stream holds them all (no worker has taken any), each wearer's
  // last frame on its own subject.
  JetStreamReader reader(nats.url());
  CHECK(reader.messages("GW_FRAMES") == sent);
  for (const std::uint32_t w : wearers) {
    gw::sensors::Frame frame;
    const std::string subject = gw::cluster::frame_subject("gw.frames", gw::cluster::partition_of(w, kPartitions), w);
    INFO(subject);
    REQUIRE(reader.last_frame("GW_FRAMES", subject, frame));
    CHECK(frame.wearer_id == w);
    CHECK(frame.samples > 0);
  }
  gw::sensors::Frame none;
  CHECK_FALSE(reader.last_frame("GW_FRAMES",
                                gw::cluster::frame_subject("gw.frames", gw::cluster::partition_of(6, kPartitions), 6),
                                none));
}

TEST_CASE("gaitwatchd --gateway gathers a partition's frames into batches: every frame once, each wearer's in "
          "order",
          "[integration][cluster]") {
  if (gw::test::nats_server_missing()) return;
  const gw::test::TempNatsServer nats("gw_nats_batches");
  DaemonFixture fx;
  publish_to(fx, nats);  // frames_per_message: the default
  fx.config["ingest"]["queue_overflow"] = "block";
  fx.write_config(fx.config);

  gw::Process gateway = start_gateway(fx);
  INFO(gateway.err());
  wait_ready(gateway);
  // Three wearers at once, as fast as TCP takes them: the gateway's queue
  // holds several frames at a time, so batches form.
  const std::vector<std::uint32_t> wearers = {3, 4, 5};
  const std::uint64_t sent = gw::test::replay_at_once(fx, wearers, fx.tcp());
  REQUIRE(sent > 100);

  const json final_counters = stop_with_every_frame_acked(gateway, sent);
  INFO(final_counters.dump());
  const json& publisher = final_counters["publisher"];
  CHECK(publisher["dropped"] == 0);
  CHECK(publisher["pending"] == 0);
  CHECK(publisher["messages"].get<std::uint64_t>() < sent);

  JetStreamReader reader(nats.url());
  std::uint64_t batches = 0;
  const std::vector<gw::sensors::Frame> frames = reader.all_frames("GW_FRAMES", batches);
  CHECK(batches > 0);
  CHECK(reader.messages("GW_FRAMES") == publisher["messages"].get<std::uint64_t>());
  CHECK(frames.size() == sent);
  // Each wearer's frames whole and in the order they were sent.
  std::map<std::uint32_t, std::vector<std::uint64_t>> sequences;
  for (const auto& frame : frames) sequences[frame.wearer_id].push_back(frame.sequence);
  REQUIRE(sequences.size() == wearers.size());
  for (const auto& [wearer, seqs] : sequences) {
    INFO("wearer " << wearer);
    CHECK(seqs.size() == sent / wearers.size());
    for (std::size_t i = 1; i < seqs.size(); ++i) CHECK(seqs[i] == seqs[i - 1] + 1);
  }
}

TEST_CASE("gaitwatchd --gateway stopped just after its TCP senders finish publishes every frame they sent",
          "[integration][cluster]") {
  if (gw::test::nats_server_missing()) return;
  const gw::test::TempNatsServer nats("gw_nats_stop");
  DaemonFixture fx;
  publish_to(fx, nats);
  // A queue of a few frames that blocks: at the stop the connections wait
  // for room, and the senders' last frames are still in the socket buffers.
  fx.config["ingest"]["queue_capacity"] = 4;
  fx.config["ingest"]["queue_overflow"] = "block";
  fx.write_config(fx.config);

  gw::Process gateway = start_gateway(fx);
  INFO(gateway.err());
  wait_ready(gateway);
  const std::uint64_t sent = gw::test::replay_at_once(fx, {7, 8}, fx.tcp());
  REQUIRE(sent > 100);

  const json final_counters = stop_with_every_frame_acked(gateway, sent);
  INFO(final_counters.dump());
  CHECK(final_counters["ingest"]["tcp_frames"] == sent);
  CHECK(final_counters["ingest"]["queue_refused_closed"] == 0);
  CHECK(final_counters["publisher"]["dropped"] == 0);
  JetStreamReader reader(nats.url());
  std::uint64_t batches = 0;
  CHECK(reader.all_frames("GW_FRAMES", batches).size() == sent);
}

TEST_CASE("gaitwatchd --gateway stops at start with the reason: no nats section, no server", "[integration][cluster]") {
  DaemonFixture fx;
  {
    gw::Process gateway = start_gateway(fx);
    const auto code = gateway.wait(std::chrono::seconds(20));
    REQUIRE(code.has_value());
    CHECK(*code == 1);
    CHECK_THAT(gateway.err(), Catch::Contains("nats: missing"));
  }
  const int closed_port = gw::free_port(false);
  fx.config["nats"]["url"] = "nats://127.0.0.1:" + std::to_string(closed_port);
  fx.write_config(fx.config);
  gw::Process gateway = start_gateway(fx);
  const auto code = gateway.wait(std::chrono::seconds(30));
  REQUIRE(code.has_value());
  CHECK(*code == 1);
  CHECK_THAT(gateway.err(), Catch::Contains("nats://127.0.0.1:" + std::to_string(closed_port)));
  CHECK_THAT(gateway.err(), Catch::Contains("cannot connect"));
}
