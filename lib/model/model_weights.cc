#include "lib/model/model_weights.h"

#include "lib/format/rope_factors.h"
#include "lib/model/arch/tensor_reader.h"
#include "lib/util/status.h"

namespace llm42 {

absl::StatusOr<std::unique_ptr<ModelWeights>> ModelWeights::Load(std::shared_ptr<const GgufFile> file) {
  std::unique_ptr<ModelWeights> m(new ModelWeights());
  const GgufFile& f = *file;
  LLM42_ASSIGN_OR_RETURN(m->config_, ModelConfig::FromGguf(f));
  ModelConfig& c = m->config_;
  m->arch_ = FindArchitecture(c.architecture);  // FromGguf refused names without one
  const GgufTensorInfo* embd = f.FindTensor("token_embd.weight");
  if (embd == nullptr) return FormatError("missing tensor 'token_embd.weight'");
  if (embd->dims.size() != 2) {
    return FormatError("tensor 'token_embd.weight': expected 2 dimensions, got ", embd->dims.size());
  }
  c.n_vocab = embd->dims[1];
  TensorReader r(f);
  // The embedding table is gathered, not streamed, per step: its bytes count only where it is
  // the output matrix too.
  LLM42_ASSIGN_OR_RETURN(m->token_embd_, r.Table("token_embd.weight", c.n_embd, c.n_vocab));
  LLM42_ASSIGN_OR_RETURN(m->output_norm_, r.Vector("output_norm.weight", c.n_embd));
  if (r.Has("output.weight")) {
    LLM42_ASSIGN_OR_RETURN(m->output_, r.Matrix("output.weight", c.n_embd, c.n_vocab));
  } else {
    m->output_ = m->token_embd_;  // tied embeddings
    r.count(static_cast<int64_t>(embd->n_bytes));
  }
  LLM42_ASSIGN_OR_RETURN(m->rope_freqs_, r.OptionalVector("rope_freqs.weight", c.n_rot / 2));
  float attn_factor = c.rope_attn_factor;
  if (c.yarn.factor > 0) {  // YaRN's divisors and magnitude (a file has one kind of per-pair factors)
    if (!m->rope_freqs_.empty()) return FormatError("rope_freqs.weight beside YaRN scaling: one kind of RoPE factors at most");
    m->rope_freqs_ = YarnRopeFactors(c.n_rot, c.rope_freq_base, c.yarn.factor, c.yarn.original_context,
                                     c.yarn.beta_fast, c.yarn.beta_slow);
    attn_factor = YarnMagnitude(c.yarn.factor, c.yarn.log_mul, c.rope_attn_factor);
  }
  LLM42_ASSIGN_OR_RETURN(m->rope_factors_short_, r.OptionalVector("rope_factors_short.weight", c.n_rot / 2));
  LLM42_ASSIGN_OR_RETURN(m->rope_factors_long_, r.OptionalVector("rope_factors_long.weight", c.n_rot / 2));
  m->rope_.n_rot = c.n_rot;
  m->rope_.freq_base = c.rope_freq_base;
  m->rope_.freq_scale = c.rope_freq_scale;
  m->rope_.neox = c.rope_neox;
  m->rope_.attn_factor = attn_factor;
  if (c.n_embd_per_layer > 0) {  // gathered like token_embd; the projection streamed
    const int64_t width = c.n_layer * c.n_embd_per_layer;
    PerLayerInputTensors<std::vector<float>>& t = m->per_layer_inputs_;
    LLM42_ASSIGN_OR_RETURN(t.table, r.Table("per_layer_token_embd.weight", width, c.n_vocab));
    LLM42_ASSIGN_OR_RETURN(t.proj, r.Matrix("per_layer_model_proj.weight", c.n_embd, width));
    LLM42_ASSIGN_OR_RETURN(t.proj_norm, r.Vector("per_layer_proj_norm.weight", c.n_embd_per_layer));
  }
  m->layers_.resize(static_cast<size_t>(c.n_layer));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    LLM42_RETURN_IF_ERROR(m->arch_->LoadLayer(r, c, l, m->layers_[static_cast<size_t>(l)]));
  }
  m->weight_bytes_ = r.matrix_bytes();
  m->file_ = std::move(file);
  return m;
}

}  // namespace llm42
