#ifndef LLM42_MODEL_MODEL_MAKER_H_
#define LLM42_MODEL_MODEL_MAKER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "lib/model/ggml_types.h"

namespace llm42 {

// Shape of a generated Llama model.
struct ModelPreset {
  std::string name;
  int64_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
};

// tiny (tests: big enough that the fast path takes its split and GEMV branches), llama-110m,
// llama-1b.
const std::vector<ModelPreset>& ModelPresets();

// Writes a Llama GGUF with seeded uniform random weights (reproducible across machines: the
// values come from Philox) and the vocabulary (tokens, scores, types, special ids) of
// `vocab_path`, another GGUF. Matrices are stored as `dtype` (f32, f16, bf16 or q8_0); norms are
// f32 ones.
absl::Status MakeModel(const ModelPreset& preset, GgmlType dtype, const std::string& vocab_path,
                       uint64_t seed, const std::string& out_path);

}  // namespace llm42

#endif  // LLM42_MODEL_MODEL_MAKER_H_
