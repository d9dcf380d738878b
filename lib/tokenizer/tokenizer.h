#ifndef LLM42_TOKENIZER_TOKENIZER_H_
#define LLM42_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/tokenizer/bpe_encoder.h"
#include "lib/tokenizer/pretokenizer.h"
#include "lib/tokenizer/vocab.h"

namespace llm42 {

class GgufFile;

// Text <-> token ids for a model: SentencePiece ("llama"), byte-level BPE ("gpt2" with one
// of the pre-tokenizers of pretokenizer.h) or Gemma 4's BPE on UTF-8 ("gemma4"). Special tokens (control, user-defined) written
// literally in the text are matched first, longest first; the text between them goes to the
// model's subword encoder.
class Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& file);
  // UNSUPPORTED for tokenizer models and pre-tokenizers llm42 does not implement, naming them.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromVocab(Vocab vocab);

  const Vocab& vocab() const { return vocab_; }

  // `text` must be valid UTF-8 (the C API checks). add_special adds BOS/EOS as the model asks;
  // parse_special lets control tokens be written in the text (user-defined ones always are).
  std::vector<int32_t> Encode(std::string_view text, bool add_special, bool parse_special) const;

  // Bytes a token contributes to output text: control and unused tokens none, byte tokens
  // their byte, the unknown token U+2585, normal tokens their text with U+2581 as a space
  // (SentencePiece) or mapped back to bytes (byte-level BPE).
  std::string TokenBytes(int32_t id) const;

  // Concatenated TokenBytes as valid UTF-8. Like llama.cpp's detokenize, the space the encoder
  // prefixed is dropped from the first token when the model adds one.
  std::string Decode(std::span<const int32_t> ids) const;

 private:
  explicit Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}
  void EncodeRaw(std::string_view text, bool prefix_space, std::vector<int32_t>* out) const;

  Vocab vocab_;
  bool bpe_ = false;
  PreTokenizer pre_ = PreTokenizer::kGpt2;
  BpeOptions bpe_options_;
};

}  // namespace llm42

#endif  // LLM42_TOKENIZER_TOKENIZER_H_
