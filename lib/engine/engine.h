#ifndef LLM42_ENGINE_ENGINE_H_
#define LLM42_ENGINE_ENGINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "lib/backend/backend.h"
#include "lib/engine/dvr_controller.h"
#include "lib/engine/engine_stats.h"
#include "lib/engine/recurrent_slots.h"
#include "lib/engine/scheduler.h"
#include "lib/engine/sequence.h"
#include "lib/engine/step_cost.h"
#include "lib/model/model_runner.h"
#include "lib/sampling/sampler.h"

namespace llm42 {

class KvCache;
class Tokenizer;

struct EngineConfig {
  SchedulerLimits limits;
  DeterminismPolicy determinism;
  Schedule schedule = Schedule::kFast;  // of every row that is not a deterministic request's
  int64_t max_sequence = 0;             // min(context length, KV capacity)
  // fast_path_noise is keyed by this, the request and the position: a session draws it at
  // random, so the noisy fast path differs from process to process as real batch variance
  // does, and a run-to-run test without determinism sees different outputs.
  uint64_t noise_salt = 0;
  // Runs fn(begin, end) over [0, n) on host threads and returns when all is done: the step's
  // draws, each a pure function of its row. Unset: on the engine thread. A session passes its
  // backend's HostParallelFor.
  std::function<void(int64_t n, const std::function<void(int64_t, int64_t)>& fn)> parallel_for;
  // Sampled rows are drawn where the logits are (ForwardBatch::device_draw), and the bias,
  // penalties and grammar mask of those rows and of greedy rows without logprobs are applied
  // there first (ForwardBatch::controls), their logits never crossing to the host: the same bits
  // (lib/numerics/draw_rule.h, logit_edit.h). Not under the fast path's noise. A session sets it
  // on backends other than the CPU's (where the logits already are on the host).
  bool device_draws = false;
  // A model with recurrent layers: its state's slots (lib/engine/recurrent_slots.h; off: none),
  // and the backend's copy of one slot into another (Backend::CopyRecurrent).
  RecurrentSlots recurrent;
  std::function<absl::Status(int32_t from, int32_t to)> copy_recurrent;
};

// Runs engine steps: each one planned by the Scheduler, computed by one forward pass, then
// sampled and committed, with deterministic requests' candidates verified by the
// DvrController. Engine thread only; the forward pass is a function so that tests can drive
// the engine with a fake model.
class Engine : private DvrController::Committer {
 public:
  // Returns the logits [row][n_vocab] of batch.logit_rows that are not batch.argmax_only,
  // packed, in host memory valid until the next call (and fills batch.argmax for the others);
  // writes K/V into the cache it was given. A failure (a backend error) ends every running
  // request with it.
  using ForwardFn = std::function<absl::StatusOr<float*>(const ForwardBatch& batch)>;

  Engine(const EngineConfig& config, const Tokenizer& tokenizer, KvCache& cache, ForwardFn forward,
         EngineStats& stats);

  void Enqueue(std::unique_ptr<Sequence> seq) { scheduler_.Enqueue(std::move(seq)); }
  // One step: cancellations, admission, the plan, the forward pass, sampling, verification and
  // commits. False when there was nothing to run.
  bool Step();
  bool idle() const { return scheduler_.idle(); }
  // Finishes every queued and running request with `reason` and `status` (cancelled: the
  // session is going away; error: the forward pass failed).
  void FinishAll(FinishReason reason, const absl::Status& status);

  int32_t initial_window() const { return dvr_.initial_window(); }

 private:
  // Why `token`, making the sequence `length` long with `generated` tokens, would end it.
  FinishReason EndsRequest(const Sequence& s, int32_t token, int64_t length, int64_t generated,
                           bool stop_string) const;
  // Commits tokens in order after the committed prefix, stopping at the first that ends the
  // request; streams them. Candidates that the tokens repeat stay, the rest are dropped. True
  // when the request finished (its cache is then released and it is counted finished
  // before anyone can see it finished).
  // `top`: RequestOptions::top_logprobs entries per token, or none.
  bool CommitTokens(Sequence& s, std::span<const int32_t> tokens, std::span<const float> logprobs,
                    std::span<const TopLogprob> top) override;
  void Finish(Sequence& s, FinishReason reason, absl::Status status);
  // Finishes a running request with an error: its cache released, the status reported.
  void Fail(Sequence& s, absl::Status status);
  // Fail with FAILED_PRECONDITION: the request's controls leave nothing to draw at `position`
  // (row_controls.h says what emptied it).
  void FailDeadEnd(Sequence& s, int64_t position) override;
  int64_t n_vocab() const;
  // Whether the request changes its logits before they are sampled (then a draw from its row
  // needs the controls applied first: on the host, or where the logits are).
  static bool ControlsLogits(const Sequence& s);
  // The request's changes to the logits of `position` (row_controls.h) applied to them: what every
  // draw of the position (a candidate, its replay, a direct commit) samples from. False when they
  // leave nothing to draw there.
  // Timed into EngineStats::StepTimes. Any thread (a sequence's rows on one at a time).
  bool ControlLogits(Sequence& s, int64_t position, std::span<float> logits);
  // Whether `token` at `position` completes the request's grammar (nothing can follow it).
  static bool CompletesGrammar(const Sequence& s, int64_t position, int32_t token);
  // How an entry's rows compute: plain requests under the session's schedule (their decode rows
  // under fixed when the step's choice is kAllFixed); a deterministic request's verify and
  // prefill rows under fixed, its decode row under fixed when the choice is not kCandidates and
  // nothing awaits verification, else under fast (a candidate).
  Schedule EntrySchedule(const PlanEntry& p, DvrController::DecodeChoice choice) const;
  // One step, as its stages (Step runs them in this order) hand it along: the plan, the rows of
  // the forward pass, the logits it returned and the draws made from them.
  struct StepBatch {
    std::vector<PlanEntry> plan;
    std::vector<Schedule> entry_schedule;  // per entry (EntrySchedule)
    StepShape rest;                        // the rows of entries other than deterministic decodes
    int64_t replay_rows = 0;               // verify rows, for the DVR controller's cost model
    StepShape shape;                       // every row, by schedule
    // The forward pass's rows.
    std::vector<int32_t> tokens, positions, seqs;
    std::vector<Schedule> schedules;
    std::vector<RecurrentRow> recurrent;  // per row, for a model with recurrent layers
    std::vector<int64_t> first_scratch;   // per entry: a verify entry's first scratch slot (RecurrentSlots)
    std::vector<uint8_t> snapshotted;     // per row: it leaves its block's snapshot (KvCache::SnapshotAt)
    std::vector<std::pair<int32_t, int32_t>> snapshot_copies;  // after the pass: verify rows' scratch to snapshots
    // The rows whose logits the step reads; a summarized row returns only its ArgmaxSummary.
    std::vector<int32_t> logit_rows;
    std::vector<uint8_t> argmax_only;
    // The rows drawn on the backend (EngineConfig::device_draws), and their draws' parameters.
    std::vector<uint8_t> device_draw;
    std::vector<RowDraw> row_draws;
    // The controls the backend applies to rows it summarizes or draws (ForwardBatch::controls),
    // each one's edits and mask words in the two arrays from control_at's offsets on.
    std::vector<Backend::RowControl> controls;
    std::vector<std::pair<size_t, size_t>> control_at;
    std::vector<LogitEdit> control_edits;
    std::vector<uint64_t> control_words;
    // Per entry: its first logit row, and the rows scoring its prompt (first, count).
    std::vector<size_t> first_logit, score_first, score_n;
    std::vector<int64_t> slot;  // per logit row: its place among the returned logits, -1 if summarized
    float* logits = nullptr;
    size_t n_vocab = 0;
    std::vector<std::optional<SampledToken>> draws;  // per entry: its next token, once drawn
    double pass_s = 0, logits_s = 0;                 // the forward pass, and the logits' copy in it

    // A logit row's logits (empty for a summarized or device-drawn row: its draw reads the
    // summary or the device's draw).
    std::span<float> Row(size_t r) const {
      return slot[r] < 0 ? std::span<float>() : std::span<float>(logits + static_cast<size_t>(slot[r]) * n_vocab, n_vocab);
    }
  };
  // Step's stages. Each entry's schedule, with the DVR controller's choice of how deterministic
  // requests decode this step.
  void ChooseSchedules(StepBatch& b);
  // The forward pass's rows, and which rows' logits (or argmax summaries) it returns.
  void BuildRows(StepBatch& b);
  // The controls of s's row at `position` into b.controls, for the logit row BuildRows adds
  // next; false, adding nothing, when the grammar leaves no token (the host then fails the
  // request from the row's logits).
  bool ControlOnDevice(const Sequence& s, int64_t position, size_t logit_row, StepBatch& b);
  // Whether a verify entry of n rows, about to be added, comes back as the replay's draws made
  // where the logits are (a sampled request's by DrawRows, a greedy one's without logprobs as
  // argmax summaries), its rows' controls in b.controls; not on the CPU, nor where the grammar
  // leaves no token at one of its rows (nothing added then).
  bool ReplayOnDevice(const Sequence& s, int64_t n, StepBatch& b);
  // The draw of s's token at `position` (its row set by the model runner), for DrawRows.
  static RowDraw DrawOf(const Sequence& s, int64_t position);
  // Row j of verify entry e as the replay drew it (DvrController::VerifyAndCommit's rows).
  DvrController::ReplayDraw ReplayRow(StepBatch& b, size_t e, int64_t j);
  // The logprob of `token` in logit row r and its top logprobs into *top, as the request asks
  // for them (else 0 and none): the backend's where it drew the row (its own draw's), else from
  // the row's logits (after their controls).
  float Scores(const StepBatch& b, size_t r, int32_t token, const RequestOptions& o, std::vector<TopLogprob>* top);
  // Deterministic requests that draft (RequestOptions::draft) and are about to decode a candidate
  // get a window of drafts instead, ready to verify this step (each draft a candidate the replay
  // checks, so nothing of the output changes): prompt lookup (lib/engine/ngram_draft.h), within
  // the request's window, its grammar and the cache's free room.
  void ProposeDrafts();
  // Entry e's rows' recurrent state into b.recurrent (RecurrentSlots' rules).
  void RecurrentRows(StepBatch& b, size_t e, int64_t* scratch_used);
  // After verify entry e committed (s not finished): live holds the state after the last row the
  // pass kept. False (every request then fails) when the backend's copy failed.
  bool SettleRecurrent(const StepBatch& b, size_t e, const Sequence& s);
  // The forward pass; false when it failed (every request then fails with its status).
  bool Run(StepBatch& b);
  // An entry's next token into b.draws[e]; any thread for entries of different sequences.
  void Draw(StepBatch& b, size_t e);
  // The draws that can run ahead, in parallel on host threads (EngineConfig::parallel_for).
  void DrawAhead(StepBatch& b);
  // Each entry's result in plan order: prompt scores, verification, candidates and commits.
  void Commit(StepBatch& b);

  EngineConfig config_;
  const Tokenizer& tokenizer_;
  KvCache& cache_;
  ForwardFn forward_;
  EngineStats& stats_;
  Scheduler scheduler_;
  DvrController dvr_;
  std::vector<TopLogprob> replay_top_;     // ReplayRow's
  std::vector<LogitEdit> edits_scratch_;  // ControlOnDevice's (the engine thread's)
  std::vector<uint64_t> allowed_scratch_;
  std::vector<ArgmaxSummary> argmax_;  // per logit row of a step; the summarized rows' only
  std::vector<DrawnRow> drawn_;        // per logit row of a step; the device-drawn rows' only
  std::vector<TopLogprob> top_scratch_;
};

}  // namespace llm42

#endif  // LLM42_ENGINE_ENGINE_H_
