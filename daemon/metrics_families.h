// The Prometheus families that gaitwatchd exports from its counters JSON
// (the "stats." message and `status`): one declared table, so that every
// exported family is deliberate and documented, with Prometheus' naming
// conventions (counters end in `_total`, base units with their suffix,
// reasons and kinds as labels).
//
// The JSON keeps its own names; only the rendering maps them. A numeric leaf
// of the JSON that the table neither maps nor lists as ignored is not
// exported: unmapped_counter_leaves() finds such leaves, and the daemon's
// integration test fails on any, so a new counter cannot go missing
// silently. Stateless; safe from any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gw::daemon {

enum class MetricType { kCounter, kGauge };

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// One sample of a family: the counters-JSON leaf it reads (a JSON pointer,
// "/ingest/admission/bad_mac") and the labels that tell it from the
// family's other samples. A last path token "*" stands for every key of that
// object; a label whose value is "*" then takes the key.
struct MetricSample {
  std::string path;
  MetricLabels labels;
};

struct MetricFamily {
  std::string name;
  MetricType type = MetricType::kGauge;
  std::string help;
  // Multiplies the JSON value into the family's base unit (ms -> s: 1e-3).
  double scale = 1;
  // The leaves may be absent even when their section is there (a feature
  // that is off, keys another component does not provide). Absent leaves are
  // never rendered; this only tells missing_counter_leaves() to accept it.
  bool optional = false;
  std::vector<MetricSample> samples;
};

// A numeric leaf of the counters (or, with a last token "*", every leaf
// under an object) that is deliberately not exported, and why.
struct IgnoredCounterLeaf {
  std::string path;
  std::string why;
};

// The table, in rendering order. Names are unique; every family has help.
const std::vector<MetricFamily>& metric_families();
const std::vector<IgnoredCounterLeaf>& ignored_counter_leaves();

// Appends each family with at least one present leaf (HELP, TYPE, samples)
// to `out`. Booleans render as 0/1; strings are never samples.
void render_counter_families(const nlohmann::json& counters, std::string& out);

// JSON pointers of the numeric or boolean leaves of `counters` that no
// family reads and no ignored entry names.
std::vector<std::string> unmapped_counter_leaves(const nlohmann::json& counters);

// Paths of the samples of non-optional families that `counters` lacks
// (wildcards: their object), for a counters JSON with every section present.
std::vector<std::string> missing_counter_leaves(const nlohmann::json& counters);

// The sample a counters-JSON leaf renders as ("gaitwatch_ingest_frames_
// refused_total{reason=\"bad_mac\"}" for "/ingest/admission/bad_mac") and
// its family's scale; nullopt for a leaf no family reads. For readers of
// /metrics that name what they read by the counters' JSON (bench/e2e_bench).
struct CounterSample {
  std::string sample;
  double scale = 1;
};
std::optional<CounterSample> sample_for_counter(const std::string& json_path);

// The sink's committed alerts by severity, then kind
// (SinkCounters::committed_by_severity), as the counters hold them under
// /sink/committed_by_severity: every severity a pattern can have is there,
// an empty object until one of its alerts commits, so that the family
// gaitwatch_alerts_total is never missing a leaf.
nlohmann::json alerts_by_severity_json(
    const std::map<std::string, std::map<std::string, std::uint64_t>>& committed);

// `gaitwatch_build_info{labels} 1` (HELP and TYPE included).
void render_build_info(const MetricLabels& labels, std::string& out);

// The labels gaitwatch_build_info carries: version (the project's),
// cuda ("true" when the CUDA backend is built in), allocator ("jemalloc"
// when gaitwatchd is linked against it, else "glibc"; GAITWATCH_JEMALLOC)
// and backend (the search backend the daemon started on).
MetricLabels build_info_labels(const std::string& search_backend);

// A label value as the text format writes it (backslash, quote and newline
// escaped).
std::string escape_label_value(const std::string& value);

}  // namespace gw::daemon
