#ifndef LLM42_GRAMMAR_GRAMMAR_MATCHER_H_
#define LLM42_GRAMMAR_GRAMMAR_MATCHER_H_

// Runs a Grammar over code points, one at a time: a pushdown automaton whose state is the set of
// stacks of positions (rule, alternative, element) that the input so far can be in, each stack's
// top a code-point element still to match (or the stack empty: the input is a whole sentence).
// A reference at a position is expanded when it reaches the top, the position after it kept
// beneath (and dropped where nothing follows it, so that x* runs in constant depth).
#include <cstdint>
#include <set>
#include <string_view>
#include <vector>

#include "lib/grammar/grammar.h"

namespace llm42 {

class GrammarMatcher {
 public:
  // `grammar` must outlive the matcher (ParseGbnf's: no left recursion, root productive).
  explicit GrammarMatcher(const Grammar* grammar);

  // Takes the code point if the grammar allows it here (true); else false, and nothing changes.
  bool Accept(uint32_t code_point);
  // Takes the UTF-8 text's code points in order; on the first refused one, false, and the
  // matcher is as it was before the call.
  bool AcceptText(std::string_view utf8);
  // The input so far is a whole sentence of the grammar.
  bool CanEnd() const;
  // Nothing more can follow (a complete sentence that no code point extends).
  bool IsComplete() const;

 private:
  struct Position {
    int32_t rule, alternative, element;
    auto operator<=>(const Position&) const = default;
  };
  using Stack = std::vector<Position>;

  const GrammarElement& Top(const Stack& s) const;
  void Expand(Stack s, std::set<Stack>* out) const;

  const Grammar* grammar_;
  std::set<Stack> stacks_;
};

}  // namespace llm42

#endif  // LLM42_GRAMMAR_GRAMMAR_MATCHER_H_
