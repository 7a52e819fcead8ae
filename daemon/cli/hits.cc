// gaitwatch hits: reads the daemon's SQLite store (read-only; safe while the
// daemon runs, thanks to WAL).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "daemon/cli/cli.h"
#include "pipeline/evaluation.h"
#include "sinks/store.h"
#include "sensors/recording.h"

namespace gw::cli {
namespace {

struct HitsOptions {
  std::string db;
  long wearer = -1;
  std::string pattern;
  std::uint64_t after_seq = 0;
  int limit = 100;
  bool json = false;
  // An annotated recording the hits came from (replayed into the daemon):
  // each hit is shown beside the annotated event it overlaps.
  std::string truth_file;
  std::string truth_format;
  std::int64_t truth_start = 0;  // the replayed sample range [start, end); end < 0: to the end
  std::int64_t truth_end = -1;
  int truth_label = 2;
};

// "m:ss.s" of a recording time in seconds.
std::string clock_text(double seconds) {
  const double whole = std::floor(seconds / 60);
  return fmt::format("{:.0f}:{:04.1f}", whole, seconds - 60 * whole);
}

// The hits next to the recording's annotated events, matched by device time
// (a replay sends the recording's own clock): a hit is on an event when its
// window [t_start, t_end] meets the event widened by one second each side, as
// `gaitwatch eval` scores. Events are those that start inside the replayed
// sample range.
void print_hits_with_truth(const std::vector<pipeline::Alert>& all_hits, const HitsOptions& o) {
  // A sensor_offline alert says the stream stopped, nothing about the
  // movement: it is left out of the comparison (and counted).
  std::vector<pipeline::Alert> hits;
  for (const pipeline::Alert& h : all_hits)
    if (h.kind != pipeline::kSensorOfflineKind) hits.push_back(h);
  const sensors::Recording rec = sensors::read_recording(o.truth_file, o.truth_format);
  if (rec.labels.empty())
    throw Error(o.truth_file + ": the " + o.truth_format + " format carries no annotation");
  const auto samples = static_cast<std::int64_t>(rec.time_s.size());
  const std::int64_t from = std::clamp<std::int64_t>(o.truth_start, 0, samples);
  const std::int64_t to =
      o.truth_end < 0 ? samples : std::clamp<std::int64_t>(o.truth_end, from, samples);
  struct Span {
    double from, to;
  };
  std::vector<Span> events;
  for (const pipeline::LabelledEvent& e : pipeline::events_from_labels(rec.labels, o.truth_label))
    if (e.start >= from && e.start < to)
      events.push_back({rec.time_s[static_cast<std::size_t>(e.start)],
                        rec.time_s[static_cast<std::size_t>(e.end - 1)]});
  constexpr double kToleranceS = 1;
  const auto event_text = [&](std::size_t i) {
    return fmt::format("event {} ({} - {})", i + 1, clock_text(events[i].from),
                       clock_text(events[i].to));
  };
  std::vector<bool> alerted(events.size(), false);
  std::size_t on_event = 0;
  std::printf("%5s %6s  %-18s %-8s  %-19s  %s\n", "seq", "wearer", "pattern", "severity",
              "recording time", "annotation");
  for (const auto& h : hits) {
    std::string truth = "no annotated event: false alert";
    for (std::size_t i = 0; i < events.size(); ++i) {
      if (h.t_end < events[i].from - kToleranceS || h.t_start > events[i].to + kToleranceS)
        continue;
      truth = event_text(i);
      if (!alerted[i]) {
        const double after = h.t_end - events[i].from;
        truth += fmt::format(", alert {:.1f} s {} its onset", std::abs(after),
                             after < 0 ? "before" : "after");
      }
      alerted[i] = true;
      ++on_event;
      break;
    }
    std::printf("%5llu %6u  %-18s %-8s  %8s - %-8s  %s\n", static_cast<unsigned long long>(h.seq),
                h.wearer, h.pattern.c_str(), h.severity.c_str(), clock_text(h.t_start).c_str(),
                clock_text(h.t_end).c_str(), truth.c_str());
  }
  std::size_t detected = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (alerted[i]) {
      ++detected;
    } else {
      std::printf("%5s %6s  %-18s %-8s  %-19s  %s: missed\n", "-", "-", "-", "-", "-",
                  event_text(i).c_str());
    }
  }
  std::printf("%zu of %zu annotated events alerted; %zu alerts, %zu on an event, %zu false\n",
              detected, events.size(), hits.size(), on_event, hits.size() - on_event);
  if (hits.size() != all_hits.size())
    std::printf("(%zu sensor_offline alerts left out: the stream stopped, which says nothing "
                "about the movement)\n",
                all_hits.size() - hits.size());
}

int run(const HitsOptions& o) {
  pipeline::HitStore store(o.db, /*read_only=*/true);
  pipeline::HitQuery q;
  if (o.wearer >= 0) q.wearer = static_cast<std::uint32_t>(o.wearer);
  if (!o.pattern.empty()) q.pattern = o.pattern;
  q.after_seq = o.after_seq;
  q.limit = o.limit;
  const auto hits = store.query(q);
  // Each hit's active mark, if any.
  std::map<std::uint64_t, pipeline::MarkVerdict> marks;
  if (!hits.empty())
    for (const auto& [seq, verdict] : store.verdicts(hits.front().seq, hits.back().seq))
      marks[seq] = verdict;
  const auto mark_json = [&](std::uint64_t seq) -> nlohmann::json {
    const auto it = marks.find(seq);
    if (it == marks.end()) return nullptr;
    return pipeline::verdict_name(it->second);
  };
  if (o.json) {
    for (const auto& h : hits) {
      nlohmann::json j = pipeline::alert_to_json(h);
      j["mark"] = mark_json(h.seq);
      std::cout << j.dump() << "\n";
    }
    return 0;
  }
  if (!o.truth_file.empty()) {
    print_hits_with_truth(hits, o);
    return 0;
  }
  print_hits_table(hits, &marks);
  std::printf("%zu hits (store holds %llu, last seq %llu)\n", hits.size(),
              static_cast<unsigned long long>(store.count()),
              static_cast<unsigned long long>(store.last_seq()));
  return 0;
}

}  // namespace

void print_hits_header(bool with_marks) {
  std::printf("%6s %7s %-20s %-17s %-8s %10s %10s %9s %5s%s\n", "seq", "wearer", "pattern", "kind",
              "severity", "t_start", "t_end", "distance", "dims", with_marks ? "  mark" : "");
  std::fflush(stdout);
}

std::string hit_row(const pipeline::Alert& h) {
  char row[512];
  std::snprintf(row, sizeof row, "%6llu %7u %-20s %-17s %-8s %10.2f %10.2f %9.3f %2d/%-2d",
                static_cast<unsigned long long>(h.seq), h.wearer, h.pattern.c_str(),
                h.kind.c_str(), h.severity.c_str(), h.t_start, h.t_end, h.distance,
                h.matched_dims, h.pattern_dims);
  return row;
}

void print_hits_table(const std::vector<pipeline::Alert>& hits,
                      const std::map<std::uint64_t, pipeline::MarkVerdict>* marks) {
  print_hits_header(marks != nullptr);
  for (const auto& h : hits) {
    std::string mark;
    if (marks) {
      const auto it = marks->find(h.seq);
      mark = std::string("  ") + (it == marks->end() ? "-" : pipeline::verdict_name(it->second));
    }
    // A pressure hotspot's place under the foot, after the columns every hit has.
    const std::string where = h.region.empty() ? "" : "  " + h.foot + " foot, " + h.region;
    std::printf("%s%s%s\n", hit_row(h).c_str(), mark.c_str(), where.c_str());
  }
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
  auto* truth = cmd->add_option("--truth", options->truth_file,
                                "an annotated recording the hits came from (replayed): show each "
                                "hit beside the annotated event it overlaps, and the events missed");
  auto* truth_format = cmd->add_option("--truth-format", options->truth_format,
                                       "the recording's format (daphnet)")
                           ->check(CLI::IsMember({"daphnet"}))
                           ->needs(truth);
  truth->needs(truth_format);
  cmd->add_option("--truth-start", options->truth_start,
                  "first replayed sample (replay --start; default 0)")
      ->needs(truth);
  cmd->add_option("--truth-end", options->truth_end,
                  "one past the last replayed sample (replay --end; default: the end)")
      ->needs(truth);
  cmd->add_option("--truth-label", options->truth_label,
                  "the annotation value of an event (Daphnet: 2 = freeze; default 2)")
      ->needs(truth);
  on_run(*cmd, exit_code, [options] { return run(*options); });
}

}  // namespace gw::cli
