#include "daemon/gait_job.h"

#include <catch2/catch.hpp>

#include <cmath>

#include "tests/gait/synthetic_walk.h"

namespace {

using gw::daemon::GaitWorker;

std::map<std::uint16_t, std::vector<gw::gait::FootSource>> pair_device() {
  return {{6, {gw::gait::FootSource{gw::gait::Foot::kLeft, {0}, {}},
               gw::gait::FootSource{gw::gait::Foot::kRight, {1}, {}}}}};
}

// The synthetic walk as 10-sample frames of both feet's loads for `wearer`.
std::vector<GaitWorker::FrameLoads> walk_frames(std::uint32_t wearer, double seconds) {
  gw::gait::testing::SyntheticWalk w;
  std::vector<GaitWorker::FrameLoads> frames;
  for (long first = 0; first < static_cast<long>(seconds * 100); first += 10) {
    GaitWorker::FrameLoads f{wearer, 6, first / 100.0, 100, 10, {}, 0};
    for (long s = first; s < first + 10; ++s)
      for (int foot = 0; foot < 2; ++foot) {
        gw::gait::FootLoad l;
        l.load = gw::gait::testing::synthetic_load(w, foot, s / 100.0);
        f.loads.push_back(l);
      }
    frames.push_back(std::move(f));
  }
  return frames;
}

TEST_CASE("the gait thread goes through what it is offered and hands back its minutes", "[gait]") {
  gw::gait::MonitorOptions options;
  options.minute_s = 30;
  GaitWorker worker(options, pair_device(), 1 << 16);
  auto frames = walk_frames(3, 70);
  const std::size_t count = frames.size();
  worker.offer(frames);
  CHECK(frames.empty());
  REQUIRE(worker.wait_idle(std::chrono::seconds(10)));
  const GaitWorker::Output out = worker.take();
  REQUIRE(out.minutes.size() == 2);  // 70 s of 1.1-s strides: two 30-s minutes
  CHECK(out.minutes[0].wearer == 3);
  CHECK(out.minutes[0].metrics.stride_time_median_s == Approx(1.1).margin(0.01));
  CHECK(std::isnan(out.minutes[0].abnormal_score));
  CHECK(out.bouts.empty());
  CHECK(worker.take().minutes.empty());
  const auto counters = worker.counters_json();
  CHECK(counters["samples"] == count * 10);
  CHECK(counters["dropped_frames"] == 0);
  CHECK(counters["wearers"] == 1);
  CHECK(counters["minutes"] == 2);
}

TEST_CASE("a full gait queue drops frames' loads and counts them, nothing blocks", "[gait]") {
  GaitWorker worker(gw::gait::MonitorOptions{}, pair_device(), 4);
  std::uint64_t offered = 0;
  for (int bunch = 0; bunch < 20; ++bunch) {
    auto frames = walk_frames(static_cast<std::uint32_t>(bunch), 5);
    offered += frames.size();
    worker.offer(frames);
  }
  REQUIRE(worker.wait_idle(std::chrono::seconds(10)));
  const auto counters = worker.counters_json();
  const auto dropped = counters["dropped_frames"].get<std::uint64_t>();
  CHECK(dropped > 0);
  CHECK(counters["samples"].get<std::uint64_t>() == (offered - dropped) * 10);
  CHECK(counters["queue_depth"] == 0);
}

}  // namespace
