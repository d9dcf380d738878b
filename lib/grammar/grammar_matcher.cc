#include "lib/grammar/grammar_matcher.h"

#include <algorithm>
#include <utility>

namespace llm42 {

std::vector<int32_t> GrammarState::Key() const {
  std::vector<int32_t> key{utf8.need, static_cast<int32_t>(utf8.bits), utf8.length};
  for (const auto& s : stacks) {
    key.push_back(static_cast<int32_t>(s.size()));
    key.insert(key.end(), s.begin(), s.end());
  }
  return key;
}

bool GrammarAutomaton::CodePointSet::Intersects(uint32_t lo, uint32_t hi) const {
  if (!negated) {
    for (const auto& [a, b] : ranges) {
      if (a <= hi && b >= lo) return true;
    }
    return false;
  }
  // Some code point of [lo, hi] outside every range: walk up from lo past the ranges covering it.
  uint32_t cp = lo;
  for (bool moved = true; moved && cp <= hi;) {
    moved = false;
    for (const auto& [a, b] : ranges) {
      if (a <= cp && cp <= b) {
        if (b >= hi) return false;
        cp = b + 1;
        moved = true;
      }
    }
  }
  return cp <= hi;
}

GrammarAutomaton::GrammarAutomaton(const Grammar& grammar) : root_(grammar.root) {
  alternatives_.resize(grammar.rules.size());
  for (size_t r = 0; r < grammar.rules.size(); ++r) {
    for (const auto& alternative : grammar.rules[r].alternatives) {
      alternatives_[r].push_back(static_cast<int32_t>(elements_.size()));
      for (const GrammarElement& e : alternative) {
        if (e.is_rule()) {
          elements_.push_back({-1, e.rule});
        } else {
          sets_.push_back({e.ranges, e.negated});
          elements_.push_back({static_cast<int32_t>(sets_.size() - 1), -1});
        }
      }
      elements_.push_back({});  // the end
    }
  }
  sets_.push_back({});  // no code point
  sentinel_ = static_cast<int32_t>(elements_.size());
  elements_.push_back({static_cast<int32_t>(sets_.size() - 1), -1});
  elements_.push_back({});
}

namespace {

void SortUnique(std::vector<std::vector<int32_t>>* stacks) {
  std::sort(stacks->begin(), stacks->end());
  stacks->erase(std::unique(stacks->begin(), stacks->end()), stacks->end());
}

}  // namespace

GrammarState GrammarAutomaton::Resume(std::vector<int32_t> stack) const {
  GrammarState s;
  Expand(std::move(stack), &s.stacks);
  SortUnique(&s.stacks);
  return s;
}

// Brings `stack` to where its top is a code-point set (or it is empty), in every way the
// references allow, into `out`.
void GrammarAutomaton::Expand(std::vector<int32_t> stack, std::vector<std::vector<int32_t>>* out) const {
  while (!stack.empty() && elements_[static_cast<size_t>(stack.back())].is_end()) stack.pop_back();
  if (stack.empty() || elements_[static_cast<size_t>(stack.back())].set >= 0) {
    out->push_back(std::move(stack));
    return;
  }
  const int32_t rule = elements_[static_cast<size_t>(stack.back())].rule;
  ++stack.back();  // where to continue once the rule is matched
  if (elements_[static_cast<size_t>(stack.back())].is_end()) stack.pop_back();  // nothing follows: drop it
  const auto& starts = alternatives_[static_cast<size_t>(rule)];
  for (size_t a = 0; a < starts.size(); ++a) {
    std::vector<int32_t> next = a + 1 == starts.size() ? std::move(stack) : stack;
    next.push_back(starts[a]);
    Expand(std::move(next), out);
  }
}


GrammarState GrammarAutomaton::Initial() const {
  GrammarState s;
  for (int32_t start : alternatives_[static_cast<size_t>(root_)]) Expand({start}, &s.stacks);
  SortUnique(&s.stacks);
  return s;
}

bool GrammarAutomaton::AcceptCodePoint(const GrammarState& in, uint32_t cp, GrammarState* out) const {
  out->stacks.clear();
  out->utf8 = Utf8Partial{};
  for (const auto& s : in.stacks) {
    if (s.empty()) continue;
    const CodePointSet& set = sets_[static_cast<size_t>(elements_[static_cast<size_t>(s.back())].set)];
    if (!set.Intersects(cp, cp)) continue;
    std::vector<int32_t> advanced = s;
    ++advanced.back();
    Expand(std::move(advanced), &out->stacks);
    if (out->stacks.size() > kMaxStacks) return false;
  }
  if (out->stacks.empty()) return false;
  SortUnique(&out->stacks);
  return true;
}

bool GrammarAutomaton::Viable(const GrammarState& in, const Utf8Partial& partial) const {
  const uint32_t lo = partial.lowest(), hi = partial.highest();
  if (lo > hi) return false;
  for (const auto& stack : in.stacks) {
    if (stack.empty()) continue;
    if (sets_[static_cast<size_t>(elements_[static_cast<size_t>(stack.back())].set)].Intersects(lo, hi)) return true;
  }
  return false;
}

std::vector<uint32_t> GrammarAutomaton::CodePointIntervals() const {
  std::vector<uint32_t> starts = {0};
  for (const CodePointSet& set : sets_) {
    for (const auto& [lo, hi] : set.ranges) {
      starts.push_back(lo);
      if (hi < 0x10FFFF) starts.push_back(hi + 1);
    }
  }
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  return starts;
}

Utf8Partial::Push Utf8Partial::Take(uint8_t b) {
  if (need == 0) {
    if (b < 0x80) {
      bits = b;
      return Push::kComplete;
    }
    if (b >= 0xC2 && b <= 0xDF) {
      need = 1, bits = b & 0x1Fu;
    } else if ((b & 0xF0) == 0xE0) {
      need = 2, bits = b & 0x0Fu;
    } else if (b >= 0xF0 && b <= 0xF4) {
      need = 3, bits = b & 0x07u;
    } else {
      return Push::kRefused;  // a continuation byte, or a lead that begins no code point
    }
    length = need + 1;
    return Push::kPartial;
  }
  if ((b & 0xC0) != 0x80) return Push::kRefused;
  // Second bytes that would make an overlong form, a surrogate or a code point past U+10FFFF.
  if (length == 3 && need == 2) {
    if ((bits == 0 && b < 0xA0) || (bits == 0xD && b >= 0xA0)) return Push::kRefused;
  } else if (length == 4 && need == 3) {
    if ((bits == 0 && b < 0x90) || (bits == 4 && b >= 0x90)) return Push::kRefused;
  }
  bits = bits << 6 | (b & 0x3Fu);
  if (--need > 0) return Push::kPartial;
  length = 0;
  return Push::kComplete;
}

uint32_t Utf8Partial::lowest() const {
  static constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  return std::max(bits << (6 * need), kSmallest[length]);
}

uint32_t Utf8Partial::highest() const {
  // After the lead byte 0xED the surrogates (U+D800..U+DFFF) are what Take refuses: the code
  // point ends at U+D7FF. (Viable would otherwise admit 0xED towards a class that holds them,
  // and the token after it would find nothing.)
  if (length == 3 && need == 2 && bits == 0xD) return 0xD7FF;
  return std::min<uint32_t>((bits << (6 * need)) | ((1u << (6 * need)) - 1), 0x10FFFF);
}

bool GrammarAutomaton::Step(const GrammarState& in, uint8_t b, GrammarState* out) const {
  Utf8Partial p = in.utf8;
  switch (p.Take(b)) {
    case Utf8Partial::Push::kRefused:
      return false;
    case Utf8Partial::Push::kComplete:
      return AcceptCodePoint(in, p.bits, out);
    case Utf8Partial::Push::kPartial:
      break;
  }
  if (!Viable(in, p)) return false;
  out->stacks = in.stacks;
  out->utf8 = p;
  return true;
}

bool GrammarAutomaton::CanEnd(const GrammarState& s) const {
  return s.utf8.need == 0 && !s.stacks.empty() && s.stacks.front().empty();  // sorted: the empty stack first
}

bool GrammarAutomaton::IsComplete(const GrammarState& s) const { return CanEnd(s) && s.stacks.size() == 1; }

GrammarMatcher::GrammarMatcher(const Grammar* grammar) : automaton_(*grammar), state_(automaton_.Initial()) {}

bool GrammarMatcher::Accept(uint32_t code_point) {
  char utf8[4];
  size_t n;
  if (code_point < 0x80) {
    utf8[0] = static_cast<char>(code_point), n = 1;
  } else if (code_point < 0x800) {
    utf8[0] = static_cast<char>(0xC0 | code_point >> 6), utf8[1] = static_cast<char>(0x80 | (code_point & 0x3F)), n = 2;
  } else if (code_point < 0x10000) {
    utf8[0] = static_cast<char>(0xE0 | code_point >> 12), utf8[1] = static_cast<char>(0x80 | (code_point >> 6 & 0x3F));
    utf8[2] = static_cast<char>(0x80 | (code_point & 0x3F)), n = 3;
  } else if (code_point <= 0x10FFFF) {
    utf8[0] = static_cast<char>(0xF0 | code_point >> 18), utf8[1] = static_cast<char>(0x80 | (code_point >> 12 & 0x3F));
    utf8[2] = static_cast<char>(0x80 | (code_point >> 6 & 0x3F)), utf8[3] = static_cast<char>(0x80 | (code_point & 0x3F));
    n = 4;
  } else {
    return false;
  }
  return AcceptText(std::string_view(utf8, n));
}

bool GrammarMatcher::AcceptText(std::string_view utf8) {
  GrammarState s = state_, next;
  for (char c : utf8) {
    if (!automaton_.Step(s, static_cast<uint8_t>(c), &next)) return false;
    std::swap(s, next);
  }
  state_ = std::move(s);
  return true;
}

}  // namespace llm42
