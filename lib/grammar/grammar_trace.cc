#include "lib/grammar/grammar_trace.h"

#include <algorithm>
#include <utility>

namespace llm42 {

GrammarTrace::GrammarTrace(std::shared_ptr<const TokenGrammar> grammar) : grammar_(std::move(grammar)) {
  states_.push_back(grammar_->automaton().Initial());
}

const GrammarState* GrammarTrace::After(std::span<const int32_t> output) {
  const size_t same =
      static_cast<size_t>(std::mismatch(tokens_.begin(), tokens_.end(), output.begin(), output.end()).first -
                          tokens_.begin());
  if (same == output.size()) return &states_[same];  // a prefix of the trace (a longer one is kept)
  tokens_.resize(same);
  states_.resize(same + 1);
  for (size_t k = same; k < output.size(); ++k) {
    GrammarState next;
    if (!grammar_->Advance(states_.back(), output[k], &next)) return nullptr;
    tokens_.push_back(output[k]);
    states_.push_back(std::move(next));
  }
  return &states_.back();
}

const GrammarState* GrammarTrace::After(std::span<const int32_t> output, int32_t next) {
  if (After(output) == nullptr) return nullptr;
  const size_t n = output.size();
  if (tokens_.size() > n && tokens_[n] == next) return &states_[n + 1];
  tokens_.resize(n);
  states_.resize(n + 1);
  GrammarState state;
  if (!grammar_->Advance(states_.back(), next, &state)) return nullptr;
  tokens_.push_back(next);
  states_.push_back(std::move(state));
  return &states_.back();
}
}  // namespace llm42
