#include "lib/tokenizer/pretokenizer.h"

#include <cstdint>

#include "utf8proc.h"

namespace llm42 {
namespace {

constexpr char32_t kEnd = 0xFFFFFFFF;  // past either end of the text

// Code points of the text with the byte offset each starts at (offsets has one more entry: the
// text's length).
struct CodePoints {
  std::vector<char32_t> cp;
  std::vector<size_t> offset;

  explicit CodePoints(std::string_view text) {
    const auto* s = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
    size_t i = 0;
    while (i < text.size()) {
      utf8proc_int32_t c = 0;
      utf8proc_ssize_t n = utf8proc_iterate(s + i, static_cast<utf8proc_ssize_t>(text.size() - i), &c);
      if (n <= 0) {  // invalid UTF-8 (callers validate): one byte as U+FFFD
        c = 0xFFFD;
        n = 1;
      }
      cp.push_back(static_cast<char32_t>(c));
      offset.push_back(i);
      i += static_cast<size_t>(n);
    }
    offset.push_back(text.size());
  }
  size_t size() const { return cp.size(); }
  char32_t at(size_t i) const { return i < cp.size() ? cp[i] : kEnd; }
};

bool IsLetter(char32_t c) {
  if (c == kEnd) return false;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: return true;
    default: return false;
  }
}

bool IsNumber(char32_t c) {
  if (c == kEnd) return false;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO: return true;
    default: return false;
  }
}

// \s: Unicode White_Space, which is the separator categories plus the ASCII and Latin-1
// control-range spaces.
bool IsSpace(char32_t c) {
  if (c == kEnd) return false;
  if ((c >= 0x09 && c <= 0x0D) || c == 0x85) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: return true;
    default: return false;
  }
}

bool IsNewline(char32_t c) { return c == '\r' || c == '\n'; }
// [^\s\p{L}\p{N}]
bool IsOther(char32_t c) { return c != kEnd && !IsSpace(c) && !IsLetter(c) && !IsNumber(c); }

char32_t Lower(char32_t c) {
  return c == kEnd ? c : static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}

// Length of a contraction ('s 't 're 've 'm 'll 'd) at i, 0 when none.
size_t Contraction(const CodePoints& t, size_t i, bool ignore_case) {
  if (t.at(i) != '\'') return 0;
  auto c = [&](size_t k) { return ignore_case ? Lower(t.at(k)) : t.at(k); };
  const char32_t a = c(i + 1), b = c(i + 2);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

template <typename Pred>
size_t RunLength(const CodePoints& t, size_t i, Pred pred, size_t max = SIZE_MAX) {
  size_t n = 0;
  while (n < max && pred(t.at(i + n))) ++n;
  return n;
}

// \s+(?!\S)|\s+ at i (i is whitespace): the run, less its last character when a non-space
// follows and the run is longer than one.
size_t TrailingSpaceRun(const CodePoints& t, size_t i) {
  const size_t n = RunLength(t, i, IsSpace);
  return (n > 1 && t.at(i + n) != kEnd) ? n - 1 : n;
}

size_t MatchGpt2(const CodePoints& t, size_t i) {
  if (size_t n = Contraction(t, i, /*ignore_case=*/false)) return n;
  const size_t sp = t.at(i) == ' ' ? 1 : 0;
  const char32_t c = t.at(i + sp);
  if (IsLetter(c)) return sp + RunLength(t, i + sp, IsLetter);
  if (IsNumber(c)) return sp + RunLength(t, i + sp, IsNumber);
  if (IsOther(c)) return sp + RunLength(t, i + sp, IsOther);
  return TrailingSpaceRun(t, i);  // t.at(i) is whitespace here
}

// Letters, with combining marks where `marks` (Qwen3.5's [\p{L}\p{M}]).
bool IsMark(char32_t c) {
  if (c == kEnd) return false;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME: return true;
    default: return false;
  }
}

// \s*[\r\n]+ at i: whitespace up to and including the run's last newline; 0 when the run has none.
size_t NewlineRun(const CodePoints& t, size_t i) {
  const size_t run = RunLength(t, i, IsSpace);
  size_t last_newline = 0;
  for (size_t k = 0; k < run; ++k) {
    if (IsNewline(t.at(i + k))) last_newline = k + 1;
  }
  return last_newline;
}

size_t MatchLlama3(const CodePoints& t, size_t i, size_t max_digits, bool marks = false) {
  if (size_t n = Contraction(t, i, /*ignore_case=*/true)) return n;
  const char32_t c = t.at(i);
  auto word = [marks](char32_t x) { return IsLetter(x) || (marks && IsMark(x)); };
  auto other = [marks](char32_t x) { return IsOther(x) && !(marks && IsMark(x)); };
  // [^\r\n\p{L}\p{N}]?\p{L}+ (with marks: [^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+)
  if (word(c)) return RunLength(t, i, word);
  if (!IsNewline(c) && !IsNumber(c) && word(t.at(i + 1))) return 1 + RunLength(t, i + 1, word);
  // \p{N}{1,max}
  if (IsNumber(c)) return RunLength(t, i, IsNumber, max_digits);
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*' (with marks: not \p{M} either)
  const size_t sp = c == ' ' ? 1 : 0;
  if (other(t.at(i + sp))) {
    size_t n = sp + RunLength(t, i + sp, other);
    return n + RunLength(t, i + n, IsNewline);
  }
  if (const size_t n = NewlineRun(t, i)) return n;
  return TrailingSpaceRun(t, i);
}

// The o200k regex's letter classes: [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] (a word's capitals) and
// [\p{Ll}\p{Lm}\p{Lo}\p{M}] (its small letters); modifier and other letters and marks are both.
bool IsCapitalClass(char32_t c) {
  if (c == kEnd) return false;
  const utf8proc_category_t k = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LT || k == UTF8PROC_CATEGORY_LM ||
         k == UTF8PROC_CATEGORY_LO || IsMark(c);
}
bool IsSmallClass(char32_t c) {
  if (c == kEnd) return false;
  const utf8proc_category_t k = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_LO || IsMark(c);
}

// A word of the o200k regex's first two alternatives from j (i being where the match began),
// with its optional contraction; 0 when none. `first`: C*S+ — the longest run of capitals after
// which a small letter stands, backtracking to the last capital-class character that is also small;
// else C+S*.
size_t O200kWord(const CodePoints& t, size_t i, size_t j, bool first) {
  const size_t caps = RunLength(t, j, IsCapitalClass);
  size_t end = 0;
  if (first) {
    size_t k = caps;
    while (!IsSmallClass(t.at(j + k))) {
      if (k == 0) return 0;
      --k;
    }
    end = j + k + RunLength(t, j + k, IsSmallClass);
  } else {
    if (caps == 0) return 0;
    end = j + caps + RunLength(t, j + caps, IsSmallClass);
  }
  return end - i + Contraction(t, end, /*ignore_case=*/true);
}

// o200k (gpt-4o, gpt-oss):
//   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//  |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//  |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Each word alternative tries its optional leading character first, then none.
size_t MatchO200k(const CodePoints& t, size_t i) {
  const char32_t c = t.at(i);
  const bool lead = !IsNewline(c) && !IsLetter(c) && !IsNumber(c);
  for (const bool first : {true, false}) {
    if (lead) {
      if (const size_t n = O200kWord(t, i, i + 1, first)) return n;
    }
    if (const size_t n = O200kWord(t, i, i, first)) return n;
  }
  if (IsNumber(c)) return RunLength(t, i, IsNumber, 3);
  const size_t sp = c == ' ' ? 1 : 0;
  if (IsOther(t.at(i + sp))) {
    const size_t n = sp + RunLength(t, i + sp, IsOther);
    return n + RunLength(t, i + n, [](char32_t x) { return IsNewline(x) || x == '/'; });
  }
  if (const size_t n = NewlineRun(t, i)) return n;
  return TrailingSpaceRun(t, i);
}

}  // namespace

std::optional<PreTokenizer> PreTokenizerFromName(std::string_view name) {
  if (name == "default" || name == "gpt-2" || name == "gpt2") return PreTokenizer::kGpt2;
  if (name == "llama-bpe" || name == "llama3" || name == "llama-v3") return PreTokenizer::kLlama3;
  if (name == "qwen2") return PreTokenizer::kQwen2;
  if (name == "qwen35") return PreTokenizer::kQwen35;
  if (name == "gemma4") return PreTokenizer::kNewlineRuns;
  if (name == "gpt-4o") return PreTokenizer::kO200k;
  return std::nullopt;
}

std::vector<std::string_view> PreTokenize(PreTokenizer kind, std::string_view text) {
  const CodePoints t(text);
  std::vector<std::string_view> pieces;
  for (size_t i = 0; i < t.size();) {
    size_t n = 0;
    switch (kind) {
      case PreTokenizer::kGpt2: n = MatchGpt2(t, i); break;
      case PreTokenizer::kLlama3: n = MatchLlama3(t, i, 3); break;
      case PreTokenizer::kQwen2: n = MatchLlama3(t, i, 1); break;
      case PreTokenizer::kQwen35: n = MatchLlama3(t, i, 1, /*marks=*/true); break;
      case PreTokenizer::kO200k: n = MatchO200k(t, i); break;
      case PreTokenizer::kNewlineRuns: {
        const bool newline = t.at(i) == '\n';
        while (i + n < t.size() && (t.at(i + n) == '\n') == newline) ++n;
        break;
      }
    }
    if (n == 0) n = 1;  // unreachable for these expressions; guarantees progress
    pieces.push_back(text.substr(t.offset[i], t.offset[i + n] - t.offset[i]));
    i += n;
  }
  return pieces;
}

}  // namespace llm42
