#ifndef LLM42_SAMPLING_LOGIT_CONTROLS_H_
#define LLM42_SAMPLING_LOGIT_CONTROLS_H_

// Changes a request makes to its logits before they are sampled: logit bias, then llama.cpp's
// penalties. The same pure function of the logits and the tokens before the position on every
// path (a deterministic request's candidates and its replay), so both see the same values.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "lib/numerics/logit_edit.h"

namespace llm42 {

struct LogitControls {
  // (token, bias) sorted by token, one entry per token: the bias is added to the token's logit
  // (-infinity bans it).
  std::vector<std::pair<int32_t, float>> bias;
  // llama.cpp's penalties over the last `penalty_last_n` tokens of the sequence, prompt included
  // (0: the whole sequence): a token that occurs there c > 0 times has its logit divided by
  // repetition_penalty when positive and multiplied by it otherwise, then lowered by
  // c * frequency_penalty + presence_penalty.
  float repetition_penalty = 1.0f;
  int32_t penalty_last_n = 64;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;

  static constexpr float kMaxPenalty = 100.0f;  // |frequency|, |presence|, and repetition's upper end
  // |bias| of a finite bias: with the penalties' bounds, a finite logit stays finite through every
  // edit, so only -infinity biases (and a grammar) can leave a row with nothing to draw
  // (lib/engine/row_controls.h), whatever the logits.
  static constexpr float kMaxBias = 1e30f;

  // Adds or replaces the bias of `token`.
  void SetBias(int32_t token, float value);
  bool penalizes() const { return repetition_penalty != 1.0f || frequency_penalty != 0.0f || presence_penalty != 0.0f; }
  bool active() const { return !bias.empty() || penalizes(); }
  PenaltyRule penalty_rule() const { return {repetition_penalty, frequency_penalty, presence_penalty}; }
  // OUT_OF_RANGE naming the first value outside its range: a NaN or +infinite bias, a finite one
  // of size above kMaxBias, a
  // repetition penalty outside (0, kMaxPenalty], other penalties outside [-kMaxPenalty,
  // kMaxPenalty], a negative last_n. (Token ids against the vocabulary: the session's check.)
  absl::Status Validate() const;
};

// Applies `c` to the logits of the position after `history` (the sequence's tokens before it):
// lib/numerics/logit_edit.h's ApplyEdits of LogitEditsOf.
void ApplyLogitControls(const LogitControls& c, std::span<const int32_t> history, std::span<float> logits);

// What `c` changes in a row of n_vocab logits after `history`: one edit per token it touches,
// sorted by token (tokens outside the vocabulary left out), into *edits (cleared first).
void LogitEditsOf(const LogitControls& c, std::span<const int32_t> history, int64_t n_vocab,
                  std::vector<LogitEdit>* edits);

}  // namespace llm42

#endif  // LLM42_SAMPLING_LOGIT_CONTROLS_H_
