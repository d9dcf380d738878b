#ifndef LLM42_NUMERICS_EXPERT_ROUTING_H_
#define LLM42_NUMERICS_EXPERT_ROUTING_H_

// How a mixture-of-experts router's logits become a token's experts and their weights, as one
// defined arithmetic (every backend computes it to the bit, for both schedules: a row's choice
// depends on that row's logits alone, never on the batch), following llama.cpp's build_moe_ffn.
#include <cstdint>

namespace llm42 {

struct ExpertRouting {
  enum class Gate : uint8_t {
    kSoftmax,        // probabilities: softmax over every expert's logit (Qwen3-MoE, Mixtral)
    kSigmoid,        // probabilities: each logit's sigmoid
    kSoftmaxChosen,  // experts chosen by logit; weights: softmax over the chosen logits (gpt-oss)
  };
  int64_t n_expert = 0;  // experts in the layer
  int64_t n_used = 0;    // chosen per token
  Gate gate = Gate::kSoftmax;
  bool normalize = false;  // the chosen weights divided by their sum (clamped below at 2^-14)
  float scale = 1;         // the weights then multiplied by it (1: not)
  bool operator==(const ExpertRouting&) const = default;
};

// One token's routing: ids[0..n_used) the chosen experts by decreasing probability (ties to the
// lower id) and weights[] theirs. The arithmetic: softmax's maximum, exponentials (PortableExpf)
// of each logit less it, their sum in double in expert order, each probability the exponential
// times the float of 1 / sum; the chosen weights' sum in float in slot order. Logits that are NaN
// rank below every number (so a damaged row still names n_used distinct experts).
void RouteToken(const ExpertRouting& r, const float* logits, int32_t* ids, float* weights);

}  // namespace llm42

#endif  // LLM42_NUMERICS_EXPERT_ROUTING_H_
