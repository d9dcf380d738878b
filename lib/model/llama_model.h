#ifndef LLM42_MODEL_LLAMA_MODEL_H_
#define LLM42_MODEL_LLAMA_MODEL_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/model/gguf_reader.h"
#include "lib/model/llama_config.h"

namespace llm42 {

class KvCache;

// One forward pass's input: token i is `tokens[i]` at `positions[i]` of KV-cache sequence
// `seqs[i]` (which must have room reserved for it). Logits are produced for the token indices in
// `logit_rows`, in that order. Token i runs under schedules[i], or all under `schedule` when
// `schedules` is empty.
struct ForwardBatch {
  std::span<const int32_t> tokens;
  std::span<const int32_t> positions;
  std::span<const int32_t> seqs;
  std::span<const int32_t> logit_rows;
  Schedule schedule = Schedule::kFast;
  std::span<const Schedule> schedules = {};
};

// A Llama decoder whose weights point into a memory-mapped GGUF file. The graph is written once
// over the Backend interface.
class LlamaModel {
 public:
  // Validates every tensor's presence, shape and type against the config: FORMAT_ERROR naming
  // the tensor ("blk.3.attn_q.weight: expected 64x64, got 64x63"), UNSUPPORTED for a dtype
  // without kernels.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Load(std::shared_ptr<const GgufFile> file);

  const LlamaConfig& config() const { return config_; }
  const GgufFile& file() const { return *file_; }
  // Bytes of weights one decode step reads (for bandwidth accounting).
  int64_t weight_bytes() const { return weight_bytes_; }

  // Runs the batch, writing each token's K/V into `cache` at its position before attention
  // reads it, and fills logits[row][n_vocab] for batch.logit_rows. Not thread-safe.
  void Forward(Backend& backend, KvCache& cache, const ForwardBatch& batch, float* logits);

 private:
  struct Layer {
    std::vector<float> attn_norm, ffn_norm;
    std::vector<float> bq, bk, bv;  // empty when the model has no attention biases
    WeightMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
  };

  LlamaModel() = default;

  std::shared_ptr<const GgufFile> file_;
  LlamaConfig config_;
  WeightMatrix token_embd_, output_;
  std::vector<float> output_norm_;
  std::vector<float> rope_freqs_;  // per-pair frequency divisors (Llama 3.1), or empty
  RopeParams rope_;
  std::vector<Layer> layers_;
  int64_t weight_bytes_ = 0;

  // Scratch activations, grown to the largest batch seen.
  std::vector<float> x_, xn_, q_, k_, v_, attn_, proj_, gate_, up_, logits_in_;
  std::vector<const int32_t*> tables_;
  std::vector<Schedule> logit_schedules_;
};

}  // namespace llm42

#endif  // LLM42_MODEL_LLAMA_MODEL_H_
