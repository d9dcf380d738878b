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

// The measured cost of a forward pass as a function of its shape:
//   seconds = a + a_fixed * [fixed_rows > 0] + r(fast_rows) + r(fixed_rows)
//             + d_fixed * fixed_rows + c * attended
// r is piecewise linear in a schedule's rows with knots at kRowKnots, the same function for both
// schedules: a step's first rows are matrix-vector products that each stream the weights (on the
// CPU ~3.6 ms a row for a 110M model at 2 threads) while rows in larger batches share tiles
// (~0.5 ms a row). A cost linear in rows, fitted to decode steps and prefill chunks together,
// mistook that gap for a per-step cost of whichever schedule ran the large batches (the fixed
// one: deterministic prefill and verification) and sent decode steps through verification that
// decoding under fixed would have served at no extra cost. What fixed rows cost beyond fast ones
// is a_fixed, paid once per step with any fixed rows (a separate GEMM pass, padded shapes on a
// GPU), and d_fixed per row (a slower kernel); one shared r keeps the parameters few, so that
// a noisy machine's timings still fit them. The fit is exponentially weighted least squares over
// the steps the engine ran (the last few hundred count; costs drift with the machine's load and
// the contexts' lengths).
//
// Directions the steps have not explored keep their previous estimate (a ridge term pulls the
// solution towards it), so a session that only ever runs one kind of step keeps what it
// learned about the other.
class StepCostModel {
 public:
  static constexpr std::array<int64_t, 4> kRowKnots = {2, 4, 8, 16};
  static constexpr int kRowFeatures = static_cast<int>(kRowKnots.size()) + 1;
  static constexpr int kFeatures = 4 + kRowFeatures;

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
  // Adds r's features of `rows` (split at the knots, in hundreds) to out[0..kRowFeatures).
  static void AddRowFeatures(int64_t rows, double* out);
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
