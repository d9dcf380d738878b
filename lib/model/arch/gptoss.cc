// gpt-oss (20B, 120B; general.architecture "gpt-oss", llama.cpp's openai-moe graph): attention
// with biases on q, k, v and the output, and a learned sink logit per head that every softmax also
// counts (AttentionShape::sinks); even layers slide over attention.sliding_window positions, odd
// ones attend globally, all with NeoX RoPE and YaRN scaling (the file's rope.scaling keys); the
// feed-forward norm is post_attention_norm; every layer's FFN is a mixture of experts (experts.h)
// with biases on the router and on each expert's products, routed by a softmax over the chosen
// experts' logits (top-k of the raw logits, no normalization), and the clamped SwiGLU
// (Backend::ClampedSwiGlu). Its experts ship in MXFP4.
#include "lib/format/gguf_reader.h"
#include "lib/model/arch/blocks.h"

namespace llm42 {
namespace {

ArchitectureData Data() {
  ArchitectureData d;
  d.name = "gpt-oss";
  d.rope_neox = true;
  d.window = Window::kRequired;
  d.parts = {.biases = LayerParts::Biases::kRequired,
             .ffn_norm = "post_attention_norm",
             .sinks = true,
             .output_bias = true,
             .expert_biases = true};
  d.made_rope_base = 150000.0f;
  d.experts = Experts::kRequired;
  d.routing = {.gate = ExpertRouting::Gate::kSoftmaxChosen, .normalize = false};
  // Both presets: n_expert experts of n_ff_exp, n_used per token, and YaRN by 4 over 512 positions
  // without a log multiplier (so its magnitude 1 + 0.1 ln 4 scales every rotation, as gpt-oss's 32
  // over 4096 does).
  auto with_experts = [](ModelPreset p, int64_t n_expert, int64_t n_used, int64_t n_ff_exp) {
    p.n_expert = n_expert;
    p.n_expert_used = n_used;
    p.n_ff_exp = n_ff_exp;
    p.yarn_factor = 4;
    p.yarn_original_context = 512;
    p.yarn_log_multiplier = 0;
    return p;
  };
  // Eight heads of 64 on a width of 256 (queries wider than the stream, as the 20B's 64 on 2880),
  // eight experts of 256, two per token; even layers slide over 32 positions.
  const ModelPreset tiny = with_experts({"tiny-gptoss", 256, 4, 8, 2, 256, 2048, "gpt-oss", false, 64, 32}, 8, 2, 256);
  // A benchmark's: llama-110m's width and depth (12 heads of 64, 4 KV heads) with 32 experts of
  // 512, 4 per token (qwen3moe-500m's), windows of 128 on the even layers.
  const ModelPreset bench =
      with_experts({"gptoss-500m", 768, 12, 12, 4, 2048, 2048, "gpt-oss", false, 64, 128}, 32, 4, 512);
  d.presets = {tiny, bench};
  return d;
}

class GptOss final : public BlockArchitecture {
 public:
  GptOss() : BlockArchitecture(Data(), Activation::kClampedSilu) {}
  // Layers slide by attention.sliding_window_pattern's period (2 without it: the even layers);
  // sliding layers with a RoPE base of their own (rope.freq_base_swa, which gpt-oss's files do not
  // carry) are UNSUPPORTED.
  absl::Status ReadConfig(const GgufFile& f, ModelConfig& c) const override {
    const std::string a = c.architecture + ".";
    int64_t pattern = 2;
    if (const std::string key = a + "attention.sliding_window_pattern"; f.Find(key) != nullptr) {
      LLM42_ASSIGN_OR_RETURN(pattern, IntKeyIn(f, key, 1, c.n_layer));
    }
    SlideByPattern(c, pattern);
    if (const std::string key = a + "rope.freq_base_swa"; f.Find(key) != nullptr) {
      LLM42_ASSIGN_OR_RETURN(const double base, f.GetFloat(key));
      if (static_cast<float>(base) != c.rope_freq_base) {
        return UnsupportedError("key '", key, "' = ", base, ": sliding layers with a RoPE base of their own");
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace

const Architecture& GptOssArchitecture() {
  static const GptOss arch;
  return arch;
}

}  // namespace llm42
