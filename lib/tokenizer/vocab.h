#ifndef LLM42_TOKENIZER_VOCAB_H_
#define LLM42_TOKENIZER_VOCAB_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "lib/format/vocab_spec.h"

namespace llm42 {

class GgufFile;

// The token table of a model: texts, merge scores or ranks, types and the special ids.
class Vocab {
 public:
  static absl::StatusOr<Vocab> FromGguf(const GgufFile& file);
  // FORMAT_ERROR for inconsistent specs (sizes, ids out of range, malformed merges).
  static absl::StatusOr<Vocab> FromSpec(VocabSpec spec);

  int32_t size() const { return static_cast<int32_t>(texts_.size()); }
  const std::string& model() const { return model_; }
  const std::string& pre() const { return pre_; }
  const std::string& chat_template() const { return chat_template_; }
  const std::string& text(int32_t id) const { return texts_[static_cast<size_t>(id)]; }
  float score(int32_t id) const { return scores_[static_cast<size_t>(id)]; }
  TokenType type(int32_t id) const { return types_[static_cast<size_t>(id)]; }
  bool IsValid(int32_t id) const { return id >= 0 && id < size(); }
  // INVALID_ARGUMENT naming the first id outside the vocabulary (the one rule for token ids
  // a caller passes: prompts, detokenization).
  absl::Status CheckIds(std::span<const int32_t> ids) const;
  std::optional<int32_t> Find(std::string_view text) const;

  int32_t bos() const { return bos_; }  // -1 when the model has none
  int32_t eos() const { return eos_; }
  int32_t unk() const { return unk_; }
  // True for tokens that end a turn: EOS, end-of-turn (<|eot_id|>, <|im_end|>, ...).
  bool IsEndOfGeneration(int32_t id) const;
  // BPE merge rank of the pair (lower merges first), -1 when the pair never merges.
  int32_t MergeRank(std::string_view left, std::string_view right) const;
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  // Ids of tokens that can be written literally in text (control, user-defined, unknown),
  // longest text first.
  const std::vector<int32_t>& special_tokens() const { return special_tokens_; }
  // Token for a raw byte (<0xXX>, else the byte itself as a token, else unk).
  int32_t ByteToken(uint8_t byte) const;

 private:
  std::string model_, pre_, chat_template_;
  std::vector<std::string> texts_;
  std::vector<float> scores_;
  std::vector<TokenType> types_;
  absl::flat_hash_map<std::string, int32_t> index_;
  absl::flat_hash_map<std::string, int32_t> merge_rank_;  // key "left right"
  std::vector<int32_t> end_of_generation_;
  std::vector<int32_t> special_tokens_;
  int32_t bos_ = -1, eos_ = -1, unk_ = -1;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = true;
};

}  // namespace llm42

#endif  // LLM42_TOKENIZER_VOCAB_H_
