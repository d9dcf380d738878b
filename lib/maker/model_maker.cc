#include "lib/maker/model_maker.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "lib/format/gguf_reader.h"
#include "lib/maker/gguf_writer.h"
#include "lib/maker/quantizer.h"
#include "lib/model/arch/architecture.h"
#include "lib/numerics/philox.h"
#include "lib/numerics/portable_math.h"
#include "lib/util/status.h"
#include "lib/util/thread_pool.h"

namespace llm42 {
namespace {

// fn(begin, end) over [0, n) on every hardware thread (ThreadPool), in ranges of whole 32-element
// groups (quantization blocks, Philox groups), so the bytes never depend on the thread count.
// Large presets (llama-8b: 16 GB) take minutes on one core.
ThreadPool& Pool() {
  static ThreadPool pool(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  return pool;
}
void ParallelPieces(size_t n, const std::function<void(size_t, size_t)>& fn) {
  ThreadPool& pool = Pool();
  constexpr size_t kGroup = 32;
  const auto groups = static_cast<int64_t>((n + kGroup - 1) / kGroup);
  pool.ParallelFor(groups, std::max<int64_t>(1, (int64_t{1} << 20) / kGroup), [&](int64_t begin, int64_t end) {
    fn(static_cast<size_t>(begin) * kGroup, std::min(n, static_cast<size_t>(end) * kGroup));
  });
}

// Uniform values in [-a, a] for element i of a tensor identified by `stream`.
void FillUniform(uint64_t seed, uint32_t stream, float a, std::vector<float>* out) {
  const auto key = std::array<uint32_t, 2>{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  ParallelPieces(out->size(), [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; i += 4) {
      const auto r = Philox4x32({static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32), stream, 0x6D6F646C}, key);
      for (size_t j = 0; j < 4 && i + j < end; ++j) {
        (*out)[i + j] = a * (static_cast<float>(r[j] >> 8) * 0x1.0p-23f - 1.0f);
      }
    }
  });
}

// v as `type`'s bytes (quantizer.h), in pieces of whole blocks on every hardware thread.
std::vector<uint8_t> Encode(const std::vector<float>& v, GgmlType type) {
  const GgmlTypeInfo info = *GetGgmlTypeInfo(static_cast<uint32_t>(type));
  const auto block = static_cast<size_t>(info.block_size);
  const size_t piece = block * 4096;  // elements per task: whole blocks of every type
  const size_t n_pieces = (v.size() + piece - 1) / piece;
  std::vector<uint8_t> out(v.size() / block * static_cast<size_t>(info.block_bytes));
  Pool().ParallelFor(static_cast<int64_t>(n_pieces), 1, [&](int64_t begin, int64_t end) {
    for (auto p = static_cast<size_t>(begin); p < static_cast<size_t>(end); ++p) {
      const size_t first = p * piece, n = std::min(piece, v.size() - first);
      const std::vector<uint8_t> bytes = Quantize(std::span<const float>(v.data() + first, n), type);
      std::memcpy(out.data() + first / block * static_cast<size_t>(info.block_bytes), bytes.data(), bytes.size());
    }
  });
  return out;
}

}  // namespace

const std::vector<ModelPreset>& ModelPresets() {
  static const std::vector<ModelPreset>* const presets = [] {
    auto* all = new std::vector<ModelPreset>;
    for (const Architecture* a : Architectures()) {
      for (ModelPreset p : a->data().presets) {
        p.architecture = std::string(a->name());
        all->push_back(std::move(p));
      }
    }
    return all;
  }();
  return *presets;
}

absl::Status MakeModel(const ModelPreset& p, GgmlType dtype, const std::string& vocab_path,
                       uint64_t seed, const std::string& out_path, const std::string& chat_template) {
  if (!CanQuantize(dtype)) {
    return InvalidArgument("make-model writes f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, "
                           "q5_k, q6_k, iq4_nl, iq4_xs or mxfp4");
  }
  const int64_t block = GetGgmlTypeInfo(static_cast<uint32_t>(dtype))->block_size;
  // Layer l's shape by ModelConfig's per-layer rules (the loader's), from the preset's fields.
  const int64_t head_dim = p.head_dim > 0 ? p.head_dim : p.n_embd / p.n_head;
  ModelConfig shape;
  shape.n_layer = p.n_layer;
  shape.n_head = p.n_head;
  shape.n_head_kv = p.n_head_kv;
  shape.head_dim = head_dim;
  shape.n_ff = p.n_ff;
  shape.head_dim_swa = p.head_dim_swa;
  shape.layer_sliding.assign(p.sliding.begin(), p.sliding.end());
  shape.layer_head_kv.assign(p.layer_head_kv.begin(), p.layer_head_kv.end());
  shape.layer_ff.assign(p.layer_ff.begin(), p.layer_ff.end());
  shape.n_kv_shared = p.n_kv_shared;
  if (p.full_attention_interval > 0) {  // recurrent layers: no K/V heads
    shape.layer_recurrent.resize(static_cast<size_t>(p.n_layer));
    if (shape.layer_head_kv.empty()) shape.layer_head_kv.assign(static_cast<size_t>(p.n_layer), p.n_head_kv);
    for (int64_t l = 0; l < p.n_layer; ++l) {
      const bool recurrent = (l + 1) % p.full_attention_interval != 0;
      shape.layer_recurrent[static_cast<size_t>(l)] = recurrent;
      if (recurrent) shape.layer_head_kv[static_cast<size_t>(l)] = 0;
    }
    shape.ssm_conv_kernel = p.ssm_conv_kernel;
    shape.ssm_key_heads = p.ssm_key_heads;
    shape.ssm_value_heads = p.ssm_value_heads;
    shape.ssm_head_dim = p.ssm_head_dim;
  }
  for (int64_t l = 0; l < p.n_layer; ++l) {
    for (int64_t cols : {p.n_embd, p.n_expert > 0 ? p.n_ff_exp : shape.n_ff_of(l),
                         shape.recurrent(l) ? p.ssm_value_heads * p.ssm_head_dim : shape.q_dim(l)}) {
      if (cols % block != 0) {
        return InvalidArgument("preset '", p.name, "' has rows of ", cols, " weights, not whole ", block,
                               "-weight blocks of ", GetGgmlTypeInfo(static_cast<uint32_t>(dtype))->name);
      }
    }
  }
  LLM42_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> vocab, GgufFile::Open(vocab_path));
  const GgufValue* tokens = vocab->Find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->string_array.empty()) {
    return FormatError(vocab_path, ": no tokenizer.ggml.tokens to copy");
  }
  const auto n_vocab = static_cast<int64_t>(tokens->string_array.size());

  const Architecture* arch = FindArchitecture(p.architecture);
  if (arch == nullptr) {
    return InvalidArgument("preset '", p.name, "': architecture '", p.architecture, "' is not one of ",
                           ArchitectureNames());
  }
  const ArchitectureData& d = arch->data();
  GgufWriter w;
  const std::string a = p.architecture + ".";
  const int64_t n_rot = p.rope_dims > 0 ? p.rope_dims : head_dim;
  const float rope_base = p.llama3_rope ? 500000.0f : d.made_rope_base;
  w.AddString("general.architecture", p.architecture);
  w.AddString("general.name", "llm42-random-" + p.name);
  w.AddUint32(a + "context_length", static_cast<uint32_t>(p.n_ctx));
  w.AddUint32(a + "embedding_length", static_cast<uint32_t>(p.n_embd));
  w.AddUint32(a + "block_count", static_cast<uint32_t>(p.n_layer));
  if (p.layer_ff.empty()) {
    w.AddUint32(a + "feed_forward_length", static_cast<uint32_t>(p.n_ff));
  } else {
    w.AddInt32Array(a + "feed_forward_length", p.layer_ff);
  }
  w.AddUint32(a + "attention.head_count", static_cast<uint32_t>(p.n_head));
  if (p.layer_head_kv.empty()) {
    w.AddUint32(a + "attention.head_count_kv", static_cast<uint32_t>(p.n_head_kv));
  } else {
    w.AddInt32Array(a + "attention.head_count_kv", p.layer_head_kv);
  }
  if (!p.sliding.empty()) w.AddBoolArray(a + "attention.sliding_window_pattern", p.sliding);
  if (p.head_dim_swa > 0) {
    w.AddUint32(a + "attention.key_length_swa", static_cast<uint32_t>(p.head_dim_swa));
    w.AddUint32(a + "attention.value_length_swa", static_cast<uint32_t>(p.head_dim_swa));
    w.AddUint32(a + "rope.dimension_count_swa", static_cast<uint32_t>(p.head_dim_swa));
  }
  if (p.n_kv_shared > 0) w.AddUint32(a + "attention.shared_kv_layers", static_cast<uint32_t>(p.n_kv_shared));
  if (p.n_embd_per_layer > 0) {
    w.AddUint32(a + "embedding_length_per_layer_input", static_cast<uint32_t>(p.n_embd_per_layer));
  }
  if (p.head_dim > 0) {
    w.AddUint32(a + "attention.key_length", static_cast<uint32_t>(head_dim));
    w.AddUint32(a + "attention.value_length", static_cast<uint32_t>(head_dim));
  }
  w.AddUint32(a + "rope.dimension_count", static_cast<uint32_t>(n_rot));
  w.AddFloat32(a + "rope.freq_base", rope_base);
  w.AddFloat32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  if (p.sliding_window > 0) w.AddUint32(a + "attention.sliding_window", static_cast<uint32_t>(p.sliding_window));
  if (!p.rope_sections.empty()) w.AddInt32Array(a + "rope.dimension_sections", p.rope_sections);
  if (p.full_attention_interval > 0) {
    w.AddUint32(a + "full_attention_interval", static_cast<uint32_t>(p.full_attention_interval));
    w.AddUint32(a + "ssm.conv_kernel", static_cast<uint32_t>(p.ssm_conv_kernel));
    w.AddUint32(a + "ssm.group_count", static_cast<uint32_t>(p.ssm_key_heads));
    w.AddUint32(a + "ssm.time_step_rank", static_cast<uint32_t>(p.ssm_value_heads));
    w.AddUint32(a + "ssm.state_size", static_cast<uint32_t>(p.ssm_head_dim));
    w.AddUint32(a + "ssm.inner_size", static_cast<uint32_t>(p.ssm_value_heads * p.ssm_head_dim));
  }
  if (p.n_expert > 0) {
    w.AddUint32(a + "expert_count", static_cast<uint32_t>(p.n_expert));
    w.AddUint32(a + "expert_used_count", static_cast<uint32_t>(p.n_expert_used));
    if (!d.experts_full_width) w.AddUint32(a + "expert_feed_forward_length", static_cast<uint32_t>(p.n_ff_exp));
    if (p.n_ff_shexp > 0) w.AddUint32(a + "expert_shared_feed_forward_length", static_cast<uint32_t>(p.n_ff_shexp));
  }
  for (const ArchKey& k : d.keys) {
    if (!k.made) continue;
    float value = k.fallback;
    for (const auto& [suffix, v] : p.keys) {
      if (suffix == k.suffix) value = v;
    }
    w.AddFloat32(a + std::string(k.suffix), value);
  }
  if (p.yarn_factor > 0) {
    w.AddString(a + "rope.scaling.type", "yarn");
    w.AddFloat32(a + "rope.scaling.factor", static_cast<float>(p.yarn_factor));
    w.AddUint32(a + "rope.scaling.original_context_length", static_cast<uint32_t>(p.yarn_original_context));
    if (p.yarn_log_multiplier != 0) w.AddFloat32(a + "rope.scaling.yarn_log_multiplier", p.yarn_log_multiplier);
  }
  if (d.longrope) {  // LongRoPE (Phi-3.5's keys): the short factors below a 64-position original context,
    // the attention factor as llama.cpp's converter derives it, sqrt(1 + ln(scale) / ln(original))
    const double scale = static_cast<double>(p.n_ctx) / 64.0;
    w.AddFloat32(a + "rope.scaling.attn_factor",
                 static_cast<float>(std::sqrt(1 + PortableLog(scale) / PortableLog(64.0))));
    w.AddUint32(a + "rope.scaling.original_context_length", 64);
  }
  for (const auto& [key, value] : vocab->metadata()) {
    if (key.rfind("tokenizer.", 0) == 0 && (chat_template.empty() || key != "tokenizer.chat_template")) {
      w.AddValue(key, value);
    }
  }
  if (!chat_template.empty()) w.AddString("tokenizer.chat_template", chat_template);

  uint32_t stream = 0;
  auto matrix = [&](const std::string& name, int64_t cols, int64_t rows, GgmlType type) {
    std::vector<float> v(static_cast<size_t>(cols * rows));
    FillUniform(seed, stream++, 0.02f * std::sqrt(3.0f), &v);
    w.AddTensor(name, type, {cols, rows}, Encode(v, type));
  };
  // An expert tensor: n_expert matrices of `rows` rows of `cols` (GGUF dims {cols, rows, n_expert}).
  auto experts = [&](const std::string& name, int64_t cols, int64_t rows) {
    std::vector<float> v(static_cast<size_t>(cols * rows * p.n_expert));
    FillUniform(seed, stream++, 0.02f * std::sqrt(3.0f), &v);
    w.AddTensor(name, dtype, {cols, rows, p.n_expert}, Encode(v, dtype));
  };
  auto ones = [&](const std::string& name, int64_t n) {
    w.AddTensor(name, GgmlType::kF32, {n}, Encode(std::vector<float>(static_cast<size_t>(n), 1.0f), GgmlType::kF32));
  };
  auto bias = [&](const std::string& name, int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    FillUniform(seed, stream++, 0.5f, &v);
    w.AddTensor(name, GgmlType::kF32, {n}, Encode(v, GgmlType::kF32));
  };
  if (p.llama3_rope) {
    w.AddTensor("rope_freqs.weight", GgmlType::kF32, {n_rot / 2},
                Encode(Llama3RopeFactors(n_rot, rope_base, 8.0, 1.0, 4.0, 64.0), GgmlType::kF32));
  }
  if (p.rope_partial > 0) {  // as llama.cpp's converter writes Gemma 4's proportional RoPE
    std::vector<float> v(static_cast<size_t>(n_rot / 2), 1e30f);
    std::fill_n(v.begin(), static_cast<int64_t>(static_cast<double>(n_rot) * p.rope_partial / 2), 1.0f);
    w.AddTensor("rope_freqs.weight", GgmlType::kF32, {n_rot / 2}, Encode(v, GgmlType::kF32));
  }
  // Norm weights around 1 (per-head q/k norms): a test sees a weight that is not applied.
  auto norm = [&](const std::string& name, int64_t n, float scale = 1) {
    std::vector<float> v(static_cast<size_t>(n));
    FillUniform(seed, stream++, 0.5f, &v);
    for (float& x : v) x = (x + 1.0f) * scale;
    w.AddTensor(name, GgmlType::kF32, {n}, Encode(v, GgmlType::kF32));
  };

  // q8_0, q4_0 and mxfp4 models keep the embedding table in f16, as llama.cpp's quantizer keeps it
  // in higher precision than those matrices; the other block types hold it in their own (as k-quant
  // files do: Q4_K_M's table is q4_k).
  const bool f16_table = dtype == GgmlType::kQ8_0 || dtype == GgmlType::kQ4_0 || dtype == GgmlType::kMXFP4;
  matrix("token_embd.weight", p.n_embd, n_vocab, f16_table ? GgmlType::kF16 : dtype);
  ones("output_norm.weight", p.n_embd);
  if (!d.ties_output) matrix("output.weight", p.n_embd, n_vocab, dtype);
  if (d.longrope) {
    // Divisors between 1 and 2 for the short context, 1 and 8 beyond it.
    struct Factors {
      const char* name;
      float low, high;
    };
    for (const Factors& f : {Factors{"rope_factors_short.weight", 1, 2}, Factors{"rope_factors_long.weight", 1, 8}}) {
      std::vector<float> v(static_cast<size_t>(n_rot / 2));
      FillUniform(seed, stream++, 1.0f, &v);  // in [-1, 1]
      for (float& x : v) x = f.low + (x + 1) / 2 * (f.high - f.low);
      w.AddTensor(f.name, GgmlType::kF32, {n_rot / 2}, Encode(v, GgmlType::kF32));
    }
  }
  // Per-layer embeddings: matrices P wide in f16 where P is not whole blocks of the type (as
  // llama.cpp's quantizer falls back to another type for such rows).
  const int64_t pl = p.n_embd_per_layer;
  const GgmlType pl_type = pl % block == 0 && p.n_layer * pl % block == 0 ? dtype : GgmlType::kF16;
  if (pl > 0) {
    matrix("per_layer_token_embd.weight", p.n_layer * pl, n_vocab, f16_table ? GgmlType::kF16 : pl_type);
    matrix("per_layer_model_proj.weight", p.n_embd, p.n_layer * pl, dtype);
    norm("per_layer_proj_norm.weight", pl);
  }
  for (int64_t l = 0; l < p.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const int64_t hd = shape.head_dim_of(l), q_dim = shape.q_dim(l), kv = shape.kv_dim(l), ff = shape.n_ff_of(l);
    const bool stores_kv = l < shape.n_kv_layers();
    ones(b + "attn_norm.weight", p.n_embd);
    ones(b + std::string(d.parts.ffn_norm) + ".weight", p.n_embd);
    if (d.parts.post_norms) {
      norm(b + "post_attention_norm.weight", p.n_embd);
      norm(b + "post_ffw_norm.weight", p.n_embd);
    }
    if (shape.recurrent(l)) {  // a gated DeltaNet layer (blocks.h's LoadDeltaNetTensors)
      const int64_t hv = p.ssm_value_heads, inner = hv * p.ssm_head_dim;
      const int64_t channels = (2 * p.ssm_key_heads + hv) * p.ssm_head_dim;
      matrix(b + "attn_qkv.weight", p.n_embd, channels, dtype);
      matrix(b + "attn_gate.weight", p.n_embd, inner, dtype);
      matrix(b + "ssm_beta.weight", p.n_embd, hv, dtype);
      matrix(b + "ssm_alpha.weight", p.n_embd, hv, dtype);
      matrix(b + "ssm_out.weight", inner, p.n_embd, dtype);
      // The convolution's weights in f32 (llama.cpp's quantizer leaves them), about +-0.5; the decay
      // bias about +-0.5 and its scale -exp(A_log) in [-0.3, -0.05], so that states fade over tens
      // of positions, not one.
      std::vector<float> conv(static_cast<size_t>(p.ssm_conv_kernel * channels));
      FillUniform(seed, stream++, 0.5f, &conv);
      w.AddTensor(b + "ssm_conv1d.weight", GgmlType::kF32, {p.ssm_conv_kernel, channels}, Encode(conv, GgmlType::kF32));
      bias(b + "ssm_dt.bias", hv);
      std::vector<float> decay(static_cast<size_t>(hv));
      FillUniform(seed, stream++, 1.0f, &decay);
      for (float& x : decay) x = -0.175f + 0.125f * x;
      w.AddTensor(b + "ssm_a", GgmlType::kF32, {hv}, Encode(decay, GgmlType::kF32));
      norm(b + "ssm_norm.weight", p.ssm_head_dim);
    } else if (d.parts.fused) {
      matrix(b + "attn_qkv.weight", p.n_embd, q_dim + 2 * kv, dtype);
    } else {
      matrix(b + "attn_q.weight", p.n_embd, d.parts.output_gate ? 2 * q_dim : q_dim, dtype);
      if (stores_kv) {
        matrix(b + "attn_k.weight", p.n_embd, kv, dtype);
        matrix(b + "attn_v.weight", p.n_embd, kv, dtype);
      }
    }
    if (d.parts.biases == LayerParts::Biases::kRequired && !shape.recurrent(l)) {
      bias(b + "attn_q.bias", q_dim);
      bias(b + "attn_k.bias", kv);
      bias(b + "attn_v.bias", kv);
    }
    if (d.parts.qk_norms && !shape.recurrent(l)) {
      norm(b + "attn_q_norm.weight", hd, p.qk_norm_scale);
      if (stores_kv) norm(b + "attn_k_norm.weight", hd, p.qk_norm_scale);
    }
    if (!shape.recurrent(l)) matrix(b + "attn_output.weight", q_dim, p.n_embd, dtype);
    if (d.parts.output_bias) {  // about the residual stream's size, which a larger constant would drown
      std::vector<float> v(static_cast<size_t>(p.n_embd));
      FillUniform(seed, stream++, 0.02f, &v);
      w.AddTensor(b + "attn_output.bias", GgmlType::kF32, {p.n_embd}, Encode(v, GgmlType::kF32));
    }
    if (d.parts.sinks) {  // logits of 0 to 4: a sink takes a visible share beside a random model's scores
      std::vector<float> sinks(static_cast<size_t>(p.n_head));
      FillUniform(seed, stream++, 2.0f, &sinks);
      for (float& x : sinks) x += 2.0f;
      w.AddTensor(b + "attn_sinks.weight", GgmlType::kF32, {p.n_head}, Encode(sinks, GgmlType::kF32));
    }
    if (p.n_expert > 0) {
      // The router in f32 (llama.cpp's quantizer leaves it), its logits spread a few units apart so
      // that a token's choice is clear; then the experts' 3-D tensors.
      std::vector<float> router(static_cast<size_t>(p.n_embd * p.n_expert));
      FillUniform(seed, stream++, 0.5f, &router);
      w.AddTensor(b + "ffn_gate_inp.weight", GgmlType::kF32, {p.n_embd, p.n_expert}, Encode(router, GgmlType::kF32));
      experts(b + "ffn_gate_exps.weight", p.n_embd, p.n_ff_exp);
      experts(b + "ffn_up_exps.weight", p.n_embd, p.n_ff_exp);
      experts(b + "ffn_down_exps.weight", p.n_ff_exp, p.n_embd);
      if (d.parts.expert_biases) {  // [n_expert][width] in f32 (GGUF dims {width, n_expert})
        bias(b + "ffn_gate_inp.bias", p.n_expert);
        struct Bias {
          const char* name;
          int64_t width;
          float size;  // the down product's about the residual stream's, as the output bias
        };
        for (const Bias& x : {Bias{"ffn_gate_exps.bias", p.n_ff_exp, 8.0f}, Bias{"ffn_up_exps.bias", p.n_ff_exp, 8.0f},
                              Bias{"ffn_down_exps.bias", p.n_embd, 0.02f}}) {
          const auto [name, width, size] = x;
          std::vector<float> v(static_cast<size_t>(width * p.n_expert));
          FillUniform(seed, stream++, size, &v);
          w.AddTensor(b + name, GgmlType::kF32, {width, p.n_expert}, Encode(v, GgmlType::kF32));
        }
      }
      if (d.parts.dense_with_experts) {  // Gemma 4's norms around its experts, and their scales
        norm(b + "ffn_gate_inp.scale", p.n_embd);
        norm(b + "pre_ffw_norm_2.weight", p.n_embd);
        norm(b + "post_ffw_norm_1.weight", p.n_embd);
        norm(b + "post_ffw_norm_2.weight", p.n_embd);
        norm(b + "ffn_down_exps.scale", p.n_expert);
      }
      if (p.n_ff_shexp > 0) {
        std::vector<float> gate(static_cast<size_t>(p.n_embd));  // a vector (llama.cpp's shape), f32
        FillUniform(seed, stream++, 0.25f, &gate);
        w.AddTensor(b + "ffn_gate_inp_shexp.weight", GgmlType::kF32, {p.n_embd}, Encode(gate, GgmlType::kF32));
        matrix(b + "ffn_gate_shexp.weight", p.n_embd, p.n_ff_shexp, dtype);
        matrix(b + "ffn_up_shexp.weight", p.n_embd, p.n_ff_shexp, dtype);
        matrix(b + "ffn_down_shexp.weight", p.n_ff_shexp, p.n_embd, dtype);
      }
    }
    if (p.n_expert == 0 || d.parts.dense_with_experts) {
      if (d.parts.fused) {
        matrix(b + "ffn_up.weight", p.n_embd, 2 * ff, dtype);  // gate rows, then up rows
      } else {
        matrix(b + "ffn_gate.weight", p.n_embd, ff, dtype);
        matrix(b + "ffn_up.weight", p.n_embd, ff, dtype);
      }
      matrix(b + "ffn_down.weight", ff, p.n_embd, dtype);
    }
    if (pl > 0) {
      matrix(b + "inp_gate.weight", p.n_embd, pl, dtype);
      matrix(b + "proj.weight", pl, p.n_embd, pl_type);
      norm(b + "post_norm.weight", p.n_embd);
    }
    if (d.parts.layer_scale) norm(b + "layer_output_scale.weight", 1);
  }
  return w.WriteFile(out_path);
}

}  // namespace llm42
