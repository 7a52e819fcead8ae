// The daemon's side of carers' marks (docs/interfaces.md: alert.mark,
// alert.marks, alert.unmark): the marks live in the hit store (its own
// read-write connection to storage.path, apart from the sink's), and every
// active mark whose window still fits its pattern adds a wearer-scoped
// example (pipeline/marks.h) to the config the engine runs. The daemon asks
// effective_config() for that config at start, after each reload and
// whenever take_changed() says the marks changed, and reconfigures the
// engine with it between two ticks (as a reload does).
//
// A mark whose example cannot be used stays stored and listed but inactive,
// with its reason: its pattern is no longer configured, its pattern's shape
// (channels, transforms, length) changed since the window was cut, or newer
// marks of the same wearer and pattern fill marks.max_examples_per_wearer.
// A mark that becomes inactive, or active again, is logged once.
//
// Thread safety: none; the daemon's pipeline thread owns it (the control
// commands run there). Errors: store failures throw gw::Error.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "sinks/event.h"
#include "sinks/store.h"

namespace gw::daemon {

// Why an active mark adds no example.
enum class MarkInactive { kNone, kPatternMissing, kShapeChanged, kOverCap };
const char* inactive_reason_name(MarkInactive reason);

class MarkBook {
 public:
  // Opens storage.path (the sink has created it) and reads the active marks
  // against `base`.
  MarkBook(const std::string& db_path, const config::Config& base);

  // The config without marks' examples changed (a reload): the marks are
  // evaluated against it anew.
  void set_base(const config::Config& base);
  const config::Config& base_config() const { return base_; }
  // `base` plus every usable mark's example.
  const config::Config& effective_config() const { return effective_; }
  // Whether effective_config() changed since the last call (then false until
  // the next change).
  bool take_changed() { return std::exchange(changed_, false); }
  // Whether effective_config() changed since take_changed() last ran.
  bool changed() const { return changed_; }

  // Where mark() and unmark() send their alert_marked / alert_unmarked
  // events (AlertSink::submit_event in the daemon); none = no events.
  void set_event_publisher(std::function<void(pipeline::Event)> publish) {
    publish_event_ = std::move(publish);
  }

  // The control commands; arguments and replies as docs/interfaces.md says.
  // Throw daemon::ControlError for requests the store refuses.
  nlohmann::json mark(const nlohmann::json& args);
  nlohmann::json list(const nlohmann::json& args) const;
  nlohmann::json unmark(const nlohmann::json& args);

  // Active marks whose example is in effective_config().
  std::size_t active_examples() const;
  // Gauges of the active marks by state, and counters of the requests.
  nlohmann::json stats_json() const;

 private:
  // Reads the active marks and windows again and recomputes effective_ and
  // the states; logs marks whose state changed.
  void refresh();
  nlohmann::json mark_json(const pipeline::MarkRecord& mark) const;
  // The alert_marked / alert_unmarked event of `mark`, by `actor`.
  void publish_mark_event(pipeline::EventType type, const pipeline::MarkRecord& mark,
                          const std::string& actor) const;

  std::function<void(pipeline::Event)> publish_event_;

  std::unique_ptr<pipeline::HitStore> store_;
  config::Config base_;
  config::Config effective_;
  bool changed_ = false;
  std::map<std::int64_t, MarkInactive> state_;  // per active mark
  struct Counts {
    std::uint64_t marked = 0, remarked = 0, withdrawn = 0, refused = 0;
  } counts_;
};

}  // namespace gw::daemon
