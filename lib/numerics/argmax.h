#ifndef LLM42_NUMERICS_ARGMAX_H_
#define LLM42_NUMERICS_ARGMAX_H_

#include <cstdint>
#include <span>

namespace llm42 {

// All a greedy draw needs of a row of logits: the lowest id of its largest logit, that logit,
// and the largest of the others (the draw's margin). The rule, which a backend computing it on
// its device must follow to the bit: scanning ids upward from 0, a logit replaces the best only
// if it is greater (so NaN never does, and the lowest id wins ties); `second` is the largest of
// the others that are not NaN (-inf if there are none). A NaN at id 0 stays the best.
struct ArgmaxSummary {
  int32_t id = 0;
  float best = 0;
  float second = 0;
};

// The summary of `logits` (at least one), in one pass. Measured over 128256 logits
// (2026-12-01): 0.07-0.09 ms; keeping the best value in a register instead of reading it back
// 0.10 ms alone and 0.43 ms with the runner-up; an argmax-only loop that read the best back
// 0.55 ms.
ArgmaxSummary SummarizeArgmax(std::span<const float> logits);

}  // namespace llm42

#endif  // LLM42_NUMERICS_ARGMAX_H_
