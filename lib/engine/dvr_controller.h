#ifndef LLM42_ENGINE_DVR_CONTROLLER_H_
#define LLM42_ENGINE_DVR_CONTROLLER_H_

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "lib/engine/engine_stats.h"
#include "lib/engine/options.h"
#include "lib/engine/sequence.h"
#include "lib/engine/step_cost.h"

namespace llm42 {

class KvCache;

// Decode-verify-rollback for deterministic requests (DESIGN.md §3,
// docs/deterministic-requests.md): decides when a request's candidates are verified, compares
// them with the fixed-schedule replay, and rolls back what disagrees. Engine thread only.
//
// When to verify, beyond the paper's fixed window W:
// - adaptive window: after a rollback a request's window drops to W / 8 (at least 2), and
//   doubles back towards W after every window that verifies clean. Mismatches cluster (in the
//   LLM-42 paper the median gap to the next one is about one token), so a short window right
//   after one wastes few candidates when the next one comes;
// - early verification: a candidate whose draw lies within kEarlyVerifyMargin of a decision
//   boundary (see SampledToken::margin) is the kind the fast path's rounding can flip, so the
//   request is verified right after it instead of decoding more candidates on top of it.
// Neither changes what is committed (the replay decides every token), only what is wasted.
class DvrController {
 public:
  // Candidates whose margin is below this are verified at once. Fast and fixed logits differ
  // by rounding (about 1e-6 relative); the margin leaves two orders of magnitude.
  static constexpr double kEarlyVerifyMargin = 1e-6;

  DvrController(const DeterminismPolicy& policy, EngineStats& stats);

  int32_t initial_window() const { return policy_.window; }

  // Whether deterministic requests decode directly under fixed this step (those with nothing
  // awaiting verification; the engine has the others verify what they hold, so that they can
  // follow) rather than as fast candidates. n (> 0): the step's deterministic decode rows; `rest`: the
  // shape of its other rows; a verify step replays up to `verify_rows`. Under DecodePath::kAuto
  // it compares, by the measured step costs, what n fixed rows add to this step with what
  // verifying n candidates later costs (the replay rows, plus the candidates that recent
  // rollbacks wasted); until the steps have shown both kinds, it alternates.
  // The choice holds until the other path is predicted cheaper by kSwitchMargin, so timing
  // noise does not flip it step by step.
  bool DecodeDirect(int64_t n, const StepShape& rest, int64_t verify_rows);
  static constexpr double kSwitchMargin = 0.1;
  // Feeds a step's measured time to the cost model.
  void ObserveStep(const StepShape& shape, double seconds) { cost_.Observe(shape, seconds); }

  // Appends a fast-path candidate; the request becomes ready when its window is full, when the
  // candidate would end it (`ends`), when the draw was close to a boundary, or when this step
  // decodes under fixed (DecodeDirect), so that the request follows once verified.
  void AddCandidate(Sequence& s, int32_t token, double margin, bool ends);

  // What a verify pass found.
  struct Verdict {
    std::vector<int32_t> tokens;  // to commit: the agreed candidates, then the replay's token
    std::vector<float> logprobs;  // theirs under fixed, when requested
    std::vector<TopLogprob> top;  // top_n per token under fixed, when requested
    int64_t verified = 0;         // candidates checked
    bool disagreed = false;       // the replay disagreed (or the injection hook said so)
    int64_t discarded = 0;        // candidates dropped: from the first disagreement on
  };
  // Compares the first n candidates (all of them, or the part of a window that fitted in this
  // step) with the replay: row(j) holds the fixed-schedule logits that predict position
  // n_committed + j.
  Verdict Verify(const Sequence& s, int64_t n, bool logprobs, int top_n,
                 const std::function<std::span<const float>(int64_t)>& row);
  // Counts the pass in the request's and the session's stats: before its tokens are committed,
  // so that whoever sees the request finished sees its stats complete.
  void Count(Sequence& s, const Verdict& v);
  // After the verdict's tokens were committed, unless that finished the request: leaves the
  // cache holding the fixed-schedule prefix (truncating what was rolled back) and adapts the
  // window. Candidates past a part that agreed stay ready for the next step.
  void Settle(Sequence& s, const Verdict& v, KvCache& cache);

 private:
  DeterminismPolicy policy_;
  EngineStats& stats_;
  StepCostModel cost_;
  // Recent candidates verified and discarded (decayed per pass): the recompute rate.
  double recent_verified_ = 0, recent_discarded_ = 0;
  bool direct_ = false;  // this step's choice (DecodeDirect)
  int64_t explore_steps_ = 0;
};

}  // namespace llm42

#endif  // LLM42_ENGINE_DVR_CONTROLLER_H_
