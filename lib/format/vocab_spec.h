#ifndef LLM42_FORMAT_VOCAB_SPEC_H_
#define LLM42_FORMAT_VOCAB_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace llm42 {

// Token types as GGUF's tokenizer.ggml.token_type numbers them.
enum class TokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// A vocabulary as a model file describes it, before validation. GGUF's tokenizer.ggml.* keys
// and Hugging Face's tokenizer files both fill one.
struct VocabSpec {
  std::string model;  // "llama" (SentencePiece) or "gpt2" (byte-level BPE)
  std::string pre;    // the BPE pre-tokenizer's name (tokenizer.ggml.pre)
  std::vector<std::string> texts;
  std::vector<float> scores;       // empty: all 0
  std::vector<TokenType> types;    // empty: all normal
  std::vector<std::string> merges;  // BPE: "left right", highest priority first
  int32_t bos = -1, eos = -1, unk = -1, eot = -1;
  std::optional<bool> add_bos, add_eos, add_space_prefix;  // unset: the model type's default
  std::string chat_template;  // Jinja source, empty when the model has none
};

}  // namespace llm42

#endif  // LLM42_FORMAT_VOCAB_SPEC_H_
