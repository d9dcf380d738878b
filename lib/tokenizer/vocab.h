#ifndef LLM42_TOKENIZER_VOCAB_H_
#define LLM42_TOKENIZER_VOCAB_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace llm42 {

class GgufFile;

// Token types as GGUF's tokenizer.ggml.token_type numbers them.
enum class TokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// The token table of a model: texts, merge scores, types and the special ids, read from GGUF
// metadata (tokenizer.ggml.*).
class Vocab {
 public:
  static absl::StatusOr<Vocab> FromGguf(const GgufFile& file);

  int32_t size() const { return static_cast<int32_t>(texts_.size()); }
  const std::string& model() const { return model_; }
  const std::string& text(int32_t id) const { return texts_[static_cast<size_t>(id)]; }
  float score(int32_t id) const { return scores_[static_cast<size_t>(id)]; }
  TokenType type(int32_t id) const { return types_[static_cast<size_t>(id)]; }
  bool IsValid(int32_t id) const { return id >= 0 && id < size(); }
  std::optional<int32_t> Find(std::string_view text) const;

  int32_t bos() const { return bos_; }  // -1 when the model has none
  int32_t eos() const { return eos_; }
  int32_t unk() const { return unk_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  // Ids of tokens that can be written literally in text (control, user-defined, unknown),
  // longest text first.
  const std::vector<int32_t>& special_tokens() const { return special_tokens_; }
  // Token for a raw byte (<0xXX>, else the byte itself as a token, else unk).
  int32_t ByteToken(uint8_t byte) const;

 private:
  std::string model_;
  std::vector<std::string> texts_;
  std::vector<float> scores_;
  std::vector<TokenType> types_;
  absl::flat_hash_map<std::string, int32_t> index_;
  std::vector<int32_t> special_tokens_;
  int32_t bos_ = -1, eos_ = -1, unk_ = -1;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = true;
};

}  // namespace llm42

#endif  // LLM42_TOKENIZER_VOCAB_H_
