#ifndef LLM42_GRAMMAR_TOKEN_GRAMMAR_H_
#define LLM42_GRAMMAR_TOKEN_GRAMMAR_H_

// A grammar against a vocabulary: which tokens may come next in a state of its automaton.
//
// The tokens' bytes are sorted once, each with the length of the prefix it shares with the one
// before (a trie laid out flat): a mask walks them in order, keeps the automaton's state per byte
// depth, so a shared prefix is stepped once, and skips every token under a prefix the grammar
// refused. Masks are cached per state (a state recurs constantly: every character inside a JSON
// string leaves the same one), bounded in memory, shared by every request of the grammar.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "lib/util/mutex.h"
#include "lib/grammar/grammar.h"
#include "lib/grammar/grammar_matcher.h"

namespace llm42 {

class TokenGrammar {
 public:
  // A bit per token id: the token's bytes continue the input within the grammar.
  using Mask = std::vector<uint64_t>;

  // `token_bytes[id]`: what token `id` adds to the output (empty for tokens that add nothing:
  // those are never allowed, except `end_tokens` where the grammar can end). INVALID_ARGUMENT
  // when no token of the vocabulary can begin a sentence of the grammar (and "" is none).
  static absl::StatusOr<std::shared_ptr<const TokenGrammar>> Create(const Grammar& grammar,
                                                                    std::vector<std::string> token_bytes,
                                                                    std::vector<int32_t> end_tokens);

  const GrammarAutomaton& automaton() const { return automaton_; }
  int32_t vocab_size() const { return static_cast<int32_t>(bytes_.size()); }

  // The tokens whose bytes the grammar allows after `s` (end tokens not included). Thread-safe.
  std::shared_ptr<const Mask> Allowed(const GrammarState& s) const;
  // Sets the logits of tokens the grammar does not allow after `s` to -infinity; the end tokens
  // stay where the grammar can end and `allow_end`. False when no token is left.
  bool MaskLogits(const GrammarState& s, bool allow_end, std::span<float> logits) const;
  // The state after token `id`; false when the grammar refuses its bytes (or it adds none).
  bool Advance(const GrammarState& s, int32_t id, GrammarState* out) const;
  bool IsEndToken(int32_t id) const;

 private:
  TokenGrammar(const Grammar& grammar, std::vector<std::string> token_bytes, std::vector<int32_t> end_tokens);
  Mask Compute(const GrammarState& s) const;

  GrammarAutomaton automaton_;
  std::vector<std::string> bytes_;
  std::vector<int32_t> end_tokens_;  // sorted
  std::vector<int32_t> order_;       // ids with bytes, by their bytes
  std::vector<uint32_t> shared_;     // shared_[i]: common prefix of order_[i - 1]'s and order_[i]'s bytes
  size_t max_cached_;
  mutable Mutex mu_;
  mutable absl::flat_hash_map<std::vector<int32_t>, std::shared_ptr<const Mask>> cache_ ABSL_GUARDED_BY(mu_);
};

}  // namespace llm42

#endif  // LLM42_GRAMMAR_TOKEN_GRAMMAR_H_
