#ifndef LLM42_NUMERICS_LOGIT_EDIT_H_
#define LLM42_NUMERICS_LOGIT_EDIT_H_

// What a request's controls do to one row of logits, written once for the host and a device
// (host_device.h): the edits of single tokens (logit bias, then llama.cpp's penalties) and the
// grammar's mask of allowed tokens. lib/sampling/logit_controls.h builds the edits from a
// request's controls and its history, lib/grammar/token_grammar.h the mask from a grammar state;
// the host applies them with these functions and a device (Backend::ControlRows) with the same,
// compiled without fused multiply-adds, so a controlled row has the same bits wherever it was
// controlled.
#include <cstdint>

#include "lib/numerics/host_device.h"

namespace llm42 {

// llama.cpp's penalties: a token that occurs c > 0 times in the window has its logit divided by
// `repetition` when positive and multiplied by it otherwise, then lowered by
// c * frequency + presence.
struct PenaltyRule {
  float repetition = 1.0f;
  float frequency = 0.0f;
  float presence = 0.0f;
};

// One token's edit: its bias added (when has_bias), then the penalties of `times` occurrences
// (none when 0). At most one edit per token in a row's list.
struct LogitEdit {
  int32_t token = 0;
  int32_t times = 0;
  float bias = 0.0f;
  int32_t has_bias = 0;  // not `bias != 0`: adding +0 turns a -0 logit into +0
};

LLM42_HD inline float EditedLogit(float logit, const LogitEdit& e, const PenaltyRule& p) {
  float l = logit;
  if (e.has_bias != 0) l += e.bias;
  if (e.times > 0) {
    if (l <= 0) {
      l *= p.repetition;
    } else {
      l /= p.repetition;
    }
    l -= static_cast<float>(e.times) * p.frequency + p.presence;
  }
  return l;
}

// The grammar's mask: bit (t % 64) of word t / 64 is set when token t may come; a logit whose
// bit is clear becomes -infinity.
LLM42_HD inline bool TokenAllowed(const uint64_t* allowed, int64_t token) {
  return ((allowed[token >> 6] >> (token & 63)) & 1) != 0;
}

LLM42_HD inline float NoLogit() { return -__builtin_huge_valf(); }

// The host's loops over a row (a device runs the functions above an element a thread).
inline void ApplyEdits(const LogitEdit* edits, int64_t n_edits, const PenaltyRule& rule, float* logits) {
  for (int64_t i = 0; i < n_edits; ++i) logits[edits[i].token] = EditedLogit(logits[edits[i].token], edits[i], rule);
}

// Sets the logits of a row of n whose bits are clear in `allowed` to NoLogit.
inline void ApplyAllowed(const uint64_t* allowed, int64_t n, float* logits) {
  for (int64_t w = 0; w * 64 < n; ++w) {
    const int64_t width = n - w * 64 < 64 ? n - w * 64 : 64;
    const uint64_t in_row = width == 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
    float* word = logits + w * 64;
    if (allowed[w] == 0) {  // most words of a grammar's row
      for (int64_t i = 0; i < width; ++i) word[i] = NoLogit();
      continue;
    }
    // The refused tokens of the word, lowest first.
    for (uint64_t refused = ~allowed[w] & in_row; refused != 0; refused &= refused - 1) {
      word[__builtin_ctzll(refused)] = NoLogit();
    }
  }
}

}  // namespace llm42

#endif  // LLM42_NUMERICS_LOGIT_EDIT_H_
