// Gemma 3 (text): Gemma 2's layer without soft-capping, with per-head q/k norms; five layers of
// six slide (with RoPE base 10000, unscaled), the sixth attends globally (the file's RoPE base
// and linear scaling).
#include "lib/model/arch/blocks.h"
#include "lib/model/arch/gemma_common.h"

namespace llm42 {
namespace {

class Gemma3 final : public BlockArchitecture {
 public:
  Gemma3()
      : BlockArchitecture("gemma3",
                          LayerParts{.biases = LayerParts::Biases::kNone, .qk_norms = true, .post_norms = true},
                          Activation::kGeluTanh) {}
  absl::Status ReadConfig(const GgufFile& f, ModelConfig& c) const override {
    ReadGemmaCommon(c, /*layers_27b=*/62, /*pattern=*/6);
    c.rope_local_base = 10000.0f;
    return ReadSlidingWindow(f, c, /*optional=*/false);
  }
};

}  // namespace

const Architecture& Gemma3Architecture() {
  static const Gemma3 arch;
  return arch;
}

}  // namespace llm42
