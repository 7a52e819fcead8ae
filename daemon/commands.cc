#include "daemon/commands.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/search.h"
#include "history/history_search.h"
#include "history/history_store.h"
#include "sinks/store.h"

namespace gw::daemon {

using nlohmann::json;
namespace err = control_error;

namespace {

// A status field from its name; kAnyField when absent or "any".
template <std::size_t N>
int status_field(const json& args, const char* name, const char* const (&names)[N]) {
  const std::optional<std::string> value = optional_string_arg(args, name);
  if (!value || *value == "any") return pipeline::kAnyField;
  std::string known;
  for (std::size_t i = 0; i < N; ++i) {
    if (*value == names[i]) return static_cast<int>(i);
    known += std::string(i ? ", " : "") + names[i];
  }
  throw ControlError(err::kBadRequest, std::string("argument '") + name + "': '" + *value +
                                           "' is not one of any, " + known);
}

// The zones a question covers: one, or every configured zone plus "none".
std::vector<int> zones_of(const json& args, const config::Config& config) {
  std::vector<int> all;
  for (int id = 0; id <= static_cast<int>(config.zones.size()); ++id) all.push_back(id);
  const auto it = args.find("zone");
  if (it == args.end() || it->is_null()) return all;
  std::optional<int> id;
  std::string text;
  if (it->is_number_integer()) {
    text = std::to_string(it->get<std::int64_t>());
  } else if (it->is_string()) {
    text = it->get<std::string>();
    if (text == "any") return all;
  } else {
    throw ControlError(err::kBadRequest, "argument 'zone' must be a zone name or id");
  }
  id = config.zone_id(text);
  if (!id) {
    std::string known;
    for (int z : all) known += (known.empty() ? "" : ", ") + config.zone_name(z);
    throw ControlError(err::kBadRequest,
                       "argument 'zone': no zone '" + text + "' (zones: any, " + known + ")");
  }
  return {*id};
}

json slots_job(const json& args, JobContext& job,
               const std::shared_ptr<const DaemonCommandDeps>& shared) {
  const DaemonCommandDeps& deps = *shared;
  if (!deps.slots)
    throw ControlError(err::kUnavailable,
                       "the time-slot index is disabled (slots.enabled: false)");
  const auto wearer = static_cast<std::uint32_t>(int_arg(args, "wearer", 0, pipeline::kMaxSlotWearer));
  pipeline::StatusFilter filter;
  filter.activity = status_field(args, "activity", pipeline::kActivityNames);
  filter.posture = status_field(args, "posture", pipeline::kPostureNames);
  filter.loading = status_field(args, "loading", pipeline::kLoadingNames);
  const std::vector<int> zones = zones_of(args, deps.config);
  const double since = number_arg(args, "since");
  // JSON has no NaN: NaN here means "no until given".
  const double until = number_arg(args, "until", std::numeric_limits<double>::quiet_NaN());
  const bool has_until = !std::isnan(until);
  const std::int64_t limit = int_arg(args, "limit", 1, 10'000'000, 100'000);
  if (!std::isfinite(since) || (has_until && !std::isfinite(until)))
    throw ControlError(err::kBadRequest, "arguments 'since' and 'until' must be finite");

  // The seconds the index holds now: nothing outside them is worth a search.
  const json held = job.on_pipeline([shared]() -> json {
    const auto oldest = shared->slots->oldest_second();
    const auto newest = shared->slots->newest_second();
    if (!oldest) return json();
    return json::array({*oldest, *newest});
  });
  // Every second that overlaps [since, until); no until = up to the newest.
  std::int64_t from = static_cast<std::int64_t>(std::floor(std::max(since, 0.0)));
  std::int64_t to =
      has_until ? static_cast<std::int64_t>(std::ceil(
                      std::min(until, static_cast<double>(pipeline::kMaxSlotSecond) + 1)))
                : from;
  if (held.is_null()) {
    to = from;  // the index is empty
  } else {
    from = std::max(from, held[0].get<std::int64_t>());
    const std::int64_t past_newest = held[1].get<std::int64_t>() + 1;
    to = has_until ? std::min(to, past_newest) : past_newest;
  }

  const std::uint64_t per_second =
      pipeline::matching_status_codes(filter).size() * zones.size();
  const std::int64_t chunk = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(deps.config.slots.query_chunk_searches / per_second));
  const config::Config& config = deps.config;
  json slots = json::array();
  bool truncated = false;
  const std::int64_t total = std::max<std::int64_t>(0, to - from);
  for (std::int64_t begin = from; begin < to && !truncated; begin += chunk) {
    job.throw_if_cancelled();
    const std::int64_t end = std::min(to, begin + chunk);
    // The step owns what it reads (copies, and a share of the deps that
    // keeps the config alive); the index outlives the pipeline's tasks.
    const json hits = job.on_pipeline([shared, wearer, filter, zones, begin, end]() {
      json out = json::array();
      for (const pipeline::SlotHit& hit : shared->slots->query(wearer, filter, zones, begin, end))
        out.push_back(slot_hit_json(hit, shared->config));
      return out;
    });
    for (const json& hit : hits) {
      if (static_cast<std::int64_t>(slots.size()) >= limit) {
        truncated = true;
        break;
      }
      slots.push_back(hit);
    }
    job.progress({{"seconds_done", end - from}, {"seconds_total", total}, {"slots", slots.size()}});
  }
  json zone_names = json::array();
  for (int z : zones) zone_names.push_back(config.zone_name(z));
  return {{"wearer", wearer},
          {"since", since},
          {"until", has_until ? json(until) : json()},
          {"searched_from", from},
          {"searched_to", to},
          {"activity", filter.activity == pipeline::kAnyField
                           ? "any"
                           : pipeline::kActivityNames[filter.activity]},
          {"posture", filter.posture == pipeline::kAnyField
                          ? "any"
                          : pipeline::kPostureNames[filter.posture]},
          {"loading", filter.loading == pipeline::kAnyField
                          ? "any"
                          : pipeline::kLoadingNames[filter.loading]},
          {"zones", zone_names},
          {"count", slots.size()},
          {"truncated", truncated},
          {"slots", std::move(slots)}};
}

// The example of a history.search request: {channels, values (rows of
// samples), device?, band?, znorm?, nr?, alpha?, source?} on raw channels of
// a device profile.
pipeline::HistoryPattern example_pattern(const json& example, const config::Config& config) {
  if (!example.is_object())
    throw ControlError(err::kBadRequest, "argument 'example' must be an object");
  const config::DeviceProfile* device =
      config.devices.empty() ? nullptr : &config.devices.front();
  if (const auto name = optional_string_arg(example, "device")) device = config.device_by_name(*name);
  if (!device) throw ControlError(err::kBadRequest, "argument 'example': no such device");
  sensors::Recording rec;
  rec.source = optional_string_arg(example, "source").value_or("request");
  rec.sample_rate_hz = device->sample_rate_hz;
  rec.channel_names = example.at("channels").get<std::vector<std::string>>();
  for (const json& row : example.at("values")) {
    if (!row.is_array() || row.size() != rec.channel_names.size())
      throw ControlError(err::kBadRequest, "argument 'example': every row of values needs " +
                                               std::to_string(rec.channel_names.size()) +
                                               " numbers (one per channel)");
    for (const json& v : row) rec.values.push_back(v.get<float>());
  }
  pipeline::ExampleOptions options;
  options.band = number_arg(example, "band", options.band);
  options.znorm = example.value("znorm", options.znorm);
  options.nr = static_cast<int>(int_arg(example, "nr", 0, 65535, options.nr));
  options.alpha = number_arg(example, "alpha", options.alpha);
  try {
    return pipeline::history_pattern_from_example(config, device->name, rec, options);
  } catch (const Error& e) {
    throw ControlError(err::kBadRequest, std::string("argument 'example': ") + e.what());
  }
}

json history_search_job(const json& args, JobContext& job,
                        const std::shared_ptr<const DaemonCommandDeps>& shared) {
  const DaemonCommandDeps& deps = *shared;
  if (!deps.config.history.enabled)
    throw ControlError(err::kUnavailable,
                       "the raw-stream history is disabled (history.enabled: false)");
  const std::optional<std::string> pattern_name = optional_string_arg(args, "pattern");
  const bool has_example = args.contains("example") && !args["example"].is_null();
  if (pattern_name.has_value() == has_example)
    throw ControlError(err::kBadRequest, "give exactly one of 'pattern' (a configured pattern's "
                                         "name) and 'example' (channels and values)");
  pipeline::HistorySearchRequest request;
  request.k = static_cast<int>(int_arg(args, "k", 1, 100000, 10));
  request.from = number_arg(args, "from", request.from);
  request.to = number_arg(args, "to", request.to);
  request.slice_samples = static_cast<std::size_t>(
      int_arg(args, "slice_samples", 1, std::int64_t{1} << 30,
              static_cast<std::int64_t>(request.slice_samples)));
  if (args.contains("wearers") && !args["wearers"].is_null())
    request.wearers = args["wearers"].get<std::vector<std::uint32_t>>();

  // The patterns as the engine runs them now (reloads included).
  auto live = std::make_shared<config::Config>();
  if (deps.live_config)
    job.on_pipeline([shared, live]() -> json {
      *live = shared->live_config();
      return json();
    });
  else
    *live = deps.config;
  pipeline::HistoryPattern pattern;
  if (pattern_name) {
    try {
      pattern = pipeline::history_pattern_from_config(*live, *pattern_name);
    } catch (const Error& e) {
      throw ControlError(err::kBadRequest, std::string("argument 'pattern': ") + e.what());
    }
  } else {
    pattern = example_pattern(args["example"], *live);
  }

  // Its own read-only connection and its own backend of the live kind: the
  // search replaces the backend's library, so it cannot share the engine's.
  const pipeline::HistoryStore store(deps.config.history.path, /*read_only=*/true);
  std::string note;
  auto backend = kernels::make_backend(config::name(deps.config.search.backend),
                                       deps.config.search.threads, &note);
  const pipeline::HistorySearchResult result = pipeline::search_history(
      store, pattern, *backend, request,
      [&job](const pipeline::HistoryProgress& p) {
        job.progress({{"fraction", p.fraction},
                      {"windows", p.windows},
                      {"samples", p.samples},
                      {"samples_total", p.samples_total}});
      },
      [&job] { return job.cancelled(); });
  job.throw_if_cancelled();
  return {{"pattern", pattern.pattern().config.name},
          {"backend", backend->name()},
          {"k", request.k},
          {"count", result.matches.size()},
          {"matches", pipeline::history_matches_json(result.matches)},
          {"windows", result.progress.windows},
          {"samples", result.progress.samples},
          {"slices", result.slices},
          {"chunks", result.chunks},
          {"exclusion_samples", result.exclusion_samples},
          {"warnings", result.warnings}};
}

}  // namespace

json slot_hit_json(const pipeline::SlotHit& hit, const config::Config& config) {
  return {{"second", hit.second},
          {"activity", pipeline::kActivityNames[hit.status.activity]},
          {"posture", pipeline::kPostureNames[hit.status.posture]},
          {"loading", pipeline::kLoadingNames[hit.status.loading]},
          {"zone", config.zone_name(hit.zone)},
          {"zone_id", hit.zone},
          {"mean_magnitude", hit.summary.mean_magnitude},
          {"magnitude_std", hit.summary.magnitude_std},
          {"samples", hit.summary.samples},
          {"mean_load", hit.summary.mean_load}};
}

void add_daemon_commands(ControlRegistry& registry, DaemonCommandDeps deps) {
  auto shared = std::make_shared<const DaemonCommandDeps>(std::move(deps));

  registry.add("status", "the daemon's counters (the body of a stats. message)",
               RunsOn::kPipelineThread, [shared](const json&) { return shared->status(); });

  registry.add_job(
      "slots",
      "seconds of a wearer with a status in a zone: {wearer, since, until?, activity?, "
      "posture?, loading?, zone?, limit?}",
      [shared](const json& args, JobContext& job) { return slots_job(args, job, shared); });

  registry.add_job("history.search",
                   "the k windows of the raw-stream history most like a pattern: {pattern | "
                   "example {channels, values, device?, band?, znorm?, nr?, alpha?}, wearers?, "
                   "from?, to?, k?, slice_samples?}",
                   [shared](const json& args, JobContext& job) {
                     return history_search_job(args, job, shared);
                   });

  // One read-only connection, opened on first use and used by the control
  // thread only.
  auto store = std::make_shared<std::unique_ptr<pipeline::HitStore>>();
  // The published body's wall-clock times are in the site's zone.
  const auto zone = std::make_shared<const TimeZone>(
      TimeZone::named_or_system(shared->config.site.time_zone));
  registry.add(
      "alerts.since",
      "stored alerts with seq > since_seq, oldest first: {since_seq?, limit?, wearer?, pattern?}",
      RunsOn::kControlThread, [shared, store, zone](const json& args) -> json {
        pipeline::HitQuery query;
        query.after_seq = static_cast<std::uint64_t>(
            int_arg(args, "since_seq", 0, std::numeric_limits<std::int64_t>::max(), 0));
        query.limit = static_cast<int>(int_arg(args, "limit", 1, 10000, 1000));
        if (args.contains("wearer") && !args["wearer"].is_null())
          query.wearer = static_cast<std::uint32_t>(
              int_arg(args, "wearer", 0, std::numeric_limits<std::uint32_t>::max()));
        query.pattern = optional_string_arg(args, "pattern");
        if (!*store)
          *store = std::make_unique<pipeline::HitStore>(shared->config.storage.path,
                                                        /*read_only=*/true);
        const std::vector<pipeline::Alert> rows = (*store)->query(query);
        json alerts = json::array();
        for (const pipeline::Alert& row : rows)
          alerts.push_back(pipeline::alert_message_json(row, *zone));
        return {{"alerts", alerts},
                {"count", rows.size()},
                {"since_seq", query.after_seq},
                {"last_seq", (*store)->last_seq()},
                {"more", static_cast<int>(rows.size()) == query.limit}};
      });

  // Marks change the engine's patterns, which the pipeline thread owns.
  const auto marks_command = [shared](json (MarkBook::*command)(const json&)) {
    return [shared, command](const json& args) -> json {
      if (!shared->marks) throw ControlError(err::kUnavailable, "marks are not kept by this daemon");
      return (shared->marks->*command)(args);
    };
  };
  registry.add("alert.mark",
               "mark a stored alert false or true: its window becomes a negative or positive "
               "example for its wearer from the next tick on: {seq, verdict: \"false\"|\"true\", "
               "note?}",
               RunsOn::kPipelineThread, marks_command(&MarkBook::mark));
  registry.add("alert.marks",
               "carers' marks, newest first, with whether each one's example is active: "
               "{wearer?, pattern?, include_withdrawn?, limit?}",
               RunsOn::kPipelineThread,
               [shared](const json& args) -> json {
                 if (!shared->marks)
                   throw ControlError(err::kUnavailable, "marks are not kept by this daemon");
                 return shared->marks->list(args);
               });
  registry.add("alert.unmark", "withdraw a mark: its example is dropped from the next tick on: {id}",
               RunsOn::kPipelineThread, marks_command(&MarkBook::unmark));

  registry.add("zones", "the receiving zones: id, name and sender addresses",
               RunsOn::kControlThread, [shared](const json&) -> json {
                 json zones = json::array();
                 zones.push_back({{"id", 0}, {"name", config::kNoZoneName}, {"sources", json::array()}});
                 for (const config::ZoneConfig& zone : shared->config.zones)
                   zones.push_back({{"id", zone.id}, {"name", zone.name}, {"sources", zone.sources}});
                 return {{"zones", zones}};
               });
}

}  // namespace gw::daemon
