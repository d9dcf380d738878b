#include "lib/grammar/grammar.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "utf8proc.h"
#include "lib/util/status.h"

namespace llm42 {

bool GrammarElement::Matches(uint32_t code_point) const {
  bool in = false;
  for (const auto& [lo, hi] : ranges) in |= code_point >= lo && code_point <= hi;
  return in != negated;
}

namespace {

// How many copies a bounded repetition may make: past this a grammar is refused, not expanded.
constexpr int kMaxRepetition = kMaxGbnfRepetition;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : text_(text) {}

  absl::StatusOr<Grammar> Parse() {
    for (SkipSpace(true); !AtEnd(); SkipSpace(true)) {
      LLM42_RETURN_IF_ERROR(ParseRule());
    }
    for (size_t r = 0; r < grammar_.rules.size(); ++r) {
      if (!defined_[r]) return Error(positions_[r], "rule '", grammar_.rules[r].name, "' is not defined");
    }
    auto root = index_.find("root");
    if (root == index_.end()) return Error(text_.size(), "the grammar has no rule named 'root'");
    grammar_.root = root->second;
    LLM42_RETURN_IF_ERROR(CheckProductive());
    LLM42_RETURN_IF_ERROR(CheckLeftRecursion());
    return std::move(grammar_);
  }

 private:
  using Sequence = std::vector<GrammarElement>;

  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }

  template <typename... Args>
  absl::Status Error(size_t at, const Args&... args) const {
    int line = 1, column = 1;
    for (size_t i = 0; i < std::min(at, text_.size()); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return InvalidArgument("grammar line ", line, ", column ", column, ": ", args...);
  }

  // Spaces, tabs and comments; newlines too where `newlines` (inside parentheses, after ::= and |).
  void SkipSpace(bool newlines) {
    while (!AtEnd()) {
      const char c = Peek();
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  int32_t Rule(const std::string& name, size_t at) {
    auto [it, added] = index_.emplace(name, static_cast<int32_t>(grammar_.rules.size()));
    if (added) {
      grammar_.rules.push_back(GrammarRule{name, {}});
      defined_.push_back(false);
      positions_.push_back(at);
      generated_.push_back(0);
    }
    return it->second;
  }

  // A rule for a group or repetition inside `owner`, defined at `at`.
  int32_t Generated(int32_t owner, size_t at) {
    const std::string name = absl::StrCat(grammar_.rules[static_cast<size_t>(owner)].name, "-",
                                          ++generated_[static_cast<size_t>(owner)]);
    const int32_t r = Rule(name, at);
    defined_[static_cast<size_t>(r)] = true;
    return r;
  }

  static GrammarElement Ref(int32_t rule) {
    GrammarElement e;
    e.rule = rule;
    return e;
  }

  absl::Status ParseRule() {
    const size_t start = pos_;
    std::string name;
    while (!AtEnd() && IsNameChar(Peek())) name += text_[pos_++];
    if (name.empty()) return Error(pos_, "expected a rule name, found '", std::string(1, Peek()), "'");
    SkipSpace(false);
    if (text_.substr(pos_, 3) != "::=") return Error(pos_, "expected '::=' after rule name '", name, "'");
    pos_ += 3;
    const int32_t rule = Rule(name, start);
    if (defined_[static_cast<size_t>(rule)]) return Error(start, "rule '", name, "' is defined twice");
    defined_[static_cast<size_t>(rule)] = true;
    positions_[static_cast<size_t>(rule)] = start;
    SkipSpace(true);
    std::vector<Sequence> alternatives;
    LLM42_RETURN_IF_ERROR(ParseAlternatives(rule, /*nested=*/false, &alternatives));
    grammar_.rules[static_cast<size_t>(rule)].alternatives = std::move(alternatives);
    SkipSpace(false);
    if (!AtEnd() && Peek() != '\n') {
      return Error(pos_, Peek() == ')' ? "unbalanced ')'" : "unexpected '", std::string(1, Peek()),
                   Peek() == ')' ? "" : "'");
    }
    return absl::OkStatus();
  }

  absl::Status ParseAlternatives(int32_t owner, bool nested, std::vector<Sequence>* out) {
    for (;;) {
      Sequence seq;
      LLM42_RETURN_IF_ERROR(ParseSequence(owner, nested, &seq));
      out->push_back(std::move(seq));
      SkipSpace(nested);
      if (Peek() != '|') return absl::OkStatus();
      ++pos_;
      SkipSpace(true);
    }
  }

  absl::Status ParseSequence(int32_t owner, bool nested, Sequence* seq) {
    for (;;) {
      SkipSpace(nested);
      const char c = Peek();
      if (AtEnd() || c == '|' || c == ')' || c == '\n') return absl::OkStatus();
      const size_t at = pos_;
      Sequence atom;
      if (c == '"') {
        ++pos_;
        for (;;) {
          if (AtEnd() || Peek() == '\n') return Error(at, "unterminated string literal");
          if (Peek() == '"') break;
          LLM42_ASSIGN_OR_RETURN(uint32_t cp, CodePoint());
          GrammarElement e;
          e.ranges.push_back({cp, cp});
          atom.push_back(std::move(e));
        }
        ++pos_;
      } else if (c == '[') {
        ++pos_;
        GrammarElement e;
        if (Peek() == '^') {
          e.negated = true;
          ++pos_;
        }
        for (;;) {
          if (AtEnd() || Peek() == '\n') return Error(at, "unterminated character class");
          if (Peek() == ']') break;
          LLM42_ASSIGN_OR_RETURN(uint32_t lo, CodePoint());
          uint32_t hi = lo;
          if (Peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
            ++pos_;
            LLM42_ASSIGN_OR_RETURN(hi, CodePoint());
            if (hi < lo) return Error(at, "a character range runs backwards");
          }
          e.ranges.push_back({lo, hi});
        }
        ++pos_;
        atom.push_back(std::move(e));
      } else if (c == '.') {
        ++pos_;
        GrammarElement any;
        any.negated = true;
        atom.push_back(std::move(any));
      } else if (c == '(') {
        ++pos_;
        const int32_t group = Generated(owner, at);
        SkipSpace(true);
        std::vector<Sequence> alternatives;
        LLM42_RETURN_IF_ERROR(ParseAlternatives(group, /*nested=*/true, &alternatives));
        SkipSpace(true);
        if (Peek() != ')') return Error(at, "unbalanced '('");
        ++pos_;
        grammar_.rules[static_cast<size_t>(group)].alternatives = std::move(alternatives);
        atom.push_back(Ref(group));
      } else if (IsNameChar(c)) {
        std::string name;
        while (!AtEnd() && IsNameChar(Peek())) name += text_[pos_++];
        atom.push_back(Ref(Rule(name, at)));
      } else {
        return Error(at, "unexpected '", std::string(1, c), "'");
      }
      SkipSpace(nested);
      LLM42_RETURN_IF_ERROR(ParseRepetition(owner, at, std::move(atom), seq));
    }
  }

  // The operator after an atom, if any, applied: x* as R ::= x R | "", x+ as x R, x? as
  // R ::= x | "", x{m,n} as m copies and n - m nested optional ones.
  absl::Status ParseRepetition(int32_t owner, size_t at, Sequence atom, Sequence* seq) {
    int min = 1, max = 1;  // max -1: unbounded
    const char c = Peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      min = c == '+' ? 1 : 0;
      max = c == '?' ? 1 : -1;
    } else if (c == '{') {
      ++pos_;
      auto number = [&](int* out) -> bool {
        SkipSpace(false);
        if (!(Peek() >= '0' && Peek() <= '9')) return false;
        int64_t v = 0;
        while (Peek() >= '0' && Peek() <= '9') v = std::min<int64_t>(v * 10 + (text_[pos_++] - '0'), kMaxRepetition + 1);
        *out = static_cast<int>(v);
        SkipSpace(false);
        return true;
      };
      if (!number(&min)) return Error(pos_, "expected a number after '{'");
      max = min;
      if (Peek() == ',') {
        ++pos_;
        if (!number(&max)) max = -1;
      }
      if (Peek() != '}') return Error(pos_, "expected '}'");
      ++pos_;
      if (min > kMaxRepetition || max > kMaxRepetition) {
        return Error(at, "a repetition bound above ", kMaxRepetition);
      }
      if (max >= 0 && max < min) return Error(at, "a repetition {m,n} with n below m");
    }
    for (int i = 0; i < min; ++i) seq->insert(seq->end(), atom.begin(), atom.end());
    if (max == -1) {
      const int32_t star = Generated(owner, at);
      Sequence again = atom;
      again.push_back(Ref(star));
      grammar_.rules[static_cast<size_t>(star)].alternatives = {std::move(again), {}};
      seq->push_back(Ref(star));
    } else if (max > min) {
      // Innermost first: opt_k ::= x opt_{k+1} | "", the last without the reference.
      int32_t next = -1;
      for (int k = max - min; k > 0; --k) {
        const int32_t opt = Generated(owner, at);
        Sequence body = atom;
        if (next >= 0) body.push_back(Ref(next));
        grammar_.rules[static_cast<size_t>(opt)].alternatives = {std::move(body), {}};
        next = opt;
      }
      seq->push_back(Ref(next));
    }
    SkipSpace(false);
    return absl::OkStatus();
  }

  // One code point of a literal or class, escapes decoded; UTF-8 read as such.
  absl::StatusOr<uint32_t> CodePoint() {
    const size_t at = pos_;
    if (Peek() != '\\') {
      utf8proc_int32_t cp = 0;
      const utf8proc_ssize_t len = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text_.data() + pos_),
                                                    static_cast<utf8proc_ssize_t>(text_.size() - pos_), &cp);
      if (len <= 0 || cp < 0) return Error(at, "invalid UTF-8");
      pos_ += static_cast<size_t>(len);
      return static_cast<uint32_t>(cp);
    }
    ++pos_;
    const char e = Peek();
    ++pos_;
    switch (e) {
      case 'n': return uint32_t{'\n'};
      case 'r': return uint32_t{'\r'};
      case 't': return uint32_t{'\t'};
      case '\\': case '"': case '[': case ']': case '-': case '^': return static_cast<uint32_t>(e);
      case 'x': case 'u': case 'U': {
        const int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t v = 0;
        for (int i = 0; i < digits; ++i, ++pos_) {
          const char h = Peek();
          const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                      : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
          if (d < 0) return Error(at, "expected ", digits, " hexadecimal digits after \\", std::string(1, e));
          v = v * 16 + static_cast<uint32_t>(d);
        }
        if (v > 0x10FFFF) return Error(at, "code point above U+10FFFF");
        if (v >= 0xD800 && v <= 0xDFFF) {
          return Error(at, absl::StrFormat("U+%04X", v), " is a surrogate code point, which no UTF-8 text holds");
        }
        return v;
      }
      default: return Error(at, "unknown escape '\\", std::string(1, e), "'");
    }
  }

  // The rules with an alternative whose every element `holds` (given the rules marked so far),
  // to a fixed point: the productive rules, the nullable ones.
  template <typename Holds>
  std::vector<bool> RulesWithAnAlternative(Holds holds) const {
    std::vector<bool> marked(grammar_.rules.size(), false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < marked.size(); ++r) {
        if (marked[r]) continue;
        for (const Sequence& alt : grammar_.rules[r].alternatives) {
          if (std::all_of(alt.begin(), alt.end(), [&](const GrammarElement& e) { return holds(e, marked); })) {
            marked[r] = changed = true;
            break;
          }
        }
      }
    }
    return marked;
  }

  // Root must derive some finite string, or the language is empty (a rule that only refers to
  // itself, an empty class).
  absl::Status CheckProductive() {
    const std::vector<bool> productive = RulesWithAnAlternative([](const GrammarElement& e, const std::vector<bool>& p) {
      return e.is_rule() ? p[static_cast<size_t>(e.rule)] : (e.negated || !e.ranges.empty());
    });
    if (!productive[static_cast<size_t>(grammar_.root)]) {
      return Error(positions_[static_cast<size_t>(grammar_.root)], "the grammar derives no finite string");
    }
    return absl::OkStatus();
  }

  // No rule may reach itself without consuming a code point: the matcher would expand it forever.
  absl::Status CheckLeftRecursion() {
    const size_t n = grammar_.rules.size();
    const std::vector<bool> nullable = RulesWithAnAlternative([](const GrammarElement& e, const std::vector<bool>& z) {
      return e.is_rule() && z[static_cast<size_t>(e.rule)];
    });
    // Edges to the rules an alternative can start with; then a depth-first search for a cycle.
    std::vector<std::vector<int32_t>> first(n);
    for (size_t r = 0; r < n; ++r) {
      for (const Sequence& alt : grammar_.rules[r].alternatives) {
        for (const GrammarElement& e : alt) {
          if (!e.is_rule()) break;
          first[r].push_back(e.rule);
          if (!nullable[static_cast<size_t>(e.rule)]) break;
        }
      }
    }
    std::vector<int> state(n, 0);  // 0 unseen, 1 on the path, 2 done
    std::vector<std::pair<int32_t, size_t>> path;
    for (size_t start = 0; start < n; ++start) {
      if (state[start] != 0) continue;
      path.push_back({static_cast<int32_t>(start), 0});
      state[start] = 1;
      while (!path.empty()) {
        auto& [r, next] = path.back();
        if (next == first[static_cast<size_t>(r)].size()) {
          state[static_cast<size_t>(r)] = 2;
          path.pop_back();
          continue;
        }
        const int32_t to = first[static_cast<size_t>(r)][next++];
        if (state[static_cast<size_t>(to)] == 1) {
          return Error(positions_[static_cast<size_t>(to)], "rule '", grammar_.rules[static_cast<size_t>(to)].name,
                       "' is left-recursive (it can reach itself before matching anything)");
        }
        if (state[static_cast<size_t>(to)] == 0) {
          state[static_cast<size_t>(to)] = 1;
          path.push_back({to, 0});
        }
      }
    }
    return absl::OkStatus();
  }

  std::string_view text_;
  size_t pos_ = 0;
  Grammar grammar_;
  std::map<std::string, int32_t> index_;
  std::vector<bool> defined_;
  std::vector<size_t> positions_;  // definition (or, until defined, first use) of each rule
  std::vector<int> generated_;     // rules generated inside each rule so far
};

}  // namespace

absl::StatusOr<Grammar> ParseGbnf(std::string_view text) { return GbnfParser(text).Parse(); }

}  // namespace llm42
