#ifndef LLM42_MODEL_MODEL_WEIGHTS_H_
#define LLM42_MODEL_MODEL_WEIGHTS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/model/arch/architecture.h"
#include "lib/format/gguf_reader.h"
#include "lib/model/layer_tensors.h"
#include "lib/model/model_config.h"

namespace llm42 {

// A decoder as its GGUF file holds it: the config, its architecture (lib/model/arch), and
// weights that point into the memory-mapped file (host memory). ModelRunner runs it on a backend.
class ModelWeights {
 public:
  using Layer = HostLayer;

  // Validates every tensor's presence, shape and type against the config: FORMAT_ERROR naming
  // the tensor ("blk.3.attn_q.weight: expected 64x64, got 64x63"), UNSUPPORTED for a dtype
  // without kernels.
  static absl::StatusOr<std::unique_ptr<ModelWeights>> Load(std::shared_ptr<const GgufFile> file);

  const Architecture& architecture() const { return *arch_; }
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
  // LongRoPE's per-pair divisors (Phi-3): for contexts up to config().rope_original_context, and
  // beyond it; empty where the file has none.
  const std::vector<float>& rope_factors_short() const { return rope_factors_short_; }
  const std::vector<float>& rope_factors_long() const { return rope_factors_long_; }
  const std::vector<Layer>& layers() const { return layers_; }
  // Per-layer embeddings' model-wide tensors (empty where config().n_embd_per_layer is 0).
  const PerLayerInputTensors<std::vector<float>>& per_layer_inputs() const { return per_layer_inputs_; }

 private:
  ModelWeights() = default;

  std::shared_ptr<const GgufFile> file_;
  ModelConfig config_;
  WeightMatrix token_embd_, output_;
  std::vector<float> output_norm_;
  const Architecture* arch_ = nullptr;
  std::vector<float> rope_freqs_;  // per-pair frequency divisors (Llama 3.1), or empty
  std::vector<float> rope_factors_short_, rope_factors_long_;
  RopeParams rope_;
  std::vector<Layer> layers_;
  PerLayerInputTensors<std::vector<float>> per_layer_inputs_;
  int64_t weight_bytes_ = 0;
};

}  // namespace llm42

#endif  // LLM42_MODEL_MODEL_WEIGHTS_H_
