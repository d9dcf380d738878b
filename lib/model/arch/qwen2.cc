// Qwen2 and Qwen2.5: Llama's blocks with q/k/v biases, RoPE on halves (NeoX).
#include "lib/model/arch/blocks.h"

namespace llm42 {
namespace {

ArchitectureData Data() {
  ArchitectureData d;
  d.name = "qwen2";
  d.rope_neox = true;
  d.parts = {.biases = LayerParts::Biases::kRequired};
  d.hf.classes = {"Qwen2ForCausalLM"};
  d.presets = {{"tiny-qwen2", 256, 4, 8, 4, 688, 2048, "qwen2"}};
  return d;
}

}  // namespace

const Architecture& Qwen2Architecture() {
  static const BlockArchitecture arch(Data(), Activation::kSilu);
  return arch;
}

}  // namespace llm42
