// Gemma 2: RMSNorm before and after attention and the FFN (the GGUF norms hold 1 + weight), a
// GELU-tanh gated FFN, attention scores soft-capped (attn_logit_softcapping, 50 by default) and
// the logits too (final_logit_softcapping, 30), sliding-window attention on even layers.
#include "lib/model/arch/blocks.h"
#include "lib/model/arch/gemma_common.h"

namespace llm42 {
namespace {

ArchitectureData Data() {
  ArchitectureData d = GemmaData();
  d.name = "gemma2";
  d.parts = {.biases = LayerParts::Biases::kNone, .post_norms = true};
  d.keys = {{"attn_logit_softcapping", &ModelConfig::attn_softcap, 50.0f, 0.0f, 1e6f, "attn_logit_softcapping"},
            {"final_logit_softcapping", &ModelConfig::final_softcap, 30.0f, 0.0f, 1e6f, "final_logit_softcapping"}};
  d.hf.classes = {"Gemma2ForCausalLM"};
  d.presets = {// A random tiny model's scores and logits stay far below Gemma 2's caps: its caps act.
               {"tiny-gemma2", 256, 4, 4, 2, 768, 2048, "gemma2", false, 64, 32,
                {{"attn_logit_softcapping", 0.05f}, {"final_logit_softcapping", 1.0f}}}};
  return d;
}

class Gemma2 final : public BlockArchitecture {
 public:
  Gemma2() : BlockArchitecture(Data(), Activation::kGeluTanh) {}
  absl::Status ReadConfig(const GgufFile&, ModelConfig& c) const override {
    ReadGemmaCommon(c, /*layers_27b=*/46, /*pattern=*/2);
    return absl::OkStatus();
  }
};

}  // namespace

const Architecture& Gemma2Architecture() {
  static const Gemma2 arch;
  return arch;
}

}  // namespace llm42
