// lib/grammar/token_grammar and grammar_trace: token masks against the brute-force rule (feed
// each token's bytes to the automaton alone), with tokens that share prefixes, tokens that split a
// code point's UTF-8 bytes, tokens that add nothing and end tokens; the logits a mask leaves; a
// vocabulary that cannot begin the grammar; and a trace's states after rollbacks.
#include "lib/grammar/token_grammar.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/grammar/grammar_trace.h"
#include "lib/grammar/json_schema.h"

namespace llm42 {
namespace {

Grammar Parse(const std::string& gbnf) {
  absl::StatusOr<Grammar> g = ParseGbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Grammar{};
}

// Ids 0 and 1 add nothing (1 is the end token); the rest share prefixes and split code points.
const std::vector<std::string>& Vocab() {
  static const auto* v = new std::vector<std::string>{
      "", "", "a", "ab", "abc", "abd", "b", "c", "\"", "\",", "{", "}", ":", ",", " ", "\xC3", "\xA9",
      "\xC3\xA9", "\xE2\x82", "\xAC", "\xE2\x82\xAC", "\xE2", "\x82\xAC", "\xFF", "\xA9\"", "1", "12", "0",
      "\"a", "\"ab\"", "é\"", "null", "nu", "ll", "\xF0\x9F", "\x98\x80", "\xE0", "\xF0"};
  return *v;
}

const char* kGrammar = R"(root ::= "{" ws ( pair ( "," ws pair )* )? "}"
pair ::= str ws ":" ws val ws
val ::= str | num | "null"
str ::= "\"" [a-cé€😀]* "\""
num ::= [0-9]+
ws ::= " "?)";

bool Allowed(const TokenGrammar::Mask& m, int32_t id) { return m[static_cast<size_t>(id) / 64] >> (id % 64) & 1; }

TEST(TokenGrammar, MasksAreWhatFeedingEachTokenAloneAllows) {
  const Grammar g = Parse(kGrammar);
  auto tg = TokenGrammar::Create(g, Vocab(), {1});
  ASSERT_TRUE(tg.ok()) << tg.status();
  std::mt19937 rng(7);
  int checked = 0, allowed_total = 0;
  for (int walk = 0; walk < 40; ++walk) {
    GrammarState s = (*tg)->automaton().Initial();
    for (int step = 0; step < 60; ++step) {
      const auto mask = (*tg)->Allowed(s);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < static_cast<int32_t>(Vocab().size()); ++id) {
        GrammarState next;
        const bool fits = (*tg)->Advance(s, id, &next);
        EXPECT_EQ(Allowed(*mask, id), fits) << "token " << id << " at step " << step;
        if (fits) allowed.push_back(id);
        ++checked;
      }
      allowed_total += static_cast<int>(allowed.size());
      if (allowed.empty()) break;
      GrammarState next;
      ASSERT_TRUE((*tg)->Advance(s, allowed[rng() % allowed.size()], &next));
      s = std::move(next);
    }
  }
  EXPECT_GT(checked, 10000);
  EXPECT_GT(allowed_total, 1000);  // the walks went somewhere
  // Split code points: the lead byte alone is allowed inside a string, its tail only after it.
  GrammarState s = (*tg)->automaton().Initial(), t;
  for (int32_t id : {10, 8}) {  // {"
    ASSERT_TRUE((*tg)->Advance(s, id, &t));
    s = t;
  }
  const auto in_string = (*tg)->Allowed(s);
  for (int32_t id : {15, 17, 18, 20, 21, 34, 2, 4, 8}) EXPECT_TRUE(Allowed(*in_string, id)) << id;
  // \xE0 begins only U+0800..U+0FFF, none in the class; \xF0 begins U+1F600.
  for (int32_t id : {16, 19, 22, 23, 24, 25, 0, 1, 36}) EXPECT_FALSE(Allowed(*in_string, id)) << id;
  EXPECT_TRUE(Allowed(*in_string, 37));
  const auto at_start = (*tg)->Allowed((*tg)->automaton().Initial());  // only "{": no lead byte
  EXPECT_FALSE(Allowed(*at_start, 36));
  EXPECT_FALSE(Allowed(*at_start, 37));
  ASSERT_TRUE((*tg)->Advance(s, 15, &t));  // \xC3: only \xA9 (é) may finish it
  const auto mid = (*tg)->Allowed(t);
  EXPECT_TRUE(Allowed(*mid, 16));
  EXPECT_TRUE(Allowed(*mid, 24));
  EXPECT_FALSE(Allowed(*mid, 19));
  EXPECT_FALSE(Allowed(*mid, 2));
}

// Deep stacks: a JSON schema's grammar nests arrays in objects in arrays, so a mask unites frame
// tables (a stack's top positions) with the groups that leave them, checked from beneath. Tokens
// that close a string and go on (`",`, `"]}`, `":`) leave the string's frames mid-token. Masks
// against feeding each token alone, along random walks, and the walks' outputs reach depth 6.
TEST(TokenGrammar, MasksOverDeepStacksAreWhatFeedingEachTokenAloneAllows) {
  absl::StatusOr<std::string> gbnf = JsonSchemaToGbnf(R"({"type": "array", "items": {"type": "object",
      "properties": {"k": {"type": "array", "items": {"anyOf": [{"type": "string", "maxLength": 3},
      {"type": "array", "items": {"type": "integer"}}, {"$ref": "#"}]}}, "e": {"enum": ["ab", "c\"d"]}}}})");
  ASSERT_TRUE(gbnf.ok()) << gbnf.status();
  const Grammar g = Parse(*gbnf);
  std::vector<std::string> vocab = {"", "[", "]", "{", "}", "\"", ",", ":", " ", "\n", "k", "e", "a", "b", "c", "d",
                                    "1", "-", "0", "\\", "\",", "\"]", "\"]}", "\":", "\"k\"", "\"e\":", "ab",
                                    "\"ab\"", "[{", "}]", "}, {", "], [", "12", "\xC3", "\xA9", "é\"", "\",\"", "[[",
                                    "]]", "\"c\\\"d\"", "\"k\": [", "\n  ", "\": \""};
  auto tg = TokenGrammar::Create(g, vocab, {0});
  ASSERT_TRUE(tg.ok()) << tg.status();
  std::mt19937 rng(11);
  int checked = 0;
  size_t deepest = 0;
  for (int walk = 0; walk < 60; ++walk) {
    GrammarState s = (*tg)->automaton().Initial();
    for (int step = 0; step < 80; ++step) {
      const auto mask = (*tg)->Allowed(s);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < static_cast<int32_t>(vocab.size()); ++id) {
        GrammarState next;
        const bool fits = (*tg)->Advance(s, id, &next);
        ASSERT_EQ(Allowed(*mask, id), fits) << "token " << id << " (" << vocab[static_cast<size_t>(id)] << ") at walk "
                                             << walk << " step " << step;
        if (fits) allowed.push_back(id);
        ++checked;
      }
      for (const auto& stack : s.stacks) deepest = std::max(deepest, stack.size());
      if (allowed.empty()) break;
      GrammarState next;
      ASSERT_TRUE((*tg)->Advance(s, allowed[rng() % allowed.size()], &next));
      s = std::move(next);
    }
  }
  EXPECT_GT(checked, 30000);
  EXPECT_GE(deepest, 6u);
}

TEST(TokenGrammar, MaskedLogitsKeepAllowedValuesAndEndTokensOnlyWhereTheGrammarEnds) {
  auto tg = TokenGrammar::Create(Parse(R"(root ::= "a" "b"?)"), Vocab(), {1});
  ASSERT_TRUE(tg.ok());
  const size_t n = Vocab().size() + 3;  // a model's logit rows may be padded past the vocabulary
  std::vector<float> logits(n);
  for (size_t i = 0; i < n; ++i) logits[i] = static_cast<float>(i) * 0.5f - 3.0f;
  const std::vector<float> original = logits;
  GrammarState s = (*tg)->automaton().Initial();
  EXPECT_TRUE((*tg)->MaskLogits(s, true, logits));
  for (size_t i = 0; i < n; ++i) {
    const bool keep = i == 2 || i == 3;  // "a", "ab"
    EXPECT_EQ(logits[i], keep ? original[i] : -INFINITY) << i;
  }
  GrammarState after_a;
  ASSERT_TRUE((*tg)->Advance(s, 2, &after_a));
  logits = original;
  EXPECT_TRUE((*tg)->MaskLogits(after_a, true, logits));
  EXPECT_EQ(logits[1], original[1]);  // the end token: the grammar can end here
  EXPECT_EQ(logits[6], original[6]);  // "b"
  EXPECT_EQ(logits[0], -INFINITY);    // adds nothing, ends nothing
  logits = original;
  EXPECT_TRUE((*tg)->MaskLogits(after_a, false, logits));  // ignore_eos: the end token stays out
  EXPECT_EQ(logits[1], -INFINITY);
  GrammarState ab;
  ASSERT_TRUE((*tg)->Advance(s, 3, &ab));
  EXPECT_TRUE((*tg)->automaton().IsComplete(ab));
  logits = original;
  EXPECT_FALSE((*tg)->MaskLogits(ab, false, logits));  // nothing may follow, and no end token
}

TEST(TokenGrammar, AVocabularyThatCannotBeginTheGrammarIsRefused) {
  auto tg = TokenGrammar::Create(Parse(R"(root ::= "z" [a-c]*)"), Vocab(), {1});
  ASSERT_FALSE(tg.ok());
  EXPECT_EQ(tg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tg.status().message().find("no token"), std::string_view::npos);
  // A grammar whose only sentence is "" is fine: the end token may come.
  EXPECT_TRUE(TokenGrammar::Create(Parse(R"(root ::= "")"), Vocab(), {1}).ok());
}

// Issue 55: a class that spans the surrogates but holds nothing else after the lead byte 0xED (here
// the complement of every other code point) must not admit 0xED: every continuation of it is a
// surrogate, which UTF-8 refuses, so a token ending in 0xED led to a state with nothing allowed.
// Checked to fail without the 0xED case of Utf8Partial::highest. A class that holds U+D7FF still
// admits 0xED (0xED 0x9F 0xBF is U+D7FF).
TEST(TokenGrammar, TheLeadByteOfOnlySurrogatesIsNotViable) {
  const std::vector<std::string> vocab = {"", "", "a", "\xED", "\xED\x9F", "\xBF", "\x9F\xBF", "\xED\xA0"};
  auto only_surrogates = TokenGrammar::Create(Parse(R"(root ::= ( "a" | [^\x00-\uD7FF\uE000-\U0010FFFF] )+)"), vocab, {1});
  ASSERT_TRUE(only_surrogates.ok()) << only_surrogates.status();
  const auto mask = (*only_surrogates)->Allowed((*only_surrogates)->automaton().Initial());
  EXPECT_TRUE(Allowed(*mask, 2));
  for (int32_t id : {3, 4, 7}) EXPECT_FALSE(Allowed(*mask, id)) << id;
  auto with_d7ff = TokenGrammar::Create(Parse(R"(root ::= ( "a" | [\uD7FF-\uE000] )+)"), vocab, {1});
  ASSERT_TRUE(with_d7ff.ok()) << with_d7ff.status();
  const GrammarState initial = (*with_d7ff)->automaton().Initial();
  const auto mask2 = (*with_d7ff)->Allowed(initial);
  EXPECT_TRUE(Allowed(*mask2, 3));
  EXPECT_TRUE(Allowed(*mask2, 4));
  EXPECT_FALSE(Allowed(*mask2, 7));  // 0xED 0xA0 begins U+D800
  GrammarState after_ed;
  ASSERT_TRUE((*with_d7ff)->Advance(initial, 3, &after_ed));
  const auto tail = (*with_d7ff)->Allowed(after_ed);
  EXPECT_TRUE(Allowed(*tail, 6));
}

TEST(GrammarTrace, StatesAfterARollbackAreThoseOfThePositionReturnedTo) {
  auto tg = TokenGrammar::Create(Parse(kGrammar), Vocab(), {1});
  ASSERT_TRUE(tg.ok());
  GrammarTrace trace(*tg);
  const std::vector<int32_t> a = {10, 28, 8, 12, 25, 13, 14, 29};  // {"a":1, "ab"
  const std::vector<int32_t> b = {10, 28, 8, 12, 31};              // {"a":null
  auto fresh = [&](const std::vector<int32_t>& tokens, size_t n) {
    GrammarState s = (*tg)->automaton().Initial(), t;
    for (size_t i = 0; i < n; ++i) {
      EXPECT_TRUE((*tg)->Advance(s, tokens[i], &t));
      s = t;
    }
    return s;
  };
  ASSERT_NE(trace.After(a), nullptr);
  EXPECT_EQ(*trace.After(a), fresh(a, a.size()));
  EXPECT_EQ(*trace.After(std::span(a).first(3)), fresh(a, 3));  // rolled back
  EXPECT_EQ(*trace.After(b), fresh(b, b.size()));                // another way on
  EXPECT_EQ(*trace.After(a), fresh(a, a.size()));
  const std::vector<int32_t> refused = {10, 25};  // {1
  EXPECT_EQ(trace.After(refused), nullptr);
  EXPECT_EQ(*trace.After(std::span(a).first(1)), fresh(a, 1));
}

}  // namespace
}  // namespace llm42
