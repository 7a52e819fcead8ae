#include "pipeline/decision_fit.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "common/error.h"

namespace gw::pipeline {

std::vector<TrainingSample> sample_trace(
    const std::vector<PatternTracker::TracedDecision>& trace, std::int64_t first_end,
    std::int64_t stop, std::int64_t step,
    const std::function<std::optional<bool>(std::int64_t end)>& label) {
  std::vector<TrainingSample> out;
  if (trace.empty() || step < 1) return out;
  std::size_t entry = 0;
  for (std::int64_t t = std::max(first_end, trace.front().end); t < stop; t += step) {
    while (entry + 1 < trace.size() && trace[entry + 1].end <= t) ++entry;
    const std::optional<bool> positive = label(t);
    if (!positive) continue;
    out.push_back({trace[entry].features, *positive});
  }
  return out;
}

namespace {

constexpr std::size_t kParams = config::kDecisionFeatureCount + 1;  // weights, then the bias
using Vector = std::array<double, kParams>;
using Matrix = std::array<Vector, kParams>;

// Solves a x = b for a symmetric positive definite a (Gaussian elimination
// with partial pivoting; a and b are consumed).
Vector solve(Matrix a, Vector b) {
  for (std::size_t col = 0; col < kParams; ++col) {
    std::size_t pivot = col;
    for (std::size_t r = col + 1; r < kParams; ++r)
      if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
    std::swap(a[col], a[pivot]);
    std::swap(b[col], b[pivot]);
    if (a[col][col] == 0) throw Error("decision fit: singular system");
    for (std::size_t r = col + 1; r < kParams; ++r) {
      const double f = a[r][col] / a[col][col];
      for (std::size_t c = col; c < kParams; ++c) a[r][c] -= f * a[col][c];
      b[r] -= f * b[col];
    }
  }
  Vector x{};
  for (std::size_t i = kParams; i-- > 0;) {
    double sum = b[i];
    for (std::size_t c = i + 1; c < kParams; ++c) sum -= a[i][c] * x[c];
    x[i] = sum / a[i][i];
  }
  return x;
}

double log1p_exp(double z) { return z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z)); }

}  // namespace

FitResult fit_logistic(const std::vector<TrainingSample>& samples, const FitOptions& options) {
  FitResult result;
  for (const TrainingSample& s : samples) (s.positive ? result.positives : result.negatives)++;
  if (result.positives == 0 || result.negatives == 0)
    throw Error("decision fit: needs window ends of both kinds, got " +
                std::to_string(result.positives) + " inside events and " +
                std::to_string(result.negatives) + " outside");
  const double n = static_cast<double>(samples.size());
  const double w_pos = options.balance_classes ? n / (2.0 * result.positives) : 1.0;
  const double w_neg = options.balance_classes ? n / (2.0 * result.negatives) : 1.0;
  const auto row = [](const TrainingSample& s) {
    Vector x{};
    std::copy(s.features.begin(), s.features.end(), x.begin());
    x[kParams - 1] = 1.0;
    return x;
  };
  // Objective: weighted mean log-loss + l2 / 2 * |weights|^2.
  const auto objective = [&](const Vector& beta, double* loss_only) {
    double loss = 0;
    for (const TrainingSample& s : samples) {
      const Vector x = row(s);
      double z = 0;
      for (std::size_t i = 0; i < kParams; ++i) z += beta[i] * x[i];
      loss += (s.positive ? w_pos : w_neg) * (s.positive ? log1p_exp(-z) : log1p_exp(z));
    }
    loss /= n;
    if (loss_only) *loss_only = loss;
    double penalty = 0;
    for (std::size_t i = 0; i + 1 < kParams; ++i) penalty += beta[i] * beta[i];
    return loss + 0.5 * options.l2 * penalty;
  };
  Vector beta{};
  double current = objective(beta, nullptr);
  for (result.iterations = 1; result.iterations <= options.max_iterations; ++result.iterations) {
    Vector gradient{};
    Matrix hessian{};
    for (const TrainingSample& s : samples) {
      const Vector x = row(s);
      double z = 0;
      for (std::size_t i = 0; i < kParams; ++i) z += beta[i] * x[i];
      const double p = 1.0 / (1.0 + std::exp(-z));
      const double w = s.positive ? w_pos : w_neg;
      const double residual = w * (p - (s.positive ? 1.0 : 0.0));
      const double curvature = w * p * (1 - p);
      for (std::size_t i = 0; i < kParams; ++i) {
        gradient[i] += residual * x[i];
        for (std::size_t j = 0; j < kParams; ++j) hessian[i][j] += curvature * x[i] * x[j];
      }
    }
    for (std::size_t i = 0; i < kParams; ++i) {
      gradient[i] /= n;
      for (std::size_t j = 0; j < kParams; ++j) hessian[i][j] /= n;
    }
    for (std::size_t i = 0; i + 1 < kParams; ++i) {
      gradient[i] += options.l2 * beta[i];
      hessian[i][i] += options.l2;
    }
    // A tiny ridge everywhere keeps the system solvable when a feature never
    // varies (its weight then stays 0).
    for (std::size_t i = 0; i < kParams; ++i) hessian[i][i] += 1e-9;
    const Vector step = solve(hessian, gradient);
    // Newton's step, halved while it does not lower the objective.
    double scale = 1.0, next_value = current;
    Vector next = beta;
    for (int halvings = 0; halvings < 30; ++halvings, scale /= 2) {
      for (std::size_t i = 0; i < kParams; ++i) next[i] = beta[i] - scale * step[i];
      next_value = objective(next, nullptr);
      if (next_value <= current) break;
    }
    double change = 0;
    for (std::size_t i = 0; i < kParams; ++i) change = std::max(change, std::abs(next[i] - beta[i]));
    const bool improved = next_value <= current;
    if (improved) {
      beta = next;
      current = next_value;
    }
    if (!improved || change < 1e-9) break;
  }
  result.iterations = std::min(result.iterations, options.max_iterations);
  objective(beta, &result.mean_loss);
  for (std::size_t i = 0; i + 1 < kParams; ++i) result.decision.weights[i] = beta[i];
  result.decision.bias = beta[kParams - 1];
  return result;
}

}  // namespace gw::pipeline
