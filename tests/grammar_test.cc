// lib/grammar: GBNF parsing (llama.cpp's syntax) and the code-point matcher, against hand-written
// expectations: which strings each construct accepts and refuses, and which grammars are refused
// with which line and column.
#include "lib/grammar/grammar.h"

#include <string>

#include "gtest/gtest.h"
#include "lib/grammar/grammar_matcher.h"

namespace llm42 {
namespace {

// Whether `grammar` accepts `text` as a whole sentence.
bool Accepts(const Grammar& grammar, const std::string& text) {
  GrammarMatcher m(&grammar);
  return m.AcceptText(text) && m.CanEnd();
}

Grammar Parse(const std::string& gbnf) {
  absl::StatusOr<Grammar> g = ParseGbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.status() << "\n" << gbnf;
  return g.ok() ? *std::move(g) : Grammar{};
}

struct Case {
  const char* gbnf;
  std::vector<std::string> accepted, refused;
};

TEST(Gbnf, EveryConstructAcceptsAndRefusesWhatItShould) {
  const Case cases[] = {
      {R"(root ::= "ab" "c")", {"abc"}, {"", "ab", "abd", "abcc"}},
      {R"(root ::= "")", {""}, {"a"}},
      {R"(root ::= [a-z0-9_]+)", {"a", "z9_", "abc"}, {"", "A", "a-b"}},
      {R"(root ::= "\"" [^"\\]* "\"")", {R"("")", R"("a b")"}, {R"(")", R"("a"b")", R"("\")"}},
      {R"(root ::= ("a" | "b") "c" | "d")", {"ac", "bc", "d"}, {"c", "ad", "dc"}},
      {R"(root ::= "x"?  "y")", {"y", "xy"}, {"xxy", "x"}},
      {R"(root ::= "x"* "y")", {"y", "xy", "xxxxy"}, {"x", "yy"}},
      {R"(root ::= "x"{2})", {"xx"}, {"x", "xxx"}},
      {R"(root ::= "x"{2,})", {"xx", "xxxxx"}, {"", "x"}},
      {R"(root ::= "ab"{1,3})", {"ab", "abab", "ababab"}, {"", "a", "abababab"}},
      {R"(root ::= "a"{0,2} "b")", {"b", "ab", "aab"}, {"aaab"}},
      {R"(root ::= . "!")", {"a!", "é!", "\n!"}, {"!", "ab!"}},
      {R"(root ::= "\n\t\x41\u00e9\U0001F600")", {"\n\tAé😀"}, {"\n\tA"}},
      {R"(root ::= [\x30-\x39\-] [^\]])", {"1a", "-b"}, {"1]", "a1"}},
      {"root ::= \"é\" [à-ü]", {"éà", "éü"}, {"éa", "eà"}},
      // Balanced parentheses: recursion that is not left recursion.
      {R"g(root ::= "(" root ")" root | "")g", {"", "()", "(())()", "((()))"}, {"(", ")", "())"}},
      // Rules on several lines: after ::=, after |, inside parentheses; comments anywhere.
      {"# a comment\nroot ::=\n  item (\n    \",\" item  # more\n  )*\nitem ::= \"a\" |\n  \"b\"\n",
       {"a", "a,b", "b,a,a"}, {"", "a,", ",a", "c"}},
  };
  for (const Case& c : cases) {
    const Grammar g = Parse(c.gbnf);
    for (const std::string& s : c.accepted) EXPECT_TRUE(Accepts(g, s)) << c.gbnf << "\nshould accept: " << s;
    for (const std::string& s : c.refused) EXPECT_FALSE(Accepts(g, s)) << c.gbnf << "\nshould refuse: " << s;
  }
}

// A JSON grammar as people write them for llama.cpp.
TEST(Gbnf, AJsonGrammarAcceptsJsonOnly) {
  const Grammar g = Parse(R"(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws
array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws
string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)");
  for (const char* ok : {R"({})", R"({"a": 1})", R"({"a": [1, 2.5, "x\n", true, null], "b": {"c": -3e5}})",
                         "{\n  \"k\": \"\\u00e9\"\n}"}) {
    EXPECT_TRUE(Accepts(g, ok)) << ok;
  }
  for (const char* bad : {R"({"a": })", R"({"a" 1})", R"([1, 2])", R"({"a": 01})", R"({"a": "x)", R"({'a': 1})"}) {
    EXPECT_FALSE(Accepts(g, bad)) << bad;
  }
  // A prefix of JSON is accepted as far as it goes, and is not yet a sentence.
  GrammarMatcher m(&g);
  EXPECT_TRUE(m.AcceptText(R"({"a": [1, )"));
  EXPECT_FALSE(m.CanEnd());
  EXPECT_FALSE(m.AcceptText("]"));  // refused, and nothing changed:
  EXPECT_TRUE(m.AcceptText("2]}"));
  EXPECT_TRUE(m.CanEnd());
}

TEST(Gbnf, CompletenessAndLongRepetitions) {
  const Grammar fixed = Parse(R"(root ::= "yes" | "no")");
  GrammarMatcher m(&fixed);
  ASSERT_TRUE(m.AcceptText("no"));
  EXPECT_TRUE(m.IsComplete());
  const Grammar open = Parse(R"(root ::= "a"+)");
  GrammarMatcher n(&open);
  ASSERT_TRUE(n.AcceptText(std::string(20000, 'a')));
  EXPECT_TRUE(n.CanEnd());
  EXPECT_FALSE(n.IsComplete());
}

// Each bad grammar refused, with the first error's place and what it is.
TEST(Gbnf, BadGrammarsAreRefusedWithLineAndColumn) {
  const std::pair<const char*, const char*> cases[] = {
      {"root ::= (\"a\"", "line 1, column 10: unbalanced '('"},
      {"root ::= \"a\")", "line 1, column 13: unbalanced ')'"},
      {"root ::= \"a\"\nx ::= y", "line 2, column 7: rule 'y' is not defined"},
      {"item ::= \"a\"", "the grammar has no rule named 'root'"},
      {"root ::= root \"x\" | \"y\"", "rule 'root' is left-recursive"},
      {"root ::= b root \"x\" | \"y\"\nb ::= \"\" | \"z\"", "rule 'root' is left-recursive"},
      {"root ::= \"a\" root", "line 1, column 1: the grammar derives no finite string"},
      {"root ::= []", "derives no finite string"},
      {"root ::= \"abc", "line 1, column 10: unterminated string literal"},
      {"root ::= [abc", "unterminated character class"},
      {"root ::= \"\\q\"", "unknown escape '\\q'"},
      {"root ::= \"\\x4\"", "expected 2 hexadecimal digits"},
      {"root ::= \"a\"{3,1}", "n below m"},
      {"root ::= \"a\"{5000}", "repetition bound above 1000"},
      {"root ::= [z-a]", "runs backwards"},
      {"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice"},
      {"root = \"a\"", "expected '::='"},
      {"root ::= \"\xff\"", "invalid UTF-8"},
      {"root ::= \"a\" @", "unexpected '@'"},
      // Issue 55: surrogates are no characters; a literal or a class's end that names one is refused.
      {"root ::= \"a\" b\nb ::= \"\\uD800\"", "line 2, column 8: U+D800 is a surrogate code point"},
      {"root ::= ( \"a\" | [\\uD800-\\uDFFF] )+", "line 1, column 19: U+D800 is a surrogate"},
      {"root ::= [a-\\uDC00]", "U+DC00 is a surrogate"},
      {"root ::= \"\\U0000DFFF\"", "U+DFFF is a surrogate"},
  };
  for (const auto& [gbnf, want] : cases) {
    absl::StatusOr<Grammar> g = ParseGbnf(gbnf);
    ASSERT_FALSE(g.ok()) << gbnf;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(g.status().message()).find(want), std::string::npos)
        << gbnf << "\n" << g.status().message() << "\nwanted: " << want;
  }
}

}  // namespace
}  // namespace llm42
