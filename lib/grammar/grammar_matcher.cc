#include "lib/grammar/grammar_matcher.h"

#include <utility>

#include "utf8proc.h"

namespace llm42 {

GrammarMatcher::GrammarMatcher(const Grammar* grammar) : grammar_(grammar) {
  const auto& root = grammar_->rules[static_cast<size_t>(grammar_->root)];
  for (size_t a = 0; a < root.alternatives.size(); ++a) {
    Expand(Stack{{grammar_->root, static_cast<int32_t>(a), 0}}, &stacks_);
  }
}

const GrammarElement& GrammarMatcher::Top(const Stack& s) const {
  const Position& p = s.back();
  return grammar_->rules[static_cast<size_t>(p.rule)].alternatives[static_cast<size_t>(p.alternative)]
                       [static_cast<size_t>(p.element)];
}

// Brings `s` to where its top is a code-point element (or it is empty), in every way the
// references allow, into `out`.
void GrammarMatcher::Expand(Stack s, std::set<Stack>* out) const {
  // Positions at the end of their alternative are done: the one beneath continues.
  auto at_end = [&](const Position& p) {
    return static_cast<size_t>(p.element) ==
           grammar_->rules[static_cast<size_t>(p.rule)].alternatives[static_cast<size_t>(p.alternative)].size();
  };
  while (!s.empty() && at_end(s.back())) s.pop_back();
  if (s.empty() || !Top(s).is_rule()) {
    out->insert(std::move(s));
    return;
  }
  const int32_t rule = Top(s).rule;
  ++s.back().element;  // where to continue once the rule is matched
  if (at_end(s.back())) s.pop_back();  // nothing follows it here: no need to keep the position
  const auto& alternatives = grammar_->rules[static_cast<size_t>(rule)].alternatives;
  for (size_t a = 0; a < alternatives.size(); ++a) {
    Stack next = s;
    next.push_back({rule, static_cast<int32_t>(a), 0});
    Expand(std::move(next), out);
  }
}

bool GrammarMatcher::Accept(uint32_t code_point) {
  std::set<Stack> next;
  for (const Stack& s : stacks_) {
    if (s.empty() || !Top(s).Matches(code_point)) continue;
    Stack advanced = s;
    ++advanced.back().element;
    Expand(std::move(advanced), &next);
  }
  if (next.empty()) return false;
  stacks_ = std::move(next);
  return true;
}

bool GrammarMatcher::AcceptText(std::string_view utf8) {
  const std::set<Stack> before = stacks_;
  for (size_t i = 0; i < utf8.size();) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(utf8.data() + i),
                                                static_cast<utf8proc_ssize_t>(utf8.size() - i), &cp);
    if (n <= 0 || cp < 0 || !Accept(static_cast<uint32_t>(cp))) {
      stacks_ = before;
      return false;
    }
    i += static_cast<size_t>(n);
  }
  return true;
}

bool GrammarMatcher::CanEnd() const { return stacks_.count(Stack{}) > 0; }

bool GrammarMatcher::IsComplete() const { return stacks_.size() == 1 && CanEnd(); }

}  // namespace llm42
