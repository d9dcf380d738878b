#include "lib/engine/step_cost.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace llm42 {

void StepCostModel::AddRowFeatures(int64_t rows, double* out) {
  int64_t below = 0;
  for (size_t i = 0; i <= kRowKnots.size(); ++i) {
    const int64_t upto = i < kRowKnots.size() ? std::min(rows, kRowKnots[i]) : rows;
    out[i] += static_cast<double>(std::max<int64_t>(upto - below, 0)) / 100;
    if (i < kRowKnots.size()) below = kRowKnots[i];
  }
}

StepCostModel::Vec StepCostModel::Features(const StepShape& s) {
  // Rows in hundreds and positions in hundred-thousands keep the normal equations well scaled.
  const bool fast = s.fast_rows > 0, fixed = s.fixed_rows > 0;
  Vec x{};
  x[0] = (fast ? 1.0 : 0.0) + (fixed ? 1.0 : 0.0);
  x[1] = fixed ? 1.0 : 0.0;
  x[2] = fast && fixed ? 1.0 : 0.0;
  x[3] = static_cast<double>(s.fixed_rows) / 100;
  x[4] = static_cast<double>(s.attended) / 1e5;
  AddRowFeatures(s.fast_rows, &x[5]);
  AddRowFeatures(s.fixed_rows, &x[5]);
  return x;
}

void StepCostModel::Observe(const StepShape& shape, double seconds) {
  const Vec x = Features(shape);
  // Each step's error relative to its time: a prefill chunk of 200 ms must not outweigh the
  // dozens of 7 ms decode steps whose choices the model is for.
  const double w = 1 / std::max(seconds * seconds, 1e-8);
  for (int i = 0; i < kFeatures; ++i) {
    for (int j = 0; j < kFeatures; ++j) gram_[i][j] = kDecay * gram_[i][j] + w * x[i] * x[j];
    moment_[i] = kDecay * moment_[i] + w * x[i] * seconds;
  }
  ++seen_[static_cast<size_t>(KindOf(shape))];
  Solve();
}

bool StepCostModel::Predictable(const StepShape& shape, int64_t min_seen) const {
  int kinds = 0;
  for (int64_t n : seen_) kinds += n >= min_seen;
  return kinds >= 2 || seen(KindOf(shape)) >= min_seen;
}

double StepCostModel::Predict(const StepShape& shape) const {
  const Vec x = Features(shape);
  double y = 0;
  for (int i = 0; i < kFeatures; ++i) y += theta_[i] * x[i];
  return y;
}

void StepCostModel::Solve() {
  // (G + R) theta' = m + R theta: ridge towards the previous fit, small relative to the data in
  // every direction the steps explore, and firmer for the schedules' differences, so that in a
  // direction the steps do not tell apart the shared parameters move and the differences keep
  // their value (0 until steps have shown them).
  double trace = 0;
  for (int i = 0; i < kFeatures; ++i) trace += gram_[i][i];
  std::array<std::array<double, kFeatures + 1>, kFeatures> a{};
  for (int i = 0; i < kFeatures; ++i) {
    const double rho = (Difference(i) ? 1e-3 : 1e-6) * trace + 1e-12;
    for (int j = 0; j < kFeatures; ++j) a[i][j] = gram_[i][j] + (i == j ? rho : 0.0);
    a[i][kFeatures] = moment_[i] + rho * theta_[i];
  }
  // Gaussian elimination with partial pivoting; the matrix is positive definite.
  for (int c = 0; c < kFeatures; ++c) {
    int pivot = c;
    for (int r = c + 1; r < kFeatures; ++r) {
      if (std::fabs(a[r][c]) > std::fabs(a[pivot][c])) pivot = r;
    }
    std::swap(a[c], a[pivot]);
    if (a[c][c] == 0) return;
    for (int r = c + 1; r < kFeatures; ++r) {
      const double f = a[r][c] / a[c][c];
      for (int j = c; j <= kFeatures; ++j) a[r][j] -= f * a[c][j];
    }
  }
  Vec theta{};
  for (int r = kFeatures - 1; r >= 0; --r) {
    double s = a[r][kFeatures];
    for (int j = r + 1; j < kFeatures; ++j) s -= a[r][j] * theta[j];
    theta[r] = s / a[r][r];
  }
  theta_ = theta;
}

}  // namespace llm42
