#ifndef LLM42_TOKENIZER_SPM_ENCODER_H_
#define LLM42_TOKENIZER_SPM_ENCODER_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "lib/tokenizer/vocab.h"

namespace llm42 {

// SentencePiece-style BPE over token scores, as llama.cpp's SPM tokenizer does it: start from
// UTF-8 characters, repeatedly merge the adjacent pair whose concatenation is the
// highest-scoring token (leftmost on ties), then emit byte tokens for characters the vocabulary
// lacks. `text` must already have spaces escaped to U+2581.
void SpmEncode(const Vocab& vocab, std::string_view text, std::vector<int32_t>* out);

}  // namespace llm42

#endif  // LLM42_TOKENIZER_SPM_ENCODER_H_
