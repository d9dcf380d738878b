#ifndef LLM42_TOKENIZER_PRETOKENIZER_H_
#define LLM42_TOKENIZER_PRETOKENIZER_H_

#include <optional>
#include <string_view>
#include <vector>

namespace llm42 {

// The regular expressions byte-level BPE models split text with before merging, as named by
// GGUF's tokenizer.ggml.pre. Each is implemented as a hand-written matcher with the regex's
// leftmost-alternative semantics (the approach llama.cpp takes; no regex engine needed), over
// Unicode general categories from utf8proc.
enum class PreTokenizer {
  // GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //          ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kLlama3,
  // Qwen 2: as Llama 3 but digits one at a time (\p{N}).
  kQwen2,
  // Qwen 3.5: as Qwen 2 with combining marks joining letters ([\p{L}\p{M}]+, and not in
  // [^\s\p{L}\p{M}\p{N}]).
  kQwen35,
  // Gemma 4 (spaces already U+2581): [^\n]+|[\n]+ — runs of newlines and of anything else.
  kNewlineRuns,
  // o200k (GGUF's "gpt-4o": GPT-4o, gpt-oss): words split at capitals, contractions as their
  // suffixes, digits in threes, punctuation runs taking the newlines and slashes after them
  // (pretokenizer.cc gives the expression).
  kO200k,
};

// The pre-tokenizer GGUF calls `name`; nullopt for ones llm42 does not implement.
std::optional<PreTokenizer> PreTokenizerFromName(std::string_view name);

// Splits valid UTF-8 `text` into the pieces the regex matches, in order; their concatenation is
// `text`.
std::vector<std::string_view> PreTokenize(PreTokenizer kind, std::string_view text);

}  // namespace llm42

#endif  // LLM42_TOKENIZER_PRETOKENIZER_H_
