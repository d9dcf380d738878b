#include "lib/engine/row_controls.h"

#include <bit>
#include <cmath>
#include <span>

#include "absl/strings/str_cat.h"
#include "lib/grammar/token_grammar.h"
#include "lib/sampling/logit_controls.h"

namespace llm42 {
namespace {

bool Banned(const LogitEdit& e) { return e.has_bias != 0 && std::isinf(e.bias) && e.bias < 0; }

// Whether the row keeps a token that is allowed (every one without a grammar; a grammar's mask
// that got here allows one) and not banned. Counts the mask's tokens only when a ban falls in it:
// a controlled row on the per-token path pays a pass over its edits, not over the vocabulary.
bool KeepsAToken(std::span<const LogitEdit> edits, std::span<const uint64_t> allowed, int64_t n_vocab) {
  int64_t banned = 0;  // of the allowed tokens (edits hold one entry per token)
  for (const LogitEdit& e : edits) {
    if (Banned(e) && (allowed.empty() || TokenAllowed(allowed.data(), e.token))) ++banned;
  }
  if (banned == 0) return allowed.empty() ? n_vocab > 0 : true;
  if (allowed.empty()) return banned < n_vocab;
  int64_t kept = 0;
  for (uint64_t w : allowed) kept += std::popcount(w);
  return banned < kept;
}

}  // namespace

RowLeft RowControls(const Sequence& s, int64_t position, int64_t n_vocab, std::vector<LogitEdit>* edits,
                    std::vector<uint64_t>* allowed) {
  const RequestOptions& o = s.request->options();
  LogitEditsOf(o.controls, std::span<const int32_t>(s.tokens).first(static_cast<size_t>(position)), n_vocab, edits);
  allowed->clear();
  if (s.grammar != nullptr) {
    const GrammarState* state = s.grammar->After(s.OutputBefore(position));
    if (state == nullptr || !s.grammar->grammar().AllowedInRow(*state, !o.ignore_eos, n_vocab, allowed)) {
      return RowLeft::kNoGrammar;
    }
  }
  return KeepsAToken(*edits, *allowed, n_vocab) ? RowLeft::kTokens : RowLeft::kAllBanned;
}

absl::Status NothingToDraw(const Sequence& s, int64_t position, RowLeft why) {
  const std::string after = position == s.n_prompt ? std::string(" at the first output token")
                                                    : absl::StrCat(" after ", position - s.n_prompt, " output tokens");
  if (why == RowLeft::kNoGrammar) {
    return absl::FailedPreconditionError(
        absl::StrCat("the output grammar allows no token of the model's vocabulary", after));
  }
  return absl::FailedPreconditionError(
      absl::StrCat(s.grammar != nullptr ? "the logit biases ban every token the output grammar allows"
                                        : "the logit biases ban every token of the vocabulary",
                   after, ": nothing is left to draw"));
}

}  // namespace llm42
