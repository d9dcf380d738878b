#ifndef LLM42_MODEL_ARCH_GEMMA_COMMON_H_
#define LLM42_MODEL_ARCH_GEMMA_COMMON_H_

// What Gemma 2 and Gemma 3 share (gemma2.cc, gemma3.cc).
#include <cmath>
#include <cstdint>

#include "lib/model/arch/architecture.h"
#include "lib/model/model_config.h"

namespace llm42 {

// Their data but for the name, parts, keys and presets: NeoX RoPE, sliding windows, the
// embeddings as the output matrix; on Hugging Face, four norms a layer (after attention is
// post_attention_layernorm, Llama's name for the norm before the FFN, which Gemma calls
// pre_feedforward_layernorm), each scaling by 1 + weight.
inline ArchitectureData GemmaData() {
  return {
      .rope_neox = true,
      .window = Window::kRequired,
      .ties_output = true,
      .hf = {.layer_tensors = {{"post_attention_layernorm.weight", "post_attention_norm.weight"},
                               {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
                               {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"}},
             .norms_plus_one = true},
  };
}

// Embeddings scaled by sqrt(n_embd); scores by 1 / sqrt(query_pre_attn_scalar), which GGUF does
// not carry: head_dim but for the 27B models (`layers_27b` layers: Gemma 2 46, Gemma 3 62), whose
// is n_embd / n_head (llama.cpp's rule); layers slide by `pattern` (SlideByPattern: Gemma 2's 2,
// even layers; Gemma 3's 6, five of six).
inline void ReadGemmaCommon(ModelConfig& c, int64_t layers_27b, int64_t pattern) {
  c.embed_scale = std::sqrt(static_cast<float>(c.n_embd));
  const int64_t scalar = c.n_layer == layers_27b ? c.n_embd / c.n_head : c.head_dim;
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(scalar));
  SlideByPattern(c, pattern);
}

}  // namespace llm42

#endif  // LLM42_MODEL_ARCH_GEMMA_COMMON_H_
