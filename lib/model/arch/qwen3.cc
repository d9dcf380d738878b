// Qwen3: no biases; every query and key head RMS-normalized (its own weights) before NeoX RoPE;
// heads often wider than n_embd / n_head (Qwen3-0.6B: 16 of 128 on 1024).
#include "lib/model/arch/blocks.h"

namespace llm42 {
namespace {

class Qwen3 final : public BlockArchitecture {
 public:
  Qwen3()
      : BlockArchitecture("qwen3", LayerParts{.biases = LayerParts::Biases::kNone, .qk_norms = true}, Activation::kSilu) {}
  absl::Status ReadConfig(const GgufFile&, ModelConfig& c) const override {
    c.rope_neox = true;
    return absl::OkStatus();
  }
};

}  // namespace

const Architecture& Qwen3Architecture() {
  static const Qwen3 arch;
  return arch;
}

}  // namespace llm42
