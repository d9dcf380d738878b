#ifndef LLM42_MAKER_MODEL_MAKER_H_
#define LLM42_MAKER_MODEL_MAKER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "lib/format/rope_factors.h"
#include "lib/util/ggml_types.h"

namespace llm42 {

// Shape of a generated model.
struct ModelPreset {
  std::string name;
  int64_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
  std::string architecture = "llama";  // or qwen2, qwen3, gemma2, gemma3, phi3 (lib/model/arch)
  bool llama3_rope = false;  // Llama 3.1 RoPE scaling (rope_freqs.weight, base 500000)
  int64_t head_dim = 0;      // a head's width; 0: n_embd / n_head (else stated as attention.key_length)
  int64_t sliding_window = 0;  // attention.sliding_window where nonzero (gemma2, gemma3, phi3)
  // gemma2's attention and final soft-caps (Gemma 2's own are 50 and 30; a random tiny model's
  // scores and logits stay far below those, so its preset caps them where they act).
  float attn_softcap = 50.0f, final_softcap = 30.0f;
};

// tiny (tests: big enough that the fast path takes its split and GEMV branches), tiny-qwen2,
// tiny-llama3, tiny-qwen3 (the tiny shape with the other architecture features; tiny-qwen3's heads
// are twice n_embd / n_head wide, as Qwen3-0.6B's), tiny-blocks (the tiny shape in whole
// 256-weight blocks, for every quantized type), tiny-gemma2, tiny-gemma3 (windows of 32 positions),
// tiny-phi (phi3: fused tensors, LongRoPE factors; a name without "phi3", which llama.cpp takes
// for Phi-3's own vocabulary), tiny-swa (tiny-phi with a window of 40 positions on every layer, as
// Phi-3-mini-4k's 2047: the KV cache releases what lies behind it), llama-110m, llama-1b,
// llama-8b (Llama-3.1-8B's shape).
const std::vector<ModelPreset>& ModelPresets();

// Writes a Llama GGUF with seeded uniform random weights (reproducible across machines: the
// values come from Philox) and the vocabulary (tokens, scores, types, special ids) of
// `vocab_path`, another GGUF. Matrices are stored as `dtype` (quantizer.h's types; the embedding
// table of q8_0 and q4_0 models in f16); norms are f32 ones.

// A non-empty chat_template replaces the vocabulary file's tokenizer.chat_template.
absl::Status MakeModel(const ModelPreset& preset, GgmlType dtype, const std::string& vocab_path,
                       uint64_t seed, const std::string& out_path, const std::string& chat_template = "");

}  // namespace llm42

#endif  // LLM42_MAKER_MODEL_MAKER_H_
