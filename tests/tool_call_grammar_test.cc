// lib/chat/tool_call_grammar: the grammar of a reply that calls tools, per syntax and tool choice.
// Hand-written expectations: the calls each family's template writes are accepted, other tools,
// missing arguments and broken syntax refused, free text kept free of the call's opening; bad
// tools and choices refused by name. Then independently: 300 replies sampled at random from each
// grammar are read back by ParseChatOutput (every one parses, with its calls) and every call's
// arguments are validated against its tool's schema by Debian's python3-jsonschema.
#include "lib/chat/tool_call_grammar.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/grammar/grammar.h"
#include "lib/grammar/grammar_matcher.h"
#include "nlohmann/json.hpp"
#include "tests/grammar_sampler.h"

namespace llm42 {
namespace {

constexpr char kTools[] = R"([
  {"type": "function", "function": {"name": "give_item", "description": "Gives the player an item",
    "parameters": {"type": "object", "properties": {"player": {"type": "string", "maxLength": 12},
      "item": {"enum": ["sword", "shield", "potion"]}, "count": {"type": "integer", "minimum": 1, "maximum": 9}},
      "required": ["player", "item"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "move_to", "parameters": {"type": "object",
    "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]}}},
  {"name": "say", "parameters": {"type": "object", "properties": {"line": {"type": "string", "maxLength": 20}},
    "required": ["line"]}}])";

Grammar GrammarOf(ChatSyntax syntax, const std::string& choice) {
  auto c = ParseToolChoice(choice);
  EXPECT_TRUE(c.ok()) << c.status();
  auto gbnf = ToolCallGrammar(syntax, kTools, *c);
  EXPECT_TRUE(gbnf.ok()) << gbnf.status();
  if (!gbnf.ok()) return Grammar{};
  auto g = ParseGbnf(*gbnf);
  EXPECT_TRUE(g.ok()) << g.status() << "\n" << *gbnf;
  return g.ok() ? *std::move(g) : Grammar{};
}

bool Accepts(const Grammar& grammar, const std::string& text) {
  GrammarMatcher m(&grammar);
  return m.AcceptText(text) && m.CanEnd();
}

struct Case {
  ChatSyntax syntax;
  std::string choice;
  std::vector<std::string> accepted, refused;
};

TEST(ToolCallGrammar, AcceptsTheTemplatesCallsAndRefusesOthers) {
  const std::string hermes = "<tool_call>\n{\"name\": \"give_item\", \"arguments\": {\"player\": \"Ann\", \"item\": \"sword\"}}\n</tool_call>";
  const std::string hermes_move = "<tool_call>\n{\"name\": \"move_to\", \"arguments\": {\"x\": 1.5, \"y\": -2}}\n</tool_call>";
  const std::string mistral = "[TOOL_CALLS][{\"name\": \"give_item\", \"arguments\": {\"player\": \"Bo\", \"item\": \"potion\", \"count\": 3}}]";
  const std::string llama3 = "{\"name\": \"say\", \"parameters\": {\"line\": \"Hi there\"}}";
  // gpt-oss's: the recipient in the role's header after the generation prompt <|start|>assistant.
  const std::string harmony = " to=functions.give_item<|channel|>commentary json<|message|>{\"player\": \"Ann\", \"item\": \"sword\"}";
  const std::string harmony_move = " to=functions.move_to<|channel|>commentary json<|message|>{\"x\": 1, \"y\": 2}";
  const std::string analysis = "<|channel|>analysis<|message|>The player wants a sword.<|end|><|start|>assistant";
  // Qwen3.5's XML: parameters in the schema's order, plain strings raw, others JSON.
  const std::string xml = "<tool_call>\n<function=give_item>\n<parameter=player>\nAnn\n</parameter>\n<parameter=item>\nsword\n</parameter>\n</function>\n</tool_call>";
  const std::string xml_move = "<tool_call>\n<function=move_to>\n<parameter=x>\n1.5\n</parameter>\n<parameter=y>\n-2\n</parameter>\n</function>\n</tool_call>";
  const std::vector<Case> cases = {
      {ChatSyntax::kQwenXml, "required",
       {xml, xml + "\n" + xml_move,
        "<tool_call>\n<function=give_item>\n<parameter=player>\n42\n</parameter>\n<parameter=item>\npotion\n</parameter>\n<parameter=count>\n3\n</parameter>\n</function>\n</tool_call>"},
       {"<tool_call>\n<function=give_item>\n<parameter=item>\nsword\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=give_item>\n<parameter=player>\nAnn\n</parameter>\n<parameter=item>\naxe\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=move_to>\n<parameter=x>\none\n</parameter>\n<parameter=y>\n2\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=give_item>\n<parameter=player>\nA very long name indeed\n</parameter>\n<parameter=item>\nsword\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=give_item>\n<parameter=player>\n<b>Ann</b>\n</parameter>\n<parameter=item>\nsword\n</parameter>\n</function>\n</tool_call>"}},
      {ChatSyntax::kQwenXml, "auto", {"", "Let me look.\n\n" + xml}, {"<tool_call> text", xml + " after"}},
      {ChatSyntax::kHarmony, "required", {harmony, harmony_move},
       {analysis + harmony, "to=functions.give_item<|channel|>commentary json<|message|>{\"player\": \"Ann\", \"item\": \"sword\"}",
        " to=functions.jump<|channel|>commentary json<|message|>{}", harmony + harmony_move, harmony + "<|end|>"}},
      {ChatSyntax::kHarmony, "auto", {"", analysis + "<|channel|>final<|message|>Here you are.", analysis + harmony, harmony},
       {analysis + " to=functions.jump<|channel|>commentary json<|message|>{}", harmony + " and then text",
        "<|channel|>final<|message|>to=functions.say"}},
      {ChatSyntax::kHarmony, "move_to", {harmony_move}, {harmony}},
      {ChatSyntax::kHermes, "required", {hermes, "\n" + hermes, hermes + "\n" + hermes_move},
       {"Sure! " + hermes, "<tool_call>\n{\"name\": \"jump\", \"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"give_item\", \"arguments\": {\"item\": \"sword\"}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"give_item\", \"arguments\": {\"player\": \"Ann\", \"item\": \"axe\"}}\n</tool_call>", ""}},
      {ChatSyntax::kHermes, "auto", {"", "Hello, traveller.", "a <tool and <tool_cal are text", "Here: " + hermes,
                                     hermes + "\n" + hermes_move, "<<tool_call>\n{\"name\": \"say\", \"arguments\": {\"line\": \"x\"}}\n</tool_call>"},
       {"Here: <tool_call> not a call", hermes + " and then text", "<tool_call>\n{\"name\": \"say\"}\n</tool_call>"}},
      {ChatSyntax::kHermes, "give_item", {hermes}, {hermes_move, "hi"}},
      {ChatSyntax::kHermes, R"({"type": "function", "function": {"name": "move_to"}})", {hermes_move}, {hermes}},
      {ChatSyntax::kMistral, "required",
       {mistral, "[TOOL_CALLS][{\"name\": \"say\", \"arguments\": {\"line\": \"a\"}}, {\"name\": \"move_to\", \"arguments\": {\"x\": 0, \"y\": 0}}]"},
       {"[TOOL_CALLS]{\"name\": \"say\", \"arguments\": {\"line\": \"a\"}}", "[TOOL_CALLS][]"}},
      {ChatSyntax::kMistral, "auto", {"[TOOL and [TOOL_CALL] are text", "ok " + mistral}, {"[TOOL_CALLS] text"}},
      {ChatSyntax::kLlama3, "required", {llama3, "{\"name\": \"move_to\", \"parameters\": {\"x\": 3, \"y\": 4}}"},
       {"{\"name\": \"say\", \"arguments\": {\"line\": \"Hi\"}}", "{\"name\": \"say\", \"parameters\": {\"line\": \"far too long a line, really\"}}"}},
      {ChatSyntax::kLlama3, "auto", {"Plain text {with braces}", llama3}, {"{\"name\": \"nobody\", \"parameters\": {}}"}},
  };
  for (const Case& c : cases) {
    const Grammar g = GrammarOf(c.syntax, c.choice);
    for (const std::string& t : c.accepted) EXPECT_TRUE(Accepts(g, t)) << ChatSyntaxName(c.syntax) << " " << c.choice << " should accept: " << t;
    for (const std::string& t : c.refused) EXPECT_FALSE(Accepts(g, t)) << ChatSyntaxName(c.syntax) << " " << c.choice << " should refuse: " << t;
  }
  // "none": no constraint at all.
  auto none = ToolCallGrammar(ChatSyntax::kHermes, kTools, *ParseToolChoice("none"));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// Qwen's XML writes strings raw: given the tools, a string parameter that reads as JSON stays a
// string (its schema says so); an integer one becomes a number. Without them it reads as JSON, as
// the template writes numbers.
TEST(ToolCallGrammar, XmlValuesParseBackByTheirToolsSchemas) {
  const std::string reply =
      "<tool_call>\n<function=give_item>\n<parameter=player>\n42\n</parameter>\n<parameter=item>\nsword\n</parameter>\n"
      "<parameter=count>\n3\n</parameter>\n</function>\n</tool_call>";
  auto with = ParseChatOutput(ChatSyntax::kQwenXml, reply, kTools);
  ASSERT_TRUE(with.ok()) << with.status();
  ASSERT_EQ(with->tool_calls.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(with->tool_calls[0].arguments_json),
            nlohmann::json::parse(R"({"player": "42", "item": "sword", "count": 3})"));
  auto without = ParseChatOutput(ChatSyntax::kQwenXml, reply);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ(nlohmann::json::parse(without->tool_calls[0].arguments_json)["player"], 42);
}

TEST(ToolCallGrammar, BadToolsAndChoicesAreRefusedByName) {
  struct Bad {
    ChatSyntax syntax;
    const char* tools;
    std::string choice;
    absl::StatusCode code;
    const char* message;
  };
  for (const Bad& b : std::vector<Bad>{
           {ChatSyntax::kHermes, "{}", "auto", absl::StatusCode::kInvalidArgument, "not a non-empty array"},
           {ChatSyntax::kHermes, "[", "auto", absl::StatusCode::kInvalidArgument, "not JSON"},
           {ChatSyntax::kHermes, R"([{"function": {"description": "x"}}])", "auto", absl::StatusCode::kInvalidArgument, "tools[0]: no function name"},
           {ChatSyntax::kHermes, R"([{"name": "a"}, {"name": "a"}])", "auto", absl::StatusCode::kInvalidArgument, "a second tool named 'a'"},
           {ChatSyntax::kHermes, R"([{"name": "a", "parameters": {"type": "object", "patternProperties": {}}}])", "auto",
            absl::StatusCode::kInvalidArgument, "tool 'a': its parameters"},
           {ChatSyntax::kHermes, kTools, "fly", absl::StatusCode::kInvalidArgument, "names 'fly', which is no tool"},
           {ChatSyntax::kPlain, kTools, "auto", absl::StatusCode::kUnimplemented, "writes no tool calls"},
           {ChatSyntax::kGemma4, kTools, "auto", absl::StatusCode::kUnimplemented, "gemma-4"},
           {ChatSyntax::kHarmony, R"([{"name": "look around"}])", "auto", absl::StatusCode::kInvalidArgument,
            "tool 'look around': a name the harmony syntax cannot write"},
           {ChatSyntax::kQwenXml, R"([{"name": "a", "parameters": {"type": "array"}}])", "auto",
            absl::StatusCode::kInvalidArgument, "tool 'a': its parameters: the qwen-xml syntax writes an object's properties"},
           {ChatSyntax::kQwenXml, R"([{"name": "a", "parameters": {"type": "object", "properties": {"x y": {}}}}])", "auto",
            absl::StatusCode::kInvalidArgument, "property 'x y': a key the qwen-xml syntax cannot write"},
       }) {
    auto choice = ParseToolChoice(b.choice);
    ASSERT_TRUE(choice.ok());
    const auto g = ToolCallGrammar(b.syntax, b.tools, *choice);
    EXPECT_EQ(g.status().code(), b.code) << b.tools << " " << g.status();
    EXPECT_NE(g.status().message().find(b.message), std::string::npos) << g.status();
  }
  EXPECT_FALSE(ParseToolChoice(R"({"type": "function"})").ok());
  EXPECT_FALSE(ParseToolChoice("{").ok());
}

// Independently of the grammar: replies sampled from it parse back into calls whose arguments
// python3-jsonschema validates against their tools' schemas.
TEST(ToolCallGrammar, SampledCallsParseAndValidateWithAnIndependentValidator) {
  const std::string python = LLM42_PYTHON3;
  ASSERT_FALSE(python.empty()) << "Debian's python3 was not found (tools/install-deps.sh installs it)";
  ASSERT_EQ(system((python + " -c 'import jsonschema' 2>/dev/null").c_str()), 0)
      << "Debian's python3-jsonschema is not installed (tools/install-deps.sh installs it)";
  const std::string dir = LLM42_TEST_TMP_DIR;
  std::filesystem::create_directories(dir);
  const std::string tools_path = dir + "/tools.json", calls_path = dir + "/calls.json", script_path = dir + "/validate_calls.py";
  std::ofstream(tools_path) << kTools;
  std::ofstream(script_path) << "import json, sys, jsonschema\n"
                                "tools = json.load(open(sys.argv[1]))\n"
                                "schemas = {}\n"
                                "for t in tools:\n"
                                "    f = t.get('function', t)\n"
                                "    schemas[f['name']] = jsonschema.Draft202012Validator(f['parameters'])\n"
                                "calls = json.load(open(sys.argv[2]))\n"
                                "for c in calls:\n"
                                "    schemas[c['name']].validate(c['arguments'])\n"
                                "print('validated', len(calls))\n";
  for (ChatSyntax syntax : {ChatSyntax::kHermes, ChatSyntax::kMistral, ChatSyntax::kLlama3, ChatSyntax::kHarmony,
                            ChatSyntax::kQwenXml}) {
    for (const char* choice : {"required", "auto", "move_to"}) {
      SCOPED_TRACE(std::string(ChatSyntaxName(syntax)) + " " + choice);
      const std::vector<std::string> replies =
          testing::SampleSentences(GrammarOf(syntax, choice), 300, 7,
                                   {"<tool_call>", "</tool_call>", "[TOOL_CALLS]", "{\"name\": \"", "to=functions.",
                                    "<|channel|>analysis<|message|>", "<|end|><|start|>assistant", "<function=",
                                    "<parameter=", "42"});
      nlohmann::json calls = nlohmann::json::array();
      int with_calls = 0;
      for (const std::string& reply : replies) {
        auto parsed = ParseChatOutput(syntax, reply, kTools);
        ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << reply;
        with_calls += !parsed->tool_calls.empty();
        if (std::string(choice) != "auto") {
          ASSERT_FALSE(parsed->tool_calls.empty()) << reply;
        }
        for (const ParsedToolCall& c : parsed->tool_calls) {
          if (std::string(choice) == "move_to") {
            EXPECT_EQ(c.name, "move_to");
          }
          calls.push_back({{"name", c.name}, {"arguments", nlohmann::json::parse(c.arguments_json)}});
        }
      }
      EXPECT_GT(with_calls, 0) << "no sampled reply called a tool";
      std::ofstream(calls_path) << calls.dump();
      FILE* p = popen((python + " " + script_path + " " + tools_path + " " + calls_path + " 2>&1").c_str(), "r");
      ASSERT_NE(p, nullptr);
      std::string output;
      char buf[512];
      while (fgets(buf, sizeof buf, p) != nullptr) output += buf;
      EXPECT_EQ(pclose(p), 0) << output;
      EXPECT_NE(output.find("validated " + std::to_string(calls.size())), std::string::npos) << output;
    }
  }
}

}  // namespace
}  // namespace llm42
