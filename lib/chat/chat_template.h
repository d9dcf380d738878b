#ifndef LLM42_CHAT_CHAT_TEMPLATE_H_
#define LLM42_CHAT_CHAT_TEMPLATE_H_

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "lib/chat/chat_output.h"
#include "lib/chat/jinja_template.h"

namespace llm42 {

struct ChatMessage {
  std::string role;  // system, user or assistant
  std::string content;
};


// A model's chat format: its own Jinja chat template, rendered as transformers' apply_chat_template
// renders it (jinja_template.h); or, for a model without one, a format recognised from its
// vocabulary's special tokens and rendered by built-in code (checked against the reference
// templates byte for byte: tests/chat_template_test.cc).
struct ChatTemplate {
  enum class Format {
    kLlama3,  // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
    kChatMl,  // <|im_start|>role\n...<|im_end|>\n (Qwen)
    kLlama2,  // <s>[INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] ... </s>
    kMistral, // <s>[INST] ... [/INST]...</s>
    kGemma,   // <start_of_turn>user|model\n...<end_of_turn>\n (Gemma 2 and 3)
    kPhi3,    // <|user|>\n...<|end|>\n (Phi-3, 3.5, 4-mini)
  };
  Format format = Format::kChatMl;
  // Llama 3.1/3.2: a system block with the knowledge cutoff and date always comes first.
  bool llama31_system_block = false;
  // System message used when the conversation has none (Qwen2.5's templates have one).
  std::string default_system;
  // ChatML with Qwen3's reasoning: an assistant turn's "<think>...</think>" stripped from history,
  // and the generation prompt closing an empty think block when thinking is off.
  bool qwen3_thinking = false;
  // Gemma: a system message goes before the first user turn's text (Gemma 3); else a system
  // message is refused, as Gemma 2's template raises.
  bool gemma_system_prefix = false;

  // How the model writes tool calls and reasoning (chat_output.h): recognised from its template,
  // else its built-in format's (Llama 3's JSON calls; ChatML's Hermes calls).
  ChatSyntax syntax = ChatSyntax::kPlain;
  // The model's template, parsed; null where a built-in format renders. Rendered within `limits`.
  std::shared_ptr<const jinja::Template> jinja;
  jinja::Limits limits;

  // A model's chat format: its template `source` (tokenizer.chat_template) when it parses, else
  // Detect's built-in formats; a template that neither parses nor is recognised gives its parse
  // error (INVALID_ARGUMENT with line and column).
  static absl::StatusOr<ChatTemplate> FromModel(std::string_view source, bool has_im_start, bool has_header_tokens);

  // Recognises `jinja` (a tokenizer.chat_template). Without a template, the vocabulary's special
  // tokens decide (`has_im_start`: ChatML, `has_header_tokens`: Llama 3). UNSUPPORTED when
  // neither identifies a format llm42 renders.
  static absl::StatusOr<ChatTemplate> Detect(std::string_view jinja, bool has_im_start,
                                             bool has_header_tokens);

  // The conversation as the template renders it with add_generation_prompt (the assistant's
  // header appended), bos/eos as the template's bos_token/eos_token, tools and documents None.
  // INVALID_ARGUMENT for an empty conversation, roles the format does not have, or what the
  // template raises; RESOURCE_EXHAUSTED past the renderer's limits.
  // `thinking`: false renders the template's enable_thinking=false (Qwen3: the reply starts after
  // an empty think block); formats without reasoning ignore it.
  absl::StatusOr<std::string> Render(std::span<const ChatMessage> messages, std::string_view bos,
                                     std::string_view eos, bool thinking = true) const;

  // transformers' apply_chat_template over JSON: `messages_json`, an array of OpenAI chat messages
  // (role system, user, assistant or tool; content a string, an array of parts or null; assistant
  // tool_calls; tool tool_call_id), given to the template as they are; `options_json` (empty:
  // none) an object of "tools" (an array, else the template sees None), "add_generation_prompt"
  // (default true), "template" (Jinja source used instead of the model's) and "kwargs" (more
  // template variables, which may override bos_token and eos_token). INVALID_ARGUMENT for
  // malformed JSON (with its byte offset), messages or options, a template that does not parse or
  // what it raises; FAILED_PRECONDITION when the model has no template of its own and the options
  // give none (a built-in format renders only plain role and content strings without tools).
  // `model`: the model's chat format, or null where it has none.
  static absl::StatusOr<std::string> Apply(const ChatTemplate* model, std::string_view messages_json,
                                           std::string_view options_json, std::string_view bos, std::string_view eos);
};

}  // namespace llm42

#endif  // LLM42_CHAT_CHAT_TEMPLATE_H_
