// Arbitrary bytes as a GBNF grammar (up to the first zero byte) and a text to run it over (the
// rest): the grammar is parsed or refused with INVALID_ARGUMENT; a parsed one matches the text
// code point by code point without crashing, and a refused code point changes nothing.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "lib/grammar/grammar.h"
#include "lib/grammar/grammar_matcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t split = all.find('\0');
  const std::string_view gbnf = all.substr(0, split);
  const std::string_view text = split == std::string_view::npos ? std::string_view() : all.substr(split + 1);
  if (gbnf.size() > 4096 || text.size() > 512) return 0;
  absl::StatusOr<llm42::Grammar> grammar = llm42::ParseGbnf(gbnf);
  if (!grammar.ok()) {
    if (grammar.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  llm42::GrammarMatcher matcher(&*grammar);
  for (unsigned char c : text) {
    const bool could_end = matcher.CanEnd();
    if (!matcher.Accept(c) && matcher.CanEnd() != could_end) std::abort();  // a refusal changed the state
  }
  return 0;
}
