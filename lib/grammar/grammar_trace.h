#ifndef LLM42_GRAMMAR_GRAMMAR_TRACE_H_
#define LLM42_GRAMMAR_GRAMMAR_TRACE_H_

// One request's way through its grammar: the automaton's state after each of its output tokens,
// so that the state at any position is at hand. Asked for the state after some output, it reuses
// the states of the prefix that output shares with the last one asked for: a rollback or a
// rejected candidate simply asks for a shorter or different output, and gets the state of the
// position it returns to (a prefix's state is read without dropping the longer way).
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "lib/grammar/token_grammar.h"

namespace llm42 {

class GrammarTrace {
 public:
  explicit GrammarTrace(std::shared_ptr<const TokenGrammar> grammar);

  const TokenGrammar& grammar() const { return *grammar_; }
  // The state after `output`; nullptr when the grammar refuses one of its tokens.
  const GrammarState* After(std::span<const int32_t> output);
  // The state after `output` then `next` (a token about to join it: the trace keeps the step,
  // so asking next for the output with it costs nothing).
  const GrammarState* After(std::span<const int32_t> output, int32_t next);

 private:
  std::shared_ptr<const TokenGrammar> grammar_;
  std::vector<int32_t> tokens_;       // the output the states are for
  std::vector<GrammarState> states_;  // states_[k]: after tokens_[0..k)
};

}  // namespace llm42

#endif  // LLM42_GRAMMAR_GRAMMAR_TRACE_H_
