// Phi-3, 3.5 and 4-mini: Llama's blocks on fused tensors as the file stores them (attn_qkv: q, k,
// v rows; ffn_up: gate, then up rows), NeoX RoPE with LongRoPE's per-pair factors where the file
// has them (rope_factors_short / _long.weight: ModelWeights) and its attention factor, and a
// sliding window on every layer where the file sets one.
#include "lib/model/arch/blocks.h"
#include "lib/format/gguf_reader.h"

namespace llm42 {
namespace {

class Phi3 final : public BlockArchitecture {
 public:
  Phi3() : BlockArchitecture("phi3", LayerParts{.fused = true}, Activation::kSilu) {}
  absl::Status ReadConfig(const GgufFile& f, ModelConfig& c) const override {
    c.rope_neox = true;
    if (f.Find("phi3.rope.scaling.attn_factor") != nullptr) {
      LLM42_ASSIGN_OR_RETURN(const double factor, f.GetFloat("phi3.rope.scaling.attn_factor"));
      if (!(factor > 0 && factor < 16)) return FormatError("phi3.rope.scaling.attn_factor = ", factor, " is out of range");
      c.rope_attn_factor = static_cast<float>(factor);
    }
    if (f.Find("phi3.rope.scaling.original_context_length") != nullptr) {
      LLM42_ASSIGN_OR_RETURN(c.rope_original_context, f.GetInt("phi3.rope.scaling.original_context_length"));
      if (c.rope_original_context <= 0) return FormatError("phi3.rope.scaling.original_context_length must be positive");
    }
    LLM42_RETURN_IF_ERROR(ReadSlidingWindow(f, c, /*optional=*/true));
    c.layer_sliding.assign(static_cast<size_t>(c.n_layer), 1);
    return absl::OkStatus();
  }
};

}  // namespace

const Architecture& Phi3Architecture() {
  static const Phi3 arch;
  return arch;
}

}  // namespace llm42
