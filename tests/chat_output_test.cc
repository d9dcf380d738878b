// Tool calls and reasoning parsed out of generated replies (issue 58): each syntax as its model
// family's own chat template writes an assistant turn's tool calls — the templates of llama.cpp's
// test corpus rendered by lib/chat's renderer (which tests/jinja_test.cc checks against
// python3-jinja2), the reply cut from the rendering and parsed back to the calls that went in —
// and hand-written replies for what a rendering does not show (reasoning, several calls, a reply
// cut inside a call).
#include "lib/chat/chat_output.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "gtest/gtest.h"
#include "lib/chat/chat_template.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace llm42 {
namespace {

using Json = nlohmann::ordered_json;

ChatOutput Parse(ChatSyntax syntax, std::string_view text) {
  absl::StatusOr<ChatOutput> out = ParseChatOutput(syntax, text);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : ChatOutput{};
}

Json Args(const ParsedToolCall& c) { return Json::parse(c.arguments_json); }

TEST(ChatOutput, HermesCallsAndReasoning) {
  const ChatOutput o = Parse(ChatSyntax::kHermes,
                             "<think>\nThe user wants weather.\n</think>\n\nLet me check.\n<tool_call>\n{\"name\": "
                             "\"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": "
                             "\"get_time\", \"arguments\": \"{\\\"zone\\\": \\\"CET\\\"}\"}\n</tool_call>");
  ASSERT_TRUE(o.reasoning.has_value());
  EXPECT_EQ(*o.reasoning, "The user wants weather.");
  EXPECT_EQ(o.content, "Let me check.");
  ASSERT_EQ(o.tool_calls.size(), 2u);
  EXPECT_EQ(o.tool_calls[0].name, "get_weather");
  EXPECT_EQ(Args(o.tool_calls[0]), Json({{"city", "Paris"}}));
  EXPECT_EQ(o.tool_calls[1].name, "get_time");
  EXPECT_EQ(Args(o.tool_calls[1]), Json({{"zone", "CET"}}));  // arguments given as a JSON string
}

TEST(ChatOutput, PlainRepliesAreContent) {
  for (ChatSyntax s : {ChatSyntax::kPlain, ChatSyntax::kHermes, ChatSyntax::kQwenXml, ChatSyntax::kMistral,
                       ChatSyntax::kLlama3, ChatSyntax::kGemma4, ChatSyntax::kDeepSeekR1, ChatSyntax::kHarmony}) {
    const ChatOutput o = Parse(s, "  Paris is sunny today.\n");
    EXPECT_EQ(o.content, "Paris is sunny today.") << ChatSyntaxName(s);
    EXPECT_FALSE(o.reasoning.has_value()) << ChatSyntaxName(s);
    EXPECT_TRUE(o.tool_calls.empty()) << ChatSyntaxName(s);
  }
  // A generation prompt that opened the reasoning: the reply closes it (DeepSeek R1 distills).
  const ChatOutput r1 = Parse(ChatSyntax::kDeepSeekR1, "thinking hard\n</think>\n\nThe answer is 4.");
  EXPECT_EQ(r1.reasoning.value_or("-"), "thinking hard");
  EXPECT_EQ(r1.content, "The answer is 4.");
  // Cut inside its reasoning: all reasoning.
  const ChatOutput cut = Parse(ChatSyntax::kPlain, "<think>still going");
  EXPECT_EQ(cut.reasoning.value_or("-"), "still going");
  EXPECT_EQ(cut.content, "");
}

TEST(ChatOutput, QwenXmlValuesKeepTheirTypes) {
  const ChatOutput o = Parse(ChatSyntax::kQwenXml,
                             "<tool_call>\n<function=search>\n<parameter=query>\nbest pizza\nin town\n</parameter>\n"
                             "<parameter=limit>\n5\n</parameter>\n<parameter=filters>\n{\"open\": true}\n</parameter>\n"
                             "</function>\n</tool_call>");
  ASSERT_EQ(o.tool_calls.size(), 1u);
  EXPECT_EQ(o.tool_calls[0].name, "search");
  EXPECT_EQ(Args(o.tool_calls[0]), Json({{"query", "best pizza\nin town"}, {"limit", 5}, {"filters", {{"open", true}}}}));
}

TEST(ChatOutput, MistralBothForms) {
  const ChatOutput v3 = Parse(ChatSyntax::kMistral,
                              "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}, \"id\": \"abc123def\"}, "
                              "{\"name\": \"b\", \"arguments\": {}}]");
  ASSERT_EQ(v3.tool_calls.size(), 2u);
  EXPECT_EQ(v3.tool_calls[0].id, "abc123def");
  EXPECT_EQ(v3.tool_calls[1].name, "b");
  const ChatOutput small = Parse(ChatSyntax::kMistral,
                                 "[THINK]plan[/THINK]Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\", \"tags\": "
                                 "[\"a]\", \"}\"]}[TOOL_CALLS]get_time[ARGS]{}");
  EXPECT_EQ(small.reasoning.value_or("-"), "plan");
  EXPECT_EQ(small.content, "Sure.");
  ASSERT_EQ(small.tool_calls.size(), 2u);
  EXPECT_EQ(Args(small.tool_calls[0]), Json({{"city", "Paris"}, {"tags", {"a]", "}"}}}));
  EXPECT_EQ(small.tool_calls[1].name, "get_time");
}

TEST(ChatOutput, GemmaFourValues) {
  const ChatOutput o = Parse(ChatSyntax::kGemma4,
                             "<|channel>thought\nneed weather<channel|><|tool_call>call:get_weather{city:<|\"|>Paris, "
                             "France<|\"|>,days:3,metric:true,opts:{<|\"|>a<|\"|>:[1,2.5,<|\"|>x<|\"|>]}}<tool_call|>");
  EXPECT_EQ(o.reasoning.value_or("-"), "need weather");
  ASSERT_EQ(o.tool_calls.size(), 1u);
  EXPECT_EQ(o.tool_calls[0].name, "get_weather");
  EXPECT_EQ(Args(o.tool_calls[0]),
            Json({{"city", "Paris, France"}, {"days", 3}, {"metric", true}, {"opts", {{"a", {1, 2.5, "x"}}}}}));
}

TEST(ChatOutput, HarmonyChannels) {
  const ChatOutput o = Parse(ChatSyntax::kHarmony,
                             "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>"
                             "commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>");
  EXPECT_EQ(o.reasoning.value_or("-"), "Need the weather.");
  ASSERT_EQ(o.tool_calls.size(), 1u);
  EXPECT_EQ(o.tool_calls[0].name, "get_weather");
  const ChatOutput f = Parse(ChatSyntax::kHarmony, "<|channel|>final<|message|>It is sunny.<|return|>");
  EXPECT_EQ(f.content, "It is sunny.");
}

TEST(ChatOutput, MalformedCallsAreInvalidArgument) {
  struct Case {
    ChatSyntax syntax;
    const char* text;
    const char* message;
  };
  for (const Case& c : {Case{ChatSyntax::kHermes, "<tool_call>\n{\"name\": \"a\", \"argu", "never closed"},
                        Case{ChatSyntax::kHermes, "<tool_call>{\"arguments\": {}}</tool_call>", "string \"name\""},
                        Case{ChatSyntax::kHermes, "<tool_call>{\"name\": \"a\", \"arguments\": 3}</tool_call>", "not a JSON object"},
                        Case{ChatSyntax::kMistral, "[TOOL_CALLS]get[ARGS]{\"x\": ", "[ARGS] not followed"},
                        Case{ChatSyntax::kGemma4, "<|tool_call>call:f{a:<|\"|>open}<tool_call|>", "do not parse"},
                        Case{ChatSyntax::kQwenXml, "<tool_call><function=f><parameter=x>1</tool_call>", "without </parameter>"}}) {
    const absl::StatusOr<ChatOutput> o = ParseChatOutput(c.syntax, c.text);
    ASSERT_FALSE(o.ok()) << c.text;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(o.status().message().find(c.message), std::string::npos) << o.status();
  }
}

TEST(ChatOutput, JsonForm) {
  const ChatOutput o = Parse(ChatSyntax::kHermes, "Hi<tool_call>{\"name\": \"f\", \"arguments\": {\"k\": [1]}}</tool_call>");
  EXPECT_EQ(o.ToJson(),
            "{\"content\":\"Hi\",\"reasoning_content\":null,\"tool_calls\":[{\"name\":\"f\",\"arguments\":{\"k\":[1]}}]}");
}

// The calls that go in, as an assistant turn's OpenAI tool_calls.
const Json& Calls() {
  static const Json calls = Json::parse(R"([{"id": "call0abcd", "type": "function", "function": {"name": "get_weather",
      "arguments": {"city": "Paris", "days": 3, "units": {"temp": "C"}}}}])");
  return calls;
}

std::string Render(const std::string& source, const Json& messages, bool generation_prompt) {
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
      "units": {"type": "object"}}, "required": ["city"]}}}])");
  const Json options = {{"tools", tools}, {"add_generation_prompt", generation_prompt}, {"template", source}};
  absl::StatusOr<std::string> text = ChatTemplate::Apply(nullptr, messages.dump(), options.dump(), "<s>", "</s>");
  return text.ok() ? *text : std::string();
}

// Every template of the corpus that writes tool calls: its reply with one call — the rendering of
// [user, assistant with the call] past where it leaves the rendering of [user] with the generation
// prompt, cut at the turn's end marker (where generation stops) — parses back to that call.
// Templates whose renderings part more than a header's length before the prompt's end are counted,
// not checked.
TEST(ChatOutput, EveryTemplatesOwnToolCallParsesBack) {
  const std::string dir = testing::LlamaCppSourceDir() + "/models/templates";
  if (testing::LlamaCppSourceDir().empty() || !std::filesystem::is_directory(dir)) {
    GTEST_SKIP() << "no " << dir << ": run tools/make-llamacpp-references.sh (or set LLM42_LLAMACPP_CACHE) to fetch "
                 << "llama.cpp's source with its test templates";
  }
  const Json user = {{"role", "user"}, {"content", "What is the weather in Paris?"}};
  const Json assistant = {{"role", "assistant"}, {"content", ""}, {"tool_calls", Calls()}};
  std::map<std::string, ChatSyntax> checked;
  std::vector<std::string> not_continuations, differs;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".jinja") continue;
    std::ifstream f(entry.path());
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string source = ss.str();
    const ChatSyntax syntax = ChatSyntaxOf(source);
    if (syntax == ChatSyntax::kPlain) continue;
    const std::string name = entry.path().stem().string();
    const std::string prompt = Render(source, Json::array({user}), true);
    const std::string full = Render(source, Json::array({user, assistant}), false);
    // The reply: where the history rendering leaves the prompt's (templates that render the
    // generation prompt's reasoning opening, or a date, but not in history part at its end).
    size_t common = 0;
    while (common < prompt.size() && common < full.size() && prompt[common] == full[common]) ++common;
    if (prompt.empty() || full.empty() || common + 64 < prompt.size()) {
      not_continuations.push_back(name);
      continue;
    }
    if (common < prompt.size()) {  // parted inside a marker: from its start
      const size_t marker = full.rfind('<', common);
      if (marker != std::string::npos && common - marker < 16) common = marker;
    }
    std::string reply = full.substr(common);
    for (const char* end : {"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<turn|>", "<｜end▁of▁sentence｜>", "</s>",
                            "<|end_of_text|>", "<|end_of_role|>", "<|return|>", "<|end|>\n", "<sep>", "<|role_end|>",
                            "<|tool_response>"}) {
      if (syntax == ChatSyntax::kHarmony && std::string_view(end) == "<|end|>\n") continue;
      reply = reply.substr(0, reply.find(end));
    }
    const absl::StatusOr<ChatOutput> o = ParseChatOutput(syntax, reply);
    const bool same = o.ok() && o->tool_calls.size() == 1 && o->tool_calls[0].name == "get_weather" &&
                      Args(o->tool_calls[0]) == Calls()[0]["function"]["arguments"] && o->content.empty();
    if (same) {
      checked[name] = syntax;
    } else {
      differs.push_back(name + " (" + ChatSyntaxName(syntax) + "): reply '" + reply + "' parses to " +
                        (o.ok() ? o->ToJson() : o.status().ToString()));
    }
  }
  std::string names;
  for (const auto& [n, s] : checked) names += n + " (" + ChatSyntaxName(s) + ") ";
  std::cout << "parsed back: " << names << "\nnot continuations: ";
  for (const std::string& n : not_continuations) std::cout << n << " ";
  std::cout << "\nother syntaxes with the same markers:\n";
  for (const std::string& d : differs) std::cout << "  " << d << "\n";
  // The families the parser claims, each through its own template.
  for (const char* must : {"Qwen3.5-4B", "google-gemma-4-31B-it", "Mistral-Small-3.2-24B-Instruct-2506",
                           "Qwen-Qwen2.5-7B-Instruct", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
                           "meta-llama-Llama-3.1-8B-Instruct", "openai-gpt-oss-120b",
                           "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B"}) {
    EXPECT_TRUE(checked.count(must)) << must << " was not checked";
  }
}

}  // namespace
}  // namespace llm42
