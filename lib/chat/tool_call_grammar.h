#ifndef LLM42_CHAT_TOOL_CALL_GRAMMAR_H_
#define LLM42_CHAT_TOOL_CALL_GRAMMAR_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "lib/chat/chat_output.h"

namespace llm42 {

// What a request lets the model do with its tools (OpenAI's tool_choice).
struct ToolChoice {
  enum class Kind { kNone, kAuto, kRequired, kNamed };
  Kind kind = Kind::kAuto;
  std::string name;       // kNamed's function
  bool parallel = true;   // several calls in a reply (OpenAI's parallel_tool_calls); false: one
};
// "none", "auto", "required", or a function's name; or OpenAI's object
// {"type": "function", "function": {"name": NAME}}. INVALID_ARGUMENT otherwise.
absl::StatusOr<ToolChoice> ParseToolChoice(std::string_view text);

// The GBNF grammar (lib/grammar/grammar.h) of a reply in `syntax` that calls the tools of
// `tools_json` (an array of OpenAI tool objects, {"type": "function", "function": {"name",
// "description", "parameters": JSON Schema}}, or of the inner function objects) as `choice` lets
// it, each call's arguments valid under its tool's schema (lib/grammar/json_schema.h):
// - kAuto: free text until the syntax's opening of a call (a text that never contains it), then
//   the calls, as llama.cpp's lazy tool-call grammars do; the reply may end anywhere in the text;
// - kRequired: one call or more, from the reply's start (whitespace allowed before);
// - kNamed: calls of that tool only, from the start;
// - kNone: "" (no constraint);
// and where `parallel` is false, one call only (the reply then ends with it).
// The calls are written as the syntax's template renders them, so that ParseChatOutput(syntax)
// reads them back: Hermes' <tool_call>{"name", "arguments"}</tool_call> (one or more), Mistral's
// [TOOL_CALLS][{"name", "arguments"}, ...], Llama 3's {"name", "parameters"}, harmony's (gpt-oss)
// " to=functions.NAME<|channel|>commentary json<|message|>ARGS" after its generation prompt (one,
// whose <|call|> ends the reply; under kAuto after any whole messages), Qwen3.5's and
// Qwen3-Coder's <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n...</function>
// (one or more; XmlParameterRules in the .cc says how values are written: plain strings raw
// without '<', other values JSON; ParseChatOutput reads them back given the tools). INVALID_ARGUMENT for
// tools that are not such an array, a tool without a name, two of one name, a name harmony cannot
// write, a schema the grammar
// engine refuses (naming the tool), or a named choice that is no tool; UNIMPLEMENTED for a syntax
// whose calls are not generated yet (named) or a template that writes none (kPlain).
absl::StatusOr<std::string> ToolCallGrammar(ChatSyntax syntax, std::string_view tools_json, const ToolChoice& choice);

}  // namespace llm42

#endif  // LLM42_CHAT_TOOL_CALL_GRAMMAR_H_
