#ifndef LLM42_MODEL_MODEL_CONFIG_H_
#define LLM42_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/numerics/expert_routing.h"

namespace llm42 {

class GgufFile;

// Hyperparameters of a decoder, from GGUF metadata ({arch}.* keys): the ones every architecture
// has, read here, and its own, read by its lib/model/arch file (Architecture::ReadConfig).
struct ModelConfig {
  std::string architecture;
  std::string name;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_ff = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t n_rot = 0;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / linear scaling factor
  bool rope_neox = false;
  float rms_eps = 1e-5f;

  // What some architectures add (lib/model/arch), each with its "none" default.
  // Sliding-window layers attend to their last `sliding_window` positions: layer l is one where
  // layer_sliding[l] (Gemma 2: even layers, Gemma 3: five of each six, Phi-3: every layer).
  int64_t sliding_window = 0;
  std::vector<uint8_t> layer_sliding;
  float rope_local_base = 0;   // sliding layers' RoPE base, unscaled (Gemma 3: 10000); 0: the global RoPE
  float embed_scale = 0;       // embeddings multiplied by it (Gemma: sqrt(n_embd)); 0: not
  float attn_scale = 0;        // scores' scale; 0: 1 / sqrt(head_dim)
  float attn_softcap = 0;      // attention scores soft-capped (Gemma 2); 0: not
  float final_softcap = 0;     // logits soft-capped (Gemma 2); 0: not
  float rope_attn_factor = 1;  // LongRoPE's factor on cosines and sines (Phi-3)
  // Llama 4's attention temperature (Ministral 3): queries at position p scaled by
  // 1 + this * ln(floor(p / yarn.original_context) + 1); 0: none.
  float attn_temperature_scale = 0;
  int64_t rope_original_context = 0;  // LongRoPE: the long factors beyond this context (Phi-3)
  // YaRN RoPE scaling (rope.scaling.type "yarn"; factor 0: none): the factor, the context it
  // extends, beta_fast and beta_slow, and yarn_log_multiplier. ModelWeights turns them into
  // per-pair divisors and a magnitude (lib/format/rope_factors.h); rope_freq_scale stays 1.
  struct Yarn {
    double factor = 0, original_context = 0, beta_fast = 32, beta_slow = 1, log_mul = 0;
  } yarn;

  // Layers of different shapes (Gemma 4): sliding layers' head width and rotated dims where they
  // differ from the others' (0: head_dim, n_rot); per-layer key/value head counts and FFN widths
  // where the file gives arrays (empty: n_head_kv, n_ff each).
  int64_t head_dim_swa = 0, n_rot_swa = 0;
  std::vector<int64_t> layer_head_kv, layer_ff;
  // The last n_kv_shared layers store no K/V of their own (Gemma 4): each reads that of the last
  // layer before them of its kind (kv_layer).
  int64_t n_kv_shared = 0;
  // Per-layer embeddings' width (Gemma 4 E2B, E4B: lib/model/arch/blocks.h's PerLayerInputs); 0: none.
  int64_t n_embd_per_layer = 0;

  // Linear-attention layers (gated DeltaNet, Qwen3.5: lib/model/arch/blocks.h's DeltaNetBlock):
  // layer l is one where layer_recurrent[l] (it has no K/V: n_head_kv_of(l) is 0); their
  // convolution's width, key heads, value heads and head width (ssm.conv_kernel,
  // ssm.group_count, ssm.time_step_rank, ssm.state_size).
  std::vector<uint8_t> layer_recurrent;
  int64_t ssm_conv_kernel = 0, ssm_key_heads = 0, ssm_value_heads = 0, ssm_head_dim = 0;

  // Mixture-of-experts feed-forward blocks (lib/model/arch/experts.h), in every layer where
  // n_expert > 0: routing.n_expert experts of n_ff_exp each (expert_count,
  // expert_feed_forward_length), routing.n_used of them per token (expert_used_count), chosen and
  // weighted by the router as `routing` says; a shared expert of n_ff_shexp beside them where the
  // file has one (expert_shared_feed_forward_length, else n_ff).
  int64_t n_expert = 0, n_ff_exp = 0, n_ff_shexp = 0;
  ExpertRouting routing;

  // The attention window of layer l (0: every earlier position).
  int64_t window(int64_t l) const {
    return sliding_window > 0 && sliding(l) ? sliding_window : 0;
  }

  // The window every layer attends within, when every layer has one (0: some layer reads every
  // earlier position): the KV cache may release what lies behind it.
  int64_t common_window() const {
    for (int64_t l = 0; l < n_layer; ++l) {
      if (window(l) == 0) return 0;
    }
    return n_layer > 0 ? sliding_window : 0;
  }

  // Layer l's head width, rotated dims, key/value heads and FFN width.
  bool sliding(int64_t l) const {
    return static_cast<size_t>(l) < layer_sliding.size() && layer_sliding[static_cast<size_t>(l)] != 0;
  }
  int64_t head_dim_of(int64_t l) const { return head_dim_swa > 0 && sliding(l) ? head_dim_swa : head_dim; }
  int64_t n_rot_of(int64_t l) const { return n_rot_swa > 0 && sliding(l) ? n_rot_swa : n_rot; }
  int64_t n_head_kv_of(int64_t l) const {
    return layer_head_kv.empty() ? n_head_kv : layer_head_kv[static_cast<size_t>(l)];
  }
  int64_t n_ff_of(int64_t l) const { return layer_ff.empty() ? n_ff : layer_ff[static_cast<size_t>(l)]; }
  bool recurrent(int64_t l) const {
    return static_cast<size_t>(l) < layer_recurrent.size() && layer_recurrent[static_cast<size_t>(l)] != 0;
  }
  // Recurrent layers, and layer l's index among them (the recurrent state's layer).
  int64_t n_recurrent() const;
  int64_t recurrent_index(int64_t l) const;
  // Widths of layer l's query heads and of its key (or value) heads of a position; q_dim may
  // differ from n_embd (Qwen3-0.6B: 16 heads of 128 on 1024).
  int64_t q_dim(int64_t l) const { return n_head * head_dim_of(l); }
  int64_t kv_dim(int64_t l) const { return n_head_kv_of(l) * head_dim_of(l); }
  // The widest layer's (activation buffers).
  int64_t max_q_dim() const;
  int64_t max_kv_dim() const;
  int64_t max_ff() const;

  // Layers that store K/V: the first n_layer - n_kv_shared. Layer l writes and reads the K/V
  // storage layer kv_layer(l): l itself, or for a sharing layer the last storing layer of its kind
  // (sliding or not) as llama.cpp picks it (the storing layers' last two must be one of each:
  // ValidateLayers).
  int64_t n_kv_layers() const { return n_layer - n_kv_shared; }
  int64_t kv_layer(int64_t l) const {
    return l < n_kv_layers() ? l : n_kv_layers() - (sliding(l) ? 2 : 1);
  }
  // The per-layer checks of the fields above: FORMAT_ERROR naming what is wrong.
  absl::Status ValidateLayers() const;

  // FORMAT_ERROR for missing or inconsistent keys, UNSUPPORTED for architectures without a
  // lib/model/arch file and RoPE scaling types (naming them).
  static absl::StatusOr<ModelConfig> FromGguf(const GgufFile& file);
};

}  // namespace llm42

#endif  // LLM42_MODEL_MODEL_CONFIG_H_
