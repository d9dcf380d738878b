// Gemma 4 (dense: E2B, E4B, 31B), as llama.cpp's gemma4 graph computes it: Gemma 3's layer
// (norms before and after attention and the FFN, per-head q/k norms, a GELU-tanh gated FFN,
// embeddings scaled by sqrt(n_embd), NeoX RoPE) with
// - the sliding layers listed per layer (attention.sliding_window_pattern), narrower heads than
//   the global layers' (attention.key_length_swa) and their own RoPE base (rope.freq_base_swa);
//   the global layers turn a part of each head's pairs (rope_freqs.weight divides the others'
//   angles by 1e30: "proportional" RoPE);
// - scores unscaled (Gemma 4's attention scale is 1), values normalized per head without a weight,
//   attn_v optional (the 31B's global layers use the keys' projection as values);
// - per-layer key/value heads and FFN widths (arrays), the last attention.shared_kv_layers layers
//   reading the K/V of the last storing layer of their kind (ModelConfig::kv_layer);
// - per-layer embeddings (embedding_length_per_layer_input, E2B and E4B: blocks.h's
//   PerLayerInputs) and a scale on each layer's output (layer_output_scale);
// - logits soft-capped (final_logit_softcapping).
// Its norms hold their weights as they are (no 1 + weight). The mixture-of-experts 26B-A4B has
// experts (experts.h) beside every layer's dense FFN, each with its own norms (Gemma4::Layer).
#include <algorithm>

#include "lib/format/gguf_reader.h"
#include "lib/model/arch/blocks.h"
#include "lib/model/arch/gemma_common.h"
#include "lib/util/status.h"

namespace llm42 {
namespace {

ArchitectureData Data() {
  ArchitectureData d = GemmaData();
  d.name = "gemma4";
  d.parts = {.biases = LayerParts::Biases::kNone,
             .qk_norms = true,
             .post_norms = true,
             .v_norm = true,
             .optional_v = true,
             .layer_scale = true};
  d.made_rope_base = 1000000.0f;
  d.keys = {{"final_logit_softcapping", &ModelConfig::final_softcap, 0.0f, -1e-30f, 1e6f},
            {"rope.freq_base_swa", &ModelConfig::rope_local_base, 10000.0f, 1.0f, 1e12f}};
  d.hf = {};  // its Hugging Face layout is not read yet
  // Six layers: two sliding of 64-wide heads (2 KV heads, window 32), one global of 128-wide
  // heads (1 KV head, a quarter of its pairs turning), twice; the last three share the K/V of
  // layers 1 and 2 and have FFNs twice as wide (Gemma 4's double-wide MLP); per-layer embeddings
  // of 64; logits capped at 2 (a random tiny model's stay far below Gemma 4's 30: the cap acts);
  // q/k norm weights near 0.3, so that unscaled scores stay as soft as a trained model's.
  ModelPreset tiny{"tiny-gemma4", 256, 6, 4, 2, 512, 2048, "gemma4", false, 128, 32, {{"final_logit_softcapping", 2.0f}}};
  tiny.sliding = {true, true, false, true, true, false};
  tiny.head_dim_swa = 64;
  tiny.layer_head_kv = {2, 2, 1, 2, 2, 1};
  tiny.layer_ff = {512, 512, 512, 1024, 1024, 1024};
  tiny.n_kv_shared = 3;
  tiny.n_embd_per_layer = 64;
  tiny.rope_partial = 0.25;
  tiny.qk_norm_scale = 0.3f;
  // A benchmark's: llama-110m's width and depth in Gemma 4's shape, E2B's proportions (three
  // sliding layers of 128-wide heads to a global one of 256; the last four layers share K/V).
  ModelPreset bench{"gemma4-110m", 768, 12, 6, 2, 2048, 2048, "gemma4", false, 256, 512, {{"final_logit_softcapping", 30.0f}}};
  bench.sliding = {true, true, true, false, true, true, true, false, true, true, true, false};
  bench.head_dim_swa = 128;
  bench.layer_head_kv = {2, 2, 2, 1, 2, 2, 2, 1, 2, 2, 2, 1};
  bench.layer_ff = {2048, 2048, 2048, 2048, 2048, 2048, 2048, 2048, 4096, 4096, 4096, 4096};
  bench.n_kv_shared = 4;
  bench.n_embd_per_layer = 128;
  bench.rope_partial = 0.25;
  bench.qk_norm_scale = 0.3f;
  // The mixture of experts (26B-A4B): every layer's dense FFN with experts beside it.
  d.parts.dense_with_experts = true;
  d.experts = Experts::kOptional;
  d.routing = {.gate = ExpertRouting::Gate::kSoftmax, .normalize = true};
  // tiny-gemma4's layers with eight experts of 256, two per token, beside dense FFNs of 256.
  ModelPreset moe = tiny;
  moe.name = "tiny-gemma4moe";
  moe.layer_ff = {256, 256, 256, 256, 256, 256};
  moe.n_expert = 8;
  moe.n_expert_used = 2;
  moe.n_ff_exp = 256;
  d.presets = {tiny, bench, moe};
  return d;
}

class Gemma4 final : public BlockArchitecture {
 public:
  Gemma4() : BlockArchitecture(Data(), Activation::kGeluTanh) {}
  absl::Status ReadConfig(const GgufFile& f, ModelConfig& c) const override {
    const std::string a = c.architecture + ".";
    c.embed_scale = std::sqrt(static_cast<float>(c.n_embd));
    c.attn_scale = 1.0f;
    const std::string pattern = a + "attention.sliding_window_pattern";
    const GgufValue* v = f.Find(pattern);
    if (v == nullptr) return FormatError("missing key '", pattern, "'");
    if (v->type != GgufType::kArray || v->int_array.size() != static_cast<size_t>(c.n_layer)) {
      return FormatError("key '", pattern, "' holds ", v->array_size(), " values where the model has ", c.n_layer,
                         " layers (a flag per layer)");
    }
    c.layer_sliding.assign(v->int_array.begin(), v->int_array.end());
    for (uint8_t& s : c.layer_sliding) s = s != 0;
    if (const std::string key = a + "attention.shared_kv_layers"; f.Find(key) != nullptr) {
      LLM42_ASSIGN_OR_RETURN(c.n_kv_shared, f.GetInt(key));
      if (c.n_kv_shared < 0 || c.n_kv_shared > c.n_layer - 2) {
        return FormatError("key '", key, "' = ", c.n_kv_shared, " is out of range (0..", c.n_layer - 2,
                           ": at least 2 of the ", c.n_layer, " layers store keys and values)");
      }
    }
    if (const std::string key = a + "embedding_length_per_layer_input"; f.Find(key) != nullptr) {
      LLM42_ASSIGN_OR_RETURN(c.n_embd_per_layer, f.GetInt(key));
      if (c.n_embd_per_layer < 0 || c.n_embd_per_layer > c.n_embd) {
        return FormatError("key '", key, "' = ", c.n_embd_per_layer, " is out of range (0..", c.n_embd, ")");
      }
    }
    // Its global layers' proportional RoPE (llama.cpp requires it too).
    if (std::count(c.layer_sliding.begin(), c.layer_sliding.end(), 0) > 0 && f.FindTensor("rope_freqs.weight") == nullptr) {
      return FormatError("missing tensor 'rope_freqs.weight' (the global layers' RoPE divisors)");
    }
    return absl::OkStatus();
  }

  // A layer with experts also has their norms (llama.cpp's gemma4 graph): the router's input scale
  // (ffn_gate_inp.scale, taken over sqrt(n_embd) into one weight), the experts' input norm and the
  // dense and expert outputs' norms.
  absl::Status LoadLayer(TensorReader& r, const ModelConfig& c, int64_t l, HostLayer& L) const override {
    LLM42_RETURN_IF_ERROR(BlockArchitecture::LoadLayer(r, c, l, L));
    if (c.n_expert == 0) return absl::OkStatus();
    const std::string p = "blk." + std::to_string(l) + ".";
    LLM42_ASSIGN_OR_RETURN(L.router_norm, r.Vector(p + "ffn_gate_inp.scale", c.n_embd));
    const float root = 1.0f / std::sqrt(static_cast<float>(c.n_embd));
    for (float& w : L.router_norm) w *= root;
    LLM42_ASSIGN_OR_RETURN(L.ffn_pre_norm_2, r.Vector(p + "pre_ffw_norm_2.weight", c.n_embd));
    LLM42_ASSIGN_OR_RETURN(L.ffn_post_norm_1, r.Vector(p + "post_ffw_norm_1.weight", c.n_embd));
    LLM42_ASSIGN_OR_RETURN(L.ffn_post_norm_2, r.Vector(p + "post_ffw_norm_2.weight", c.n_embd));
    return absl::OkStatus();
  }

  // With experts: the dense FFN of ffn_norm(x), post_ffw_norm_1'd, plus the experts' output for
  // pre_ffw_norm_2(x), routed by the router's logits for rms_norm(x) times its scale,
  // post_ffw_norm_2'd; the sum post_ffw_norm'd and added to x.
  absl::Status Layer(const LayerGraph& g, const BackendLayer& L) const override {
    if (g.c.n_expert == 0) return BlockArchitecture::Layer(g, L);
    Backend& be = g.be;
    const ModelConfig& c = g.c;
    const int64_t m = g.m, e = c.n_embd;
    ExpertWork& w = *g.experts;
    LLM42_RETURN_IF_ERROR(AttentionBlock(g, L));
    LLM42_RETURN_IF_ERROR(be.AddRmsNorm(g.x, g.proj, L.ffn_norm, m, e, c.rms_eps, g.xn, g.sc));
    LLM42_RETURN_IF_ERROR(FeedForward(g, L, act(), g.proj));
    LLM42_RETURN_IF_ERROR(be.RmsNorm(g.proj, L.ffn_post_norm_1, m, e, c.rms_eps, g.proj, g.sc));
    LLM42_RETURN_IF_ERROR(be.RmsNorm(g.x, L.ffn_pre_norm_2, m, e, c.rms_eps, g.xn, g.sc));
    LLM42_RETURN_IF_ERROR(be.RmsNorm(g.x, L.router_norm, m, e, c.rms_eps, w.router_in, g.sc));
    LLM42_RETURN_IF_ERROR(Experts(g, L, act(), w.router_in, g.xn, w.sum));
    LLM42_RETURN_IF_ERROR(be.RmsNorm(w.sum, L.ffn_post_norm_2, m, e, c.rms_eps, w.sum, g.sc));
    LLM42_RETURN_IF_ERROR(be.Add(g.proj, w.sum, static_cast<size_t>(m * e)));
    LLM42_RETURN_IF_ERROR(be.RmsNorm(g.proj, L.ffn_post_norm, m, e, c.rms_eps, g.proj, g.sc));
    LLM42_RETURN_IF_ERROR(be.Add(g.x, g.proj, static_cast<size_t>(m * e)));
    return LayerEnd(g, L);
  }
};

}  // namespace

const Architecture& Gemma4Architecture() {
  static const Gemma4 arch;
  return arch;
}

}  // namespace llm42
