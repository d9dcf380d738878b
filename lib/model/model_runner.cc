#include "lib/model/model_runner.h"

#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/kv/kv_cache.h"
#include "lib/model/arch/architecture.h"
#include "lib/model/arch/blocks.h"
#include "lib/util/status.h"

namespace llm42 {
namespace {

// Activation workspace slots.
enum Slot : int {
  kX, kXn, kQ, kK, kV, kAttn, kProj, kGate, kUp, kLogitsIn, kLogits, kLogitsPacked, kPerLayer, kPerLayerScratch,
  kExpertLogits, kExpertWeights, kExpertIn, kExpertGate, kExpertUp, kExpertOut, kExpertRouterIn, kExpertSum
};

// A vector in backend memory, or nullptr for an absent (empty) one.
absl::StatusOr<const float*> UploadOptional(Backend& be, const std::vector<float>& v) {
  if (v.empty()) return static_cast<const float*>(nullptr);
  return be.UploadVector(v);
}

// Matrices that MatMulShared takes together, uploaded together, in that order.
absl::Status UploadGroup(Backend& be, std::initializer_list<const WeightMatrix*> from,
                         std::initializer_list<WeightMatrix*> to) {
  LLM42_ASSIGN_OR_RETURN(std::vector<WeightMatrix> up, be.UploadWeights(std::vector<const WeightMatrix*>(from)));
  auto out = to.begin();
  for (const WeightMatrix& w : up) **out++ = w;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelRunner>> ModelRunner::Create(
    const ModelWeights& model, Backend& be, int64_t context_length,
    const std::function<absl::Status(int64_t done, int64_t total)>& after_layer) {
  std::unique_ptr<ModelRunner> r(new ModelRunner(model, be));
  const ModelConfig& c = model.config();
  if (c.n_recurrent() > 0 && !be.runs_recurrent()) {
    return UnsupportedError("the ", be.name(), " backend does not run recurrent (linear-attention) layers yet: run ",
                            c.architecture.empty() ? std::string("this model") : c.architecture, " on the cpu backend");
  }
  if (c.n_expert > 0 && !be.runs_experts()) {
    return UnsupportedError("the ", be.name(), " backend does not run mixture-of-experts layers yet: run ",
                            c.architecture.empty() ? std::string("this model") : c.architecture, " on the cpu backend");
  }
  LLM42_ASSIGN_OR_RETURN(r->token_embd_, be.UploadWeight(model.token_embd()));
  // Tied embeddings share the host tensor; the backend keeps one copy per upload, so reuse it.
  if (model.output().data == model.token_embd().data) {
    r->output_ = r->token_embd_;
  } else {
    LLM42_ASSIGN_OR_RETURN(r->output_, be.UploadWeight(model.output()));
  }
  LLM42_ASSIGN_OR_RETURN(r->output_norm_, be.UploadVector(model.output_norm()));
  r->rope_ = model.rope();
  // Per-pair divisors: LongRoPE's long ones past the original context, else its short ones, else
  // Llama 3.1's (a file has at most one kind).
  const int64_t context = context_length > 0 ? context_length : c.n_ctx_train;
  const std::vector<float>* factors = &model.rope_freqs();
  if (!model.rope_factors_short().empty()) factors = &model.rope_factors_short();
  if (!model.rope_factors_long().empty() && c.rope_original_context > 0 && context > c.rope_original_context) {
    factors = &model.rope_factors_long();
  }
  LLM42_ASSIGN_OR_RETURN(r->rope_.freq_factors, UploadOptional(be, *factors));
  // Sliding layers' RoPE: their own rotated dims (Gemma 4), and where they have their own base
  // (Gemma 3 and 4), unscaled and without the global layers' per-pair divisors.
  r->rope_local_ = r->rope_;
  r->rope_local_.n_rot = c.n_rot_swa > 0 ? c.n_rot_swa : c.n_rot;
  if (c.rope_local_base > 0) {
    r->rope_local_.freq_base = c.rope_local_base;
    r->rope_local_.freq_scale = 1.0f;
    r->rope_local_.freq_factors = nullptr;
  }
  if (c.n_embd_per_layer > 0) {
    const PerLayerInputTensors<std::vector<float>>& t = model.per_layer_inputs();
    LLM42_ASSIGN_OR_RETURN(r->per_layer_inputs_.table, be.UploadWeight(t.table));
    LLM42_ASSIGN_OR_RETURN(r->per_layer_inputs_.proj, be.UploadWeight(t.proj));
    LLM42_ASSIGN_OR_RETURN(r->per_layer_inputs_.proj_norm, be.UploadVector(t.proj_norm));
  }
  for (const ModelWeights::Layer& L : model.layers()) {
    Layer& R = r->layers_.emplace_back();
    for (auto [from, to] : {std::pair{&L.attn_norm, &R.attn_norm}, {&L.attn_post_norm, &R.attn_post_norm},
                            {&L.ffn_norm, &R.ffn_norm}, {&L.ffn_post_norm, &R.ffn_post_norm}, {&L.bq, &R.bq},
                            {&L.bk, &R.bk}, {&L.bv, &R.bv}, {&L.q_norm, &R.q_norm}, {&L.k_norm, &R.k_norm},
                            {&L.v_norm, &R.v_norm}, {&L.inp_post_norm, &R.inp_post_norm}, {&L.ssm_conv, &R.ssm_conv},
                            {&L.ssm_dt, &R.ssm_dt}, {&L.ssm_a, &R.ssm_a}, {&L.ssm_norm, &R.ssm_norm},
                            {&L.router_norm, &R.router_norm}, {&L.ffn_pre_norm_2, &R.ffn_pre_norm_2},
                            {&L.ffn_post_norm_1, &R.ffn_post_norm_1}, {&L.ffn_post_norm_2, &R.ffn_post_norm_2},
                            {&L.bo, &R.bo}, {&L.sinks, &R.sinks}, {&L.router_bias, &R.router_bias},
                            {&L.exp_gate_bias, &R.exp_gate_bias}, {&L.exp_up_bias, &R.exp_up_bias},
                            {&L.exp_down_bias, &R.exp_down_bias}}) {
      LLM42_ASSIGN_OR_RETURN(*to, UploadOptional(be, *from));
    }
    // The matrices MatMulShared takes together are uploaded together (Backend::UploadWeights); a
    // layer sharing an earlier layer's K/V has its queries' alone.
    if (L.wk.data != nullptr) {
      LLM42_RETURN_IF_ERROR(UploadGroup(be, {&L.wq, &L.wk, &L.wv}, {&R.wq, &R.wk, &R.wv}));
    } else if (L.wq.data != nullptr) {
      LLM42_ASSIGN_OR_RETURN(R.wq, be.UploadWeight(L.wq));
    } else {  // a recurrent layer (blocks.h's DeltaNetBlock takes its four input projections together)
      LLM42_RETURN_IF_ERROR(UploadGroup(be, {&L.ssm_in, &L.ssm_z, &L.ssm_alpha, &L.ssm_beta},
                                        {&R.ssm_in, &R.ssm_z, &R.ssm_alpha, &R.ssm_beta}));
    }
    if (L.w_gate.data != nullptr) LLM42_RETURN_IF_ERROR(UploadGroup(be, {&L.w_gate, &L.w_up}, {&R.w_gate, &R.w_up}));
    if (L.router.data != nullptr) {  // experts: each one's gate and up together (experts.h)
      LLM42_ASSIGN_OR_RETURN(R.router, be.UploadWeight(L.router));
      R.exp_gate.resize(L.exp_gate.size());
      R.exp_up.resize(L.exp_up.size());
      for (size_t x = 0; x < L.exp_gate.size(); ++x) {
        LLM42_RETURN_IF_ERROR(UploadGroup(be, {&L.exp_gate[x], &L.exp_up[x]}, {&R.exp_gate[x], &R.exp_up[x]}));
      }
      for (const WeightMatrix& down : L.exp_down) {
        LLM42_ASSIGN_OR_RETURN(WeightMatrix uploaded, be.UploadWeight(down));
        R.exp_down.push_back(uploaded);
      }
      R.exp_scale = L.exp_scale;
      if (L.shexp_router.data != nullptr) {
        LLM42_RETURN_IF_ERROR(UploadGroup(be, {&L.shexp_gate, &L.shexp_up, &L.shexp_router},
                                          {&R.shexp_gate, &R.shexp_up, &R.shexp_router}));
        LLM42_ASSIGN_OR_RETURN(R.shexp_down, be.UploadWeight(L.shexp_down));
      }
    }
    for (auto [from, to] : {std::pair{&L.wo, &R.wo}, {&L.w_down, &R.w_down}, {&L.inp_gate, &R.inp_gate},
                            {&L.inp_proj, &R.inp_proj}, {&L.ssm_out, &R.ssm_out}}) {
      if (from->data == nullptr) continue;  // a tensor the model lacks
      LLM42_ASSIGN_OR_RETURN(*to, be.UploadWeight(*from));
    }
    R.out_scale = L.out_scale;
    if (after_layer) {
      LLM42_RETURN_IF_ERROR(after_layer(static_cast<int64_t>(r->layers_.size()),
                                        static_cast<int64_t>(model.layers().size())));
    }
  }
  return r;
}

absl::Status ModelRunner::AllocateRecurrent(int64_t n_slots) {
  recurrent_shape_ = RecurrentShape{};
  const RecurrentShape shape = recurrent_shape(n_slots);
  LLM42_RETURN_IF_ERROR(backend_.AllocateRecurrent(shape));
  recurrent_shape_ = shape;
  return absl::OkStatus();
}

RecurrentShape ModelRunner::recurrent_shape(int64_t n_slots) const {
  const ModelConfig& c = model_.config();
  return RecurrentShape{c.n_recurrent(), n_slots, c.ssm_conv_kernel, (2 * c.ssm_key_heads + c.ssm_value_heads) * c.ssm_head_dim,
                        c.ssm_value_heads, c.ssm_head_dim};
}

absl::Status ModelRunner::AllocateKv(const KvCache& cache) {
  const ModelConfig& c = model_.config();
  KvShape shape{c.n_kv_layers(), cache.n_blocks(), cache.block_size(), c.max_kv_dim()};
  for (int64_t l = 0; l < c.n_kv_layers(); ++l) shape.layer_dims.push_back(c.kv_dim(l));
  if (std::all_of(shape.layer_dims.begin(), shape.layer_dims.end(), [&](int64_t w) { return w == shape.kv_dim; })) {
    shape.layer_dims.clear();  // one width: the uniform layout
  }
  kv_shape_ = KvShape{};
  LLM42_RETURN_IF_ERROR(backend_.AllocateKv(shape));
  kv_shape_ = shape;
  return absl::OkStatus();
}

int64_t ModelRunner::kv_bytes_per_token() const {
  const ModelConfig& c = model_.config();
  int64_t widths = 0;
  for (int64_t l = 0; l < c.n_kv_layers(); ++l) widths += c.kv_dim(l);
  return 2 * widths * static_cast<int64_t>(backend_.kv_element_bytes());
}

absl::Status ModelRunner::Forward(const KvCache& cache, const ForwardBatch& batch, float* logits) {
  LLM42_ASSIGN_OR_RETURN(const float* view, ForwardView(cache, batch));
  if (view != nullptr) std::copy_n(view, full_.size() * static_cast<size_t>(model_.config().n_vocab), logits);
  return absl::OkStatus();
}

absl::StatusOr<float*> ModelRunner::ForwardView(const KvCache& cache, const ForwardBatch& batch) {
  if (kv_shape_.n_blocks != cache.n_blocks() || kv_shape_.block_size != cache.block_size()) {
    return absl::FailedPreconditionError("the backend's KV storage was not allocated for this cache");
  }
  const ModelConfig& c = model_.config();
  Backend& be = backend_;
  const auto real = static_cast<int64_t>(batch.tokens.size());
  Schedules sc = batch.schedules.empty() ? Schedules(batch.schedule) : Schedules(batch.schedules.data());
  std::span<const int32_t> tokens = batch.tokens, positions = batch.positions;
  tables_.resize(static_cast<size_t>(real));
  for (size_t i = 0; i < tables_.size(); ++i) tables_[i] = cache.block_table(batch.seqs[i]);
  // Padded to the backend's bucket (recorded steps are per bucket): rows of token 0 at position
  // 0 of the backend's padding block, under the last row's schedule, whose results are ignored.
  const int32_t padding_block = be.PaddingBlock();
  const int64_t m = padding_block >= 0 && real > 0 ? std::max(real, be.StepRows(real)) : real;
  const auto um = static_cast<size_t>(m);
  if (m > real) {
    padding_table_[0] = padding_block;
    tables_.resize(um, padding_table_);
    step_tokens_.assign(tokens.begin(), tokens.end());
    step_tokens_.resize(um, 0);
    step_positions_.assign(positions.begin(), positions.end());
    step_positions_.resize(um, 0);
    tokens = step_tokens_;
    positions = step_positions_;
    if (!sc.uniform()) {
      step_schedules_.resize(um);
      for (int64_t i = 0; i < m; ++i) step_schedules_[static_cast<size_t>(i)] = sc[std::min(i, real - 1)];
      sc = Schedules(step_schedules_.data());
    }
  }
  // Buffers wide enough for every block's use of them (blocks.h): a gated attention's queries and
  // gates in gate and up, a DeltaNet layer's convolution channels there, its z and outputs in q and
  // attn, its decays' and rates' inputs in k and v.
  const bool gated = model_.architecture().data().parts.output_gate;
  const int64_t inner = c.ssm_value_heads * c.ssm_head_dim;
  const int64_t e = c.n_embd, qd = std::max(c.max_q_dim(), inner), kv = std::max(c.max_kv_dim(), c.ssm_value_heads);
  const int64_t ff = std::max({c.max_ff(), c.n_embd_per_layer, gated ? 2 * c.max_q_dim() : 0,
                               c.n_recurrent() > 0 ? recurrent_shape_.conv_channels : 0});
  const int64_t per_layer_width = c.n_layer * c.n_embd_per_layer;
  auto buffer = [&](Slot slot, int64_t width) { return be.Workspace(slot, um * static_cast<size_t>(width)); };
  LLM42_ASSIGN_OR_RETURN(float* x, buffer(kX, e));
  LLM42_ASSIGN_OR_RETURN(float* xn, buffer(kXn, e));
  LLM42_ASSIGN_OR_RETURN(float* q, buffer(kQ, qd));
  LLM42_ASSIGN_OR_RETURN(float* k, buffer(kK, kv));
  LLM42_ASSIGN_OR_RETURN(float* v, buffer(kV, kv));
  LLM42_ASSIGN_OR_RETURN(float* attn, buffer(kAttn, qd));
  LLM42_ASSIGN_OR_RETURN(float* proj, buffer(kProj, e));
  LLM42_ASSIGN_OR_RETURN(float* gate, buffer(kGate, ff));
  LLM42_ASSIGN_OR_RETURN(float* up, buffer(kUp, ff));
  float *per_layer = nullptr, *per_layer_scratch = nullptr;
  if (per_layer_width > 0) {
    LLM42_ASSIGN_OR_RETURN(per_layer, buffer(kPerLayer, per_layer_width));
    LLM42_ASSIGN_OR_RETURN(per_layer_scratch, buffer(kPerLayerScratch, per_layer_width));
  }

  ExpertWork* experts = nullptr;
  if (c.n_expert > 0) {
    const auto pairs = um * static_cast<size_t>(c.routing.n_used);
    ExpertWork& w = experts_;
    LLM42_ASSIGN_OR_RETURN(w.logits, buffer(kExpertLogits, c.n_expert));
    LLM42_ASSIGN_OR_RETURN(w.weights, buffer(kExpertWeights, c.routing.n_used));
    LLM42_ASSIGN_OR_RETURN(w.in, be.Workspace(kExpertIn, pairs * static_cast<size_t>(e)));
    const size_t ff = std::max(pairs * static_cast<size_t>(c.n_ff_exp), um * static_cast<size_t>(c.n_ff_shexp));
    LLM42_ASSIGN_OR_RETURN(w.gate, be.Workspace(kExpertGate, ff));
    LLM42_ASSIGN_OR_RETURN(w.up, be.Workspace(kExpertUp, ff));
    LLM42_ASSIGN_OR_RETURN(w.out, be.Workspace(kExpertOut, pairs * static_cast<size_t>(e)));
    LLM42_ASSIGN_OR_RETURN(w.router_in, buffer(kExpertRouterIn, e));
    LLM42_ASSIGN_OR_RETURN(w.sum, buffer(kExpertSum, e));
    experts = &w;
  }

  std::span<const RecurrentRow> recurrent = batch.recurrent;
  if (c.n_recurrent() > 0) {
    if (recurrent_shape_.n_slots == 0) return absl::FailedPreconditionError("the model's recurrent state was not allocated");
    if (recurrent.size() != static_cast<size_t>(real)) {
      return absl::InvalidArgumentError(absl::StrCat("a batch of ", real, " rows with recurrent state for ", recurrent.size()));
    }
    if (m > real) {  // padding rows: each in the padding slot, from zeros, a run of its own would
      // be apart; one run of them all in the last slot (ModelRunner::padding_slot)
      step_recurrent_.assign(recurrent.begin(), recurrent.end());
      step_recurrent_.resize(um, RecurrentRow{static_cast<int32_t>(recurrent_shape_.n_slots - 1), RecurrentRow::kZeroState});
      for (size_t i = static_cast<size_t>(real) + 1; i < um; ++i) step_recurrent_[i].from = RecurrentRow::kNone;
      recurrent = step_recurrent_;
    }
  }
  LLM42_RETURN_IF_ERROR(be.BeginBatch(BatchPlan{tokens, positions, tables_, sc, recurrent}));
  // The layers, which a device may record once and replay for later steps planned alike.
  LLM42_RETURN_IF_ERROR(be.RunStep(this, [&]() -> absl::Status {
    LLM42_RETURN_IF_ERROR(be.Embed(token_embd_, x));
    if (c.embed_scale != 0) LLM42_RETURN_IF_ERROR(be.Scale(x, um * static_cast<size_t>(e), c.embed_scale));
    if (per_layer != nullptr) {
      LLM42_RETURN_IF_ERROR(PerLayerInputs(be, c, m, per_layer_inputs_, sc, x, per_layer, per_layer_scratch));
    }
    const Architecture& arch = model_.architecture();
    for (size_t l = 0; l < layers_.size(); ++l) {
      const auto layer = static_cast<int64_t>(l);
      const int64_t window = c.window(layer);
      const LayerGraph g{be, c, layer, m, sc, window > 0 ? rope_local_ : rope_,
                         AttentionShape{c.n_head, c.n_head_kv_of(layer), c.head_dim_of(layer), c.attn_scale,
                                        c.attn_softcap, window, layers_[l].sinks},
                         c.kv_layer(layer), layer < c.n_kv_layers(), per_layer,
                         x, xn, q, k, v, attn, proj, gate, up, experts};
      LLM42_RETURN_IF_ERROR(arch.Layer(g, layers_[l]));
    }
    return absl::OkStatus();
  }));

  const size_t n_out = batch.logit_rows.size();
  if (batch.logits_copy_seconds != nullptr) *batch.logits_copy_seconds = 0;
  if (n_out == 0) {
    LLM42_RETURN_IF_ERROR(be.Synchronize());
    return nullptr;
  }
  const auto rows = static_cast<int64_t>(n_out);
  LLM42_ASSIGN_OR_RETURN(float* sel, be.Workspace(kLogitsIn, n_out * static_cast<size_t>(e)));
  LLM42_ASSIGN_OR_RETURN(float* out, be.Workspace(kLogits, n_out * static_cast<size_t>(c.n_vocab)));
  LLM42_RETURN_IF_ERROR(be.GatherRows(x, e, batch.logit_rows, sel));
  logit_schedules_.resize(n_out);
  for (size_t r = 0; r < n_out; ++r) logit_schedules_[r] = sc[batch.logit_rows[r]];
  const Schedules out_sc(logit_schedules_.data());
  LLM42_RETURN_IF_ERROR(be.RmsNorm(sel, output_norm_, rows, e, c.rms_eps, sel, out_sc));
  LLM42_RETURN_IF_ERROR(be.MatMul(sel, rows, output_, out, out_sc));
  if (c.final_softcap != 0) LLM42_RETURN_IF_ERROR(be.SoftCap(out, n_out * static_cast<size_t>(c.n_vocab), c.final_softcap));
  LLM42_RETURN_IF_ERROR(be.Synchronize());  // the pass done: what follows brings its results over
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<float*> fetched = FetchLogits(batch, out);
  if (batch.logits_copy_seconds != nullptr) {
    *batch.logits_copy_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return fetched;
}

absl::StatusOr<float*> ModelRunner::FetchLogits(const ForwardBatch& batch, float* out) {
  const int64_t n_vocab = model_.config().n_vocab;
  const size_t n_out = batch.logit_rows.size();
  summarized_.clear();
  full_.clear();
  drawn_rows_.clear();
  draws_.clear();
  LLM42_RETURN_IF_ERROR(backend_.ControlRows(out, n_vocab, batch.controls));
  for (size_t r = 0; r < n_out; ++r) {
    if (!batch.device_draw.empty() && batch.device_draw[r]) {
      drawn_rows_.push_back(static_cast<int32_t>(r));
      draws_.push_back(batch.draws[r]);
      draws_.back().row = static_cast<int32_t>(r);
      continue;
    }
    (!batch.argmax_only.empty() && batch.argmax_only[r] ? summarized_ : full_).push_back(static_cast<int32_t>(r));
  }
  if (!draws_.empty()) {
    drawn_.resize(draws_.size());
    LLM42_RETURN_IF_ERROR(backend_.DrawRows(out, n_vocab, draws_, drawn_.data()));
    for (size_t i = 0; i < draws_.size(); ++i) batch.drawn[drawn_rows_[i]] = drawn_[i];
  }
  if (!summarized_.empty()) {
    summaries_.resize(summarized_.size());
    LLM42_RETURN_IF_ERROR(backend_.ArgmaxRows(out, n_vocab, summarized_, summaries_.data()));
    for (size_t i = 0; i < summarized_.size(); ++i) batch.argmax[summarized_[i]] = summaries_[i];
  }
  if (full_.empty()) return nullptr;
  float* rows = out;
  if (full_.size() < n_out) {  // packed first, so that only they cross
    LLM42_ASSIGN_OR_RETURN(float* packed, backend_.Workspace(kLogitsPacked, full_.size() * static_cast<size_t>(n_vocab)));
    LLM42_RETURN_IF_ERROR(backend_.GatherRows(out, n_vocab, full_, packed));
    rows = packed;
  }
  return backend_.HostView(rows, full_.size() * static_cast<size_t>(n_vocab));
}

}  // namespace llm42
