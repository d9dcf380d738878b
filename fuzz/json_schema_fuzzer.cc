// Arbitrary bytes as a JSON Schema: converted or refused with INVALID_ARGUMENT; every converted
// schema's grammar parses (a converter that wrote a broken grammar aborts), and its token masks
// over a small vocabulary (single characters, a few words, split UTF-8) step along a short walk
// without crashing, each allowed token accepted by Advance.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "lib/grammar/grammar.h"
#include "lib/grammar/json_schema.h"
#include "lib/grammar/token_grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const std::string_view schema(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::string> gbnf = llm42::JsonSchemaToGbnf(schema);
  if (!gbnf.ok()) {
    if (gbnf.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  absl::StatusOr<llm42::Grammar> grammar = llm42::ParseGbnf(*gbnf);
  if (!grammar.ok()) std::abort();  // the converter wrote a grammar that does not parse
  static const std::vector<std::string>* vocab = [] {
    auto* v = new std::vector<std::string>{""};
    for (int c = 0x20; c < 0x7F; ++c) v->push_back(std::string(1, static_cast<char>(c)));
    for (const char* t : {"\n", "true", "null", "\": \"", "12", "\xC3", "\xA9", "é", "\xF0\x9F\x98\x80"}) v->push_back(t);
    return v;
  }();
  absl::StatusOr<std::shared_ptr<const llm42::TokenGrammar>> tg = llm42::TokenGrammar::Create(*grammar, *vocab, {0});
  if (!tg.ok()) return 0;
  llm42::GrammarState s = (*tg)->automaton().Initial();
  uint64_t pick = size;
  for (int step = 0; step < 24; ++step) {
    const auto mask = (*tg)->Allowed(s);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < static_cast<int32_t>(vocab->size()); ++id) {
      if ((*mask)[static_cast<size_t>(id) / 64] >> (id % 64) & 1) allowed.push_back(id);
    }
    if (allowed.empty()) break;
    pick = pick * 6364136223846793005u + 1442695040888963407u;
    llm42::GrammarState next;
    if (!(*tg)->Advance(s, allowed[(pick >> 33) % allowed.size()], &next)) std::abort();  // mask and Advance disagree
    s = std::move(next);
  }
  return 0;
}
