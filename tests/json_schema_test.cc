// lib/grammar/json_schema: JSON Schema to GBNF, checked two ways. Hand-written expectations:
// for every supported keyword, JSON texts the grammar must accept and texts it must refuse; and
// every unsupported keyword or malformed schema refused with its name and JSON pointer. Then
// independently of our converter: 1,000 texts sampled at random from each test schema's grammar
// are validated by Debian's python3-jsonschema.
#include "lib/grammar/json_schema.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/grammar/grammar.h"
#include "lib/grammar/grammar_matcher.h"
#include "lib/grammar/token_grammar.h"
#include "tests/grammar_sampler.h"

namespace llm42 {
namespace {

Grammar Convert(const std::string& schema) {
  absl::StatusOr<std::string> gbnf = JsonSchemaToGbnf(schema);
  EXPECT_TRUE(gbnf.ok()) << gbnf.status() << "\n" << schema;
  if (!gbnf.ok()) return Grammar{};
  absl::StatusOr<Grammar> g = ParseGbnf(*gbnf);
  EXPECT_TRUE(g.ok()) << g.status() << "\n" << *gbnf;
  return g.ok() ? *std::move(g) : Grammar{};
}

bool Accepts(const Grammar& g, const std::string& text) {
  GrammarMatcher m(&g);
  return m.AcceptText(text) && m.CanEnd();
}

struct Case {
  const char* schema;
  std::vector<std::string> accepted, refused;
};

TEST(JsonSchema, EveryKeywordAcceptsAndRefusesWhatItShould) {
  const Case cases[] = {
      {R"({})", {"1", R"("a")", R"({"x": [1, null, true]})", "-2.5e3"}, {"", "tru", "{", "01"}},
      {R"(true)", {"null", "[]"}, {"nul"}},
      {R"({"type": "string"})", {R"("")", R"("a b\"c\\")", R"("é😀")", R"("\n")"}, {"a", R"("a)", "1", "\"\x01\""}},
      {R"({"type": "number"})", {"0", "-1", "3.25", "1e10", "-0.5E-3"}, {"01", "1.", ".5", "+1", R"("1")"}},
      {R"({"type": "integer"})", {"0", "-7", "123456"}, {"1.5", "1e3", "00", "-"}},
      {R"({"type": "boolean"})", {"true", "false"}, {"True", "1"}},
      {R"({"type": "null"})", {"null"}, {"nil", "{}"}},
      {R"({"type": ["integer", "null"]})", {"3", "null"}, {R"("3")"}},
      {R"({"type": "object"})", {"{}", R"({"a": 1, "b": {"c": []}})"}, {"[]", R"({"a"})", R"({1: 2})"}},
      {R"({"type": "array"})", {"[]", R"([1, "a", [null]])"}, {"[1,]", "{}"}},
      {R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["b"]})",
       {R"({"b": "x"})", R"({"a": 1, "b": "x"})", R"({ "a" : 1 , "b" : "" })"},
       {"{}", R"({"a": 1})", R"({"b": 1})", R"({"b": "x", "a": 1})", R"({"b": "x", "c": 1})"}},
      {R"({"properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "boolean"}})",
       {"{}", R"({"a": 1, "zz": true})", R"({"q": false})"}, {R"({"q": 1})"}},
      {R"({"type": "object", "properties": {"a": {"const": 1}}, "additionalProperties": false})",
       {"{}", R"({"a": 1})"}, {R"({"a": 2})", R"({"b": 1})"}},
      {R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})",
       {"[1]", "[1, 2, 3]"}, {"[]", "[1, 2, 3, 4]", R"(["a"])"}},
      {R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false})",
       {"[]", R"(["a"])", R"(["a", 2])"}, {"[2]", R"(["a", 2, 3])"}},
      {R"({"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "boolean"}, "minItems": 2})",
       {R"(["a", true])", R"(["a", true, false])"}, {R"(["a"])", R"(["a", 1])"}},
      {R"({"enum": ["red", 3, null, {"k": [1]}]})", {R"("red")", "3", "null", R"({"k":[1]})"}, {R"("blue")", "4"}},
      {R"({"const": "fixed"})", {R"("fixed")"}, {R"("other")"}},
      {R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}]})", {"1", R"("ab")"}, {R"("abc")", "true"}},
      {R"({"oneOf": [{"type": "boolean"}, {"type": "null"}]})", {"true", "null"}, {"0"}},
      {R"({"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}}, "$ref": "#/$defs/node"})",
       {"{}", R"({"next": {"next": {}}})"}, {R"({"next": 1})"}},
      {R"({"definitions": {"n": {"type": "integer"}}, "type": "array", "items": {"$ref": "#/definitions/n"}})",
       {"[1, 2]"}, {R"(["a"])"}},
      {R"({"type": "string", "minLength": 2, "maxLength": 3})", {R"("ab")", R"("abc")", R"("a\"")"}, {R"("a")", R"("abcd")"}},
      {R"({"type": "integer", "minimum": -12, "maximum": 105})",
       {"-12", "-9", "0", "7", "99", "100", "105"}, {"-13", "-100", "106", "200", "1000"}},
      {R"({"type": "integer", "minimum": 10})", {"10", "99", "100", "123456789"}, {"9", "0", "-5"}},
      {R"({"type": "integer", "maximum": -3})", {"-3", "-10", "-999"}, {"-2", "0", "5"}},
      {R"({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10})", {"1", "9"}, {"0", "10"}},
      {R"({"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"})", {R"("AB-123")"}, {R"("A-123")", R"("AB-12")", R"("ab-123")"}},
      {R"({"type": "string", "pattern": "(cat|dog)s?"})", {R"("cat")", R"("dogs")"}, {R"("cow")", R"("cats!")"}},
      {R"({"type": "string", "pattern": "a.c"})", {R"("abc")", R"("a\"c")", R"("a\\c")"}, {"\"a\nc\"", R"("ac")"}},
      {R"({"type": "string", "pattern": "[^a-z]+"})", {R"("ABC")", R"("1 2")"}, {R"("aB")"}},
      {R"({"type": "string", "format": "date"})", {R"("2026-12-04")"}, {R"("2026-13-01")", R"("26-12-04")"}},
      {R"({"type": "string", "format": "time"})", {R"("23:59:59Z")", R"("08:00:00.5+02:00")"}, {R"("24:00:00Z")", R"("08:00:00")"}},
      {R"({"type": "string", "format": "date-time"})", {R"("2026-12-04T05:06:07Z")"}, {R"("2026-12-04 05:06:07Z")"}},
      {R"({"type": "string", "format": "uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123e4567e89b12d3a456426614174000")"}},
      {R"({"title": "t", "description": "d", "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "null"})",
       {"null"}, {"1"}},
  };
  for (const Case& c : cases) {
    const Grammar g = Convert(c.schema);
    for (const std::string& s : c.accepted) EXPECT_TRUE(Accepts(g, s)) << c.schema << "\nshould accept: " << s;
    for (const std::string& s : c.refused) EXPECT_FALSE(Accepts(g, s)) << c.schema << "\nshould refuse: " << s;
  }
}

TEST(JsonSchema, UnsupportedAndMalformedSchemasAreRefusedByName) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type": "object", "properties": {"a": {"type": "string", "uniqueItems": true}}})", "'uniqueItems' is not supported"},
      {R"({"type": "object", "properties": {"a": {"type": "string", "uniqueItems": true}}})", "/properties/a"},
      {R"({"allOf": [{}]})", "'allOf'"},
      {R"({"not": {}})", "'not'"},
      {R"({"type": "number", "minimum": 1})", "'minimum' does not apply to type 'number'"},
      {R"({"type": "string", "format": "email"})", "the format 'email'"},
      {R"({"type": "text"})", "unknown type 'text'"},
      {R"({"$ref": "#/$defs/missing"})", "names no definition"},
      {R"({"$ref": "other.json#/a"})", "only references to #, #/$defs/NAME"},
      {R"({"type": "string", "pattern": "(a)\\1"})", "backreferences"},
      {R"({"type": "string", "pattern": "(?=a)b"})", "lookaround"},
      {R"({"type": "string", "pattern": "a+?"})", "lazy quantifiers"},
      {R"({"type": "string", "pattern": "(ab"})", "unbalanced '('"},
      {R"({"type": "array", "minItems": 3, "maxItems": 2})", "no array length"},
      {R"({"type": "string", "maxLength": 5000})", "/maxLength"},
      {R"({"type": "string", "pattern": "a{2,1001}"})", "a repetition count above 1000"},
      {R"({"type": "integer", "minimum": 5, "maximum": 4})", "no integer lies within"},
      {R"({"type": "object", "properties": [1]})", "/properties"},
      {R"(false)", "allows no value"},
      {R"({"type": "object",)", "not JSON"},
      {R"({"type": "integer", "minimum": 44e4777})", "not usable JSON"},  // found by json_schema_fuzzer
      {R"([1, 2])", "a schema is an object or a boolean"},
  };
  for (const auto& [schema, expected] : cases) {
    absl::StatusOr<std::string> g = JsonSchemaToGbnf(schema);
    ASSERT_FALSE(g.ok()) << schema;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << schema;
    EXPECT_NE(g.status().message().find(expected), std::string_view::npos) << schema << "\n" << g.status();
  }
}

TEST(JsonSchema, SampledOutputsValidateWithAnIndependentValidator) {
  const std::string python = LLM42_PYTHON3;
  // Not a skip: tools/install-deps.sh pins python3-jsonschema, so its absence is a broken setup.
  ASSERT_FALSE(python.empty()) << "Debian's python3 was not found (tools/install-deps.sh installs it)";
  ASSERT_EQ(system((python + " -c 'import jsonschema' 2>/dev/null").c_str()), 0)
      << "Debian's python3-jsonschema is not installed (tools/install-deps.sh installs it)";
  const char* schemas[] = {
      // The game sample's NPC action.
      R"({"type": "object", "properties": {"line": {"type": "string", "maxLength": 40},
          "action": {"enum": ["talk", "give_item", "attack", "flee"]},
          "item": {"type": "string", "pattern": "^[a-z_]{1,12}$"}}, "required": ["line", "action"],
          "additionalProperties": false})",
      R"({"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer", "minimum": -5, "maximum": 1234},
          "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 3}}, "required": ["id"]},
          "maxItems": 4})",
      R"({"$defs": {"tree": {"type": "object", "properties": {"v": {"type": ["number", "null"]},
          "kids": {"type": "array", "items": {"$ref": "#/$defs/tree"}, "maxItems": 2}}, "required": ["v"]}},
          "anyOf": [{"$ref": "#/$defs/tree"}, {"type": "boolean"}, {"const": [1, "x"]}]})",
      R"({"type": "object", "properties": {"when": {"type": "string", "format": "date-time"},
          "id": {"type": "string", "format": "uuid"}, "n": {"type": "integer", "exclusiveMinimum": 99}},
          "additionalProperties": {"type": "integer"}})",
      R"({})",
  };
  const std::string dir = LLM42_TEST_TMP_DIR;
  std::filesystem::create_directories(dir);
  for (size_t i = 0; i < std::size(schemas); ++i) {
    const std::vector<std::string> samples = testing::SampleSentences(Convert(schemas[i]), 1000, static_cast<uint32_t>(i + 1));
    ASSERT_EQ(samples.size(), 1000u);
    const std::string schema_path = dir + "/schema" + std::to_string(i) + ".json";
    const std::string samples_path = dir + "/samples" + std::to_string(i) + ".txt";
    std::ofstream(schema_path) << schemas[i];
    {
      std::ofstream out(samples_path, std::ios::binary);
      for (const std::string& s : samples) out << s << '\0';
    }
    // Each sample must parse as JSON (whole) and validate; prints the first failure.
    const std::string script =
        "import json, sys, jsonschema\n"
        "schema = json.load(open(sys.argv[1]))\n"
        "v = jsonschema.Draft202012Validator(schema)\n"
        "texts = open(sys.argv[2], 'rb').read().decode('utf-8').split('\\0')[:-1]\n"
        "bad = 0\n"
        "for t in texts:\n"
        "    try:\n"
        "        v.validate(json.loads(t))\n"
        "    except Exception as e:\n"
        "        bad += 1\n"
        "        if bad == 1: print('INVALID', repr(t), str(e)[:200])\n"
        "print('checked', len(texts), 'invalid', bad)\n"
        "sys.exit(1 if bad or len(texts) != 1000 else 0)\n";
    const std::string script_path = dir + "/validate.py";
    std::ofstream(script_path) << script;
    const std::string cmd = python + " " + script_path + " " + schema_path + " " + samples_path;
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string output;
    char buf[512];
    while (fgets(buf, sizeof buf, p) != nullptr) output += buf;
    EXPECT_EQ(pclose(p), 0) << schemas[i] << "\n" << output;
    EXPECT_NE(output.find("checked 1000 invalid 0"), std::string::npos) << output;
  }
}

}  // namespace
}  // namespace llm42
