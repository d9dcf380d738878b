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
  // YaRN RoPE scaling by this factor over this original context (0: none), with
  // yarn_log_multiplier 1 (Ministral 3's mscale_all_dim).
  double yarn_factor = 0;
  int64_t yarn_original_context = 0;
};

}  // namespace llm42

#endif  // LLM42_MODEL_ARCH_MODEL_PRESET_H_
