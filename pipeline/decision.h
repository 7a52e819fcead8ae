// The decision between a pattern's positive and negative examples at one
// window end: the margin rule or a learned decision over the same matches.
// docs/detection.md describes the semantics.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "config/config.h"
#include "pipeline/combination.h"
#include "pipeline/library.h"

namespace gw::pipeline {

// The decision at one window end (docs/detection.md):
//   evidence = completed distance of the nearest negative - that of the
//              nearest positive, with negatives; without, dims * alpha *
//              threshold - completed distance of the nearest positive (how far
//              the positive lies inside the absolute threshold).
//   hold  = the nearest positive matches >= min_dims dims and evidence >= margin
//   enter = hold and evidence >= margin + hysteresis
struct Decision {
  ExampleMatch positive;
  ExampleMatch negative;
  double evidence = 0;
  bool hold = false;
  bool enter = false;
};
Decision decide(const CompiledPattern& pattern, const std::vector<ExampleMatch>& per_example);

// The inputs of a learned decision (config::DecisionFeature) at one window
// end, from the same per-example matches decide() takes. Completed distances
// are divided by dims * the unmatched dim's cost, so every feature lies in
// [0, 1] (vote5 in [-1, 1]) whatever the pattern's threshold and dims.
using DecisionFeatures = std::array<double, config::kDecisionFeatureCount>;
DecisionFeatures decision_features(const CompiledPattern& pattern,
                                   const std::vector<ExampleMatch>& per_example);
// bias + weights . features: the log-odds a learned decision compares with
// margin (hold) and margin + hysteresis (enter).
double learned_evidence(const config::LearnedDecision& decision, const DecisionFeatures& features);

// decide() in two steps, for PatternTracker, which decides again at every
// change of an example's match but needs the nearest matches themselves only
// for an alert: which entries of per_example are nearest (-1: none) and the
// verdict; then the Decision, as decide() gives it, of the same per_example.
struct DecisionSummary {
  int positive = -1;
  int negative = -1;
  double evidence = 0;
  bool hold = false;
  bool enter = false;
};
DecisionSummary summarize_decision(const CompiledPattern& pattern,
                                   const std::vector<ExampleMatch>& per_example);
Decision expand_decision(const CompiledPattern& pattern,
                         const std::vector<ExampleMatch>& per_example,
                         const DecisionSummary& summary);

// Whether `example` takes part in the decisions for a stream of `wearer`:
// unscoped examples do for every wearer, scoped ones for theirs only.
bool example_applies(const CompiledExample& example, std::uint32_t wearer);

}  // namespace gw::pipeline
