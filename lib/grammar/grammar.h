#ifndef LLM42_GRAMMAR_GRAMMAR_H_
#define LLM42_GRAMMAR_GRAMMAR_H_

// A context-free grammar over Unicode code points, in the form the matcher runs: rules of
// alternatives, each a sequence of elements, an element a set of code points or a reference to
// a rule. Repetitions and groups are rewritten into rules of their own as the text is parsed, so
// the matcher knows nothing but sequences and references.
//
// ParseGbnf reads llama.cpp's GBNF: `name ::= alternatives` per rule (a rule ends at a newline,
// except after `::=` or `|` and inside parentheses), `root` the start; "literals" and [classes]
// ([^...] negated, a-z ranges) with the escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH,
// `.` for any code point, `|`, `( )`, `? * +`, `{n}`, `{m,}`, `{m,n}`, and `#` comments. Refused,
// with the line and column of the first error: syntax errors, unbalanced parentheses or quotes,
// a reference to an undefined rule, a missing `root`, left recursion (a rule that can reach itself
// without consuming a code point), and a rule that derives no finite string.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace llm42 {

struct GrammarElement {
  // A code point in any of `ranges` (inclusive), or, negated, in none of them.
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  bool negated = false;
  int32_t rule = -1;  // >= 0: a reference to that rule instead of a set of code points

  bool is_rule() const { return rule >= 0; }
  bool Matches(uint32_t code_point) const;
};

struct GrammarRule {
  std::string name;  // generated rules: the defining rule's name, '-', a number
  std::vector<std::vector<GrammarElement>> alternatives;  // an empty alternative matches ""
};

struct Grammar {
  std::vector<GrammarRule> rules;
  int32_t root = 0;
};

// The largest repetition count ParseGbnf expands ({m,n} with m or n above it is refused).
inline constexpr int kMaxGbnfRepetition = 1000;

absl::StatusOr<Grammar> ParseGbnf(std::string_view text);

}  // namespace llm42

#endif  // LLM42_GRAMMAR_GRAMMAR_H_
