#include "lib/model/arch/blocks.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "lib/util/status.h"

namespace llm42 {

namespace {

// The attention's tensors of layer l: biases, per-head norms, q/k/v (fused or not), the output.
absl::Status LoadAttentionTensors(TensorReader& r, const ModelConfig& c, int64_t l, const LayerParts& parts,
                                  HostLayer& L) {
  const std::string p = absl::StrCat("blk.", l, ".");
  const int64_t e = c.n_embd, hd = c.head_dim_of(l), qd = c.q_dim(l), kv = c.kv_dim(l);
  // A layer sharing an earlier layer's K/V has no key or value tensors (the file may hold them:
  // llama.cpp's converter writes none, but they would go unread).
  const bool stores_kv = l < c.n_kv_layers();
  if (parts.biases != LayerParts::Biases::kNone) {
    const bool required = parts.biases == LayerParts::Biases::kRequired;
    auto bias = [&](const char* name, int64_t n) {
      return required ? r.Vector(p + name, n) : r.OptionalVector(p + name, n);
    };
    LLM42_ASSIGN_OR_RETURN(L.bq, bias("attn_q.bias", qd));
    if (stores_kv) {
      LLM42_ASSIGN_OR_RETURN(L.bk, bias("attn_k.bias", kv));
      LLM42_ASSIGN_OR_RETURN(L.bv, bias("attn_v.bias", kv));
    }
  }
  if (parts.qk_norms) {
    LLM42_ASSIGN_OR_RETURN(L.q_norm, r.Vector(p + "attn_q_norm.weight", hd));
    if (stores_kv) {
      LLM42_ASSIGN_OR_RETURN(L.k_norm, r.Vector(p + "attn_k_norm.weight", hd));
    }
  }
  if (parts.v_norm && stores_kv) L.v_norm.assign(static_cast<size_t>(hd), 1.0f);
  if (parts.fused && r.Has(p + "attn_qkv.weight")) {
    // Its rows: the queries' q_dim, then the keys' and the values' kv_dim each (so a file whose
    // rows do not match its head counts fails the shape check, naming the tensor).
    LLM42_ASSIGN_OR_RETURN(const WeightMatrix qkv, r.Matrix(p + "attn_qkv.weight", e, qd + 2 * kv));
    L.wq = TensorReader::Rows(qkv, 0, qd);
    L.wk = TensorReader::Rows(qkv, qd, kv);
    L.wv = TensorReader::Rows(qkv, qd + kv, kv);
  } else {
    LLM42_ASSIGN_OR_RETURN(L.wq, r.Matrix(p + "attn_q.weight", e, parts.output_gate ? 2 * qd : qd));
    if (stores_kv) {
      LLM42_ASSIGN_OR_RETURN(L.wk, r.Matrix(p + "attn_k.weight", e, kv));
      if (parts.optional_v && !r.Has(p + "attn_v.weight")) {
        L.wv = L.wk;  // the keys' projection serves as the values' (its bytes counted once)
      } else {
        LLM42_ASSIGN_OR_RETURN(L.wv, r.Matrix(p + "attn_v.weight", e, kv));
      }
    }
  }
  LLM42_ASSIGN_OR_RETURN(L.wo, r.Matrix(p + "attn_output.weight", qd, e));
  if (parts.output_bias) {
    LLM42_ASSIGN_OR_RETURN(L.bo, r.Vector(p + "attn_output.bias", e));
  }
  if (parts.sinks) {
    LLM42_ASSIGN_OR_RETURN(L.sinks, r.Vector(p + "attn_sinks.weight", c.n_head));
    for (const float s : L.sinks) {
      if (!std::isfinite(s)) return FormatError("tensor '", p, "attn_sinks.weight' holds ", s, " (finite logits)");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadLayerTensors(TensorReader& r, const ModelConfig& c, int64_t l, const LayerParts& parts, HostLayer& L) {
  const std::string p = absl::StrCat("blk.", l, ".");
  const int64_t e = c.n_embd, ff = c.n_ff_of(l);
  LLM42_ASSIGN_OR_RETURN(L.attn_norm, r.Vector(p + "attn_norm.weight", e));
  LLM42_ASSIGN_OR_RETURN(L.ffn_norm, r.Vector(p + std::string(parts.ffn_norm) + ".weight", e));
  if (parts.post_norms) {
    LLM42_ASSIGN_OR_RETURN(L.attn_post_norm, r.Vector(p + "post_attention_norm.weight", e));
    LLM42_ASSIGN_OR_RETURN(L.ffn_post_norm, r.Vector(p + "post_ffw_norm.weight", e));
  }
  if (c.recurrent(l)) {
    LLM42_RETURN_IF_ERROR(LoadDeltaNetTensors(r, c, l, L));
  } else {
    LLM42_RETURN_IF_ERROR(LoadAttentionTensors(r, c, l, parts, L));
  }
  if (c.n_expert > 0) LLM42_RETURN_IF_ERROR(LoadExpertTensors(r, c, l, parts.expert_biases, L));
  if (c.n_expert == 0 || parts.dense_with_experts) {  // the dense FFN
    if (parts.fused && !r.Has(p + "ffn_gate.weight")) {
      LLM42_ASSIGN_OR_RETURN(const WeightMatrix gate_up, r.Matrix(p + "ffn_up.weight", e, 2 * ff));
      L.w_gate = TensorReader::Rows(gate_up, 0, ff);
      L.w_up = TensorReader::Rows(gate_up, ff, ff);
    } else {
      LLM42_ASSIGN_OR_RETURN(L.w_gate, r.Matrix(p + "ffn_gate.weight", e, ff));
      LLM42_ASSIGN_OR_RETURN(L.w_up, r.Matrix(p + "ffn_up.weight", e, ff));
    }
    LLM42_ASSIGN_OR_RETURN(L.w_down, r.Matrix(p + "ffn_down.weight", ff, e));
  }
  if (c.n_embd_per_layer > 0) {
    LLM42_ASSIGN_OR_RETURN(L.inp_gate, r.Matrix(p + "inp_gate.weight", e, c.n_embd_per_layer));
    LLM42_ASSIGN_OR_RETURN(L.inp_proj, r.Matrix(p + "proj.weight", c.n_embd_per_layer, e));
    LLM42_ASSIGN_OR_RETURN(L.inp_post_norm, r.Vector(p + "post_norm.weight", e));
  }
  if (parts.layer_scale) {
    LLM42_ASSIGN_OR_RETURN(const std::vector<float> scale, r.OptionalVector(p + "layer_output_scale.weight", 1));
    if (!scale.empty()) {
      if (!std::isfinite(scale[0]) || scale[0] == 0) {
        return FormatError(p, "layer_output_scale.weight = ", scale[0], " (a finite, nonzero scale)");
      }
      L.out_scale = scale[0];
    }
  }
  return absl::OkStatus();
}

absl::Status AttentionBlock(const LayerGraph& g, const BackendLayer& L) {
  Backend& be = g.be;
  const ModelConfig& c = g.c;
  const AttentionShape& h = g.heads;
  const int64_t m = g.m, e = c.n_embd, qd = h.n_head * h.head_dim, kv = h.n_head_kv * h.head_dim;
  LLM42_RETURN_IF_ERROR(be.RmsNorm(g.x, L.attn_norm, m, e, c.rms_eps, g.xn, g.sc));
  // With an output gate (LayerParts::output_gate) the queries' projection, each head's queries
  // then its gate, goes to g.gate, split into g.q and the gate in g.up.
  const bool gated = L.wq.rows == 2 * qd;
  float* q_out = gated ? g.gate : g.q;
  if (g.stores_kv) {
    const Backend::MatMulOutput qkv[] = {{&L.wq, q_out}, {&L.wk, g.k}, {&L.wv, g.v}};
    LLM42_RETURN_IF_ERROR(be.MatMulShared(g.xn, m, qkv, g.sc));
  } else {
    LLM42_RETURN_IF_ERROR(be.MatMul(g.xn, m, L.wq, q_out, g.sc));
  }
  if (gated) {
    LLM42_RETURN_IF_ERROR(be.Columns(g.gate, m * h.n_head, 2 * h.head_dim, h.head_dim, g.q));
    LLM42_RETURN_IF_ERROR(be.Columns(g.gate + h.head_dim, m * h.n_head, 2 * h.head_dim, h.head_dim, g.up));
  }
  if (L.bq != nullptr) LLM42_RETURN_IF_ERROR(be.AddBias(g.q, m, qd, L.bq));
  if (L.bk != nullptr) LLM42_RETURN_IF_ERROR(be.AddBias(g.k, m, kv, L.bk));
  if (L.bv != nullptr) LLM42_RETURN_IF_ERROR(be.AddBias(g.v, m, kv, L.bv));
  // Per-head norms: rows of head_dim, m * heads of them. RmsNorm's schedules index batch rows,
  // so these run under fixed for every row (valid for both schedules: fixed's bits are a row's
  // alone).
  if (L.q_norm != nullptr) {
    LLM42_RETURN_IF_ERROR(be.RmsNorm(g.q, L.q_norm, m * h.n_head, h.head_dim, c.rms_eps, g.q, Schedule::kFixed));
  }
  if (L.k_norm != nullptr) {
    LLM42_RETURN_IF_ERROR(be.RmsNorm(g.k, L.k_norm, m * h.n_head_kv, h.head_dim, c.rms_eps, g.k, Schedule::kFixed));
  }
  if (L.v_norm != nullptr) {
    LLM42_RETURN_IF_ERROR(be.RmsNorm(g.v, L.v_norm, m * h.n_head_kv, h.head_dim, c.rms_eps, g.v, Schedule::kFixed));
  }
  // Every token's K/V lands in the cache before any token of the batch attends; a layer sharing
  // an earlier layer's K/V (stored earlier in this pass) rotates its queries only.
  if (g.stores_kv) {
    LLM42_RETURN_IF_ERROR(be.RopeStoreKv(g.kv_layer, g.q, g.k, g.v, h, g.rope, g.sc));
  } else {
    LLM42_RETURN_IF_ERROR(be.Rope(g.q, h.n_head, h.head_dim, g.rope, g.sc));
  }
  LLM42_RETURN_IF_ERROR(be.Attention(g.kv_layer, g.q, h, g.attn, g.sc));
  if (gated) LLM42_RETURN_IF_ERROR(be.SigmoidMul(g.attn, g.up, static_cast<size_t>(m * qd)));
  LLM42_RETURN_IF_ERROR(be.MatMul(g.attn, m, L.wo, g.proj, g.sc));
  if (L.bo != nullptr) LLM42_RETURN_IF_ERROR(be.AddBias(g.proj, m, e, L.bo));
  if (L.attn_post_norm != nullptr) LLM42_RETURN_IF_ERROR(be.RmsNorm(g.proj, L.attn_post_norm, m, e, c.rms_eps, g.proj, g.sc));
  return absl::OkStatus();  // g.proj: the residual BlockArchitecture::Layer adds
}

absl::Status GatedActivation(Backend& be, Activation act, float* gate, const float* up, int64_t m, int64_t n,
                             Schedules s) {
  switch (act) {
    case Activation::kSilu: return be.SwiGlu(gate, up, m, n, gate, s);
    case Activation::kGeluTanh: return be.GeluGlu(gate, up, m, n, gate);
    case Activation::kClampedSilu: return be.ClampedSwiGlu(gate, up, m, n, 1.702f, 7.0f, gate);
  }
  return absl::InternalError("unknown activation");
}

absl::Status FeedForward(const LayerGraph& g, const BackendLayer& L, Activation act, float* out) {
  Backend& be = g.be;
  const int64_t m = g.m;
  const Backend::MatMulOutput gate_up[] = {{&L.w_gate, g.gate}, {&L.w_up, g.up}};
  LLM42_RETURN_IF_ERROR(be.MatMulShared(g.xn, m, gate_up, g.sc));
  LLM42_RETURN_IF_ERROR(GatedActivation(be, act, g.gate, g.up, m, g.c.n_ff_of(g.layer), g.sc));
  return be.MatMul(g.gate, m, L.w_down, out, g.sc);
}

absl::Status FeedForwardBlock(const LayerGraph& g, const BackendLayer& L, Activation act) {
  Backend& be = g.be;
  const ModelConfig& c = g.c;
  const int64_t m = g.m, e = c.n_embd;
  LLM42_RETURN_IF_ERROR(FeedForward(g, L, act, g.proj));
  if (L.ffn_post_norm != nullptr) LLM42_RETURN_IF_ERROR(be.RmsNorm(g.proj, L.ffn_post_norm, m, e, c.rms_eps, g.proj, g.sc));
  return be.Add(g.x, g.proj, static_cast<size_t>(m * e));
}

absl::Status LoadDeltaNetTensors(TensorReader& r, const ModelConfig& c, int64_t l, HostLayer& L) {
  const std::string p = absl::StrCat("blk.", l, ".");
  const int64_t e = c.n_embd, d = c.ssm_head_dim, hv = c.ssm_value_heads, inner = hv * d;
  const int64_t channels = (2 * c.ssm_key_heads + hv) * d;
  LLM42_ASSIGN_OR_RETURN(L.ssm_in, r.Matrix(p + "attn_qkv.weight", e, channels));
  LLM42_ASSIGN_OR_RETURN(L.ssm_z, r.Matrix(p + "attn_gate.weight", e, inner));
  LLM42_ASSIGN_OR_RETURN(L.ssm_beta, r.Matrix(p + "ssm_beta.weight", e, hv));
  LLM42_ASSIGN_OR_RETURN(L.ssm_alpha, r.Matrix(p + "ssm_alpha.weight", e, hv));
  LLM42_ASSIGN_OR_RETURN(L.ssm_out, r.Matrix(p + "ssm_out.weight", inner, e));
  LLM42_ASSIGN_OR_RETURN(L.ssm_conv, r.Values(p + "ssm_conv1d.weight", c.ssm_conv_kernel, channels));
  LLM42_ASSIGN_OR_RETURN(L.ssm_dt, r.Vector(p + "ssm_dt.bias", hv));
  LLM42_ASSIGN_OR_RETURN(L.ssm_a, r.Vector(p + "ssm_a", hv));
  LLM42_ASSIGN_OR_RETURN(L.ssm_norm, r.Vector(p + "ssm_norm.weight", d));
  return absl::OkStatus();
}

absl::Status DeltaNetBlock(const LayerGraph& g, const BackendLayer& L) {
  Backend& be = g.be;
  const ModelConfig& c = g.c;
  const int64_t m = g.m, e = c.n_embd, d = c.ssm_head_dim, hv = c.ssm_value_heads;
  const int64_t layer = c.recurrent_index(g.layer);
  const DeltaRuleShape shape{c.ssm_key_heads, hv, d, c.rms_eps};
  LLM42_RETURN_IF_ERROR(be.RmsNorm(g.x, L.attn_norm, m, e, c.rms_eps, g.xn, g.sc));
  // The convolution's input in g.gate, z in g.q, the decays' and rates' inputs in g.k and g.v.
  const Backend::MatMulOutput in[] = {{&L.ssm_in, g.gate}, {&L.ssm_z, g.q}, {&L.ssm_alpha, g.k}, {&L.ssm_beta, g.v}};
  LLM42_RETURN_IF_ERROR(be.MatMulShared(g.xn, m, in, g.sc));
  LLM42_RETURN_IF_ERROR(be.CausalConv(layer, g.gate, L.ssm_conv, g.up));
  LLM42_RETURN_IF_ERROR(be.DeltaRule(layer, {shape, g.up, g.k, g.v, L.ssm_dt, L.ssm_a}, g.attn));
  // Each head's output RMS-normalized (rows of head_dim: fixed for every row, valid for both
  // schedules), times silu(z).
  LLM42_RETURN_IF_ERROR(be.RmsNorm(g.attn, L.ssm_norm, m * hv, d, c.rms_eps, g.attn, Schedule::kFixed));
  LLM42_RETURN_IF_ERROR(be.SwiGlu(g.q, g.attn, m, hv * d, g.attn, g.sc));
  return be.MatMul(g.attn, m, L.ssm_out, g.proj, g.sc);
}

// The scales as llama.cpp's graph computes them, in float: sqrtf(P), 1 / sqrtf(n_embd), 1 / sqrtf(2).
absl::Status PerLayerInputs(Backend& be, const ModelConfig& c, int64_t m, const PerLayerInputTensors<const float*>& t,
                            Schedules sc, const float* x, float* per_layer, float* scratch) {
  const int64_t p = c.n_embd_per_layer;
  const auto n = static_cast<size_t>(m * c.n_layer * p);
  LLM42_RETURN_IF_ERROR(be.Embed(t.table, per_layer));
  LLM42_RETURN_IF_ERROR(be.Scale(per_layer, n, std::sqrt(static_cast<float>(p))));
  LLM42_RETURN_IF_ERROR(be.MatMul(x, m, t.proj, scratch, sc));
  LLM42_RETURN_IF_ERROR(be.Scale(scratch, n, 1.0f / std::sqrt(static_cast<float>(c.n_embd))));
  // Its norm's rows are the layers' parts of each batch row, which RmsNorm's schedules cannot
  // index: fixed for every row (valid for both schedules, fixed's bits being a row's alone).
  LLM42_RETURN_IF_ERROR(be.RmsNorm(scratch, t.proj_norm, m * c.n_layer, p, c.rms_eps, scratch, Schedule::kFixed));
  LLM42_RETURN_IF_ERROR(be.Add(per_layer, scratch, n));
  return be.Scale(per_layer, n, 1.0f / std::sqrt(2.0f));
}

absl::Status PerLayerInputBlock(const LayerGraph& g, const BackendLayer& L) {
  Backend& be = g.be;
  const ModelConfig& c = g.c;
  const int64_t m = g.m, e = c.n_embd, p = c.n_embd_per_layer;
  LLM42_RETURN_IF_ERROR(be.MatMul(g.x, m, L.inp_gate, g.gate, g.sc));
  LLM42_RETURN_IF_ERROR(be.Columns(g.per_layer + g.layer * p, m, c.n_layer * p, p, g.up));
  LLM42_RETURN_IF_ERROR(be.GeluGlu(g.gate, g.up, m, p, g.gate));
  LLM42_RETURN_IF_ERROR(be.MatMul(g.gate, m, L.inp_proj, g.proj, g.sc));
  LLM42_RETURN_IF_ERROR(be.RmsNorm(g.proj, L.inp_post_norm, m, e, c.rms_eps, g.proj, g.sc));
  return be.Add(g.x, g.proj, static_cast<size_t>(m * e));
}

}  // namespace llm42
