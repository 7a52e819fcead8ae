// Fitting a learned decision (config::LearnedDecision) to labelled window
// ends: the samples come from PatternTracker decision traces of annotated
// recordings (`gaitwatch train`), the fit is an L2-regularised logistic
// regression by Newton's method (iteratively reweighted least squares; see
// Hastie, Tibshirani and Friedman, "The Elements of Statistical Learning",
// section 4.4.1).
//
// Thread safety: plain functions over their arguments.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "config/config.h"
#include "pipeline/detector.h"

namespace gw::pipeline {

struct TrainingSample {
  DecisionFeatures features{};
  bool positive = false;
};

// Samples a decision trace (entries by ascending end, each holding until the
// next) at window ends first_end, first_end + step, ... < stop: the features
// in force at each end, labelled by `label` (nullopt: not used, e.g. too
// close to an event or outside the annotated part). Ends before the first
// entry have no decision yet and are skipped. step >= 1.
std::vector<TrainingSample> sample_trace(
    const std::vector<PatternTracker::TracedDecision>& trace, std::int64_t first_end,
    std::int64_t stop, std::int64_t step,
    const std::function<std::optional<bool>(std::int64_t end)>& label);

struct FitOptions {
  double l2 = 1e-3;  // penalty on the weights (not the bias), per unit of mean loss
  // Weigh each class so that both carry half the loss (log-odds 0 then means
  // equal odds under equal priors); off, the samples count as they come, so
  // the fit's log-odds are those of the training data's own event rate.
  bool balance_classes = false;
  int max_iterations = 100;
};

struct FitResult {
  config::LearnedDecision decision;  // bias and weights (file left empty)
  int positives = 0;
  int negatives = 0;
  int iterations = 0;
  double mean_loss = 0;  // weighted mean log-loss at the fit, penalty excluded
};

// Throws gw::Error when either class has no sample.
FitResult fit_logistic(const std::vector<TrainingSample>& samples, const FitOptions& options = {});

}  // namespace gw::pipeline
