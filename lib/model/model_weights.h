#ifndef LLM42_MODEL_MODEL_WEIGHTS_H_
#define LLM42_MODEL_MODEL_WEIGHTS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/model/gguf_reader.h"
#include "lib/model/model_config.h"

namespace llm42 {

// A Llama decoder as its GGUF file holds it: the config, and weights that point into the
// memory-mapped file (host memory). ModelRunner runs it on a backend.
class ModelWeights {
 public:
  struct Layer {
    std::vector<float> attn_norm, ffn_norm;
    std::vector<float> bq, bk, bv;  // empty when the model has no attention biases
    // Per-head RMSNorm weights of queries and keys before RoPE (qwen3), head_dim each; else empty.
    std::vector<float> q_norm, k_norm;
    WeightMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
  };

  // Validates every tensor's presence, shape and type against the config: FORMAT_ERROR naming
  // the tensor ("blk.3.attn_q.weight: expected 64x64, got 64x63"), UNSUPPORTED for a dtype
  // without kernels.
  static absl::StatusOr<std::unique_ptr<ModelWeights>> Load(std::shared_ptr<const GgufFile> file);

  const ModelConfig& config() const { return config_; }
  const GgufFile& file() const { return *file_; }
  // Bytes of weights one decode step reads (for bandwidth accounting).
  int64_t weight_bytes() const { return weight_bytes_; }

  const WeightMatrix& token_embd() const { return token_embd_; }
  const WeightMatrix& output() const { return output_; }
  const std::vector<float>& output_norm() const { return output_norm_; }
  // RoPE of the config; freq_factors unset (rope_freqs() holds them, when the model has any).
  const RopeParams& rope() const { return rope_; }
  const std::vector<float>& rope_freqs() const { return rope_freqs_; }
  const std::vector<Layer>& layers() const { return layers_; }

 private:
  ModelWeights() = default;

  std::shared_ptr<const GgufFile> file_;
  ModelConfig config_;
  WeightMatrix token_embd_, output_;
  std::vector<float> output_norm_;
  std::vector<float> rope_freqs_;  // per-pair frequency divisors (Llama 3.1), or empty
  RopeParams rope_;
  std::vector<Layer> layers_;
  int64_t weight_bytes_ = 0;
};

}  // namespace llm42

#endif  // LLM42_MODEL_MODEL_WEIGHTS_H_
