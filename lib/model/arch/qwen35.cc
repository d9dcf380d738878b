// Qwen3.5 (dense: 0.8B to 27B), as llama.cpp's qwen35 graph computes it: three of every four
// layers (full_attention_interval, or attention.recurrent_layers) are gated DeltaNet layers
// (blocks.h's DeltaNetBlock: a causal convolution and the delta rule over a recurrent state the
// backend keeps per sequence), the others attention layers whose queries' projection carries a
// sigmoid output gate per head, per-head q/k norms and a part of each head rotated (NeoX pairs:
// M-RoPE's sections, which for text turn every pair by the token's position). The FFN's norm is
// blk.N.post_attention_norm. The multi-token-prediction layers after the trunk (nextn) load
// without being read (drafting with them is speculation's). Qwen3.5-MoE (qwen35moe) is the same
// with a mixture of experts and a shared expert in every layer's FFN (experts.h).
#include "lib/format/gguf_reader.h"
#include "lib/model/arch/blocks.h"
#include "lib/util/status.h"

namespace llm42 {
namespace {

// Qwen3.5's layout on `p`'s shape: rotated dims and their M-RoPE sections, three DeltaNet layers to
// each attention layer, 4-wide convolutions, DeltaNet heads of head_dim.
ModelPreset Hybrid(ModelPreset p, int64_t rope_dims, std::vector<int32_t> sections, int64_t key_heads,
                   int64_t value_heads, int64_t head_dim) {
  p.rope_dims = rope_dims;
  p.rope_sections = std::move(sections);
  p.full_attention_interval = 4;
  p.ssm_conv_kernel = 4;
  p.ssm_key_heads = key_heads;
  p.ssm_value_heads = value_heads;
  p.ssm_head_dim = head_dim;
  return p;
}

// Qwen3.5's data; with `experts`, Qwen3.5-MoE's (qwen35moe: every layer's FFN a mixture of
// experts with a shared expert, experts.h, softmax routing with the chosen weights normalized).
ArchitectureData Data(bool experts) {
  ArchitectureData d;
  d.name = experts ? "qwen35moe" : "qwen35";
  d.rope_neox = true;
  d.parts = {.biases = LayerParts::Biases::kNone, .qk_norms = true, .output_gate = true,
             .ffn_norm = "post_attention_norm"};
  d.made_rope_base = 10000000.0f;
  // Four layers: DeltaNet, DeltaNet, DeltaNet, attention (Qwen3.5's pattern once). DeltaNet layers
  // of 4 key heads and 8 value heads of 32 (a 4-wide convolution over 512 channels; value head h
  // reads key head h % 4), attention heads of 64 of which a quarter turns (as Qwen3.5's 64 of 256).
  const ModelPreset tiny = Hybrid({"tiny-qwen35", 256, 4, 4, 2, 512, 2048, "qwen35", false, 64}, 16, {3, 3, 2, 0}, 4, 8, 32);
  // A benchmark's: llama-110m's width and depth in Qwen3.5's shape (0.8B's proportions: three
  // DeltaNet layers to an attention one, 128-wide DeltaNet heads as many for keys as values,
  // attention heads of which a quarter turns).
  const ModelPreset bench =
      Hybrid({"qwen35-110m", 768, 12, 6, 2, 2048, 2048, "qwen35", false, 128}, 32, {6, 5, 5, 0}, 6, 6, 128);
  d.presets = {tiny, bench};
  if (experts) {
    d.experts = Experts::kRequired;
    d.routing = {.gate = ExpertRouting::Gate::kSoftmax, .normalize = true};
    // tiny-qwen35's layers with eight experts of 256, two per token, and a shared one of 256.
    ModelPreset moe = tiny;
    moe.name = "tiny-qwen35moe";
    moe.architecture = "qwen35moe";
    moe.n_expert = 8;
    moe.n_expert_used = 2;
    moe.n_ff_exp = 256;
    moe.n_ff_shexp = 256;
    d.presets = {moe};
  }
  return d;
}

class Qwen35 final : public BlockArchitecture {
 public:
  explicit Qwen35(bool experts) : BlockArchitecture(Data(experts), Activation::kSilu) {}
  absl::Status ReadConfig(const GgufFile& f, ModelConfig& c) const override {
    const std::string a = c.architecture + ".";
    // block_count counts the multi-token-prediction layers after the trunk.
    const int64_t all = c.n_layer;
    if (const std::string key = a + "nextn_predict_layers"; f.Find(key) != nullptr) {
      LLM42_ASSIGN_OR_RETURN(const int64_t nextn, IntKeyIn(f, key, 0, all - 1));
      c.n_layer -= nextn;
      if (c.layer_ff.size() > static_cast<size_t>(c.n_layer)) c.layer_ff.resize(static_cast<size_t>(c.n_layer));
      if (c.layer_head_kv.size() > static_cast<size_t>(c.n_layer)) c.layer_head_kv.resize(static_cast<size_t>(c.n_layer));
    }
    LLM42_ASSIGN_OR_RETURN(c.ssm_conv_kernel, IntKeyIn(f, a + "ssm.conv_kernel", 1, 64));
    LLM42_ASSIGN_OR_RETURN(c.ssm_key_heads, IntKeyIn(f, a + "ssm.group_count", 1, 1024));
    LLM42_ASSIGN_OR_RETURN(c.ssm_value_heads, IntKeyIn(f, a + "ssm.time_step_rank", 1, 1024));
    LLM42_ASSIGN_OR_RETURN(c.ssm_head_dim, IntKeyIn(f, a + "ssm.state_size", 1, 1024));
    LLM42_ASSIGN_OR_RETURN(const int64_t inner, IntKeyIn(f, a + "ssm.inner_size", 1, 1 << 20));
    if (inner != c.ssm_value_heads * c.ssm_head_dim) {
      return FormatError("key '", a, "ssm.inner_size' = ", inner, " is not the DeltaNet state of ", c.ssm_value_heads,
                         " value heads (ssm.time_step_rank) of ", c.ssm_head_dim, " (ssm.state_size)");
    }
    if (c.ssm_value_heads % c.ssm_key_heads != 0) {
      return FormatError("key '", a, "ssm.time_step_rank' = ", c.ssm_value_heads, " is not a multiple of ssm.group_count ",
                         c.ssm_key_heads);
    }
    // Which layers are recurrent: a flag per layer, else all but every interval-th.
    c.layer_recurrent.assign(static_cast<size_t>(c.n_layer), 0);
    if (const std::string key = a + "attention.recurrent_layers"; const GgufValue* v = f.Find(key)) {
      if (v->type != GgufType::kArray || v->int_array.size() != static_cast<size_t>(all)) {
        return FormatError("key '", key, "' holds ", v->array_size(), " values where the file has ", all,
                           " layers (a flag per layer)");
      }
      for (int64_t l = 0; l < c.n_layer; ++l) c.layer_recurrent[static_cast<size_t>(l)] = v->int_array[static_cast<size_t>(l)] != 0;
    } else {
      int64_t interval = 4;
      if (const std::string k = a + "full_attention_interval"; f.Find(k) != nullptr) {
        LLM42_ASSIGN_OR_RETURN(interval, IntKeyIn(f, k, 1, 1024));
      }
      for (int64_t l = 0; l < c.n_layer; ++l) c.layer_recurrent[static_cast<size_t>(l)] = (l + 1) % interval != 0;
    }
    // Recurrent layers hold no K/V (ModelConfig::ValidateLayers holds the rest to it).
    if (c.layer_head_kv.empty()) c.layer_head_kv.assign(static_cast<size_t>(c.n_layer), c.n_head_kv);
    for (int64_t l = 0; l < c.n_layer; ++l) {
      if (c.recurrent(l)) c.layer_head_kv[static_cast<size_t>(l)] = 0;
    }
    // M-RoPE: for text every pair turns by the position unless a section rule leaves some to the
    // fourth (an image's) position, which llm42 does not take.
    if (const GgufValue* v = f.Find(a + "rope.dimension_sections"); v != nullptr && v->type == GgufType::kArray) {
      if (v->int_array.size() != 4) return FormatError("key '", a, "rope.dimension_sections' holds ", v->array_size(), " values, not 4");
      int64_t sec[4], total = 0;
      for (int i = 0; i < 4; ++i) {
        sec[i] = v->int_array[static_cast<size_t>(i)];
        if (sec[i] < 0 || sec[i] > c.n_rot) return FormatError("key '", a, "rope.dimension_sections'[", i, "] = ", sec[i]);
        total += sec[i];
      }
      if (total <= 0 || total > c.n_rot / 2) {
        return FormatError("key '", a, "rope.dimension_sections' sums to ", total, " (1..", c.n_rot / 2, ")");
      }
      for (int64_t p = 0; p < c.n_rot / 2; ++p) {
        const int64_t s = p % total;
        const bool text = (s % 3 == 1 && s < 3 * sec[1]) || (s % 3 == 2 && s < 3 * sec[2]) || (s % 3 == 0 && s < 3 * sec[0]);
        if (!text) {
          return UnsupportedError("rope.dimension_sections leave rotary pair ", p, " to an image position");
        }
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace

const Architecture& Qwen35Architecture() {
  static const Qwen35 arch(false);
  return arch;
}

const Architecture& Qwen35MoeArchitecture() {
  static const Qwen35 arch(true);
  return arch;
}

}  // namespace llm42
