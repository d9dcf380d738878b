#include "lib/model/arch/experts.h"

#include "absl/strings/str_cat.h"
#include "lib/model/arch/blocks.h"
#include "lib/util/status.h"

namespace llm42 {

absl::Status LoadExpertTensors(TensorReader& r, const ModelConfig& c, int64_t l, bool biases, HostLayer& L) {
  const std::string p = absl::StrCat("blk.", l, ".");
  const int64_t e = c.n_embd, ff = c.n_ff_exp, n = c.n_expert, used = c.routing.n_used;
  LLM42_ASSIGN_OR_RETURN(L.router, r.Matrix(p + "ffn_gate_inp.weight", e, n));
  if (r.Has(p + "ffn_gate_up_exps.weight")) {  // each expert's gate rows, then its up rows
    LLM42_ASSIGN_OR_RETURN(const std::vector<WeightMatrix> gate_up, r.Experts(p + "ffn_gate_up_exps.weight", e, 2 * ff, n, used));
    for (const WeightMatrix& w : gate_up) {
      L.exp_gate.push_back(TensorReader::Rows(w, 0, ff));
      L.exp_up.push_back(TensorReader::Rows(w, ff, ff));
    }
  } else {
    LLM42_ASSIGN_OR_RETURN(L.exp_gate, r.Experts(p + "ffn_gate_exps.weight", e, ff, n, used));
    LLM42_ASSIGN_OR_RETURN(L.exp_up, r.Experts(p + "ffn_up_exps.weight", e, ff, n, used));
  }
  LLM42_ASSIGN_OR_RETURN(L.exp_down, r.Experts(p + "ffn_down_exps.weight", ff, e, n, used));
  LLM42_ASSIGN_OR_RETURN(L.exp_scale, r.OptionalVector(p + "ffn_down_exps.scale", n));
  if (biases) {  // [n_expert][width] each (GGUF dims {width, n_expert})
    LLM42_ASSIGN_OR_RETURN(L.router_bias, r.Vector(p + "ffn_gate_inp.bias", n));
    LLM42_ASSIGN_OR_RETURN(L.exp_gate_bias, r.Values(p + "ffn_gate_exps.bias", ff, n));
    LLM42_ASSIGN_OR_RETURN(L.exp_up_bias, r.Values(p + "ffn_up_exps.bias", ff, n));
    LLM42_ASSIGN_OR_RETURN(L.exp_down_bias, r.Values(p + "ffn_down_exps.bias", e, n));
  }
  for (const char* unread : {"ffn_gate_exps.scale", "ffn_up_exps.scale", "ffn_gate_up_exps.scale"}) {
    if (r.Has(p + unread)) return UnsupportedError("tensor '", p, unread, "' (scales on the experts' inputs) is not supported");
  }
  if (r.Has(p + "ffn_gate_inp_shexp.weight")) {
    const int64_t shared = c.n_ff_shexp;
    LLM42_ASSIGN_OR_RETURN(L.shexp_router, r.RowMatrix(p + "ffn_gate_inp_shexp.weight", e));
    LLM42_ASSIGN_OR_RETURN(L.shexp_gate, r.Matrix(p + "ffn_gate_shexp.weight", e, shared));
    LLM42_ASSIGN_OR_RETURN(L.shexp_up, r.Matrix(p + "ffn_up_shexp.weight", e, shared));
    LLM42_ASSIGN_OR_RETURN(L.shexp_down, r.Matrix(p + "ffn_down_shexp.weight", shared, e));
  }
  return absl::OkStatus();
}

absl::Status Experts(const LayerGraph& g, const BackendLayer& L, Activation act, const float* router_in,
                     const float* in, float* out) {
  Backend& be = g.be;
  const ModelConfig& c = g.c;
  ExpertWork& w = *g.experts;
  const int64_t m = g.m, e = c.n_embd, ff = c.n_ff_exp, n = c.n_expert, k = c.routing.n_used, pairs = m * k;
  // The router's logits, under each row's schedule; each row's experts and weights.
  LLM42_RETURN_IF_ERROR(be.MatMul(router_in, m, L.router, w.logits, g.sc));
  if (L.router_bias != nullptr) LLM42_RETURN_IF_ERROR(be.AddBias(w.logits, m, n, L.router_bias));
  w.ids.resize(static_cast<size_t>(pairs));
  LLM42_RETURN_IF_ERROR(be.RouteExperts(w.logits, m, c.routing, w.ids.data(), w.weights));
  // The pairs grouped by expert (a counting sort: row order within each expert).
  w.starts.assign(static_cast<size_t>(n + 1), 0);
  for (const int32_t id : w.ids) ++w.starts[static_cast<size_t>(id) + 1];
  for (int64_t x = 0; x < n; ++x) w.starts[static_cast<size_t>(x + 1)] += w.starts[static_cast<size_t>(x)];
  w.order.resize(static_cast<size_t>(pairs));
  w.source.resize(static_cast<size_t>(pairs));
  w.schedules.resize(static_cast<size_t>(pairs));
  w.next.assign(w.starts.begin(), w.starts.end() - 1);
  for (int64_t pair = 0; pair < pairs; ++pair) {
    const auto at = static_cast<size_t>(w.next[static_cast<size_t>(w.ids[static_cast<size_t>(pair)])]++);
    w.order[at] = static_cast<int32_t>(pair);
    w.source[at] = static_cast<int32_t>(pair / k);
    w.schedules[at] = g.sc[pair / k];
  }
  // Each expert's rows at once: its gate and up products, the activation over every pair, its
  // down products.
  LLM42_RETURN_IF_ERROR(be.GatherRows(in, e, w.source, w.in));
  const Schedules all = g.sc.uniform() ? g.sc : Schedules(w.schedules.data());
  auto rows_of = [&](int64_t x, int64_t* first, int64_t* count) {
    *first = w.starts[static_cast<size_t>(x)];
    *count = w.starts[static_cast<size_t>(x + 1)] - *first;
    return g.sc.uniform() ? g.sc : Schedules(w.schedules.data() + *first);
  };
  for (int64_t x = 0; x < n; ++x) {
    int64_t first, count;
    const Schedules s = rows_of(x, &first, &count);
    if (count == 0) continue;
    const Backend::MatMulOutput gate_up[] = {{&L.exp_gate[static_cast<size_t>(x)], w.gate + first * ff},
                                             {&L.exp_up[static_cast<size_t>(x)], w.up + first * ff}};
    LLM42_RETURN_IF_ERROR(be.MatMulShared(w.in + first * e, count, gate_up, s));
    if (L.exp_gate_bias != nullptr) {
      LLM42_RETURN_IF_ERROR(be.AddBias(w.gate + first * ff, count, ff, L.exp_gate_bias + x * ff));
      LLM42_RETURN_IF_ERROR(be.AddBias(w.up + first * ff, count, ff, L.exp_up_bias + x * ff));
    }
  }
  LLM42_RETURN_IF_ERROR(GatedActivation(be, act, w.gate, w.up, pairs, ff, all));
  for (int64_t x = 0; x < n; ++x) {
    int64_t first, count;
    const Schedules s = rows_of(x, &first, &count);
    if (count == 0) continue;
    LLM42_RETURN_IF_ERROR(be.MatMul(w.gate + first * ff, count, L.exp_down[static_cast<size_t>(x)], w.out + first * e, s));
    if (L.exp_down_bias != nullptr) {
      LLM42_RETURN_IF_ERROR(be.AddBias(w.out + first * e, count, e, L.exp_down_bias + x * e));
    }
    if (!L.exp_scale.empty()) {
      LLM42_RETURN_IF_ERROR(be.Scale(w.out + first * e, static_cast<size_t>(count * e), L.exp_scale[static_cast<size_t>(x)]));
    }
  }
  // Back in (row, slot) order (into `in`, free now), weighted and summed in slot order.
  LLM42_RETURN_IF_ERROR(be.ScatterRows(w.out, e, w.order, w.in));
  LLM42_RETURN_IF_ERROR(be.MixExperts(w.in, w.weights, m, k, e, out));
  if (L.shexp_router.data != nullptr) {
    // The shared expert over every row (its gate's logits in `logits`, free now), its output in
    // `out` times its gate's sigmoid, added to the experts' sum.
    const int64_t shared = c.n_ff_shexp;
    const Backend::MatMulOutput shared_in[] = {{&L.shexp_gate, w.gate}, {&L.shexp_up, w.up}, {&L.shexp_router, w.logits}};
    LLM42_RETURN_IF_ERROR(be.MatMulShared(in, m, shared_in, g.sc));
    LLM42_RETURN_IF_ERROR(be.SwiGlu(w.gate, w.up, m, shared, w.gate, g.sc));
    LLM42_RETURN_IF_ERROR(be.MatMul(w.gate, m, L.shexp_down, w.out, g.sc));
    LLM42_RETURN_IF_ERROR(be.SigmoidScaleRows(w.out, m, e, w.logits));
    LLM42_RETURN_IF_ERROR(be.Add(out, w.out, static_cast<size_t>(m * e)));
  }
  return absl::OkStatus();
}

absl::Status ExpertsBlock(const LayerGraph& g, const BackendLayer& L, Activation act) {
  LLM42_RETURN_IF_ERROR(Experts(g, L, act, g.xn, g.xn, g.proj));
  return g.be.Add(g.x, g.proj, static_cast<size_t>(g.m * g.c.n_embd));
}

}  // namespace llm42
