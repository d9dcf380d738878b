#ifndef LLM42_ENGINE_STEP_COST_H_
#define LLM42_ENGINE_STEP_COST_H_

#include <array>
#include <cstdint>

namespace llm42 {

// What a step's forward pass computes, as far as its cost goes.
struct StepShape {
  int64_t fast_rows = 0;
  int64_t fixed_rows = 0;
  int64_t attended = 0;  // KV positions read by attention, over all rows
};

// The measured cost of a forward pass as a function of its shape: a linear model
//   seconds = a + a_fixed * [fixed_rows > 0] + b_fast * fast_rows + b_fixed * fixed_rows
//             + c * attended
// fitted by exponentially weighted least squares over the steps the engine ran (the last few
// hundred count; costs drift with the machine's load and the contexts' lengths). a_fixed is what
// a backend pays once per step for having any fixed-schedule rows (a separate GEMM pass, padded
// shapes on a GPU); b_fast and b_fixed are the per-row costs of the two schedules.
//
// Directions the steps have not explored keep their previous estimate (a ridge term pulls the
// solution towards it), so a session that only ever runs one kind of step keeps what it
// learned about the other.
class StepCostModel {
 public:
  static constexpr int kFeatures = 5;

  // Records one step.
  void Observe(const StepShape& shape, double seconds);
  // Expected seconds of a step of this shape.
  double Predict(const StepShape& shape) const;
  // Steps observed with and without fixed rows: until both reach `n`, the model has not seen
  // what fixed rows cost relative to fast ones.
  bool Explored(int64_t n) const { return with_fixed_ >= n && without_fixed_ >= n; }

 private:
  using Vec = std::array<double, kFeatures>;
  static Vec Features(const StepShape& shape);
  void Solve();

  // Decay per observation: about the last 200 steps carry the fit.
  static constexpr double kDecay = 0.995;
  std::array<Vec, kFeatures> gram_{};  // sum of decayed x x^T
  Vec moment_{};                       // sum of decayed x * seconds
  Vec theta_{};                        // the current fit
  int64_t with_fixed_ = 0, without_fixed_ = 0;
};

}  // namespace llm42

#endif  // LLM42_ENGINE_STEP_COST_H_
