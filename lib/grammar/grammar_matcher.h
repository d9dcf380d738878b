#ifndef LLM42_GRAMMAR_GRAMMAR_MATCHER_H_
#define LLM42_GRAMMAR_GRAMMAR_MATCHER_H_

// Runs a Grammar over UTF-8 bytes: a pushdown automaton whose state is the set of stacks of
// positions that the input so far can be in, each stack's top a code-point set still to match
// (or the stack empty: the input is a whole sentence), plus the bytes of a code point begun but
// not finished. A reference at a position is expanded when it reaches the top, the position after
// it kept beneath (and dropped where nothing follows it, so that x* runs in constant depth).
//
// Positions index one flat array of the grammar's elements, each alternative ending in an end
// marker, so a position's successor is the next index. Byte tokens split code points, so the
// automaton steps by byte: a lead byte is taken only if some code point it can begin is allowed.
#include <cstdint>
#include <string_view>
#include <vector>

#include "lib/grammar/grammar.h"

namespace llm42 {

// A code point's UTF-8 bytes so far.
struct Utf8Partial {
  uint32_t bits = 0;   // the code point's bits so far (all of them once complete)
  int32_t need = 0;    // continuation bytes still to come; 0: none begun (or just completed)
  int32_t length = 0;  // the code point's UTF-8 length, while need > 0
  bool operator==(const Utf8Partial&) const = default;

  enum class Push { kRefused, kPartial, kComplete };
  // Takes the next byte: kComplete leaves the code point in `bits` (and need 0); kRefused for a
  // byte no well-formed UTF-8 has here (overlong forms, surrogates and values past U+10FFFF
  // included), leaving *this unspecified.
  Push Take(uint8_t byte);
  // The code points the bytes so far can begin (need > 0).
  uint32_t lowest() const;
  uint32_t highest() const;
};

struct GrammarState {
  // Sorted and unique; a stack's last entry is its top.
  std::vector<std::vector<int32_t>> stacks;
  Utf8Partial utf8;

  bool operator==(const GrammarState&) const = default;
  // The state as one sequence of integers (what the mask cache is keyed by).
  std::vector<int32_t> Key() const;
};

class GrammarAutomaton {
 public:
  // Ambiguity bound: a step that would leave more stacks than this is refused.
  static constexpr size_t kMaxStacks = 4096;

  explicit GrammarAutomaton(const Grammar& grammar);

  GrammarState Initial() const;
  // The state after `byte` in *out (a distinct object): false when the grammar allows no
  // continuation with it (then *out is unspecified).
  bool Step(const GrammarState& in, uint8_t byte, GrammarState* out) const;
  // The steps Step takes: after a whole code point (in.utf8 empty), and whether some code point
  // the partial bytes can begin is allowed after `in`.
  bool AcceptCodePoint(const GrammarState& in, uint32_t cp, GrammarState* out) const;
  bool Viable(const GrammarState& in, const Utf8Partial& partial) const;
  // Where the grammar's code-point sets begin and end: sorted, from 0, each value the first code
  // point of an interval within which every set either holds every code point or none (so every
  // code point of an interval steps every state alike).
  std::vector<uint32_t> CodePointIntervals() const;

  // For walks over part of a stack (TokenGrammar): a position no code point matches, put beneath
  // the part; a path that reaches it has left the part. Resume: the state a stack is in (its top
  // expanded), for what lies beneath such a part.
  int32_t sentinel() const { return sentinel_; }
  GrammarState Resume(std::vector<int32_t> stack) const;
  // Whether the input so far is a whole sentence (it may go on).
  bool CanEnd(const GrammarState& s) const;
  // Whether nothing more can follow: a whole sentence that no code point extends.
  bool IsComplete(const GrammarState& s) const;

 private:
  struct CodePointSet {
    std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive
    bool negated = false;
    bool Intersects(uint32_t lo, uint32_t hi) const;
  };
  struct Element {
    int32_t set = -1;   // >= 0: a code point in sets_[set]
    int32_t rule = -1;  // >= 0: a reference to that rule; both -1: the end of an alternative
    bool is_end() const { return set < 0 && rule < 0; }
  };

  void Expand(std::vector<int32_t> stack, std::vector<std::vector<int32_t>>* out) const;

  std::vector<Element> elements_;
  std::vector<CodePointSet> sets_;
  std::vector<std::vector<int32_t>> alternatives_;  // per rule: each alternative's first position
  int32_t root_ = 0;
  int32_t sentinel_ = 0;
};

// A matcher for tests and one-off checks: an automaton and a state.
class GrammarMatcher {
 public:
  // `grammar` is copied into the automaton (ParseGbnf's: no left recursion, root productive).
  explicit GrammarMatcher(const Grammar* grammar);

  // Takes the code point if the grammar allows it here (true); else false, and nothing changes.
  bool Accept(uint32_t code_point);
  // Takes the bytes in order; on the first refused one, false, and the matcher is as it was
  // before the call.
  bool AcceptText(std::string_view utf8);
  bool CanEnd() const { return automaton_.CanEnd(state_); }
  bool IsComplete() const { return automaton_.IsComplete(state_); }

 private:
  GrammarAutomaton automaton_;
  GrammarState state_;
};

}  // namespace llm42

#endif  // LLM42_GRAMMAR_GRAMMAR_MATCHER_H_
