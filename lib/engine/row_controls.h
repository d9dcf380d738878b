#ifndef LLM42_ENGINE_ROW_CONTROLS_H_
#define LLM42_ENGINE_ROW_CONTROLS_H_

// What a request's controls do to its row of logits at one position — its logit bias and
// penalties (logit_controls.h), then its grammar's mask (token_grammar.h), from the tokens before
// the position — and whether they leave anything to draw. Every draw of the position (a
// candidate, its replay, a direct commit, the check at submit) asks here, so they all agree.
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "lib/engine/sequence.h"
#include "lib/numerics/logit_edit.h"

namespace llm42 {

// What a controlled row leaves to draw from. A pure function of the controls and the tokens
// before the position, never of the logits: a finite logit stays finite through every edit
// (LogitControls bounds finite biases and the penalties), so only the grammar's mask and
// -infinity biases can empty a row.
enum class RowLeft : uint8_t {
  kTokens,     // some token may be drawn
  kNoGrammar,  // the grammar allows no token of the vocabulary here
  kAllBanned,  // every token the grammar (or, without one, the vocabulary) allows has a -infinity bias
};

// s's controls for its row at `position` of n_vocab logits: the token edits (LogitEditsOf) into
// *edits and, under a grammar, the allowed tokens into *allowed (else left empty).
RowLeft RowControls(const Sequence& s, int64_t position, int64_t n_vocab, std::vector<LogitEdit>* edits,
                    std::vector<uint64_t>* allowed);

// FAILED_PRECONDITION saying what left nothing to draw at `position` and how many output tokens
// came before it (`why` is not kTokens).
absl::Status NothingToDraw(const Sequence& s, int64_t position, RowLeft why);

}  // namespace llm42

#endif  // LLM42_ENGINE_ROW_CONTROLS_H_
