#ifndef LLM42_MODEL_MODEL_CONFIG_H_
#define LLM42_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace llm42 {

class GgufFile;

// Hyperparameters of a Llama-family decoder, from GGUF metadata ({arch}.* keys). Architectures:
// "llama" (Llama 2/3/3.1/3.2, Mistral 7B, TinyLlama, ...), "qwen2" (Qwen2 / Qwen2.5: q/k/v
// biases, NeoX RoPE) and "qwen3" (NeoX RoPE, every query and key head RMS-normalized before it).
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

  // Widths of all query heads and of all key (or value) heads of a position; q_dim may differ
  // from n_embd (Qwen3-0.6B: 16 heads of 128 on 1024).
  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }

  // FORMAT_ERROR for missing or inconsistent keys, UNSUPPORTED for other architectures and
  // RoPE scaling types (naming them).
  static absl::StatusOr<ModelConfig> FromGguf(const GgufFile& file);
};

}  // namespace llm42

#endif  // LLM42_MODEL_MODEL_CONFIG_H_
