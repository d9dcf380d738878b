// Qwen3: no biases; every query and key head RMS-normalized (its own weights) before NeoX RoPE;
// heads often wider than n_embd / n_head (Qwen3-0.6B: 16 of 128 on 1024).
#include "lib/model/arch/blocks.h"

namespace llm42 {
namespace {

ArchitectureData Data() {
  ArchitectureData d;
  d.name = "qwen3";
  d.rope_neox = true;
  d.parts = {.biases = LayerParts::Biases::kNone, .qk_norms = true};
  d.hf.classes = {"Qwen3ForCausalLM"};
  // Heads twice n_embd / n_head wide, as Qwen3-0.6B's.
  d.presets = {{"tiny-qwen3", 256, 4, 8, 4, 768, 2048, "qwen3", false, 64}};
  return d;
}

}  // namespace

const Architecture& Qwen3Architecture() {
  static const BlockArchitecture arch(Data(), Activation::kSilu);
  return arch;
}

}  // namespace llm42
