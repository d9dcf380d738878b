#ifndef LLM42_TESTS_GRAMMAR_SAMPLER_H_
#define LLM42_TESTS_GRAMMAR_SAMPLER_H_

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/grammar/grammar.h"
#include "lib/grammar/token_grammar.h"

namespace llm42::testing {

// Sentences drawn at random from a grammar: single-character tokens (printable ASCII, newline,
// some non-ASCII), a few longer ones and `extra`, each step uniform over the allowed tokens,
// ending at random where the grammar can end. Draws longer than 600 tokens are discarded and
// redrawn.
inline std::vector<std::string> SampleSentences(const Grammar& g, int n, uint32_t seed,
                                                const std::vector<std::string>& extra = {}) {
  std::vector<std::string> vocab;
  for (int c = 0x20; c < 0x7F; ++c) vocab.push_back(std::string(1, static_cast<char>(c)));
  for (const char* t : {"\n", "é", "😀", "true", "null", "\"name\"", "\": \"", "12", "-", "ab"}) vocab.push_back(t);
  vocab.insert(vocab.end(), extra.begin(), extra.end());
  auto tg = TokenGrammar::Create(g, vocab, {});
  EXPECT_TRUE(tg.ok()) << tg.status();
  if (!tg.ok()) return {};
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  while (static_cast<int>(out.size()) < n) {
    GrammarState s = (*tg)->automaton().Initial();
    std::string text;
    for (int step = 0; step < 600; ++step) {
      const bool can_end = (*tg)->automaton().CanEnd(s);
      std::vector<int32_t> allowed;
      const auto mask = (*tg)->Allowed(s);
      for (int32_t id = 0; id < static_cast<int32_t>(vocab.size()); ++id) {
        if ((*mask)[static_cast<size_t>(id) / 64] >> (id % 64) & 1) allowed.push_back(id);
      }
      if (can_end && (allowed.empty() || rng() % 4 == 0)) {
        out.push_back(text);
        break;
      }
      if (allowed.empty()) {
        ADD_FAILURE() << "a dead end after: " << text;
        return out;
      }
      const int32_t id = allowed[rng() % allowed.size()];
      GrammarState next;
      EXPECT_TRUE((*tg)->Advance(s, id, &next));
      s = std::move(next);
      text += vocab[static_cast<size_t>(id)];
    }
  }
  return out;
}

}  // namespace llm42::testing

#endif  // LLM42_TESTS_GRAMMAR_SAMPLER_H_
