// Llama 2/3/3.1/3.2, Mistral 7B, TinyLlama, ...: the blocks as they are, RoPE on adjacent pairs,
// attention biases where a file has them.
#include "lib/model/arch/blocks.h"

namespace llm42 {
namespace {

class Llama final : public BlockArchitecture {
 public:
  Llama() : BlockArchitecture("llama", LayerParts{}, Activation::kSilu) {}
  absl::Status ReadConfig(const GgufFile&, ModelConfig& c) const override {
    c.rope_neox = false;
    return absl::OkStatus();
  }
};

}  // namespace

const Architecture& LlamaArchitecture() {
  static const Llama arch;
  return arch;
}

}  // namespace llm42
