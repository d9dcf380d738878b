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

  // Recognises `jinja` (a tokenizer.chat_template). Without a template, the vocabulary's special
  // tokens decide (`has_im_start`: ChatML, `has_header_tokens`: Llama 3). UNSUPPORTED when
  // neither identifies a format llm42 renders.
  static absl::StatusOr<ChatTemplate> Detect(std::string_view jinja, bool has_im_start,
                                             bool has_header_tokens);

  // The conversation as the template renders it with add_generation_prompt (the assistant's
  // header appended), bos/eos as the template's bos_token/eos_token. INVALID_ARGUMENT for an
  // empty conversation or roles the format does not have.
  // `thinking`: false renders the template's enable_thinking=false (Qwen3: the reply starts after
  // an empty think block); formats without reasoning ignore it.
  absl::StatusOr<std::string> Render(std::span<const ChatMessage> messages, std::string_view bos,
                                     std::string_view eos, bool thinking = true) const;
};

}  // namespace llm42

#endif  // LLM42_CHAT_CHAT_TEMPLATE_H_
