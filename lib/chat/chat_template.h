#ifndef LLM42_CHAT_CHAT_TEMPLATE_H_
#define LLM42_CHAT_CHAT_TEMPLATE_H_

#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace llm42 {

struct ChatMessage {
  std::string role;  // system, user or assistant
  std::string content;
};

// A model's chat format, recognised from its Jinja chat template and rendered by built-in code
// (no Jinja interpreter: the formats are few and their rendering must be exact and fast).
struct ChatTemplate {
  enum class Format {
    kLlama3,  // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
    kChatMl,  // <|im_start|>role\n...<|im_end|>\n (Qwen)
    kLlama2,  // <s>[INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] ... </s>
    kMistral, // <s>[INST] ... [/INST]...</s>
  };
  Format format = Format::kChatMl;
  // Llama 3.1/3.2: a system block with the knowledge cutoff and date always comes first.
  bool llama31_system_block = false;
  // System message used when the conversation has none (Qwen's templates have one).
  std::string default_system;

  // Recognises `jinja` (a tokenizer.chat_template). Without a template, the vocabulary's special
  // tokens decide (`has_im_start`: ChatML, `has_header_tokens`: Llama 3). UNSUPPORTED when
  // neither identifies a format llm42 renders.
  static absl::StatusOr<ChatTemplate> Detect(std::string_view jinja, bool has_im_start,
                                             bool has_header_tokens);

  // The conversation as the template renders it with add_generation_prompt (the assistant's
  // header appended), bos/eos as the template's bos_token/eos_token. INVALID_ARGUMENT for an
  // empty conversation or roles the format does not have.
  absl::StatusOr<std::string> Render(std::span<const ChatMessage> messages, std::string_view bos,
                                     std::string_view eos) const;
};

}  // namespace llm42

#endif  // LLM42_CHAT_CHAT_TEMPLATE_H_
