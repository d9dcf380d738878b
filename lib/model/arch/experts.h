#ifndef LLM42_MODEL_ARCH_EXPERTS_H_
#define LLM42_MODEL_ARCH_EXPERTS_H_

// The mixture-of-experts feed-forward block (Qwen3-MoE, Qwen3.5-MoE, Mixtral), beside blocks.h's
// dense one, as llama.cpp's build_moe_ffn computes it: a router picks n_used of n_expert expert
// FFNs per token (lib/numerics/expert_routing.h), each chosen expert's output weighted, the
// weighted outputs summed in the token's slot order; then, where the layer has one, a shared
// expert's output (a dense FFN every token takes) times the sigmoid of its gate added to that
// sum (Qwen3.5-MoE's, as llama.cpp's qwen35moe graph).
//
// The schedules: a step's (token, expert) pairs are grouped by expert and each expert's rows go
// through the backend's matrix products at once, so an expert's weights are read once per step
// (fast). A fixed row's bits still depend on that row alone: the fixed products are
// batch-invariant (a row's result is the same in a group of any size), the routing is a row's own
// arithmetic, and the sum's order is the row's slots', whatever the other rows chose.
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "lib/model/arch/architecture.h"
#include "lib/model/arch/tensor_reader.h"

namespace llm42 {

// The block's memory for a step of m rows (ModelRunner allocates it for models with experts):
// backend buffers for the router's logits [m][n_expert], the chosen weights [m][n_used], and per
// (token, expert) pair [m n_used] the experts' inputs [n_embd], gates and ups [n_ff_exp] and
// outputs [n_embd] (gate and up at least m n_ff_shexp wide for a shared expert); host memory for
// the step's plan.
struct ExpertWork {
  float *logits = nullptr, *weights = nullptr, *in = nullptr, *gate = nullptr, *up = nullptr, *out = nullptr;
  float *router_in = nullptr, *sum = nullptr;  // [m][n_embd] each, for blocks that route another input
  std::vector<int32_t> ids;     // [m][n_used]: each pair's expert
  std::vector<int32_t> order;   // the pairs (row * n_used + slot) grouped by expert, in row order within each
  std::vector<int32_t> source;  // order[i] / n_used: the row each grouped pair reads
  std::vector<int64_t> starts;  // expert x's pairs are order[starts[x], starts[x + 1])
  std::vector<int64_t> next;    // the counting sort's next free place per expert
  std::vector<Schedule> schedules;  // the grouped pairs' schedules (their rows')
};

// Layer l's router and experts (blk.N.ffn_gate_inp, ffn_gate_exps and ffn_up_exps or the fused
// ffn_gate_up_exps, ffn_down_exps; llama.cpp's names and shapes), in place of the dense FFN, and
// a shared expert where the file has one (ffn_gate_inp_shexp, a vector; ffn_gate_shexp,
// ffn_up_shexp, ffn_down_shexp); with `biases`, the router's and the experts' biases
// (ffn_gate_inp.bias, ffn_gate_exps.bias, ffn_up_exps.bias, ffn_down_exps.bias: gpt-oss's).
absl::Status LoadExpertTensors(TensorReader& r, const ModelConfig& c, int64_t l, bool biases, HostLayer& L);

// out = the experts' weighted sum (and the shared expert's gated output) for the rows of `in`
// ([m][n_embd]), routed by the router's logits for `router_in`'s rows (plus its bias), with `act`
// as the experts' gate activation (their gate and up products plus their biases); each expert's
// output plus its bias, times its ffn_down_exps.scale value, where the layer has them. out may be none of g.experts' buffers but router_in and sum.
absl::Status Experts(const LayerGraph& g, const BackendLayer& L, Activation act, const float* router_in,
                     const float* in, float* out);

// x += Experts(xn, xn) (xn being norm(x), which the caller has taken).
absl::Status ExpertsBlock(const LayerGraph& g, const BackendLayer& L, Activation act);

}  // namespace llm42

#endif  // LLM42_MODEL_ARCH_EXPERTS_H_
