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

// Decode-verify-rollback for deterministic requests (docs/design.md §3,
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
  // What the replay drew at a verify row: the request's controls applied to the row's
  // fixed-schedule logits, then its sampling at the row's position (on the host from the logits,
  // or where the logits are). The token, its logprob and top logprobs when the request asks for
  // them, and whether the grammar allowed no token there (the rest then means nothing).
  struct ReplayDraw {
    int32_t token = -1;
    float logprob = 0.0f;
    std::span<const TopLogprob> top;  // valid until the next row is asked for
    bool dead = false;
  };
  using ReplayRows = std::function<ReplayDraw(int64_t)>;

  // What a verify pass needs of the engine that runs it (Engine implements it).
  class Committer {
   public:
    // Commits tokens after the committed prefix and streams them; true when that finished the
    // request.
    virtual bool CommitTokens(Sequence& s, std::span<const int32_t> tokens, std::span<const float> logprobs,
                              std::span<const TopLogprob> top) = 0;
    // Ends a running request whose controls leave nothing to draw at `position`.
    virtual void FailDeadEnd(Sequence& s, int64_t position) = 0;

   protected:
    ~Committer() = default;
  };
  // Candidates whose margin is below this are verified at once. Fast and fixed logits differ
  // by rounding (about 1e-6 relative); the margin leaves two orders of magnitude.
  static constexpr double kEarlyVerifyMargin = 1e-6;

  DvrController(const DeterminismPolicy& policy, EngineStats& stats);

  int32_t initial_window() const { return policy_.window; }

  // How a step's decode rows run.
  enum class DecodeChoice : uint8_t {
    kCandidates,  // deterministic rows under fast, as candidates verified later
    kDirect,      // deterministic rows without candidates under fixed, committed at once
    kAllFixed,    // those and the plain requests' decode rows under fixed: one schedule for them all
  };
  // The choice for a step with n (> 0) deterministic decode rows, `clean` of them without
  // candidates; `rest`: the shape of its other rows, of which `plain_decodes` are plain requests'
  // decode rows (the rest prefill chunks and verify rows); `verify_rows`: the replay rows a verify
  // step would hold before any has been seen. Under DecodePath::kAuto:
  // - a step without plain rows converges on fixed: it becomes a batch_invariant step (one pass
  //   that commits every row, where verification would compute each token twice), and requests
  //   still holding candidates verify them at once (AddCandidate), the token after them included,
  //   so that they decode under fixed after;
  // - beside plain rows, by the measured step costs (StepCostModel), the cheapest of three steady
  //   states for a step of the plain decode rows and the deterministic ones: the latter under
  //   fast plus what verifying them later costs (their share of a replay pass, and the candidates
  //   that recent rollbacks wasted); the latter under fixed beside fast plain rows; every decode
  //   row under fixed (a plain row may run under either schedule, and one schedule for a step can
  //   cost less than two: on the CPU a step of both streams each weight once but converts and
  //   tiles it twice). Either of the last two converges as above. Otherwise, when the step runs
  //   fixed rows anyway (a verify pass, a deterministic prefill), the clean rows ride along under
  //   fixed where that costs less than verifying them later. Until the steps have shown two of
  //   the three kinds of step (StepCostModel::Kind) kMinSeen times each, only a steady state of
  //   a kind already shown is chosen (at first: candidates, riding along).
  // The steady state holds until another is predicted to add kSwitchMargin less, so that timing
  // noise does not flip it step by step; every kExplorePeriod-th choice beside plain rows (every
  // fourth until all three are predictable) takes another one for a step, in turn, so that the
  // model keeps seeing them all (it extrapolates to a shape it never sees, and a wrong
  // extrapolation would never be corrected).
  DecodeChoice ChooseDecode(int64_t n, int64_t clean, const StepShape& rest, int64_t plain_decodes,
                            int64_t verify_rows);
  static constexpr double kSwitchMargin = 0.1;
  static constexpr int64_t kExplorePeriod = 16;
  static constexpr int64_t kMinSeen = 4;
  // Feeds a step's measured time to the cost model; `replay_rows`: its verify rows.
  void ObserveStep(const StepShape& shape, int64_t replay_rows, double seconds);

  // Appends a fast-path candidate; the request becomes ready when its window is full, when the
  // candidate would end it (`ends`), when the draw was close to a boundary, or when the engine
  // converges on decoding under fixed (ChooseDecode), so that the request follows once verified.
  void AddCandidate(Sequence& s, int32_t token, double margin, bool ends);
  // Ends the window of a request (holding candidates) whose next fast-path draw found nothing to
  // draw (row_controls.h): that can come of candidates the replay will not draw, so it is no
  // reason to fail the request. The window is verified; if every candidate agrees, the replay's
  // row after them meets the same dead end under fixed and fails the request then, after
  // committing them (VerifyAndCommit), as every other schedule would.
  void EndWindow(Sequence& s);

  // A verify entry's whole pass: the first n candidates (see Verify) against the replay's draws
  // rows(j); the agreed tokens committed through `committer` (up to a row where the grammar
  // allowed nothing), the pass counted, the cache and window settled. True when the request
  // finished (ended, or failed at a grammar dead end).
  bool VerifyAndCommit(Sequence& s, int64_t n, const ReplayRows& rows, Committer& committer, KvCache& cache);

  // Its steps, public for the controller's tests. What a verify pass found.
  struct Verdict {
    std::vector<int32_t> tokens;  // to commit: the agreed candidates, then the replay's token
    std::vector<float> logprobs;  // theirs under fixed, when requested
    std::vector<TopLogprob> top;  // top_n per token under fixed, when requested
    int64_t verified = 0;         // candidates checked (the row after them checks none)
    bool disagreed = false;       // the replay disagreed (or the injection hook said so)
    int64_t discarded = 0;        // candidates dropped: from the first disagreement on
  };
  // Compares the first n candidates (all of them, or the part of a window that fitted in this
  // step) with the replay: row(j) is its draw for position n_committed + j. n may be one more
  // than the candidates (the last one was fed too): when they all agree, that row's token
  // follows them (a decode under fixed, committed with them).
  Verdict Verify(const Sequence& s, int64_t n, bool logprobs, int top_n, const ReplayRows& row);
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
  DecodeChoice steady_ = DecodeChoice::kCandidates;  // ChooseDecode's steady state beside plain rows
  bool converge_ = false;     // deterministic requests are converging on fixed
  int64_t decisions_ = 0, explored_ = 0;
  double replay_rows_ = 0;    // recent verify steps' replay rows (decayed mean); 0: none seen
  // What one more candidate costs to verify later: its replay row's share of a verify step, and
  // for the recompute rate's share of candidates, the replay and the fast row wasted.
  double LaterCost(const StepShape& decode, int64_t verify_rows) const;
};

}  // namespace llm42

#endif  // LLM42_ENGINE_DVR_CONTROLLER_H_
