#ifndef LLM42_ENGINE_STEP_COST_H_
#define LLM42_ENGINE_STEP_COST_H_

#include <array>
#include <cstddef>
#include <cstdint>

namespace llm42 {

// What a step's forward pass computes, as far as its cost goes.
struct StepShape {
  int64_t fast_rows = 0;
  int64_t fixed_rows = 0;
  int64_t attended = 0;  // KV positions read by attention, over all rows
};

// The measured cost of a forward pass as a function of its shape:
//   seconds = a * passes + a_fixed * [fixed_rows > 0] + a_both * [both schedules]
//             + r(fast_rows) + r(fixed_rows) + d_fixed * fixed_rows + c * attended
// where passes counts the schedules with rows (a step of only fixed rows is one pass, as a step of
// only fast rows is: a batch_invariant step costs what an `off` step does when the kernels are
// equally fast), a_fixed and d_fixed are what a fixed pass and a fixed row cost beyond fast ones,
// and a_both what a step running both schedules saves or pays beyond two passes (the CPU streams
// each weight once for both: a_both ~ -a; a GPU runs two GEMM passes: a_both ~ 0). r is piecewise
// linear in a schedule's rows with knots at kRowKnots, the same function for both schedules: a
// step's first rows are matrix-vector products that each stream the weights while rows in larger
// batches share tiles.
//
// Every parameter keeps its previous estimate in directions the steps have not explored (a ridge
// term pulls it there), so a session that runs only one kind of step for a while keeps what it
// learned about the other. a_fixed, a_both and d_fixed, the differences between the schedules,
// are held more firmly than the rest: until steps show them they stay 0 (fixed rows cost what
// fast rows cost), so that a session whose steps have all been of one kind — the first steps of
// a burst of deterministic requests — does not credit that kind with a pass it never saw.
// Each step counts by its error relative to its time (a long prefill chunk would otherwise
// outweigh the decode steps the choices are about). The fit is exponentially weighted least
// squares over the steps the engine ran (the last few hundred count; costs drift with the
// machine's load and the contexts' lengths).
class StepCostModel {
 public:
  static constexpr std::array<int64_t, 4> kRowKnots = {2, 4, 8, 16};
  static constexpr int kRowFeatures = static_cast<int>(kRowKnots.size()) + 1;
  static constexpr int kFeatures = 5 + kRowFeatures;

  // Records one step.
  void Observe(const StepShape& shape, double seconds);
  // Expected seconds of a step of this shape.
  double Predict(const StepShape& shape) const;
  // Which schedules a step runs.
  enum class Kind { kFastOnly = 0, kFixedOnly = 1, kBoth = 2 };
  static Kind KindOf(const StepShape& s) {
    return s.fixed_rows == 0 ? Kind::kFastOnly : s.fast_rows == 0 ? Kind::kFixedOnly : Kind::kBoth;
  }
  // Steps of that kind observed (not decayed).
  int64_t seen(Kind k) const { return seen_[static_cast<size_t>(k)]; }
  // Whether Predict(shape) rests on measurements: steps of its kind, or of two of the three kinds,
  // seen `min_seen` times each (a third kind differs from two known ones by the schedules'
  // differences, held at 0 until seen).
  bool Predictable(const StepShape& shape, int64_t min_seen) const;

 private:
  using Vec = std::array<double, kFeatures>;
  static Vec Features(const StepShape& shape);
  // Features 1-3 are the schedules' differences (a_fixed, a_both, d_fixed).
  static bool Difference(int i) { return i >= 1 && i <= 3; }
  // Adds r's features of `rows` (split at the knots, in hundreds) to out[0..kRowFeatures).
  static void AddRowFeatures(int64_t rows, double* out);
  void Solve();

  // Decay per observation: about the last 200 steps carry the fit.
  static constexpr double kDecay = 0.995;
  std::array<Vec, kFeatures> gram_{};  // sum of decayed x x^T
  Vec moment_{};                       // sum of decayed x * seconds
  Vec theta_{};                        // the current fit
  std::array<int64_t, 3> seen_{};
};

}  // namespace llm42

#endif  // LLM42_ENGINE_STEP_COST_H_
