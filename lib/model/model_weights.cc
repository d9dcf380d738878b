#include "lib/model/model_weights.h"

#include <algorithm>

#include "absl/strings/str_join.h"
#include "lib/backend/cpu/row_dot.h"
#include "lib/util/status.h"

namespace llm42 {
namespace {

std::string Shape(const std::vector<int64_t>& dims) { return absl::StrJoin(dims, "x"); }

absl::StatusOr<const GgufTensorInfo*> FindTensor(const GgufFile& f, const std::string& name,
                                                 const std::vector<int64_t>& dims) {
  const GgufTensorInfo* t = f.FindTensor(name);
  if (t == nullptr) return FormatError("missing tensor '", name, "'");
  if (t->dims != dims) {
    return FormatError("tensor ", name, ": expected ", Shape(dims), ", got ", Shape(t->dims));
  }
  if (!GetGgmlTypeInfo(static_cast<uint32_t>(t->type))->computable) {
    return UnsupportedError("tensor '", name, "' has type ",
                            GetGgmlTypeInfo(static_cast<uint32_t>(t->type))->name,
                            ", which llm42 cannot compute with yet (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, "
                            "q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs)");
  }
  // A damaged block (a scale that is infinite or NaN) would turn every output it touches to NaN.
  const GgmlTypeInfo info = *GetGgmlTypeInfo(static_cast<uint32_t>(t->type));
  if (info.block_size > 1) {
    const auto n_blocks = static_cast<int64_t>(t->n_bytes / static_cast<uint64_t>(info.block_bytes));
    if (const int64_t bad = FirstNonFiniteBlock(t->type, t->data, n_blocks); bad >= 0) {
      return FormatError("tensor ", name, ": block ", bad, " of ", n_blocks, " (", info.name,
                         ") has a scale that is infinite or NaN");
    }
  }
  return t;
}

absl::StatusOr<WeightMatrix> LoadMatrix(const GgufFile& f, const std::string& name, int64_t cols,
                                        int64_t rows, int64_t* total_bytes) {
  LLM42_ASSIGN_OR_RETURN(const GgufTensorInfo* t, FindTensor(f, name, {cols, rows}));
  WeightMatrix w;
  w.type = t->type;
  w.data = t->data;
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = static_cast<size_t>(t->n_bytes / static_cast<uint64_t>(rows));
  *total_bytes += static_cast<int64_t>(t->n_bytes);
  return w;
}

absl::StatusOr<std::vector<float>> LoadVector(const GgufFile& f, const std::string& name,
                                              int64_t n) {
  LLM42_ASSIGN_OR_RETURN(const GgufTensorInfo* t, FindTensor(f, name, {n}));
  std::vector<float> v(static_cast<size_t>(n));
  internal::DequantizeRow(t->type, t->data, n, v.data());
  return v;
}

// An optional vector: empty when the tensor is absent, else validated like a required one.
absl::StatusOr<std::vector<float>> LoadOptionalVector(const GgufFile& f, const std::string& name,
                                                      int64_t n) {
  if (f.FindTensor(name) == nullptr) return std::vector<float>();
  return LoadVector(f, name, n);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelWeights>> ModelWeights::Load(
    std::shared_ptr<const GgufFile> file) {
  std::unique_ptr<ModelWeights> m(new ModelWeights());
  const GgufFile& f = *file;
  LLM42_ASSIGN_OR_RETURN(m->config_, ModelConfig::FromGguf(f));
  ModelConfig& c = m->config_;
  const GgufTensorInfo* embd = f.FindTensor("token_embd.weight");
  if (embd == nullptr) return FormatError("missing tensor 'token_embd.weight'");
  if (embd->dims.size() != 2) {
    return FormatError("tensor 'token_embd.weight': expected 2 dimensions, got ", Shape(embd->dims));
  }
  c.n_vocab = embd->dims[1];
  int64_t bytes = 0;
  LLM42_ASSIGN_OR_RETURN(m->token_embd_, LoadMatrix(f, "token_embd.weight", c.n_embd, c.n_vocab, &bytes));
  bytes = 0;  // the embedding table is gathered, not streamed, per step
  LLM42_ASSIGN_OR_RETURN(m->output_norm_, LoadVector(f, "output_norm.weight", c.n_embd));
  if (f.FindTensor("output.weight") != nullptr) {
    LLM42_ASSIGN_OR_RETURN(m->output_, LoadMatrix(f, "output.weight", c.n_embd, c.n_vocab, &bytes));
  } else {
    m->output_ = m->token_embd_;  // tied embeddings
    bytes += static_cast<int64_t>(embd->n_bytes);
  }
  const int64_t kv = c.kv_dim();
  LLM42_ASSIGN_OR_RETURN(m->rope_freqs_, LoadOptionalVector(f, "rope_freqs.weight", c.n_rot / 2));
  m->rope_.n_rot = c.n_rot;
  m->rope_.freq_base = c.rope_freq_base;
  m->rope_.freq_scale = c.rope_freq_scale;
  m->rope_.neox = c.rope_neox;
  const bool qwen2 = c.architecture == "qwen2";
  m->layers_.resize(static_cast<size_t>(c.n_layer));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    Layer& L = m->layers_[static_cast<size_t>(l)];
    const std::string p = absl::StrCat("blk.", l, ".");
    LLM42_ASSIGN_OR_RETURN(L.attn_norm, LoadVector(f, p + "attn_norm.weight", c.n_embd));
    LLM42_ASSIGN_OR_RETURN(L.ffn_norm, LoadVector(f, p + "ffn_norm.weight", c.n_embd));
    LLM42_ASSIGN_OR_RETURN(L.bq, (qwen2 ? LoadVector : LoadOptionalVector)(f, p + "attn_q.bias", c.q_dim()));
    LLM42_ASSIGN_OR_RETURN(L.bk, (qwen2 ? LoadVector : LoadOptionalVector)(f, p + "attn_k.bias", kv));
    LLM42_ASSIGN_OR_RETURN(L.bv, (qwen2 ? LoadVector : LoadOptionalVector)(f, p + "attn_v.bias", kv));
    if (c.architecture == "qwen3") {
      LLM42_ASSIGN_OR_RETURN(L.q_norm, LoadVector(f, p + "attn_q_norm.weight", c.head_dim));
      LLM42_ASSIGN_OR_RETURN(L.k_norm, LoadVector(f, p + "attn_k_norm.weight", c.head_dim));
    }
    LLM42_ASSIGN_OR_RETURN(L.wq, LoadMatrix(f, p + "attn_q.weight", c.n_embd, c.q_dim(), &bytes));
    LLM42_ASSIGN_OR_RETURN(L.wk, LoadMatrix(f, p + "attn_k.weight", c.n_embd, kv, &bytes));
    LLM42_ASSIGN_OR_RETURN(L.wv, LoadMatrix(f, p + "attn_v.weight", c.n_embd, kv, &bytes));
    LLM42_ASSIGN_OR_RETURN(L.wo, LoadMatrix(f, p + "attn_output.weight", c.q_dim(), c.n_embd, &bytes));
    LLM42_ASSIGN_OR_RETURN(L.w_gate, LoadMatrix(f, p + "ffn_gate.weight", c.n_embd, c.n_ff, &bytes));
    LLM42_ASSIGN_OR_RETURN(L.w_up, LoadMatrix(f, p + "ffn_up.weight", c.n_embd, c.n_ff, &bytes));
    LLM42_ASSIGN_OR_RETURN(L.w_down, LoadMatrix(f, p + "ffn_down.weight", c.n_ff, c.n_embd, &bytes));
  }
  m->weight_bytes_ = bytes;
  m->file_ = std::move(file);
  return m;
}

}  // namespace llm42
