// The learned decision's fit (logistic regression by Newton's method) and the
// sampling of decision traces into labelled window ends.
#include "pipeline/decision_fit.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "common/error.h"

using gw::pipeline::fit_logistic;
using gw::pipeline::TrainingSample;

namespace {

// Samples drawn from a known logistic model over two of the features.
std::vector<TrainingSample> draw(double bias, double w0, double w1, int count, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<TrainingSample> out;
  for (int i = 0; i < count; ++i) {
    TrainingSample s;
    s.features[0] = unit(rng);
    s.features[1] = unit(rng);
    const double z = bias + w0 * s.features[0] + w1 * s.features[1];
    s.positive = unit(rng) < 1 / (1 + std::exp(-z));
    out.push_back(s);
  }
  return out;
}

}  // namespace

TEST_CASE("the fit recovers a logistic model from its samples", "[fit]") {
  const auto samples = draw(1.0, -4.0, 2.0, 20000, 7);
  gw::pipeline::FitOptions options;
  options.l2 = 0;
  options.balance_classes = false;
  const auto fit = fit_logistic(samples, options);
  CHECK(fit.decision.bias == Approx(1.0).margin(0.15));
  CHECK(fit.decision.weights[0] == Approx(-4.0).margin(0.25));
  CHECK(fit.decision.weights[1] == Approx(2.0).margin(0.25));
  // Features that never vary carry no weight.
  CHECK(fit.decision.weights[3] == Approx(0).margin(1e-6));
  CHECK(fit.positives + fit.negatives == 20000);
  CHECK(fit.iterations < 30);
}

TEST_CASE("the fit's penalty shrinks the weights and balancing moves the bias", "[fit]") {
  const auto samples = draw(-2.0, -3.0, 0.0, 5000, 11);  // rare positives
  gw::pipeline::FitOptions plain;
  plain.l2 = 0;
  plain.balance_classes = false;
  const auto unpenalised = fit_logistic(samples, plain);
  gw::pipeline::FitOptions penalised = plain;
  penalised.l2 = 1.0;
  CHECK(std::abs(fit_logistic(samples, penalised).decision.weights[0]) <
        std::abs(unpenalised.decision.weights[0]));
  gw::pipeline::FitOptions balanced = plain;
  balanced.balance_classes = true;
  // Both classes weigh the same: the bias rises by about log(negatives / positives).
  const auto b = fit_logistic(samples, balanced);
  const double ratio = static_cast<double>(b.negatives) / b.positives;
  CHECK(b.decision.bias - unpenalised.decision.bias == Approx(std::log(ratio)).margin(0.3));
}

TEST_CASE("the fit needs both kinds of window end", "[fit]") {
  std::vector<TrainingSample> only_negative(10);
  CHECK_THROWS_AS(fit_logistic(only_negative), gw::Error);
  CHECK_THROWS_AS(fit_logistic({}), gw::Error);
}

TEST_CASE("a trace is sampled with the decision in force at each end", "[fit]") {
  using Traced = gw::pipeline::PatternTracker::TracedDecision;
  std::vector<Traced> trace(3);
  trace[0].end = 10;
  trace[0].features[0] = 0.1;
  trace[1].end = 25;
  trace[1].features[0] = 0.2;
  trace[2].end = 40;
  trace[2].features[0] = 0.3;
  // Ends 0..59 every 5; those from 30 on are positive, 45 unused.
  const auto samples = gw::pipeline::sample_trace(
      trace, 0, 60, 5, [](std::int64_t t) -> std::optional<bool> {
        if (t == 45) return std::nullopt;
        return t >= 30;
      });
  // No decision before 10: ends 10, 15, 20, 25, 30, 35, 40, 50, 55.
  REQUIRE(samples.size() == 9);
  CHECK(samples[0].features[0] == 0.1);
  CHECK(samples[2].features[0] == 0.1);  // end 20
  CHECK(samples[3].features[0] == 0.2);  // end 25
  CHECK_FALSE(samples[3].positive);
  CHECK(samples[4].positive);            // end 30
  CHECK(samples[6].features[0] == 0.3);  // end 40
  CHECK(samples[7].features[0] == 0.3);  // end 50
}
