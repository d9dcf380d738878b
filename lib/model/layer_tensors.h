#ifndef LLM42_MODEL_LAYER_TENSORS_H_
#define LLM42_MODEL_LAYER_TENSORS_H_

#include <vector>

#include "lib/backend/backend.h"

namespace llm42 {

// One decoder layer's tensors, every architecture's (those a model lacks empty): Vec is
// std::vector<float> on the host (ModelWeights, as the file holds them) and const float* on a
// backend (ModelRunner, uploaded; nullptr for absent ones). Matrices are WeightMatrix either way
// (a fused tensor's parts are views of its rows: Phi-3's attn_qkv and ffn_up).
template <typename Vec>
struct LayerTensors {
  Vec attn_norm, attn_post_norm, ffn_norm, ffn_post_norm;  // post norms: Gemma 2 and 3
  Vec bq, bk, bv;                                          // attention biases: Qwen2
  Vec q_norm, k_norm;                                      // per-head norms, head_dim each: Qwen3, Gemma 3
  WeightMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
};

using HostLayer = LayerTensors<std::vector<float>>;
using BackendLayer = LayerTensors<const float*>;

}  // namespace llm42

#endif  // LLM42_MODEL_LAYER_TENSORS_H_
