#ifndef LLM42_MAKER_MODEL_MAKER_H_
#define LLM42_MAKER_MODEL_MAKER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "lib/format/rope_factors.h"
#include "lib/model/arch/model_preset.h"
#include "lib/util/ggml_types.h"

namespace llm42 {

// Every architecture's presets (ArchitectureData::presets), in registry order: "tiny" (hidden
// 256, 4 layers, Llama; tests: big enough that the fast path takes its split and GEMV branches)
// first, then the other tiny shapes that carry each architecture's features, and larger Llama
// shapes for benchmarks.
const std::vector<ModelPreset>& ModelPresets();

// Writes a GGUF of the preset's architecture (its keys and tensors from its ArchitectureData)
// with seeded uniform random weights (reproducible across machines: the values come from Philox)
// and the vocabulary (tokens, scores, types, special ids) of `vocab_path`, another GGUF. Matrices
// are stored as `dtype` (quantizer.h's types; the embedding table of q8_0 and q4_0 models in f16);
// norms are f32 ones. INVALID_ARGUMENT for an architecture llm42 does not have.

// A non-empty chat_template replaces the vocabulary file's tokenizer.chat_template.
absl::Status MakeModel(const ModelPreset& preset, GgmlType dtype, const std::string& vocab_path,
                       uint64_t seed, const std::string& out_path, const std::string& chat_template = "");

}  // namespace llm42

#endif  // LLM42_MAKER_MODEL_MAKER_H_
