// Gemma 3 (text): Gemma 2's layer without soft-capping, with per-head q/k norms; five layers of
// six slide (with RoPE base 10000, unscaled), the sixth attends globally (the file's RoPE base
// and linear scaling). Hugging Face's Gemma3ForCausalLM (model_type gemma3_text) is its text
// model.
#include "lib/model/arch/blocks.h"
#include "lib/model/arch/gemma_common.h"

namespace llm42 {
namespace {

ArchitectureData Data() {
  ArchitectureData d = GemmaData();
  d.name = "gemma3";
  d.parts = {.biases = LayerParts::Biases::kNone, .qk_norms = true, .post_norms = true};
  d.made_rope_base = 1000000.0f;
  d.hf.classes = {"Gemma3ForCausalLM"};
  d.presets = {{"tiny-gemma3", 256, 6, 4, 2, 768, 2048, "gemma3", false, 64, 32}};
  return d;
}

class Gemma3 final : public BlockArchitecture {
 public:
  Gemma3() : BlockArchitecture(Data(), Activation::kGeluTanh) {}
  absl::Status ReadConfig(const GgufFile&, ModelConfig& c) const override {
    ReadGemmaCommon(c, /*layers_27b=*/62, /*pattern=*/6);
    c.rope_local_base = 10000.0f;
    return absl::OkStatus();
  }
};

}  // namespace

const Architecture& Gemma3Architecture() {
  static const Gemma3 arch;
  return arch;
}

}  // namespace llm42
