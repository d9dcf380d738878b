// Qwen2 and Qwen2.5: Llama's blocks with q/k/v biases, RoPE on halves (NeoX).
#include "lib/model/arch/blocks.h"

namespace llm42 {
namespace {

ArchitectureData Data() {
  return {
      .name = "qwen2",
      .rope_neox = true,
      .parts = {.biases = LayerParts::Biases::kRequired},
      .hf = {.classes = {"Qwen2ForCausalLM"}},
      .presets = {{"tiny-qwen2", 256, 4, 8, 4, 688, 2048, "qwen2"}},
  };
}

}  // namespace

const Architecture& Qwen2Architecture() {
  static const BlockArchitecture arch(Data(), Activation::kSilu);
  return arch;
}

}  // namespace llm42
