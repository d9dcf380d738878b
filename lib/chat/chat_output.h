#ifndef LLM42_CHAT_CHAT_OUTPUT_H_
#define LLM42_CHAT_CHAT_OUTPUT_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace llm42 {

// How a chat template's models write tool calls (and reasoning) in their replies, each as the
// template's own rendering of an assistant turn's tool_calls writes them.
enum class ChatSyntax {
  kPlain,      // no tool calls; "<think>...</think>" reasoning where the reply has it
  kHermes,     // <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> (Hermes, Qwen 2.5 / 3, Granite)
  kQwenXml,    // <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>...</function>\n</tool_call>
               // (Qwen3.5, Qwen3-Coder)
  kMistral,    // [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] (Nemo) or
               // [TOOL_CALLS]NAME[ARGS]{...} (Small 3.2, Devstral, Ministral 3)
  kLlama3,     // the reply a JSON object {"name": ..., "parameters": {...}} (Llama 3.1 - 3.3)
  kGemma4,     // <|tool_call>call:NAME{key:value,...}<tool_call|>, strings in <|"|>; reasoning in
               // <|channel>thought\n...<channel|>
  kDeepSeekR1, // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>...
               // (R1; V3.1 on: NAME<｜tool▁sep｜>{...})
  kHarmony,    // gpt-oss: <|channel|>analysis / final / commentary to=functions.NAME ... <|message|>...
  kGlm,        // <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>...</tool_call> (GLM 4.5 - 4.7)
  // (kGlm stays last: fuzz/chat_template_fuzzer.cc runs every syntax up to it.)
};

// The syntax a chat template writes, recognised from the markers its source renders tool calls
// with; kPlain where none.
ChatSyntax ChatSyntaxOf(std::string_view template_source);
const char* ChatSyntaxName(ChatSyntax syntax);

struct ParsedToolCall {
  std::string name;
  std::string arguments_json;  // a JSON object
  std::string id;              // where the syntax carries one (Mistral's), else empty
};

// A generated assistant text split by its syntax: the text meant for the user, the reasoning
// (nullopt where the reply has none) and the tool calls, in order.
struct ChatOutput {
  std::string content;
  std::optional<std::string> reasoning;
  std::vector<ParsedToolCall> tool_calls;
  // {"content": ..., "reasoning_content": ... | null, "tool_calls": [{"name", "arguments", "id"?}]}
  std::string ToJson() const;
};

// Parses `text` (what a model generated after the generation prompt) by `syntax`.
// INVALID_ARGUMENT naming the call and what is wrong for a tool call whose arguments do not
// parse (a truncated reply: a call opened but not closed is one); plain text never fails.
// `tools_json` (the request's OpenAI tool objects; empty: none): the syntaxes that write values as
// text (Qwen3.5's XML parameters, GLM's) keep a value as a string where its tool's schema makes
// the parameter a string (type "string", a string enum or const: so "42" stays "42"); without it such a value that reads as JSON is
// taken as JSON, as the template wrote numbers, objects and arrays.
absl::StatusOr<ChatOutput> ParseChatOutput(ChatSyntax syntax, std::string_view text, std::string_view tools_json = {});

}  // namespace llm42

#endif  // LLM42_CHAT_CHAT_OUTPUT_H_
