// gaitwatch search: offline search of a recording for the windows most like a
// query, with the same backend the daemon uses. Flags are a scripting
// interface (kept stable):
//   --file F [--format gaitpdb|daphnet|sisfall|csv|values] [--columns NAMES]
//   (--pattern FILE | --example F:START:END) --band R [--znorm] [--nr N]
//   [--top K] [--backend auto|cpu|cuda] [--json]
// Results are the top K windows with an exclusion zone: once a window is
// reported, no other window whose end lies within m/2 samples of it is.
//
// With --history FILE it searches the daemon's raw-stream history instead
// (daemon/cli/history.cc, docs/interfaces.md): --pattern then names a pattern
// of the config. With --daemon [--config F | --endpoint E] the running daemon searches its
// own history (control command history.search) with the same flags.
#include <algorithm>
#include <cmath>
#include <iostream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "daemon/cli/cli.h"
#include "kernels/search.h"
#include "pipeline/detector.h"

namespace gw::cli {
namespace {

struct SearchOptions : SearchFlags {
  std::string pattern_file;  // with --history: a pattern name of the config
  std::string example;
  HistorySearchOptions history;
};

// The query: k dims x m samples, read like the data (same format and columns).
sensors::Recording read_query(const SearchOptions& o) {
  RecordingSource query_source = o.source;
  std::size_t start = 0, end = 0;
  bool slice = false;
  if (!o.example.empty()) {
    parse_example_spec(o.example, query_source.file, start, end);
    slice = true;
  } else {
    query_source.file = o.pattern_file;
  }
  sensors::Recording query = query_source.read();
  if (slice) {
    if (start >= end || end > query.samples())
      throw Error("--example range " + std::to_string(start) + ":" + std::to_string(end) +
                  " is outside " + query_source.file + " (" + std::to_string(query.samples()) +
                  " samples)");
    query = query.slice(start, end);
  }
  return query;
}

struct Ranked {
  std::int64_t end;
  pipeline::Combination combination;
};

int run(const SearchOptions& o) {
  const sensors::Recording data = o.source.read();
  const sensors::Recording query = read_query(o);
  if (query.channels() != data.channels())
    throw Error("query has " + std::to_string(query.channels()) + " channels, data has " +
                std::to_string(data.channels()) + " (use --columns)");
  const int m = static_cast<int>(query.samples());
  const int k = static_cast<int>(query.channels());
  if (m < 2 || static_cast<std::size_t>(m) > data.samples())
    throw Error("query length " + std::to_string(m) + " must be in 2.." +
                std::to_string(data.samples()));
  if (o.band < 0 || o.band > 1) throw Error("--band must be in [0, 1]");

  kernels::Pattern pattern;
  pattern.length = m;
  pattern.band = kernels::band_samples(o.band, m);
  pattern.znorm = o.znorm;
  pattern.dim_count = k;
  const int exclusion = m / 2;
  // Enough candidates per pair that the greedy exclusion below is exact.
  pattern.max_matches_per_pair =
      static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(o.top) * (2 * exclusion + 1),
                                             data.samples()));
  std::vector<int> home;
  for (int j = 0; j < k; ++j) {
    for (int s = 0; s < m; ++s) pattern.dims.push_back(query.at(static_cast<std::size_t>(s), j));
    home.push_back(j);
    for (int i = std::max(0, j - o.nr); i <= std::min(k - 1, j + o.nr); ++i)
      pattern.pairs.push_back({static_cast<std::uint16_t>(j), static_cast<std::uint16_t>(i)});
  }
  auto library = std::make_shared<kernels::PatternLibrary>();
  library->patterns.push_back(pattern);

  std::string note;
  auto backend = kernels::make_backend(config::name(o.backend), o.threads, &note);
  backend->set_library(library);
  kernels::SearchBatch batch;
  batch.add_slice(0, k, data.values.data(), static_cast<int>(data.samples()), 0, m - 1);
  const kernels::SearchResult result = backend->search(batch);

  // Phase 2 at every window end that some pair matched: rank by matched dims,
  // then by weighted distance (Moazeni 2013, §7.4.6), then by end.
  std::vector<pipeline::DimCandidate> candidates;
  for (const auto& match : result.matches)
    candidates.push_back({match.end, match.pattern_dim, match.stream_dim, match.distance, match.start});
  std::sort(candidates.begin(), candidates.end(),
            [](const auto& a, const auto& b) { return a.end < b.end; });
  std::vector<std::int64_t> ends;
  for (const auto& c : candidates) ends.push_back(c.end);
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  std::vector<Ranked> ranked;
  std::vector<pipeline::DimCandidate> window;
  for (const std::int64_t t : ends) {
    // A pair that has a window ending exactly at t contributes that window;
    // other pairs contribute their best window ending within m of t (lag
    // between dims, Moazeni 2013, §7.4.2). With one dim this is plain top-K.
    window.clear();
    auto it = std::lower_bound(candidates.begin(), candidates.end(), t - m + 1,
                               [](const auto& c, std::int64_t e) { return c.end < e; });
    for (; it != candidates.end() && it->end < t + m; ++it) window.push_back(*it);
    std::vector<std::pair<int, int>> exact;
    for (const auto& c : window)
      if (c.end == t) exact.emplace_back(c.pattern_dim, c.stream_dim);
    window.erase(std::remove_if(window.begin(), window.end(),
                                [&](const pipeline::DimCandidate& c) {
                                  return c.end != t &&
                                         std::count(exact.begin(), exact.end(),
                                                    std::make_pair(c.pattern_dim, c.stream_dim));
                                }),
                 window.end());
    ranked.push_back({t, pipeline::combine_matches(window, home, o.alpha)});
  }
  std::sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
    if (a.combination.edges.size() != b.combination.edges.size())
      return a.combination.edges.size() > b.combination.edges.size();
    if (a.combination.distance != b.combination.distance)
      return a.combination.distance < b.combination.distance;
    return a.end < b.end;
  });
  std::vector<Ranked> chosen;
  for (const auto& r : ranked) {
    if (static_cast<int>(chosen.size()) >= o.top) break;
    const bool excluded = std::any_of(chosen.begin(), chosen.end(), [&](const Ranked& c) {
      return std::llabs(c.end - r.end) <= exclusion;
    });
    if (!excluded) chosen.push_back(r);
  }

  if (!o.json) std::cerr << "backend: " << note << "\n";
  for (std::size_t rank = 0; rank < chosen.size(); ++rank) {
    const auto& c = chosen[rank];
    const std::int64_t start = c.end - m + 1;
    nlohmann::json dims = nlohmann::json::array();
    for (const auto& e : c.combination.edges)
      dims.push_back({{"query_dim", e.pattern_dim},
                      {"data_dim", e.stream_dim},
                      {"channel", data.channel_names[static_cast<std::size_t>(e.stream_dim)]},
                      {"distance", e.distance}});
    const nlohmann::json out = {{"rank", rank + 1},
                                {"start", start},
                                {"end", c.end},
                                {"t_start", data.time_s[static_cast<std::size_t>(start)]},
                                {"t_end", data.time_s[static_cast<std::size_t>(c.end)]},
                                {"distance", c.combination.distance},
                                {"matched_dims", c.combination.edges.size()},
                                {"dims", dims}};
    if (o.json) {
      std::cout << out.dump() << "\n";
    } else {
      std::printf("%3zu  start %8lld  end %8lld  t %9.3f s  distance %10.5f  dims %zu/%d\n",
                  rank + 1, static_cast<long long>(start), static_cast<long long>(c.end),
                  data.time_s[static_cast<std::size_t>(start)], c.combination.distance,
                  c.combination.edges.size(), k);
    }
  }
  return 0;
}

}  // namespace

void parse_example_spec(const std::string& spec, std::string& file, std::size_t& start,
                        std::size_t& end) {
  const auto last = spec.rfind(':');
  const auto middle =
      last == std::string::npos || last == 0 ? std::string::npos : spec.rfind(':', last - 1);
  if (middle == std::string::npos)
    throw Error("--example must be FILE:START:END, got '" + spec + "'");
  file = spec.substr(0, middle);
  try {
    start = std::stoul(spec.substr(middle + 1, last - middle - 1));
    end = std::stoul(spec.substr(last + 1));
  } catch (const std::exception&) {
    throw Error("--example must be FILE:START:END with sample indices, got '" + spec + "'");
  }
}

void add_search(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<SearchOptions>();
  auto* cmd = app.add_subcommand(
      "search", "find the windows of a recording, or of the daemon's history, most like a query");
  options->source.add_flags(*cmd, true, false);
  auto* pattern = cmd->add_option(
      "--pattern", options->pattern_file,
      "query file, read like --file (--format or the one its name implies, --columns); with "
      "--history: a pattern "
      "name of the config");
  auto* example = cmd->add_option("--example", options->example,
                                  "query by example: FILE:START:END sample indices, END exclusive");
  pattern->excludes(example);
  auto* band = cmd->add_option("--band", options->band, "Sakoe-Chiba band R, r = floor(R*m)");
  cmd->add_flag("--znorm", options->znorm, "z-normalise query and every window");
  cmd->add_option("--nr", options->nr, "compare query dim j with data dims j-nr..j+nr");
  cmd->add_option("-k,--top", options->top, "number of results (default 10)");
  add_choice_option<config::BackendKind>(*cmd, "--backend", options->backend,
                                         "search backend (default auto)");
  cmd->add_option("--threads", options->threads, "CPU backend threads (default all cores)");
  cmd->add_option("--alpha", options->alpha, "weight of a switched dim in the ranking (>= 1)");
  cmd->add_flag("--json", options->json, "one JSON object per match");
  HistorySearchOptions& h = options->history;
  cmd->add_option("--history", h.history,
                  "search this raw-stream history file (gaitwatchd's "
                  "history.path) instead of --file");
  cmd->add_option("--config", h.config,
                  "with --history: config with the patterns and devices (default: the one the "
                  "daemon recorded in the history file); with --daemon: the daemon's config, "
                  "for control.endpoint and its CURVE server key (default " GW_INSTALLED_CONFIG
                  " when it exists)");
  cmd->add_option("--device", h.device,
                  "with --history --example: device profile of the example's channels (default: "
                  "the config's first device)");
  cmd->add_option("--wearers", h.wearers,
                  "with --history: comma-separated wearer ids (default all)");
  cmd->add_option("--from", h.from,
                  "with --history: start of the time range, device time in seconds or ISO 8601 "
                  "UTC (2024-05-01T10:00:00Z)");
  cmd->add_option("--to", h.to, "with --history: end of the time range (exclusive)");
  cmd->add_option("--slice-samples", h.slice_samples,
                  "with --history: samples per backend batch (memory bound; default 262144)");
  cmd->add_flag("--daemon", h.daemon,
                "search the running daemon's own history through its control interface "
                "(history.search; same flags as --history, without --history)");
  // With --daemon: --endpoint, --timeout (default 60 s), --server-key, --key.
  h.control.add_flags(*cmd, "", false);
  on_run(*cmd, exit_code, [options, band] {
    const SearchOptions& o = *options;
    const bool history = !o.history.history.empty() || o.history.daemon;
    if (o.pattern_file.empty() && o.example.empty())
      throw UsageError(history ? "one of --pattern NAME or --example F:START:END is required"
                               : "one of --pattern FILE or --example F:START:END is required");
    if (o.history.daemon && !o.history.history.empty())
      throw UsageError("--daemon searches the daemon's own history: drop --history");
    if (history) {
      HistorySearchOptions history = o.history;
      history.control.config = history.config;  // --daemon: the endpoint's config
      history.pattern = o.pattern_file;
      history.example = o.example;
      return run_history_search(history, o);
    }
    if (o.source.file.empty()) throw UsageError("--file is required (or --history FILE)");
    if (band->count() == 0) throw UsageError("--band is required when searching a recording");
    return run(o);
  });
}

}  // namespace gw::cli
