#ifndef LLM42_ENGINE_NGRAM_DRAFT_H_
#define LLM42_ENGINE_NGRAM_DRAFT_H_

#include <cstdint>
#include <span>
#include <vector>

namespace llm42 {

// Prompt-lookup drafting (a draft source without a second model): the tokens that followed the
// latest earlier occurrence of the sequence's last n tokens, n from kMaxNgram down to kMinNgram
// (the longest match wins, then the most recent), at most max_draft of them; none where the
// suffix occurs nowhere before. What a model is asked to repeat (a document it edits, code it
// rewrites, a conversation it quotes, its own loops) it drafts well; a match of one token drafts
// least well, and the window a rejected draft leaves (DvrController) keeps what it wastes small.
// A pure function of the tokens, so a deterministic request drafts alike in every run (which no
// bit of its output depends on: the fixed replay decides every token).
inline constexpr int kMaxNgram = 4, kMinNgram = 1;
std::vector<int32_t> NgramDraft(std::span<const int32_t> tokens, int64_t max_draft);

}  // namespace llm42

#endif  // LLM42_ENGINE_NGRAM_DRAFT_H_
