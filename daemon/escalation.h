// When unacknowledged critical alerts escalate (config alerts.escalation_s,
// alerts.max_escalations): an alert raised at detected_at is due for level k
// at detected_at + k * escalation_s, for k = 1 .. max_escalations. Only the
// decision lives here, on times passed in, so that unit tests can step a
// clock (tests/daemon/escalation_test.cc); daemon/lifecycle.h stores and
// publishes what it decides.
//
// Thread safety: none; the pipeline thread owns it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gw::daemon {

struct EscalationPolicy {
  double escalation_s = 120;  // 0 = off: nothing is due
  int max_escalations = 3;    // >= 1
  bool enabled() const { return escalation_s > 0 && max_escalations > 0; }
};

// An open (neither acknowledged nor resolved) critical alert being watched.
struct WatchedAlert {
  std::uint64_t seq = 0;
  std::uint32_t wearer = 0;
  std::string pattern, kind, severity;
  double detected_at = 0;  // unix s
  int level = 0;           // escalations already made
};

// The level `policy` gives an alert raised at `detected_at` by `now`: the
// count of escalation_s periods passed, at most max_escalations; 0 when the
// policy is off or the time is not finite.
int due_level(const EscalationPolicy& policy, double detected_at, double now);

class EscalationSchedule {
 public:
  explicit EscalationSchedule(EscalationPolicy policy) : policy_(policy) {}

  // A reload: the levels due from now on follow the new policy (levels
  // already made stay; an alert at or beyond a lowered maximum is dropped).
  void set_policy(EscalationPolicy policy);
  const EscalationPolicy& policy() const { return policy_; }

  // Watches `alert` from its `level` on; one already at max_escalations is
  // not kept. Watching a seq again replaces it.
  void watch(const WatchedAlert& alert);
  // Acknowledged or resolved: never escalates again. Unknown seqs are fine.
  void forget(std::uint64_t seq);

  // Every escalation due by `now`, oldest alert first and, within an alert,
  // one entry per level in order (an alert late by several periods, after a
  // restart say, gets each level it missed): each a copy of the alert with
  // `level` set to that escalation's. Alerts that reached max_escalations are
  // no longer watched.
  std::vector<WatchedAlert> take_due(double now);

  std::size_t watched() const { return alerts_.size(); }

 private:
  EscalationPolicy policy_;
  std::map<std::uint64_t, WatchedAlert> alerts_;  // by seq: oldest first
};

}  // namespace gw::daemon
