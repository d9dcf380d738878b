#ifndef LLM42_MODEL_ARCH_MODEL_PRESET_H_
#define LLM42_MODEL_ARCH_MODEL_PRESET_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace llm42 {

// The shape of a random-weight model `llm42 make-model` writes (lib/maker/model_maker.h). Each
// architecture declares its own (ArchitectureData::presets).
struct ModelPreset {
  std::string name;
  int64_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
  std::string architecture = "llama";  // the architecture declaring it (ModelPresets sets it)
  bool llama3_rope = false;            // Llama 3.1 RoPE scaling (rope_freqs.weight, base 500000)
  int64_t head_dim = 0;        // a head's width; 0: n_embd / n_head (else stated as attention.key_length)
  int64_t sliding_window = 0;  // attention.sliding_window where nonzero
  // Values of the architecture's own keys (ArchKey::suffix) other than their fallbacks.
  std::vector<std::pair<std::string, float>> keys = {};
  // YaRN RoPE scaling by this factor over this original context (0: none), with this
  // yarn_log_multiplier (Ministral 3's mscale_all_dim, 1; 0: the key not written, gpt-oss's).
  double yarn_factor = 0;
  int64_t yarn_original_context = 0;
  float yarn_log_multiplier = 1;
  // Layers of different shapes (Gemma 4; ModelConfig's fields of the same names): which layers
  // slide (attention.sliding_window_pattern; empty: the architecture's rule), their head width
  // (attention.key_length_swa; 0: head_dim), KV heads and FFN widths per layer (arrays; empty:
  // n_head_kv, n_ff), the last layers sharing K/V (attention.shared_kv_layers), per-layer
  // embeddings' width (embedding_length_per_layer_input), and proportional RoPE on the global
  // layers: the first rope_partial of each head's pairs turn, the others' divisors are 1e30
  // (rope_freqs.weight; 0: none).
  std::vector<bool> sliding = {};
  int64_t head_dim_swa = 0;
  std::vector<int32_t> layer_head_kv = {}, layer_ff = {};
  int64_t n_kv_shared = 0, n_embd_per_layer = 0;
  double rope_partial = 0;
  // Per-head q/k norm weights multiplied by it: where scores go unscaled (Gemma 4), about
  // head_dim^(-1/4) keeps a random model's attention as soft as a scaled one's.
  float qk_norm_scale = 1;
  // Rotated dims of a head (rope.dimension_count; 0: all) and M-RoPE's sections
  // (rope.dimension_sections; empty: none).
  int64_t rope_dims = 0;
  std::vector<int32_t> rope_sections = {};
  // Linear-attention layers (Qwen3.5): every full_attention_interval-th layer attends, the others
  // are gated DeltaNet layers (ModelConfig's ssm_* fields; 0: none).
  int64_t full_attention_interval = 0;
  int64_t ssm_conv_kernel = 0, ssm_key_heads = 0, ssm_value_heads = 0, ssm_head_dim = 0;
  // Mixture-of-experts layers (expert_count experts of expert_feed_forward_length, expert_used_count
  // per token; 0: a dense FFN) and a shared expert's width (0: none).
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_ff_shexp = 0;
};

}  // namespace llm42

#endif  // LLM42_MODEL_ARCH_MODEL_PRESET_H_
