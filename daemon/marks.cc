#include "daemon/marks.h"

#include <chrono>
#include <limits>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "daemon/control.h"
#include "pipeline/marks.h"

namespace gw::daemon {

using nlohmann::json;
namespace err = control_error;

namespace {

// Longest note kept with a mark, in bytes.
constexpr std::size_t kMaxNoteBytes = 1000;
// Who a mark's event names when the request names nobody (`by`).
constexpr const char* kUnnamedActor = "unknown";

double unix_now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

ControlError control_error_of(const pipeline::MarkError& e) {
  using Reason = pipeline::MarkError::Reason;
  switch (e.reason()) {
    case Reason::kUnknownSeq:
      return ControlError(err::kUnknownAlert, e.what());
    case Reason::kNoWindow:
      return ControlError(err::kNoWindow, e.what());
    case Reason::kUnknownMark:
      return ControlError(err::kUnknownMark, e.what());
    case Reason::kAlreadyWithdrawn:
      return ControlError(err::kAlreadyWithdrawn, e.what());
  }
  return ControlError(err::kFailed, e.what());
}

const config::PatternConfig* pattern_named(const config::Config& config, const std::string& name) {
  for (const config::PatternConfig& p : config.patterns)
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace

const char* inactive_reason_name(MarkInactive reason) {
  switch (reason) {
    case MarkInactive::kNone:
      return "";
    case MarkInactive::kPatternMissing:
      return "pattern_missing";
    case MarkInactive::kShapeChanged:
      return "shape_changed";
    case MarkInactive::kOverCap:
      return "over_cap";
  }
  return "";
}

MarkBook::MarkBook(const std::string& db_path, const config::Config& base)
    : store_(std::make_unique<pipeline::HitStore>(db_path)), base_(base), effective_(base) {
  refresh();
}

void MarkBook::set_base(const config::Config& base) {
  base_ = base;
  refresh();
  changed_ = true;
}

void MarkBook::refresh() {
  config::Config effective = base_;
  std::map<std::int64_t, MarkInactive> state;
  std::map<std::int64_t, std::string> why;
  std::vector<pipeline::MarkedExample> examples;
  for (const pipeline::MarkWithWindow& m : store_->active_marks()) {
    const config::PatternConfig* pattern = pattern_named(base_, m.mark.pattern);
    if (!pattern) {
      state[m.mark.id] = MarkInactive::kPatternMissing;
      why[m.mark.id] = "pattern '" + m.mark.pattern + "' is no longer configured";
      continue;
    }
    const config::DeviceProfile* device = base_.device_by_name(pattern->device);
    try {
      if (!device) throw Error("no device '" + pattern->device + "'");
      examples.push_back({static_cast<std::uint64_t>(m.mark.id), m.mark.pattern,
                          pipeline::example_from_window(*pattern, device->sample_rate_hz,
                                                        m.window, m.mark.verdict)});
      state[m.mark.id] = MarkInactive::kNone;
    } catch (const Error& e) {
      state[m.mark.id] = MarkInactive::kShapeChanged;
      why[m.mark.id] = e.what();
    }
  }
  const pipeline::MarkedExamplesApplied applied = pipeline::add_marked_examples(
      effective, examples, base_.marks.max_examples_per_wearer);
  for (std::uint64_t id : applied.over_cap) {
    state[static_cast<std::int64_t>(id)] = MarkInactive::kOverCap;
    why[static_cast<std::int64_t>(id)] =
        "newer marks of its wearer and pattern fill marks.max_examples_per_wearer (" +
        std::to_string(base_.marks.max_examples_per_wearer) + ")";
  }
  for (const auto& [id, reason] : state) {
    const auto before = state_.find(id);
    const MarkInactive was = before == state_.end() ? MarkInactive::kNone : before->second;
    if (reason == was) continue;
    if (reason == MarkInactive::kNone)
      spdlog::info("mark {}: its example is active again", id);
    else
      spdlog::warn("mark {}: its example is inactive ({}): {}", id, inactive_reason_name(reason),
                   why[id]);
  }
  state_ = std::move(state);
  effective_ = std::move(effective);
  changed_ = true;
}

json MarkBook::mark_json(const pipeline::MarkRecord& mark) const {
  json j = {{"id", mark.id},
            {"seq", mark.seq},
            {"wearer", mark.wearer},
            {"pattern", mark.pattern},
            {"verdict", pipeline::verdict_name(mark.verdict)},
            {"note", mark.note},
            {"created_at", mark.created_at},
            {"withdrawn_at", mark.withdrawn_at ? json(*mark.withdrawn_at) : json()}};
  if (mark.withdrawn_at) {
    j["active"] = false;
    j["inactive_reason"] = "withdrawn";
  } else {
    const auto it = state_.find(mark.id);
    const MarkInactive reason = it == state_.end() ? MarkInactive::kNone : it->second;
    j["active"] = reason == MarkInactive::kNone;
    j["inactive_reason"] = reason == MarkInactive::kNone ? json() : json(inactive_reason_name(reason));
  }
  return j;
}

json MarkBook::mark(const json& args) {
  const auto seq = static_cast<std::uint64_t>(
      int_arg(args, "seq", 1, std::numeric_limits<std::int64_t>::max()));
  const std::string verdict_text = string_arg(args, "verdict");
  const std::optional<pipeline::MarkVerdict> verdict = pipeline::parse_verdict(verdict_text);
  if (!verdict)
    throw ControlError(err::kBadRequest,
                       "argument 'verdict' must be \"false\" or \"true\", got \"" + verdict_text + "\"");
  const std::string note = optional_string_arg(args, "note").value_or("");
  if (note.size() > kMaxNoteBytes)
    throw ControlError(err::kBadRequest, "argument 'note' is longer than " +
                                             std::to_string(kMaxNoteBytes) + " bytes");
  const std::string actor = optional_string_arg(args, "by").value_or(kUnnamedActor);
  pipeline::MarkAdded added;
  try {
    added = store_->add_mark(seq, *verdict, note, unix_now_s());
  } catch (const pipeline::MarkError& e) {
    ++counts_.refused;
    throw control_error_of(e);
  }
  ++(added.replaced ? counts_.remarked : counts_.marked);
  refresh();
  publish_mark_event(pipeline::EventType::kAlertMarked, added.mark, actor);
  spdlog::info("mark {}: alert {} (wearer {}, pattern {}) marked {}{}", added.mark.id, seq,
               added.mark.wearer, added.mark.pattern, pipeline::verdict_name(*verdict),
               added.replaced ? std::string(" (was ") + pipeline::verdict_name(*added.replaced) + ")"
                              : std::string());
  json reply = {{"mark", mark_json(added.mark)},
                {"replaced", added.replaced ? json(pipeline::verdict_name(*added.replaced)) : json()}};
  return reply;
}

json MarkBook::list(const json& args) const {
  pipeline::MarkQuery query;
  if (args.contains("wearer") && !args["wearer"].is_null())
    query.wearer = static_cast<std::uint32_t>(
        int_arg(args, "wearer", 0, std::numeric_limits<std::uint32_t>::max()));
  query.pattern = optional_string_arg(args, "pattern");
  if (args.contains("include_withdrawn") && !args["include_withdrawn"].is_null()) {
    if (!args["include_withdrawn"].is_boolean())
      throw ControlError(err::kBadRequest, "argument 'include_withdrawn' must be a boolean");
    query.include_withdrawn = args["include_withdrawn"].get<bool>();
  }
  query.limit = static_cast<int>(int_arg(args, "limit", 1, 100000, 1000));
  json marks = json::array();
  for (const pipeline::MarkRecord& m : store_->marks(query)) marks.push_back(mark_json(m));
  return {{"count", marks.size()}, {"marks", std::move(marks)}};
}

json MarkBook::unmark(const json& args) {
  const std::int64_t id = int_arg(args, "id", 1, std::numeric_limits<std::int64_t>::max());
  const std::string actor = optional_string_arg(args, "by").value_or(kUnnamedActor);
  pipeline::MarkRecord withdrawn;
  try {
    withdrawn = store_->withdraw_mark(id, unix_now_s());
  } catch (const pipeline::MarkError& e) {
    ++counts_.refused;
    throw control_error_of(e);
  }
  ++counts_.withdrawn;
  refresh();
  publish_mark_event(pipeline::EventType::kAlertUnmarked, withdrawn, actor);
  spdlog::info("mark {}: withdrawn (alert {}, wearer {}, pattern {})", id, withdrawn.seq,
               withdrawn.wearer, withdrawn.pattern);
  return {{"mark", mark_json(withdrawn)}};
}

void MarkBook::publish_mark_event(pipeline::EventType type, const pipeline::MarkRecord& mark,
                                  const std::string& actor) const {
  if (!publish_event_) return;
  pipeline::Event event;
  event.type = type;
  event.wearer = mark.wearer;
  event.alert_seq = mark.seq;
  event.actor = actor;
  event.details = {{"verdict", pipeline::verdict_name(mark.verdict)},
                   {"note", mark.note},
                   {"mark_id", mark.id}};
  publish_event_(std::move(event));
}

std::size_t MarkBook::active_examples() const {
  std::size_t active = 0;
  for (const auto& [id, reason] : state_) active += reason == MarkInactive::kNone ? 1 : 0;
  return active;
}

json MarkBook::stats_json() const {
  std::uint64_t by_state[4] = {0, 0, 0, 0};
  for (const auto& [id, reason] : state_) ++by_state[static_cast<int>(reason)];
  return {{"active", by_state[static_cast<int>(MarkInactive::kNone)]},
          {"inactive_pattern_missing", by_state[static_cast<int>(MarkInactive::kPatternMissing)]},
          {"inactive_shape_changed", by_state[static_cast<int>(MarkInactive::kShapeChanged)]},
          {"inactive_over_cap", by_state[static_cast<int>(MarkInactive::kOverCap)]},
          {"marked", counts_.marked},
          {"remarked", counts_.remarked},
          {"withdrawn", counts_.withdrawn},
          {"refused", counts_.refused}};
}

}  // namespace gw::daemon
