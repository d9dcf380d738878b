// Qwen3-MoE (30B-A3B, 235B-A22B): Qwen3's attention (no biases, per-head q/k norms, NeoX RoPE)
// with a mixture of experts in every layer's place of the FFN (experts.h): softmax over the
// router's logits, the chosen experts' weights normalized to sum to 1 (llama.cpp's graph does so
// whatever the file says).
#include "lib/model/arch/blocks.h"

namespace llm42 {
namespace {

ArchitectureData Data() {
  ArchitectureData d;
  d.name = "qwen3moe";
  d.rope_neox = true;
  d.parts = {.biases = LayerParts::Biases::kNone, .qk_norms = true};
  d.experts = Experts::kRequired;
  d.routing = {.gate = ExpertRouting::Gate::kSoftmax, .normalize = true};
  // Eight experts of 256, two per token, on tiny-qwen3's attention.
  ModelPreset tiny{"tiny-qwen3moe", 256, 4, 8, 4, 768, 2048, "qwen3moe", false, 64};
  tiny.n_expert = 8;
  tiny.n_expert_used = 2;
  tiny.n_ff_exp = 256;
  // A benchmark's: llama-110m's width and depth with 32 experts of 512, 4 per token (about 0.5B
  // weights, 70M of them active per token).
  ModelPreset bench{"qwen3moe-500m", 768, 12, 12, 4, 2048, 2048, "qwen3moe", false, 64};
  bench.n_expert = 32;
  bench.n_expert_used = 4;
  bench.n_ff_exp = 512;
  d.presets = {tiny, bench};
  return d;
}

}  // namespace

const Architecture& Qwen3MoeArchitecture() {
  static const BlockArchitecture arch(Data(), Activation::kSilu);
  return arch;
}

}  // namespace llm42
