// Qwen2 and Qwen2.5: Llama's blocks with q/k/v biases, RoPE on halves (NeoX).
#include "lib/model/arch/blocks.h"

namespace llm42 {
namespace {

class Qwen2 final : public BlockArchitecture {
 public:
  Qwen2() : BlockArchitecture("qwen2", LayerParts{.biases = LayerParts::Biases::kRequired}, Activation::kSilu) {}
  absl::Status ReadConfig(const GgufFile&, ModelConfig& c) const override {
    c.rope_neox = true;
    return absl::OkStatus();
  }
};

}  // namespace

const Architecture& Qwen2Architecture() {
  static const Qwen2 arch;
  return arch;
}

}  // namespace llm42
