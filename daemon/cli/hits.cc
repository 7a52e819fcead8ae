// gaitwatch hits: reads the daemon's SQLite store (read-only; safe while the
// daemon runs, thanks to WAL).
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "daemon/cli/cli.h"
#include "pipeline/store.h"

namespace gw::cli {
namespace {

struct HitsOptions {
  std::string db;
  long wearer = -1;
  std::string pattern;
  std::uint64_t after_seq = 0;
  int limit = 100;
  bool json = false;
};

int run(const HitsOptions& o) {
  pipeline::HitStore store(o.db, /*read_only=*/true);
  pipeline::HitQuery q;
  if (o.wearer >= 0) q.wearer = static_cast<std::uint32_t>(o.wearer);
  if (!o.pattern.empty()) q.pattern = o.pattern;
  q.after_seq = o.after_seq;
  q.limit = o.limit;
  const auto hits = store.query(q);
  if (o.json) {
    for (const auto& h : hits) std::cout << pipeline::alert_to_json(h).dump() << "\n";
    return 0;
  }
  print_hits_table(hits);
  std::printf("%zu hits (store holds %llu, last seq %llu)\n", hits.size(),
              static_cast<unsigned long long>(store.count()),
              static_cast<unsigned long long>(store.last_seq()));
  return 0;
}

}  // namespace

void print_hits_table(const std::vector<pipeline::Alert>& hits) {
  std::printf("%6s %7s %-20s %-17s %-8s %10s %10s %9s %5s\n", "seq", "wearer", "pattern", "kind",
              "severity", "t_start", "t_end", "distance", "dims");
  for (const auto& h : hits)
    std::printf("%6llu %7u %-20s %-17s %-8s %10.2f %10.2f %9.3f %2d/%-2d\n",
                static_cast<unsigned long long>(h.seq), h.wearer, h.pattern.c_str(),
                h.kind.c_str(), h.severity.c_str(), h.t_start, h.t_end, h.distance,
                h.matched_dims, h.pattern_dims);
}

void add_hits(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<HitsOptions>();
  auto* cmd = app.add_subcommand("hits", "list stored hits from the SQLite store");
  cmd->add_option("--db", options->db, "the daemon's storage.path")->required();
  cmd->add_option("--wearer", options->wearer, "only this wearer");
  cmd->add_option("--pattern", options->pattern, "only this pattern");
  cmd->add_option("--after-seq", options->after_seq, "only hits with seq > N (catch up)");
  cmd->add_option("--limit", options->limit, "at most this many (default 100)");
  cmd->add_flag("--json", options->json, "one JSON object per line");
  on_run(*cmd, exit_code, [options] { return run(*options); });
}

}  // namespace gw::cli
