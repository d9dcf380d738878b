#include "lib/model/llama_model.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_join.h"
#include "lib/backend/cpu/row_dot.h"
#include "lib/kv/kv_cache.h"
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
                            ", which llm42 cannot compute with yet (f32, f16, bf16, q8_0, q4_0)");
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

// y[i] += bias for each of m rows of n (nothing when the model has no bias).
void AddBias(float* y, int64_t m, const std::vector<float>& bias) {
  if (bias.empty()) return;
  const size_t n = bias.size();
  for (size_t i = 0; i < static_cast<size_t>(m); ++i) {
    for (size_t j = 0; j < n; ++j) y[i * n + j] += bias[j];
  }
}

template <typename T>
T* Grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(
    std::shared_ptr<const GgufFile> file) {
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  const GgufFile& f = *file;
  LLM42_ASSIGN_OR_RETURN(m->config_, LlamaConfig::FromGguf(f));
  LlamaConfig& c = m->config_;
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
  m->rope_.freq_factors = m->rope_freqs_.empty() ? nullptr : m->rope_freqs_.data();
  const bool qwen2 = c.architecture == "qwen2";
  m->layers_.resize(static_cast<size_t>(c.n_layer));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    Layer& L = m->layers_[static_cast<size_t>(l)];
    const std::string p = absl::StrCat("blk.", l, ".");
    LLM42_ASSIGN_OR_RETURN(L.attn_norm, LoadVector(f, p + "attn_norm.weight", c.n_embd));
    LLM42_ASSIGN_OR_RETURN(L.ffn_norm, LoadVector(f, p + "ffn_norm.weight", c.n_embd));
    LLM42_ASSIGN_OR_RETURN(L.bq, (qwen2 ? LoadVector : LoadOptionalVector)(f, p + "attn_q.bias", c.n_embd));
    LLM42_ASSIGN_OR_RETURN(L.bk, (qwen2 ? LoadVector : LoadOptionalVector)(f, p + "attn_k.bias", kv));
    LLM42_ASSIGN_OR_RETURN(L.bv, (qwen2 ? LoadVector : LoadOptionalVector)(f, p + "attn_v.bias", kv));
    LLM42_ASSIGN_OR_RETURN(L.wq, LoadMatrix(f, p + "attn_q.weight", c.n_embd, c.n_embd, &bytes));
    LLM42_ASSIGN_OR_RETURN(L.wk, LoadMatrix(f, p + "attn_k.weight", c.n_embd, kv, &bytes));
    LLM42_ASSIGN_OR_RETURN(L.wv, LoadMatrix(f, p + "attn_v.weight", c.n_embd, kv, &bytes));
    LLM42_ASSIGN_OR_RETURN(L.wo, LoadMatrix(f, p + "attn_output.weight", c.n_embd, c.n_embd, &bytes));
    LLM42_ASSIGN_OR_RETURN(L.w_gate, LoadMatrix(f, p + "ffn_gate.weight", c.n_embd, c.n_ff, &bytes));
    LLM42_ASSIGN_OR_RETURN(L.w_up, LoadMatrix(f, p + "ffn_up.weight", c.n_embd, c.n_ff, &bytes));
    LLM42_ASSIGN_OR_RETURN(L.w_down, LoadMatrix(f, p + "ffn_down.weight", c.n_ff, c.n_embd, &bytes));
  }
  m->weight_bytes_ = bytes;
  m->file_ = std::move(file);
  return m;
}

void LlamaModel::Forward(Backend& be, KvCache& cache, const ForwardBatch& batch, float* logits) {
  const LlamaConfig& c = config_;
  const Schedules sc = batch.schedules.empty() ? Schedules(batch.schedule) : Schedules(batch.schedules.data());
  const int64_t m = static_cast<int64_t>(batch.tokens.size());
  const int64_t e = c.n_embd, kv = c.kv_dim(), ff = c.n_ff;
  const auto um = static_cast<size_t>(m);
  float* x = Grow(x_, um * static_cast<size_t>(e));
  float* xn = Grow(xn_, um * static_cast<size_t>(e));
  float* q = Grow(q_, um * static_cast<size_t>(e));
  float* k = Grow(k_, um * static_cast<size_t>(kv));
  float* v = Grow(v_, um * static_cast<size_t>(kv));
  float* attn = Grow(attn_, um * static_cast<size_t>(e));
  float* proj = Grow(proj_, um * static_cast<size_t>(e));
  float* gate = Grow(gate_, um * static_cast<size_t>(ff));
  float* up = Grow(up_, um * static_cast<size_t>(ff));
  tables_.resize(um);
  for (size_t i = 0; i < um; ++i) tables_[i] = cache.block_table(batch.seqs[i]);

  be.Embed(token_embd_, batch.tokens.data(), m, x, sc);
  AttentionInput ai;
  ai.n_tokens = m;
  ai.positions = batch.positions.data();
  ai.block_tables = tables_.data();
  ai.n_head = c.n_head;
  ai.n_head_kv = c.n_head_kv;
  ai.head_dim = c.head_dim;

  for (int64_t l = 0; l < c.n_layer; ++l) {
    const Layer& L = layers_[static_cast<size_t>(l)];
    be.RmsNorm(x, L.attn_norm.data(), m, e, c.rms_eps, xn, sc);
    be.MatMul(xn, m, L.wq, q, sc);
    be.MatMul(xn, m, L.wk, k, sc);
    be.MatMul(xn, m, L.wv, v, sc);
    AddBias(q, m, L.bq);
    AddBias(k, m, L.bk);
    AddBias(v, m, L.bv);
    be.Rope(q, m, c.n_head, c.head_dim, rope_, batch.positions.data(), sc);
    be.Rope(k, m, c.n_head_kv, c.head_dim, rope_, batch.positions.data(), sc);
    // Every token's K/V lands in the cache before any token of the batch attends.
    ai.kv = cache.layer(l);
    for (size_t i = 0; i < um; ++i) {
      const int64_t pos = batch.positions[i];
      std::memcpy(ai.kv.key(tables_[i], pos), k + i * static_cast<size_t>(kv), static_cast<size_t>(kv) * sizeof(float));
      std::memcpy(ai.kv.value(tables_[i], pos), v + i * static_cast<size_t>(kv), static_cast<size_t>(kv) * sizeof(float));
    }
    be.Attention(q, ai, attn, sc);
    be.MatMul(attn, m, L.wo, proj, sc);
    for (size_t i = 0; i < um * static_cast<size_t>(e); ++i) x[i] += proj[i];

    be.RmsNorm(x, L.ffn_norm.data(), m, e, c.rms_eps, xn, sc);
    be.MatMul(xn, m, L.w_gate, gate, sc);
    be.MatMul(xn, m, L.w_up, up, sc);
    for (int64_t i = 0; i < m; ++i) be.SwiGlu(gate + i * ff, up + i * ff, ff, gate + i * ff, sc[i]);
    be.MatMul(gate, m, L.w_down, proj, sc);
    for (size_t i = 0; i < um * static_cast<size_t>(e); ++i) x[i] += proj[i];
  }

  const size_t n_out = batch.logit_rows.size();
  float* sel = Grow(logits_in_, n_out * static_cast<size_t>(e));
  for (size_t r = 0; r < n_out; ++r) {
    std::memcpy(sel + r * static_cast<size_t>(e), x + static_cast<size_t>(batch.logit_rows[r]) * static_cast<size_t>(e),
                static_cast<size_t>(e) * sizeof(float));
  }
  logit_schedules_.resize(n_out);
  for (size_t r = 0; r < n_out; ++r) logit_schedules_[r] = sc[batch.logit_rows[r]];
  const Schedules out_sc(logit_schedules_.data());
  be.RmsNorm(sel, output_norm_.data(), static_cast<int64_t>(n_out), e, c.rms_eps, sel, out_sc);
  be.MatMul(sel, static_cast<int64_t>(n_out), output_, logits, out_sc);
}

}  // namespace llm42
