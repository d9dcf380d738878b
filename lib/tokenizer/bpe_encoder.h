#ifndef LLM42_TOKENIZER_BPE_ENCODER_H_
#define LLM42_TOKENIZER_BPE_ENCODER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lib/tokenizer/vocab.h"

namespace llm42 {

// GPT-2's reversible byte -> code point map: printable Latin-1 bytes map to themselves, the
// others (controls, space, ...) to U+0100 onwards, so every byte string is printable text.
// Returns the UTF-8 of the byte's code point.
const std::string& ByteToUnicode(uint8_t byte);
// The inverse over a token's text: each code point of the map back to its byte; code points
// outside the map are kept as their UTF-8.
std::string UnicodeToBytes(std::string_view text);

// BPE of one pre-tokenized piece (raw UTF-8 bytes): byte-level (GPT-2's), its bytes mapped
// through ByteToUnicode, or on the UTF-8 itself (Gemma 4's); start from single code points and
// repeatedly merge the adjacent pair with the lowest merge rank (leftmost on ties), then emit each
// symbol's token. With ignore_merges a piece that is itself a token is emitted whole (Llama 3). A
// symbol without a token goes out code point by code point (byte-level), or byte by byte as
// <0xXX> tokens (on UTF-8, as llama.cpp does; bytes without one are dropped).
struct BpeOptions {
  bool ignore_merges = false;
  bool byte_level = true;
};
void BpeEncode(const Vocab& vocab, std::string_view piece, BpeOptions options, std::vector<int32_t>* out);

}  // namespace llm42

#endif  // LLM42_TOKENIZER_BPE_ENCODER_H_
