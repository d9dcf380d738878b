// Ministral 3 (mistral3; 3B, 8B, 14B): Llama's blocks and RoPE on adjacent pairs, with YaRN RoPE
// scaling (rope.scaling.type yarn: ModelConfig, ModelWeights) and Llama 4's attention temperature:
// queries at position p scaled by 1 + beta * ln(floor(p / original_context) + 1). Below the
// original context that scale is exactly 1, so contexts are capped there (16384 for the released
// models) rather than scaling queries per position.
#include "lib/model/arch/blocks.h"

namespace llm42 {
namespace {

ArchitectureData Data() {
  return {
      .name = "mistral3",
      .keys = {{"attention.temperature_scale", &ModelConfig::attn_temperature_scale, 0.0f, -1.0f, 10.0f}},
      // A YaRN factor of 4 over 512 positions (the ramp spans the tiny heads' dims), temperature
      // 0.1 as Ministral 3's: its context is capped at 512.
      .presets = {{"tiny-mistral3", 256, 4, 8, 4, 768, 2048, "mistral3", false, 0, 0,
                   {{"attention.temperature_scale", 0.1f}}, 4.0, 512}},
  };
}

class Mistral3 final : public BlockArchitecture {
 public:
  Mistral3() : BlockArchitecture(Data(), Activation::kSilu) {}
  absl::Status ReadConfig(const GgufFile&, ModelConfig& c) const override {
    if (c.attn_temperature_scale != 0) {
      const auto original = static_cast<int64_t>(c.yarn.factor > 0 ? c.yarn.original_context : c.n_ctx_train);
      c.n_ctx_train = std::min(c.n_ctx_train, original);
    }
    return absl::OkStatus();
  }
};

}  // namespace

const Architecture& Mistral3Architecture() {
  static const Mistral3 arch;
  return arch;
}

}  // namespace llm42
