#ifndef LLM42_ENGINE_SEQUENCE_H_
#define LLM42_ENGINE_SEQUENCE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "lib/engine/request.h"
#include "lib/engine/text_stream.h"
#include "lib/grammar/grammar_trace.h"
#include "lib/sampling/sampler.h"

namespace llm42 {

// Engine-side state of one request, shared by the scheduler (which plans its rows), the DVR
// controller (its window and candidates) and the engine (which feeds and commits it). See
// docs/deterministic-requests.md for the life of a deterministic one (dvr == true).
struct Sequence {
  Sequence(std::shared_ptr<Request> r, uint64_t arrival_order, SamplingParams params, bool dvr_on,
           int32_t initial_window)
      : request(std::move(r)),
        arrival(arrival_order),
        tokens(request->prompt()),
        n_prompt(static_cast<int64_t>(tokens.size())),
        n_committed(n_prompt),
        sampling(params),
        dvr(dvr_on),
        fixed_kv(dvr_on),
        window(initial_window),
        text(request->options().stops),
        probe(text) {}

  std::shared_ptr<Request> request;
  uint64_t arrival;
  // The prompt, the committed tokens, then (deterministic requests only) unverified candidates.
  std::vector<int32_t> tokens;
  int64_t n_prompt;
  int64_t n_committed;     // prompt + committed tokens
  int64_t n_computed = 0;  // positions whose K/V are in the cache
  int64_t prompt_scored = 0;  // prompt_logprobs: prompt rows scored so far (row i scores token i + 1)
  int32_t kv_seq = -1;     // KV-cache sequence while admitted
  SamplingParams sampling;
  bool dvr;            // decode-verify-rollback: candidates are committed only once verified
  // Its output must not depend on what ran beside it or before it: every K/V row it reads was
  // computed under fixed, so the prefix cache gives it only `fixed` blocks. A dvr request, and
  // every request of a batch_invariant session (whose receipts vouch for all of them).
  bool fixed_kv;
  int32_t window;      // dvr: candidates that make a full window now (adapted per request)
  bool ready = false;  // dvr: stops decoding and awaits verification
  int64_t drafted = 0;  // dvr: leading candidates drafted (RequestOptions::draft), not decoded
  bool planned = false;  // in the batch being built (never a preemption victim then)
  // Admitted since its last row: a model's recurrent state starts anew (RecurrentSlots).
  bool fresh_state = true;
  TextStream text;     // committed text
  TextStream probe;    // dvr: committed text plus candidates, to spot a candidate stop string
  // The output grammar's state per output position (RequestOptions::output_grammar), else null.
  std::unique_ptr<GrammarTrace> grammar;

  int64_t generated() const { return n_committed - n_prompt; }
  // The output tokens before `position` (committed, then candidates).
  std::span<const int32_t> OutputBefore(int64_t position) const {
    return std::span<const int32_t>(tokens).subspan(static_cast<size_t>(n_prompt),
                                                    static_cast<size_t>(position - n_prompt));
  }
  int64_t candidates() const { return static_cast<int64_t>(tokens.size()) - n_committed; }
  int64_t pending() const { return static_cast<int64_t>(tokens.size()) - n_computed; }
  // dvr: the committed prefix's K/V must (re)computed under fixed, and the token after it is
  // then committed directly: the first prefill, or the recompute after a preemption.
  bool fixed_prefill() const {
    return dvr && candidates() == 0 && (n_committed == n_prompt || n_computed < n_committed - 1);
  }
  // Feeds one token this step and samples the next (a plain request's token, or a candidate).
  bool decoding() const { return pending() == 1 && !ready && !fixed_prefill(); }
  // Drops unverified candidates (preemption, rollback).
  void DropCandidates() {
    tokens.resize(static_cast<size_t>(n_committed));
    ready = false;
    drafted = 0;
    probe = text;
  }
};

}  // namespace llm42

#endif  // LLM42_ENGINE_SEQUENCE_H_
