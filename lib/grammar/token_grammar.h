#ifndef LLM42_GRAMMAR_TOKEN_GRAMMAR_H_
#define LLM42_GRAMMAR_TOKEN_GRAMMAR_H_

// A grammar against a vocabulary: which tokens may come next in a state of its automaton.
//
// Each token is read once as symbols: the interval (GrammarAutomaton::CodePointIntervals: every
// code point of one steps every state alike) of each whole code point, and its raw bytes where
// it splits one. Tokens with the same symbols are one group, and the groups are sorted, each with
// the length of the prefix it shares with the one before (a trie laid out flat): a walk keeps
// the automaton's state per depth, so a shared prefix is stepped once, and skips every group
// under a prefix the grammar refused.
//
// A state's mask is the union of its stacks' masks, and a stack's is computed from its top
// kTableFrames positions alone, once per such top (a frame table, shared by every context it
// occurs in: every string field of a JSON schema runs the same string rule): the groups accepted
// within the top (or leaving it just as they end) need nothing more; a group that leaves it after
// k symbols is checked from there on only, from what lies beneath. Inside a JSON string, those
// are the few groups with a quote before their end.
//
// The automaton's states between code points are interned as the walks meet them, with their
// transitions remembered on first use per interval, so a walk is table lookups once the states
// around it are known. Masks are cached per state (a state recurs constantly: every character
// inside an unbounded string leaves the same one). All of it is bounded in memory and shared by
// every request of the grammar.
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
  // The tokens of a row of n_logits that may come after `s` (Allowed's, and the end tokens where
  // the grammar can end and `allow_end`) into *out, (n_logits + 63) / 64 words in
  // lib/numerics/logit_edit.h's layout. False when no token is left.
  bool AllowedInRow(const GrammarState& s, bool allow_end, int64_t n_logits, Mask* out) const;
  // Sets the logits of tokens the grammar does not allow after `s` to -infinity
  // (lib/numerics/logit_edit.h's ApplyAllowed of AllowedInRow). False when no token is left.
  bool MaskLogits(const GrammarState& s, bool allow_end, std::span<float> logits) const;
  // The state after token `id`; false when the grammar refuses its bytes (or it adds none).
  bool Advance(const GrammarState& s, int32_t id, GrammarState* out) const;

 private:
  TokenGrammar(const Grammar& grammar, std::vector<std::string> token_bytes, std::vector<int32_t> end_tokens);
  Mask Compute(const GrammarState& s) const;
  // A walk over every group from one place: the accepted groups' tokens into *accepted, and
  // (when `leaving`) each refused group with the depths where a stack had left the top beneath
  // the walk's start (for frame tables: the sentinel reached).
  struct FrameTable {
    Mask accepted;
    // (group, symbols before it leaves the top), sorted by the symbols after, each with the
    // length of the prefix those share with the entry before's: checked from beneath as a walk.
    std::vector<std::pair<uint32_t, uint32_t>> leaving;
    std::vector<uint32_t> leaving_shared;
  };
  static constexpr size_t kTableFrames = 3;
  static constexpr size_t kMaxTables = 512;  // 8 MB at a 128k vocabulary; then they start over
  void Walk(int32_t start, const Utf8Partial& utf8, Mask* accepted,
            std::vector<std::pair<uint32_t, uint32_t>>* leaving) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(dfa_mu_);
  // The table of a stack's top positions, after the bytes of a code point begun (`utf8`).
  std::shared_ptr<const FrameTable> Table(std::vector<int32_t> top, const Utf8Partial& utf8) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(dfa_mu_);

  // Interned states (without a partial code point) and their transitions per code-point interval
  // (kUnknown until stepped, kDead when refused).
  static constexpr int32_t kUnknown = -2, kDead = -1;
  static constexpr size_t kMaxStates = 32768;  // then they start over
  struct At {  // a walk's place: a state and the bytes of a code point begun after it
    int32_t id;
    Utf8Partial utf8;
  };
  int32_t Intern(GrammarState s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(dfa_mu_);
  // The place after `byte`; false when refused.
  bool Next(const At& at, uint8_t byte, At* out) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(dfa_mu_);
  // The place after a symbol (kRawByte | byte, or an interval).
  bool NextSymbol(const At& at, uint32_t symbol, At* out) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(dfa_mu_);
  static constexpr uint32_t kRawByte = 0x80000000u;
  std::vector<uint32_t> Symbols(const std::string& bytes) const;
  int32_t NextInInterval(int32_t id, size_t interval) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(dfa_mu_);
  size_t IntervalOf(uint32_t cp) const;

  GrammarAutomaton automaton_;
  std::vector<std::string> bytes_;
  std::vector<int32_t> end_tokens_;  // sorted
  // The groups of tokens with the same symbols, sorted by them: group g's symbols, the length of the
  // prefix they share with group g - 1's, and its token ids members_[first_[g]..first_[g + 1]).
  std::vector<std::vector<uint32_t>> symbols_;
  std::vector<uint32_t> shared_;
  std::vector<uint32_t> first_;
  std::vector<int32_t> members_;
  // skip_[d][g]: the first group after g that shares at most d symbols with the groups between
  // (where a walk refused at symbol d goes on; deeper refusals step group by group).
  static constexpr size_t kSkipLevels = 4;
  std::vector<uint32_t> skip_[kSkipLevels];
  size_t max_cached_;
  mutable Mutex mu_;
  mutable absl::flat_hash_map<std::vector<int32_t>, std::shared_ptr<const Mask>> cache_ ABSL_GUARDED_BY(mu_);
  mutable Mutex dfa_mu_;  // held through a mask's walk
  mutable absl::flat_hash_map<std::vector<int32_t>, int32_t> state_ids_ ABSL_GUARDED_BY(dfa_mu_);
  mutable std::vector<GrammarState> states_ ABSL_GUARDED_BY(dfa_mu_);
  mutable std::vector<uint8_t> left_ ABSL_GUARDED_BY(dfa_mu_);  // per state: a stack has left its top
  mutable absl::flat_hash_map<std::vector<int32_t>, std::shared_ptr<const FrameTable>> tables_ ABSL_GUARDED_BY(dfa_mu_);
  std::vector<uint32_t> intervals_;        // CodePointIntervals
  std::vector<uint16_t> bmp_interval_;     // IntervalOf for the code points below U+10000
  mutable std::vector<int32_t> next_ ABSL_GUARDED_BY(dfa_mu_);  // [state * intervals + interval]
};

}  // namespace llm42

#endif  // LLM42_GRAMMAR_TOKEN_GRAMMAR_H_
