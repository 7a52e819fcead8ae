// docs/grafana/gaitwatch-dashboard.json against what the daemon exports:
// every metric a panel's query reads is a family /metrics renders (the
// counter table, the histograms, build info, the process metrics), every
// label a query groups by is one of that metric's, and every datasource is
// the dashboard's variable, so that the dashboard cannot drift from the
// daemon nor be tied to one Grafana's datasource.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/metrics.h"
#include "daemon/metrics_families.h"
#include "daemon/process_metrics.h"

using nlohmann::json;

namespace {

// Metric name -> the label names its samples carry.
using KnownMetrics = std::map<std::string, std::set<std::string>>;

// Every family /metrics renders, by the names a query uses (a histogram's
// _bucket, _sum and _count series).
KnownMetrics exported_metrics() {
  KnownMetrics known;
  for (const gw::daemon::MetricFamily& family : gw::daemon::metric_families()) {
    std::set<std::string>& labels = known[family.name];
    for (const gw::daemon::MetricSample& sample : family.samples)
      for (const auto& label : sample.labels) labels.insert(label.first);
  }
  // The rest of the page as the daemon renders it: the TYPE lines name them.
  std::string page = gw::daemon::render_prometheus(gw::daemon::MetricsSnapshot{});
  gw::daemon::render_build_info(gw::daemon::build_info_labels("cpu"), page);
  gw::daemon::render_process_metrics(gw::daemon::read_process_stats(), page);
  std::istringstream lines(page);
  std::string line;
  const std::regex type_line("# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram)");
  std::smatch m;
  while (std::getline(lines, line)) {
    if (!std::regex_match(line, m, type_line)) continue;
    const std::string name = m[1];
    if (m[2] == "histogram") {
      known[name + "_bucket"] = {"le"};
      known[name + "_sum"];
      known[name + "_count"];
    } else {
      known[name];
    }
  }
  for (const auto& [label, value] : gw::daemon::build_info_labels("cpu"))
    known["gaitwatch_build_info"].insert(label);
  return known;
}

json read_dashboard() {
  std::ifstream in(std::string(GW_DOCS_DIR) + "/grafana/gaitwatch-dashboard.json");
  REQUIRE(in);
  return json::parse(in);
}

// Every panel, rows' nested ones included.
void collect_panels(const json& panels, std::vector<json>& out) {
  for (const json& panel : panels) {
    out.push_back(panel);
    if (panel.contains("panels")) collect_panels(panel["panels"], out);
  }
}

// The metric names of a PromQL expression: identifiers of gaitwatchd's
// prefixes (gaitwatch_, process_), which no PromQL function starts with.
std::vector<std::string> metrics_in(const std::string& expr) {
  static const std::regex name("\\b(gaitwatch|process)_[a-z0-9_]+");
  std::vector<std::string> names;
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), name); it != std::sregex_iterator();
       ++it)
    names.push_back(it->str());
  return names;
}

// The labels of every `by (...)` clause.
std::vector<std::string> grouping_labels(const std::string& expr) {
  static const std::regex by("\\bby\\s*\\(([^)]*)\\)");
  static const std::regex label("[a-zA-Z_][a-zA-Z0-9_]*");
  std::vector<std::string> labels;
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), by); it != std::sregex_iterator();
       ++it) {
    const std::string list = (*it)[1];
    for (auto l = std::sregex_iterator(list.begin(), list.end(), label);
         l != std::sregex_iterator(); ++l)
      labels.push_back(l->str());
  }
  return labels;
}

// Every "datasource" member anywhere in the dashboard.
void collect_datasources(const json& node, std::vector<json>& out) {
  if (node.is_object()) {
    for (const auto& [key, value] : node.items()) {
      if (key == "datasource") out.push_back(value);
      collect_datasources(value, out);
    }
  } else if (node.is_array()) {
    for (const json& item : node) collect_datasources(item, out);
  }
}

}  // namespace

TEST_CASE("the query parsers find metrics and grouping labels", "[dashboard]") {
  const std::string expr =
      "histogram_quantile(0.99, sum by (le) (rate(gaitwatch_batch_seconds_bucket{job=~\"$job\"}"
      "[$__rate_interval]))) + sum by (severity, kind) (rate(gaitwatch_alerts_total[5m])) "
      "+ process_open_fds";
  CHECK(metrics_in(expr) == std::vector<std::string>{"gaitwatch_batch_seconds_bucket",
                                                     "gaitwatch_alerts_total", "process_open_fds"});
  CHECK(grouping_labels(expr) == std::vector<std::string>{"le", "severity", "kind"});
  const KnownMetrics known = exported_metrics();
  CHECK(known.count("gaitwatch_alerts_total") == 1);
  CHECK(known.at("gaitwatch_alerts_total") == std::set<std::string>{"severity", "kind"});
  CHECK(known.count("gaitwatch_alert_latency_seconds_bucket") == 1);
  CHECK(known.count("process_resident_memory_bytes") == 1);
  CHECK(known.count("gaitwatch_no_such_family") == 0);
}

TEST_CASE("every metric and label a dashboard query reads is one the daemon exports",
          "[dashboard]") {
  const json dashboard = read_dashboard();
  const KnownMetrics known = exported_metrics();
  std::vector<json> panels;
  collect_panels(dashboard.at("panels"), panels);
  std::size_t queries = 0;
  std::set<std::string> used;
  for (const json& panel : panels) {
    if (!panel.contains("targets")) continue;
    for (const json& target : panel["targets"]) {
      const std::string expr = target.at("expr").get<std::string>();
      INFO(panel.value("title", "?") << ": " << expr);
      ++queries;
      const std::vector<std::string> metrics = metrics_in(expr);
      CHECK_FALSE(metrics.empty());
      std::set<std::string> labels;
      for (const std::string& metric : metrics) {
        INFO(metric);
        const auto found = known.find(metric);
        CHECK(found != known.end());
        if (found == known.end()) continue;
        used.insert(metric);
        labels.insert(found->second.begin(), found->second.end());
      }
      for (const std::string& label : grouping_labels(expr)) {
        INFO("by " << label);
        CHECK(labels.count(label) == 1);
      }
    }
  }
  CHECK(queries >= 20);
  // The panels the dashboard is for.
  for (const char* metric :
       {"gaitwatch_alerts_total", "gaitwatch_alert_latency_seconds_bucket",
        "gaitwatch_batch_seconds_bucket", "gaitwatch_engine_deadline_misses_total",
        "gaitwatch_ingest_queue_frames", "gaitwatch_ingest_frames_received_total",
        "gaitwatch_ingest_decode_errors_total", "gaitwatch_bridge_mqtt_messages_total",
        "gaitwatch_bridge_webhook_messages_total", "process_resident_memory_bytes",
        "process_cpu_seconds_total"}) {
    INFO(metric);
    CHECK(used.count(metric) == 1);
  }
}

TEST_CASE("the dashboard's datasource is a variable, never a fixed uid", "[dashboard]") {
  const json dashboard = read_dashboard();
  bool variable = false;
  for (const json& v : dashboard.at("templating").at("list"))
    variable = variable || (v.at("name") == "datasource" && v.at("type") == "datasource" &&
                            v.at("query") == "prometheus");
  CHECK(variable);
  std::vector<json> datasources;
  collect_datasources(dashboard, datasources);
  CHECK(datasources.size() >= 20);
  for (const json& ds : datasources) {
    INFO(ds.dump());
    REQUIRE(ds.is_object());
    CHECK(ds.at("uid") == "${datasource}");
  }
  CHECK_FALSE(dashboard.contains("__inputs"));  // nothing to bind at import
}
