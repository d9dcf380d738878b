// Phi-3, 3.5 and 4-mini: Llama's blocks on fused tensors as the file stores them (attn_qkv: q, k,
// v rows; ffn_up: gate, then up rows), NeoX RoPE with LongRoPE's per-pair factors where the file
// has them (rope_factors_short / _long.weight: ModelWeights) and its attention factor, and a
// sliding window on every layer where the file sets one.
#include "lib/model/arch/blocks.h"
#include "lib/format/gguf_reader.h"

namespace llm42 {
namespace {

ArchitectureData Data() {
  ArchitectureData d;
  d.name = "phi3";
  d.rope_neox = true;
  d.window = Window::kOptional;
  d.parts = {.fused = true};
  d.longrope = true;
  // (Hugging Face's longrope rope_scaling gives it, as llama.cpp's converter derives it.)
  d.keys = {{"rope.scaling.attn_factor", &ModelConfig::rope_attn_factor, 1.0f, 0.0f, 16.0f, {}, /*made=*/false}};
  d.hf.classes = {"Phi3ForCausalLM"};
  d.hf.layer_tensors = {{"self_attn.qkv_proj.weight", "attn_qkv.weight"}, {"mlp.gate_up_proj.weight", "ffn_up.weight"}};
  // tiny-phi: a name without "phi3", which llama.cpp takes for Phi-3's own vocabulary; tiny-swa: a
  // window of 40 positions on every layer, as Phi-3-mini-4k's 2047: the KV cache releases what
  // lies behind it.
  d.presets = {{"tiny-phi", 256, 4, 8, 8, 768, 4096, "phi3", false, 0, 2047},
               {"tiny-swa", 256, 4, 8, 8, 768, 4096, "phi3", false, 0, 40}};
  return d;
}

class Phi3 final : public BlockArchitecture {
 public:
  Phi3() : BlockArchitecture(Data(), Activation::kSilu) {}
  absl::Status ReadConfig(const GgufFile& f, ModelConfig& c) const override {
    if (f.Find("phi3.rope.scaling.original_context_length") != nullptr) {
      LLM42_ASSIGN_OR_RETURN(c.rope_original_context, f.GetInt("phi3.rope.scaling.original_context_length"));
      if (c.rope_original_context <= 0) return FormatError("phi3.rope.scaling.original_context_length must be positive");
    }
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
