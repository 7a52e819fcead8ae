#include "daemon/escalation.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace gw::daemon {

int due_level(const EscalationPolicy& policy, double detected_at, double now) {
  if (!policy.enabled() || !std::isfinite(detected_at) || !std::isfinite(now)) return 0;
  const double periods = std::floor((now - detected_at) / policy.escalation_s);
  if (periods <= 0) return 0;
  return static_cast<int>(std::min<double>(periods, policy.max_escalations));
}

void EscalationSchedule::set_policy(EscalationPolicy policy) {
  policy_ = policy;
  for (auto it = alerts_.begin(); it != alerts_.end();)
    it = it->second.level >= policy_.max_escalations ? alerts_.erase(it) : std::next(it);
}

void EscalationSchedule::watch(const WatchedAlert& alert) {
  if (alert.level >= policy_.max_escalations) {
    alerts_.erase(alert.seq);
    return;
  }
  alerts_[alert.seq] = alert;
}

void EscalationSchedule::forget(std::uint64_t seq) { alerts_.erase(seq); }

std::vector<WatchedAlert> EscalationSchedule::take_due(double now) {
  std::vector<WatchedAlert> due;
  if (!policy_.enabled()) return due;
  for (auto it = alerts_.begin(); it != alerts_.end();) {
    WatchedAlert& alert = it->second;
    const int level = due_level(policy_, alert.detected_at, now);
    while (alert.level < level) {
      ++alert.level;
      due.push_back(alert);
    }
    it = alert.level >= policy_.max_escalations ? alerts_.erase(it) : std::next(it);
  }
  return due;
}

}  // namespace gw::daemon
