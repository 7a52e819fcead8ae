#include "pipeline/decision.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "common/error.h"

namespace gw::pipeline {

namespace {

DecisionSummary summarize_decision(const CompiledPattern& pattern,
                                   const std::vector<ExampleMatch>& per_example, bool euclidean) {
  const config::PatternConfig& pc = pattern.config;
  const int dims = static_cast<int>(pattern.home_channel.size());
  const double unmatched = (euclidean ? 1.0 : pc.alpha) * pc.threshold;
  // Nearest = lowest completed distance; ties: more dims, then the earlier example.
  auto nearer = [](const ExampleMatch& a, const ExampleMatch& b) {
    if (a.completed != b.completed) return a.completed < b.completed;
    return a.combination.edges.size() > b.combination.edges.size();
  };
  DecisionSummary summary;
  for (std::size_t i = 0; i < per_example.size(); ++i) {
    const ExampleMatch& match = per_example[i];
    if (match.example < 0) continue;
    const bool negative = pattern.examples[static_cast<std::size_t>(match.example)].negative;
    int& nearest = negative ? summary.negative : summary.positive;
    if (nearest < 0 || nearer(match, per_example[static_cast<std::size_t>(nearest)]))
      nearest = static_cast<int>(i);
  }
  // An example none matches counts as completed at dims unmatched dims.
  const auto completed = [&](int nearest) {
    return nearest < 0 ? dims * unmatched : per_example[static_cast<std::size_t>(nearest)].completed;
  };
  summary.evidence = completed(summary.negative) - completed(summary.positive);
  if (pc.neighbours > 0) {
    // The k nearest matched examples vote; an example nothing matched does
    // not vote (it lies beyond the threshold on every dim).
    thread_local std::vector<std::pair<double, int>> nearest_first;
    nearest_first.clear();
    for (std::size_t i = 0; i < per_example.size(); ++i)
      if (per_example[i].example >= 0)
        nearest_first.emplace_back(per_example[i].completed, static_cast<int>(i));
    const std::size_t k = std::min(nearest_first.size(), static_cast<std::size_t>(pc.neighbours));
    std::partial_sort(nearest_first.begin(), nearest_first.begin() + static_cast<std::ptrdiff_t>(k),
                      nearest_first.end());
    int votes = 0;
    for (std::size_t n = 0; n < k; ++n) {
      const ExampleMatch& match = per_example[static_cast<std::size_t>(nearest_first[n].second)];
      votes += pattern.examples[static_cast<std::size_t>(match.example)].negative ? -1 : 1;
    }
    summary.evidence = votes;
  }
  if (pc.learned_decision)
    summary.evidence = learned_evidence(*pc.learned_decision, decision_features(pattern, per_example));
  const int needed = euclidean ? dims : pc.min_dims;
  summary.hold =
      summary.positive >= 0 &&
      static_cast<int>(
          per_example[static_cast<std::size_t>(summary.positive)].combination.edges.size()) >=
          needed &&
      summary.evidence >= pc.margin;
  summary.enter = summary.hold && summary.evidence >= pc.margin + pc.hysteresis;
  return summary;
}

}  // namespace

DecisionFeatures decision_features(const CompiledPattern& pattern,
                                   const std::vector<ExampleMatch>& per_example) {
  using config::DecisionFeature;
  const config::PatternConfig& pc = pattern.config;
  const bool euclidean = pc.measure == config::Measure::kEuclidean;
  const double dims = static_cast<double>(pattern.home_channel.size());
  const double scale = dims * (euclidean ? 1.0 : pc.alpha) * pc.threshold;
  // Matched examples, nearest first, as (scaled completed distance, negative).
  thread_local std::vector<std::pair<double, bool>> nearest_first;
  nearest_first.clear();
  int positive_dims = 0;
  double nearest_positive = 1;
  for (const ExampleMatch& match : per_example) {
    if (match.example < 0) continue;
    const bool negative = pattern.examples[static_cast<std::size_t>(match.example)].negative;
    const double scaled = std::min(1.0, match.completed / scale);
    nearest_first.emplace_back(scaled, negative);
    if (!negative && scaled < nearest_positive) {
      nearest_positive = scaled;
      positive_dims = static_cast<int>(match.combination.edges.size());
    }
  }
  std::sort(nearest_first.begin(), nearest_first.end());
  // Mean of the `count` nearest of one sign, unmatched ones counting as 1.
  const auto mean_nearest = [&](bool negative, int count) {
    double sum = 0;
    int taken = 0;
    for (const auto& [distance, is_negative] : nearest_first) {
      if (is_negative != negative) continue;
      sum += distance;
      if (++taken == count) break;
    }
    return (sum + (count - taken)) / count;
  };
  DecisionFeatures features{};
  const auto at = [&](DecisionFeature f) -> double& { return features[static_cast<std::size_t>(f)]; };
  at(DecisionFeature::kNearestPositive) = mean_nearest(false, 1);
  at(DecisionFeature::kNearestNegative) = mean_nearest(true, 1);
  at(DecisionFeature::kPositiveMean3) = mean_nearest(false, 3);
  at(DecisionFeature::kNegativeMean3) = mean_nearest(true, 3);
  at(DecisionFeature::kPositiveDims) = dims > 0 ? positive_dims / dims : 0;
  constexpr std::size_t kVoters = 5;
  int votes = 0;
  for (std::size_t n = 0; n < std::min(kVoters, nearest_first.size()); ++n)
    votes += nearest_first[n].second ? -1 : 1;
  at(DecisionFeature::kVote5) = static_cast<double>(votes) / kVoters;
  return features;
}

double learned_evidence(const config::LearnedDecision& decision, const DecisionFeatures& features) {
  double evidence = decision.bias;
  for (std::size_t f = 0; f < features.size(); ++f) evidence += decision.weights[f] * features[f];
  return evidence;
}

bool example_applies(const CompiledExample& example, std::uint32_t wearer) {
  return !example.wearer || *example.wearer == wearer;
}

Decision decide(const CompiledPattern& pattern, const std::vector<ExampleMatch>& per_example) {
  return expand_decision(pattern, per_example, summarize_decision(pattern, per_example));
}

DecisionSummary summarize_decision(const CompiledPattern& pattern,
                                   const std::vector<ExampleMatch>& per_example) {
  return summarize_decision(pattern, per_example, pattern.config.measure == config::Measure::kEuclidean);
}

Decision expand_decision(const CompiledPattern& pattern,
                         const std::vector<ExampleMatch>& per_example,
                         const DecisionSummary& summary) {
  const config::PatternConfig& pc = pattern.config;
  const double unmatched = (pc.measure == config::Measure::kEuclidean ? 1.0 : pc.alpha) * pc.threshold;
  const auto nearest = [&](int index) {
    if (index >= 0) return per_example[static_cast<std::size_t>(index)];
    ExampleMatch none;
    none.completed = static_cast<int>(pattern.home_channel.size()) * unmatched;
    return none;
  };
  Decision decision;
  decision.positive = nearest(summary.positive);
  decision.negative = nearest(summary.negative);
  decision.evidence = summary.evidence;
  decision.hold = summary.hold;
  decision.enter = summary.enter;
  return decision;
}

}  // namespace gw::pipeline
