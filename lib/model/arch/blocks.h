#ifndef LLM42_MODEL_ARCH_BLOCKS_H_
#define LLM42_MODEL_ARCH_BLOCKS_H_

// What decoder architectures share, written once: their layers' tensors and their two blocks.
#include <cstdint>

#include "absl/status/status.h"
#include "lib/model/arch/architecture.h"
#include "lib/model/arch/tensor_reader.h"
#include "lib/util/status.h"

namespace llm42 {

// Which of the optional tensors a layer has.
struct LayerParts {
  enum class Biases { kNone, kOptional, kRequired } biases = Biases::kOptional;  // blk.N.attn_{q,k,v}.bias
  bool qk_norms = false;    // blk.N.attn_{q,k}_norm.weight (per head)
  bool post_norms = false;  // blk.N.post_attention_norm.weight, blk.N.post_ffw_norm.weight
  // Fused tensors allowed: blk.N.attn_qkv.weight (q, k, v rows in turn) in place of the three,
  // blk.N.ffn_up.weight of 2 n_ff rows (gate, then up) in place of ffn_gate and ffn_up (Phi-3).
  bool fused = false;
};

// The layer's tensors by GGUF's names (blk.N.attn_norm, attn_q/k/v, attn_output, ffn_norm,
// ffn_gate/up/down, and `parts`).
absl::Status LoadLayerTensors(TensorReader& r, const ModelConfig& c, int64_t l, const LayerParts& parts, HostLayer& L);

// g.proj = post_norm(attention(norm(x))), the residual the caller adds to x: the layer's norm,
// the q/k/v projections (one op), their biases, the per-head q/k norms, RoPE and the K/V stored
// (one op), attention (g.heads), the output projection, its post norm; each optional part where
// the layer has the tensor.
absl::Status AttentionBlock(const LayerGraph& g, const BackendLayer& L);

enum class Activation { kSilu, kGeluTanh };
// x += post_norm(down(act(gate(xn)) * up(xn))), xn being norm(x), which the caller has taken.
absl::Status FeedForwardBlock(const LayerGraph& g, const BackendLayer& L, Activation act);

// The layer most architectures have: LoadLayerTensors with `parts`, AttentionBlock, then
// FeedForwardBlock with `act`. An architecture's file derives from it and reads its config.
class BlockArchitecture : public Architecture {
 public:
  BlockArchitecture(std::string_view name, LayerParts parts, Activation act) : name_(name), parts_(parts), act_(act) {}
  std::string_view name() const override { return name_; }
  absl::Status LoadLayer(TensorReader& r, const ModelConfig& c, int64_t l, HostLayer& L) const override {
    return LoadLayerTensors(r, c, l, parts_, L);
  }
  // The attention block, its residual added and the feed-forward norm taken in one op
  // (Backend::AddRmsNorm), then the feed-forward block.
  absl::Status Layer(const LayerGraph& g, const BackendLayer& L) const override {
    LLM42_RETURN_IF_ERROR(AttentionBlock(g, L));
    LLM42_RETURN_IF_ERROR(g.be.AddRmsNorm(g.x, g.proj, L.ffn_norm, g.m, g.c.n_embd, g.c.rms_eps, g.xn, g.sc));
    return FeedForwardBlock(g, L, act_);
  }

 private:
  std::string_view name_;
  LayerParts parts_;
  Activation act_;
};

}  // namespace llm42

#endif  // LLM42_MODEL_ARCH_BLOCKS_H_
