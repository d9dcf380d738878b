#ifndef LLM42_MODEL_ARCH_BLOCKS_H_
#define LLM42_MODEL_ARCH_BLOCKS_H_

// What decoder architectures share, written once: their layers' tensors and their two blocks.
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "lib/model/arch/architecture.h"
#include "lib/model/arch/experts.h"
#include "lib/model/arch/tensor_reader.h"
#include "lib/util/status.h"

namespace llm42 {

// The layer's tensors by GGUF's names (blk.N.attn_norm, attn_q/k/v, attn_output, ffn_norm,
// ffn_gate/up/down or the experts' (experts.h), and `parts`; attn_sinks.weight: FORMAT_ERROR for a
// value that is not finite).
absl::Status LoadLayerTensors(TensorReader& r, const ModelConfig& c, int64_t l, const LayerParts& parts, HostLayer& L);

// g.proj = post_norm(attention(norm(x))), the residual the caller adds to x: the layer's norm,
// the q/k/v projections (one op), their biases, the per-head q/k norms, RoPE and the K/V stored
// (one op), attention (g.heads), the output projection, its post norm; each optional part where
// the layer has the tensor.
absl::Status AttentionBlock(const LayerGraph& g, const BackendLayer& L);

// gate = act(gate) * up for m rows of n, by the backend's op for `act`.
absl::Status GatedActivation(Backend& be, Activation act, float* gate, const float* up, int64_t m, int64_t n,
                             Schedules s);

// out = down(act(gate(xn)) * up(xn)), xn being norm(x), which the caller has taken (g.gate and g.up
// its scratch).
absl::Status FeedForward(const LayerGraph& g, const BackendLayer& L, Activation act, float* out);
// x += post_norm(FeedForward(xn)).
absl::Status FeedForwardBlock(const LayerGraph& g, const BackendLayer& L, Activation act);

// Per-layer embeddings (Gemma 4 E2B, E4B; ModelConfig::n_embd_per_layer = P, llama.cpp's
// gemma4 graph). Before the layers, from the batch's tokens and their scaled embeddings x:
// per_layer = (table[token] * sqrt(P) + norm(x proj / sqrt(n_embd))) / sqrt(2), [rows][n_layer][P]
// (the norm per layer's P values). `scratch` holds as many values.
absl::Status PerLayerInputs(Backend& be, const ModelConfig& c, int64_t m, const PerLayerInputTensors<const float*>& t,
                            Schedules sc, const float* x, float* per_layer, float* scratch);
// In layer l, after its feed-forward block: x += post_norm(proj(gelu(gate(x)) * per_layer[l])).
absl::Status PerLayerInputBlock(const LayerGraph& g, const BackendLayer& L);

// A gated DeltaNet layer's tensors (Qwen3.5's linear attention: LayerTensors' ssm_*, by llama.cpp's
// names: blk.N.attn_qkv, attn_gate, ssm_beta, ssm_alpha, ssm_out, ssm_conv1d, ssm_dt.bias, ssm_a,
// ssm_norm), beside LoadLayerTensors' norms and FFN.
absl::Status LoadDeltaNetTensors(TensorReader& r, const ModelConfig& c, int64_t l, HostLayer& L);
// g.proj = the linear attention of norm(x), the residual the caller adds (llama.cpp's qwen35
// graph): the input projections, the causal convolution (Backend::CausalConv), the gated delta
// rule over the layer's recurrent state (Backend::DeltaRule), each head's output norm times
// silu(z), the output projection.
absl::Status DeltaNetBlock(const LayerGraph& g, const BackendLayer& L);

// The layer most architectures have: LoadLayerTensors with the data's parts, AttentionBlock (or
// DeltaNetBlock), then
// FeedForwardBlock with `act`. An architecture's file derives from it, declares its data and
// reads what the data cannot say.
class BlockArchitecture : public Architecture {
 public:
  BlockArchitecture(ArchitectureData data, Activation act) : data_(std::move(data)), act_(act) {}
  const ArchitectureData& data() const override { return data_; }
  absl::Status LoadLayer(TensorReader& r, const ModelConfig& c, int64_t l, HostLayer& L) const override {
    return LoadLayerTensors(r, c, l, data_.parts, L);
  }
  // The attention block (a DeltaNet block in a recurrent layer), its residual added and the
  // feed-forward norm taken in one op
  // (Backend::AddRmsNorm), then the feed-forward block (the experts' where the model has them,
  // experts.h), the per-layer input block where the
  // model has per-layer embeddings, and the layer's scale where it has one.
  absl::Status Layer(const LayerGraph& g, const BackendLayer& L) const override {
    LLM42_RETURN_IF_ERROR(g.c.recurrent(g.layer) ? DeltaNetBlock(g, L) : AttentionBlock(g, L));
    LLM42_RETURN_IF_ERROR(g.be.AddRmsNorm(g.x, g.proj, L.ffn_norm, g.m, g.c.n_embd, g.c.rms_eps, g.xn, g.sc));
    LLM42_RETURN_IF_ERROR(g.c.n_expert > 0 ? ExpertsBlock(g, L, act_) : FeedForwardBlock(g, L, act_));
    return LayerEnd(g, L);
  }

 protected:
  Activation act() const { return act_; }
  // What follows the feed-forward block: the per-layer input block where the model has per-layer
  // embeddings, and the layer's scale where it has one.
  static absl::Status LayerEnd(const LayerGraph& g, const BackendLayer& L) {
    if (g.per_layer != nullptr) LLM42_RETURN_IF_ERROR(PerLayerInputBlock(g, L));
    if (L.out_scale != 0) {
      LLM42_RETURN_IF_ERROR(g.be.Scale(g.x, static_cast<size_t>(g.m * g.c.n_embd), L.out_scale));
    }
    return absl::OkStatus();
  }

 private:
  ArchitectureData data_;
  Activation act_;
};

}  // namespace llm42

#endif  // LLM42_MODEL_ARCH_BLOCKS_H_
