// The metrics histogram, the Prometheus rendering and its family table
// (daemon/metrics.h, daemon/metrics_families.h) and the process metrics
// (daemon/process_metrics.h). The HTTP endpoint and promtool's verdict on
// the real daemon's page are in metrics_process_test.cc.
#include "daemon/metrics.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <regex>
#include <set>
#include <string>

#include "config/config.h"
#include "daemon/ingest.h"
#include "daemon/metrics_families.h"
#include "daemon/process_metrics.h"
#include "kernels/search.h"
#include "pipeline/engine.h"
#include "history/history_recorder.h"

using gw::daemon::LatencyHistogram;
using gw::daemon::metric_families;
using gw::daemon::MetricType;
using nlohmann::json;

namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

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

TEST_CASE("counters render as the table's families: labels, base units, HELP and TYPE",
          "[metrics]") {
  gw::daemon::MetricsSnapshot s;
  s.counters = {
      {"engine",
       {{"alerts", 3},
        {"last_batch_ms", 12.5},
        {"backend", "cpu"},
        {"deferred_streams", 4},
        {"shed_streams", 0},
        {"not_in_the_table", 7}}},
      {"ingest",
       {{"decode_errors", {{"bad_crc", 2}, {"truncated", 0}}}, {"admission", {{"bad_mac", 5}}}}},
      {"sink", {{"committed", 3}, {"commit_s", 0.25}}},
      {"dedup", {{"enabled", true}}},
      {"latency", {{"alert_p50_ms", 40}}}};
  for (double ms : {10.0, 40.0, 400.0}) s.alert_latency.observe(ms);
  const std::string text = gw::daemon::render_prometheus(s);
  INFO(text);
  CHECK(has(text, "# HELP gaitwatch_engine_alerts_total Detections"));
  CHECK(
      has(text, "# TYPE gaitwatch_engine_alerts_total counter\ngaitwatch_engine_alerts_total 3\n"));
  CHECK(has(text,
            "# TYPE gaitwatch_engine_last_batch_seconds gauge\n"
            "gaitwatch_engine_last_batch_seconds 0.0125\n"));
  CHECK(has(text,
            "gaitwatch_engine_overload_streams_total{action=\"deferred\"} 4\n"
            "gaitwatch_engine_overload_streams_total{action=\"shed\"} 0\n"));
  CHECK(has(text, "gaitwatch_ingest_decode_errors_total{status=\"bad_crc\"} 2\n"));
  CHECK(has(text, "gaitwatch_ingest_decode_errors_total{status=\"truncated\"} 0\n"));
  CHECK(has(text, "gaitwatch_ingest_frames_refused_total{reason=\"bad_mac\"} 5\n"));
  CHECK(has(text, "gaitwatch_sink_committed_alerts_total 3\n"));
  CHECK(has(text, "gaitwatch_sink_thread_seconds_total{activity=\"commit\"} 0.25\n"));
  CHECK(has(text, "gaitwatch_table_enabled{table=\"dedup\"} 1\n"));
  // Each family's HELP and TYPE come once, before its samples.
  CHECK(text.find("# TYPE gaitwatch_engine_overload_streams_total") ==
        text.rfind("# TYPE gaitwatch_engine_overload_streams_total"));
  // Strings, leaves the table does not know, ignored leaves and families
  // without a present leaf are not rendered.
  CHECK_FALSE(has(text, "\ngaitwatch_engine_backend"));
  CHECK_FALSE(has(text, "not_in_the_table"));
  CHECK_FALSE(has(text, "alert_p50"));
  CHECK_FALSE(has(text, "quantile"));
  CHECK_FALSE(has(text, "gaitwatch_streams"));
  CHECK_FALSE(has(text, "gaitwatch_history"));
  CHECK_FALSE(has(text, "{reason=\"not_allowed\"}"));
  // The histograms, in seconds.
  CHECK(has(text, "# TYPE gaitwatch_alert_latency_seconds histogram\n"));
  CHECK(has(text, "gaitwatch_alert_latency_seconds_bucket{le=\"0.05\"} 2\n"));
  CHECK(has(text, "gaitwatch_alert_latency_seconds_bucket{le=\"+Inf\"} 3\n"));
  CHECK(has(text, "gaitwatch_alert_latency_seconds_count 3\n"));
  CHECK(has(text, "gaitwatch_alert_latency_seconds_sum 0.45\n"));
}

TEST_CASE("streams by state and the oldest frame age are optional leaves", "[metrics]") {
  const json without = {{"engine", {{"streams", 2}}}};
  std::string text;
  gw::daemon::render_counter_families(without, text);
  CHECK_FALSE(has(text, "gaitwatch_streams"));
  CHECK_FALSE(has(text, "oldest_frame_age"));
  for (const std::string& path : gw::daemon::missing_counter_leaves(without))
    CHECK(path.rfind("/engine/streams_by_state", 0) != 0);

  const json with = {{"engine",
                      {{"streams_by_state", {{"online", 5}, {"stale", 1}, {"offline", 2}}},
                       {"oldest_frame_age_s", 31.5}}}};
  text.clear();
  gw::daemon::render_counter_families(with, text);
  INFO(text);
  CHECK(has(text, "# TYPE gaitwatch_streams gauge\n"));
  CHECK(has(text, "gaitwatch_streams{state=\"online\"} 5\n"));
  CHECK(has(text, "gaitwatch_streams{state=\"stale\"} 1\n"));
  CHECK(has(text, "gaitwatch_streams{state=\"offline\"} 2\n"));
  CHECK(has(text, "gaitwatch_stream_oldest_frame_age_seconds 31.5\n"));
  CHECK(gw::daemon::unmapped_counter_leaves(with).empty());
}

TEST_CASE("the family table follows Prometheus naming conventions", "[metrics]") {
  const std::regex name_re("gaitwatch_[a-z0-9_]+");
  // promtool's unit-abbreviation and base-unit lints.
  const std::set<std::string> abbreviations = {"s",  "ms", "us", "ns", "sec", "b", "kb",
                                               "mb", "gb", "tb", "pb", "m",   "h", "d"};
  std::set<std::string> names;
  for (const auto& f : metric_families()) {
    INFO(f.name);
    CHECK(std::regex_match(f.name, name_re));
    CHECK(names.insert(f.name).second);
    CHECK_FALSE(f.help.empty());
    CHECK(f.help.find_first_of("\\\n") == std::string::npos);
    const bool total = f.name.size() > 6 && f.name.compare(f.name.size() - 6, 6, "_total") == 0;
    CHECK(total == (f.type == MetricType::kCounter));
    for (const char* reserved : {"_bucket", "_count", "_sum", "_info"})
      CHECK(f.name.find(reserved) == std::string::npos);
    std::size_t at = 0;
    while (at <= f.name.size()) {
      const std::size_t end = std::min(f.name.find('_', at), f.name.size());
      const std::string token = f.name.substr(at, end - at);
      CHECK(abbreviations.count(token) == 0);
      CHECK(token.rfind("milli", 0) != 0);
      at = end + 1;
    }
    // A scaled family reads ms into seconds, and says so in its name.
    if (f.scale != 1) CHECK(f.name.find("_seconds") != std::string::npos);
    // The samples of a family carry the same label names, with distinct values.
    REQUIRE_FALSE(f.samples.empty());
    std::set<gw::daemon::MetricLabels> label_sets;
    for (const auto& sample : f.samples) {
      CHECK(sample.path.rfind('/', 0) == 0);
      CHECK(label_sets.insert(sample.labels).second);
      REQUIRE(sample.labels.size() == f.samples.front().labels.size());
      for (std::size_t i = 0; i < sample.labels.size(); ++i) {
        CHECK(sample.labels[i].first == f.samples.front().labels[i].first);
        CHECK(sample.labels[i].first != "quantile");
        CHECK(sample.labels[i].first != "le");
      }
      const bool wildcard =
          sample.path.size() > 2 && sample.path.compare(sample.path.size() - 2, 2, "/*") == 0;
      bool key_label = false;
      for (const auto& label : sample.labels) key_label = key_label || label.second == "*";
      CHECK(wildcard == key_label);
    }
  }
}

TEST_CASE("leaves the table neither maps nor ignores are reported, and absent ones", "[metrics]") {
  const json counters = {{"engine", {{"alerts", 1}, {"backend", "cpu"}, {"new_counter", 2}}},
                         {"ingest", {{"decode_errors", {{"some_new_status", 1}}}}},
                         {"latency", {{"alert_p99_ms", 9}}},
                         {"brand_new_section", {{"flag", true}}}};
  const auto unmapped = gw::daemon::unmapped_counter_leaves(counters);
  CHECK(unmapped == std::vector<std::string>{"/brand_new_section/flag", "/engine/new_counter"});
  const auto missing = gw::daemon::missing_counter_leaves(counters);
  const std::set<std::string> missing_set(missing.begin(), missing.end());
  CHECK(missing_set.count("/engine/frames_accepted") == 1);
  CHECK(missing_set.count("/engine/alerts") == 0);
  CHECK(missing_set.count("/ingest/decode_errors") == 0);  // wildcard: its object
  CHECK(missing_set.count("/control/errors") == 1);
  CHECK(missing_set.count("/control/curve_admitted") == 0);  // optional
}

TEST_CASE("a counter's JSON path names its sample on the page", "[metrics]") {
  const auto refused = gw::daemon::sample_for_counter("/ingest/admission/bad_mac");
  REQUIRE(refused);
  CHECK(refused->sample == "gaitwatch_ingest_frames_refused_total{reason=\"bad_mac\"}");
  CHECK(refused->scale == 1);
  const auto decode = gw::daemon::sample_for_counter("/ingest/decode_errors/bad_crc");
  REQUIRE(decode);
  CHECK(decode->sample == "gaitwatch_ingest_decode_errors_total{status=\"bad_crc\"}");
  const auto batch = gw::daemon::sample_for_counter("/engine/last_batch_ms");
  REQUIRE(batch);
  CHECK(batch->sample == "gaitwatch_engine_last_batch_seconds");
  CHECK(batch->scale == 1e-3);
  CHECK_FALSE(gw::daemon::sample_for_counter("/latency/alert_p99_ms"));
  CHECK_FALSE(gw::daemon::sample_for_counter("/engine/no_such_counter"));
}

TEST_CASE("the real ingest, engine and history counters are all mapped", "[metrics]") {
  // The sections whose JSON can be built here from their own sources; the
  // whole counters object of a running daemon is checked in
  // metrics_process_test.cc.
  gw::daemon::IngestCounters ingest;
  gw::daemon::FrameQueue queue(4, gw::OverflowPolicy::kDropNewest);
  const auto config = gw::config::load_config(std::string(GW_CONFIG_DIR) + "/gaitwatch.yaml");
  gw::pipeline::Engine engine(config, gw::kernels::make_cpu_backend(1));
  const auto dir =
      std::filesystem::temp_directory_path() / ("gw_metrics_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  json history;
  {
    gw::pipeline::HistoryOptions options;
    options.path = (dir / "history.db").string();
    gw::pipeline::HistoryRecorder recorder(options);
    history = recorder.stats_json();
  }
  std::filesystem::remove_all(dir);
  const json counters = {
      {"ingest", ingest.to_json(queue)}, {"engine", engine.stats_json()}, {"history", history}};
  CHECK(gw::daemon::unmapped_counter_leaves(counters) == std::vector<std::string>{});
  for (const std::string& path : gw::daemon::missing_counter_leaves(counters)) {
    INFO(path);
    const bool other_section = path.rfind("/ingest", 0) != 0 && path.rfind("/engine", 0) != 0 &&
                               path.rfind("/history", 0) != 0;
    CHECK(other_section);
  }
}

TEST_CASE("committed alerts by severity and kind: every severity there, kinds as labels",
          "[metrics]") {
  const json none = gw::daemon::alerts_by_severity_json({});
  CHECK(none == json{{"info", json::object()},
                     {"warning", json::object()},
                     {"critical", json::object()}});
  const json counters = {{"sink", {{"committed_by_severity", none}}}};
  for (const std::string& path : gw::daemon::missing_counter_leaves(counters))
    CHECK(path.rfind("/sink/committed_by_severity", 0) != 0);

  const json some = gw::daemon::alerts_by_severity_json(
      {{"critical", {{"fall", 3}, {"sensor_offline", 1}}}, {"warning", {{"freeze", 2}}}});
  const json with_alerts = {{"sink", {{"committed_by_severity", some}}}};
  std::string text;
  gw::daemon::render_counter_families(with_alerts, text);
  INFO(text);
  CHECK(has(text, "# TYPE gaitwatch_alerts_total counter\n"));
  CHECK(has(text, "gaitwatch_alerts_total{severity=\"critical\",kind=\"fall\"} 3\n"));
  CHECK(has(text, "gaitwatch_alerts_total{severity=\"critical\",kind=\"sensor_offline\"} 1\n"));
  CHECK(has(text, "gaitwatch_alerts_total{severity=\"warning\",kind=\"freeze\"} 2\n"));
  CHECK_FALSE(has(text, "severity=\"info\""));
  CHECK(gw::daemon::unmapped_counter_leaves(with_alerts).empty());
}

TEST_CASE("build info and process metrics", "[metrics]") {
  std::string text;
  gw::daemon::render_build_info(gw::daemon::build_info_labels("cpu \"2\" threads"), text);
  INFO(text);
  CHECK(has(text, "# TYPE gaitwatch_build_info gauge\n"));
  CHECK(has(text, "gaitwatch_build_info{version=\""));
  // The allocator gaitwatchd is linked with (GAITWATCH_JEMALLOC).
  CHECK((has(text, ",allocator=\"jemalloc\",") || has(text, ",allocator=\"glibc\",")));
  CHECK(has(text, ",backend=\"cpu \\\"2\\\" threads\"} 1\n"));

  const auto stats = gw::daemon::read_process_stats();
  REQUIRE(stats.cpu_seconds);
  CHECK(*stats.cpu_seconds >= 0);
  REQUIRE(stats.resident_bytes);
  CHECK(*stats.resident_bytes > 1e5);
  REQUIRE(stats.virtual_bytes);
  CHECK(*stats.virtual_bytes >= *stats.resident_bytes);
  REQUIRE(stats.open_fds);
  CHECK(*stats.open_fds >= 3);
  if (stats.max_fds) CHECK(*stats.max_fds >= *stats.open_fds);
  REQUIRE(stats.start_time_seconds);
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // This test process started within the last hour (btime is whole seconds).
  CHECK(*stats.start_time_seconds <= now + 1);
  CHECK(*stats.start_time_seconds > now - 3600);
  text.clear();
  gw::daemon::render_process_metrics(stats, text);
  for (const char* name :
       {"process_cpu_seconds_total", "process_resident_memory_bytes",
        "process_virtual_memory_bytes", "process_open_fds", "process_start_time_seconds"})
    CHECK(has(text, std::string("# TYPE ") + name));
  CHECK(has(text, "# TYPE process_cpu_seconds_total counter\n"));
}
