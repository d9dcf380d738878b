#include "lib/model/arch/blocks.h"

#include "absl/strings/str_cat.h"
#include "lib/util/status.h"

namespace llm42 {

absl::Status LoadLayerTensors(TensorReader& r, const ModelConfig& c, int64_t l, const LayerParts& parts, HostLayer& L) {
  const std::string p = absl::StrCat("blk.", l, ".");
  const int64_t e = c.n_embd, qd = c.q_dim(), kv = c.kv_dim();
  LLM42_ASSIGN_OR_RETURN(L.attn_norm, r.Vector(p + "attn_norm.weight", e));
  LLM42_ASSIGN_OR_RETURN(L.ffn_norm, r.Vector(p + "ffn_norm.weight", e));
  if (parts.post_norms) {
    LLM42_ASSIGN_OR_RETURN(L.attn_post_norm, r.Vector(p + "post_attention_norm.weight", e));
    LLM42_ASSIGN_OR_RETURN(L.ffn_post_norm, r.Vector(p + "post_ffw_norm.weight", e));
  }
  if (parts.biases != LayerParts::Biases::kNone) {
    const bool required = parts.biases == LayerParts::Biases::kRequired;
    auto bias = [&](const char* name, int64_t n) {
      return required ? r.Vector(p + name, n) : r.OptionalVector(p + name, n);
    };
    LLM42_ASSIGN_OR_RETURN(L.bq, bias("attn_q.bias", qd));
    LLM42_ASSIGN_OR_RETURN(L.bk, bias("attn_k.bias", kv));
    LLM42_ASSIGN_OR_RETURN(L.bv, bias("attn_v.bias", kv));
  }
  if (parts.qk_norms) {
    LLM42_ASSIGN_OR_RETURN(L.q_norm, r.Vector(p + "attn_q_norm.weight", c.head_dim));
    LLM42_ASSIGN_OR_RETURN(L.k_norm, r.Vector(p + "attn_k_norm.weight", c.head_dim));
  }
  if (parts.fused && r.Has(p + "attn_qkv.weight")) {
    // Its rows: the queries' q_dim, then the keys' and the values' kv_dim each (so a file whose
    // rows do not match its head counts fails the shape check, naming the tensor).
    LLM42_ASSIGN_OR_RETURN(const WeightMatrix qkv, r.Matrix(p + "attn_qkv.weight", e, qd + 2 * kv));
    L.wq = TensorReader::Rows(qkv, 0, qd);
    L.wk = TensorReader::Rows(qkv, qd, kv);
    L.wv = TensorReader::Rows(qkv, qd + kv, kv);
  } else {
    LLM42_ASSIGN_OR_RETURN(L.wq, r.Matrix(p + "attn_q.weight", e, qd));
    LLM42_ASSIGN_OR_RETURN(L.wk, r.Matrix(p + "attn_k.weight", e, kv));
    LLM42_ASSIGN_OR_RETURN(L.wv, r.Matrix(p + "attn_v.weight", e, kv));
  }
  LLM42_ASSIGN_OR_RETURN(L.wo, r.Matrix(p + "attn_output.weight", qd, e));
  if (parts.fused && !r.Has(p + "ffn_gate.weight")) {
    LLM42_ASSIGN_OR_RETURN(const WeightMatrix gate_up, r.Matrix(p + "ffn_up.weight", e, 2 * c.n_ff));
    L.w_gate = TensorReader::Rows(gate_up, 0, c.n_ff);
    L.w_up = TensorReader::Rows(gate_up, c.n_ff, c.n_ff);
  } else {
    LLM42_ASSIGN_OR_RETURN(L.w_gate, r.Matrix(p + "ffn_gate.weight", e, c.n_ff));
    LLM42_ASSIGN_OR_RETURN(L.w_up, r.Matrix(p + "ffn_up.weight", e, c.n_ff));
  }
  LLM42_ASSIGN_OR_RETURN(L.w_down, r.Matrix(p + "ffn_down.weight", c.n_ff, e));
  return absl::OkStatus();
}

absl::Status AttentionBlock(const LayerGraph& g, const BackendLayer& L) {
  Backend& be = g.be;
  const ModelConfig& c = g.c;
  const int64_t m = g.m, e = c.n_embd;
  LLM42_RETURN_IF_ERROR(be.RmsNorm(g.x, L.attn_norm, m, e, c.rms_eps, g.xn, g.sc));
  const Backend::MatMulOutput qkv[] = {{&L.wq, g.q}, {&L.wk, g.k}, {&L.wv, g.v}};
  LLM42_RETURN_IF_ERROR(be.MatMulShared(g.xn, m, qkv, g.sc));
  if (L.bq != nullptr) LLM42_RETURN_IF_ERROR(be.AddBias(g.q, m, c.q_dim(), L.bq));
  if (L.bk != nullptr) LLM42_RETURN_IF_ERROR(be.AddBias(g.k, m, c.kv_dim(), L.bk));
  if (L.bv != nullptr) LLM42_RETURN_IF_ERROR(be.AddBias(g.v, m, c.kv_dim(), L.bv));
  // Per-head norms: rows of head_dim, m * heads of them. RmsNorm's schedules index batch rows,
  // so these run under fixed for every row (valid for both schedules: fixed's bits are a row's
  // alone).
  if (L.q_norm != nullptr) {
    LLM42_RETURN_IF_ERROR(be.RmsNorm(g.q, L.q_norm, m * c.n_head, c.head_dim, c.rms_eps, g.q, Schedule::kFixed));
  }
  if (L.k_norm != nullptr) {
    LLM42_RETURN_IF_ERROR(be.RmsNorm(g.k, L.k_norm, m * c.n_head_kv, c.head_dim, c.rms_eps, g.k, Schedule::kFixed));
  }
  // Every token's K/V lands in the cache before any token of the batch attends.
  LLM42_RETURN_IF_ERROR(be.RopeStoreKv(g.layer, g.q, g.k, g.v, g.heads, g.rope, g.sc));
  LLM42_RETURN_IF_ERROR(be.Attention(g.layer, g.q, g.heads, g.attn, g.sc));
  LLM42_RETURN_IF_ERROR(be.MatMul(g.attn, m, L.wo, g.proj, g.sc));
  if (L.attn_post_norm != nullptr) LLM42_RETURN_IF_ERROR(be.RmsNorm(g.proj, L.attn_post_norm, m, e, c.rms_eps, g.proj, g.sc));
  return absl::OkStatus();  // g.proj: the residual BlockArchitecture::Layer adds
}

absl::Status FeedForwardBlock(const LayerGraph& g, const BackendLayer& L, Activation act) {
  Backend& be = g.be;
  const ModelConfig& c = g.c;
  const int64_t m = g.m, e = c.n_embd;
  const Backend::MatMulOutput gate_up[] = {{&L.w_gate, g.gate}, {&L.w_up, g.up}};
  LLM42_RETURN_IF_ERROR(be.MatMulShared(g.xn, m, gate_up, g.sc));
  if (act == Activation::kSilu) {
    LLM42_RETURN_IF_ERROR(be.SwiGlu(g.gate, g.up, m, c.n_ff, g.gate, g.sc));
  } else {
    LLM42_RETURN_IF_ERROR(be.GeluGlu(g.gate, g.up, m, c.n_ff, g.gate));
  }
  LLM42_RETURN_IF_ERROR(be.MatMul(g.gate, m, L.w_down, g.proj, g.sc));
  if (L.ffn_post_norm != nullptr) LLM42_RETURN_IF_ERROR(be.RmsNorm(g.proj, L.ffn_post_norm, m, e, c.rms_eps, g.proj, g.sc));
  return be.Add(g.x, g.proj, static_cast<size_t>(m * e));
}

}  // namespace llm42
