// The metrics histogram and Prometheus rendering (daemon/metrics.h); the HTTP
// endpoint itself is exercised on the real daemon in daemon_process_test.cc.
#include "daemon/metrics.h"

#include <catch2/catch.hpp>
#include <string>

using gw::daemon::LatencyHistogram;

TEST_CASE("latency histogram quantiles stay inside their bucket and max is exact", "[metrics]") {
  LatencyHistogram h;
  CHECK(h.quantile(0.5) == 0);
  for (int i = 1; i <= 100; ++i) h.observe(i);  // 1..100 ms
  CHECK(h.count() == 100);
  CHECK(h.sum() == Approx(5050));
  CHECK(h.max() == 100);
  // The median (50 ms) lies in the (25, 50] bucket, p99 in (75, 100].
  CHECK(h.quantile(0.5) > 25);
  CHECK(h.quantile(0.5) <= 50);
  CHECK(h.quantile(0.99) > 75);
  CHECK(h.quantile(0.99) <= 100);
  CHECK(h.quantile(1.0) == 100);
  h.observe(20000);  // beyond the last bound
  CHECK(h.quantile(1.0) == 20000);
}

TEST_CASE("the Prometheus text has every JSON counter and cumulative buckets", "[metrics]") {
  gw::daemon::MetricsSnapshot s;
  s.counters = {{"engine", {{"alerts", 3}, {"cost_model", {{"floor_ms", 1.5}}}, {"backend", "cpu"}}},
                {"ingest", {{"decode", {{"bad_crc", 2}}}}},
                {"sink", {{"committed", 3}}}};
  for (double ms : {10.0, 40.0, 400.0}) s.alert_latency.observe(ms);
  const std::string text = gw::daemon::render_prometheus(s);
  CHECK(text.find("gaitwatch_engine_alerts 3\n") != std::string::npos);
  CHECK(text.find("gaitwatch_engine_cost_model_floor_ms 1.5\n") != std::string::npos);
  CHECK(text.find("gaitwatch_ingest_decode_bad_crc 2\n") != std::string::npos);
  CHECK(text.find("gaitwatch_sink_committed 3\n") != std::string::npos);
  CHECK(text.find("gaitwatch_engine_backend") == std::string::npos);  // strings are not samples
  CHECK(text.find("gaitwatch_alert_latency_seconds_bucket{le=\"0.05\"} 2\n") != std::string::npos);
  CHECK(text.find("gaitwatch_alert_latency_seconds_bucket{le=\"+Inf\"} 3\n") != std::string::npos);
  CHECK(text.find("gaitwatch_alert_latency_seconds_count 3\n") != std::string::npos);
}
