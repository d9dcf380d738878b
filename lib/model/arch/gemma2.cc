// Gemma 2: RMSNorm before and after attention and the FFN (the GGUF norms hold 1 + weight), a
// GELU-tanh gated FFN, attention scores soft-capped (attn_logit_softcapping, 50 by default) and
// the logits too (final_logit_softcapping, 30), sliding-window attention on even layers.
#include "lib/model/arch/blocks.h"
#include "lib/model/arch/gemma_common.h"
#include "lib/format/gguf_reader.h"

namespace llm42 {
namespace {

// {arch}.key as a positive float into *out where the file has it.
absl::Status OptionalPositive(const GgufFile& f, const std::string& key, float* out) {
  if (f.Find(key) == nullptr) return absl::OkStatus();
  LLM42_ASSIGN_OR_RETURN(const double v, f.GetFloat(key));
  if (!(v > 0 && v < 1e6)) return FormatError("key '", key, "' = ", v, " is out of range");
  *out = static_cast<float>(v);
  return absl::OkStatus();
}

class Gemma2 final : public BlockArchitecture {
 public:
  Gemma2()
      : BlockArchitecture("gemma2", LayerParts{.biases = LayerParts::Biases::kNone, .post_norms = true},
                          Activation::kGeluTanh) {}
  absl::Status ReadConfig(const GgufFile& f, ModelConfig& c) const override {
    ReadGemmaCommon(c, /*layers_27b=*/46, /*pattern=*/2);
    c.attn_softcap = 50.0f;
    c.final_softcap = 30.0f;
    LLM42_RETURN_IF_ERROR(OptionalPositive(f, "gemma2.attn_logit_softcapping", &c.attn_softcap));
    LLM42_RETURN_IF_ERROR(OptionalPositive(f, "gemma2.final_logit_softcapping", &c.final_softcap));
    return ReadSlidingWindow(f, c, /*optional=*/false);
  }
};

}  // namespace

const Architecture& Gemma2Architecture() {
  static const Gemma2 arch;
  return arch;
}

}  // namespace llm42
