// Llama 2/3/3.1/3.2, Mistral 7B, TinyLlama, ...: the blocks as they are, RoPE on adjacent pairs,
// attention biases where a file has them. Hugging Face stores q/k rows in rotate-half order.
// Mixtral's files are llama files with experts (experts.h) of feed_forward_length each: softmax
// over the router's logits, the chosen weights normalized.
#include "lib/model/arch/blocks.h"

namespace llm42 {
namespace {

// (Field by field: GCC 12 at -O3 reports a use after free, falsely, in nested initializer lists.)
ArchitectureData Data() {
  ArchitectureData d;
  d.name = "llama";
  d.hf.classes = {"LlamaForCausalLM", "MistralForCausalLM"};
  d.hf.permute_qk = true;
  d.experts = Experts::kOptional;
  d.routing = {.gate = ExpertRouting::Gate::kSoftmax, .normalize = true};
  d.experts_full_width = true;
  ModelPreset mixtral{"tiny-mixtral", 256, 4, 8, 4, 256, 2048};
  mixtral.n_expert = 8;
  mixtral.n_expert_used = 2;
  mixtral.n_ff_exp = 256;
  d.presets = {
      {"tiny", 256, 4, 8, 4, 688, 2048},
      {"tiny-llama3", 256, 4, 8, 4, 688, 2048, "llama", true},
      {"tiny-blocks", 256, 4, 8, 4, 768, 2048},
      {"llama-110m", 768, 12, 12, 12, 2048, 2048},
      {"llama-1b", 2048, 16, 32, 8, 8192, 2048},
      // Llama-3.1-8B's shape (GPU benchmarks; give it a Llama 3 vocabulary for its 128256 rows).
      {"llama-8b", 4096, 32, 32, 8, 14336, 8192, "llama", true},
      mixtral,
  };
  return d;
}

}  // namespace

const Architecture& LlamaArchitecture() {
  static const BlockArchitecture arch(Data(), Activation::kSilu);
  return arch;
}

}  // namespace llm42
