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
  Vec bo;     // the attention output's bias (gpt-oss)
  Vec sinks;  // a logit per query head its softmax also counts (gpt-oss: AttentionShape::sinks)
  Vec q_norm, k_norm;                                      // per-head norms, head_dim each: Qwen3, Gemma 3
  Vec v_norm;  // values normalized per head without a weight (ones, head_dim): Gemma 4
  // A layer sharing an earlier layer's K/V (ModelConfig::kv_layer) has no wk, wv, bk, bv, k_norm,
  // v_norm.
  WeightMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
  // Per-layer embeddings (Gemma 4 E2B, E4B: blocks.h's PerLayerInputBlock): the gate from the
  // residual stream to the layer's input width, the projection back, its norm.
  WeightMatrix inp_gate, inp_proj;
  Vec inp_post_norm;
  float out_scale = 0;  // the layer's output multiplied by it (Gemma 4's layer_output_scale); 0: not
  // A gated DeltaNet layer's (Qwen3.5: blocks.h's DeltaNetBlock), in place of the attention's: the
  // input projections (to the convolution's channels, the output gate z, the rates beta and the
  // decays alpha), the output projection, the convolution's weights [channels][kernel], the decays'
  // bias and scale (one each per value head: ssm_dt.bias and ssm_a, the latter -exp(A_log)), the
  // output norm (head_dim).
  WeightMatrix ssm_in, ssm_z, ssm_beta, ssm_alpha, ssm_out;
  Vec ssm_conv, ssm_dt, ssm_a, ssm_norm;
  // A mixture-of-experts layer's (lib/model/arch/experts.h), in place of the dense FFN: the router
  // (n_expert rows), each expert's gate, up and down matrices (views of the file's 3-D tensors),
  // and a shared expert's with its gate (one row: the shared output multiplied by its sigmoid)
  // where the layer has one.
  WeightMatrix router;
  std::vector<WeightMatrix> exp_gate, exp_up, exp_down;
  WeightMatrix shexp_gate, shexp_up, shexp_down, shexp_router;
  // Each expert's output multiplied by its value (ffn_down_exps.scale; host memory on a backend too,
  // as out_scale), where the file has it.
  std::vector<float> exp_scale;
  // Biases (gpt-oss): the router's (n_expert), and each expert's on its gate and up products
  // ([n_expert][n_ff_exp] each) and on its down product ([n_expert][n_embd]).
  Vec router_bias, exp_gate_bias, exp_up_bias, exp_down_bias;
  // Gemma 4's experts beside its dense FFN: the router's input norm (its scale over sqrt(n_embd)),
  // the experts' input norm, and the dense and expert outputs' norms.
  Vec router_norm, ffn_pre_norm_2, ffn_post_norm_1, ffn_post_norm_2;
};

// The model-wide tensors of per-layer embeddings (ModelConfig::n_embd_per_layer): a table of
// n_layer * n_embd_per_layer values per token, the embeddings' projection to as many, and the
// norm of each layer's part of it.
template <typename Vec>
struct PerLayerInputTensors {
  WeightMatrix table, proj;
  Vec proj_norm;
};

using HostLayer = LayerTensors<std::vector<float>>;
using BackendLayer = LayerTensors<const float*>;

}  // namespace llm42

#endif  // LLM42_MODEL_LAYER_TENSORS_H_
