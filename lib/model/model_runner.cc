#include "lib/model/model_runner.h"

#include <algorithm>
#include <chrono>

#include "lib/kv/kv_cache.h"
#include "lib/util/status.h"

namespace llm42 {
namespace {

// Activation workspace slots.
enum Slot : int { kX, kXn, kQ, kK, kV, kAttn, kProj, kGate, kUp, kLogitsIn, kLogits, kLogitsPacked };

// A vector in backend memory, or nullptr for an absent (empty) one.
absl::StatusOr<const float*> UploadOptional(Backend& be, const std::vector<float>& v) {
  if (v.empty()) return static_cast<const float*>(nullptr);
  return be.UploadVector(v);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelRunner>> ModelRunner::Create(const ModelWeights& model,
                                                                 Backend& be) {
  std::unique_ptr<ModelRunner> r(new ModelRunner(model, be));
  LLM42_ASSIGN_OR_RETURN(r->token_embd_, be.UploadWeight(model.token_embd()));
  // Tied embeddings share the host tensor; the backend keeps one copy per upload, so reuse it.
  if (model.output().data == model.token_embd().data) {
    r->output_ = r->token_embd_;
  } else {
    LLM42_ASSIGN_OR_RETURN(r->output_, be.UploadWeight(model.output()));
  }
  LLM42_ASSIGN_OR_RETURN(r->output_norm_, be.UploadVector(model.output_norm()));
  r->rope_ = model.rope();
  LLM42_ASSIGN_OR_RETURN(r->rope_.freq_factors, UploadOptional(be, model.rope_freqs()));
  for (const ModelWeights::Layer& L : model.layers()) {
    Layer& R = r->layers_.emplace_back();
    LLM42_ASSIGN_OR_RETURN(R.attn_norm, be.UploadVector(L.attn_norm));
    LLM42_ASSIGN_OR_RETURN(R.ffn_norm, be.UploadVector(L.ffn_norm));
    LLM42_ASSIGN_OR_RETURN(R.bq, UploadOptional(be, L.bq));
    LLM42_ASSIGN_OR_RETURN(R.bk, UploadOptional(be, L.bk));
    LLM42_ASSIGN_OR_RETURN(R.bv, UploadOptional(be, L.bv));
    LLM42_ASSIGN_OR_RETURN(R.q_norm, UploadOptional(be, L.q_norm));
    LLM42_ASSIGN_OR_RETURN(R.k_norm, UploadOptional(be, L.k_norm));
    LLM42_ASSIGN_OR_RETURN(R.wq, be.UploadWeight(L.wq));
    LLM42_ASSIGN_OR_RETURN(R.wk, be.UploadWeight(L.wk));
    LLM42_ASSIGN_OR_RETURN(R.wv, be.UploadWeight(L.wv));
    LLM42_ASSIGN_OR_RETURN(R.wo, be.UploadWeight(L.wo));
    LLM42_ASSIGN_OR_RETURN(R.w_gate, be.UploadWeight(L.w_gate));
    LLM42_ASSIGN_OR_RETURN(R.w_up, be.UploadWeight(L.w_up));
    LLM42_ASSIGN_OR_RETURN(R.w_down, be.UploadWeight(L.w_down));
  }
  return r;
}

absl::Status ModelRunner::AllocateKv(const KvCache& cache) {
  const ModelConfig& c = model_.config();
  const KvShape shape{c.n_layer, cache.n_blocks(), cache.block_size(), c.kv_dim()};
  kv_shape_ = KvShape{};
  LLM42_RETURN_IF_ERROR(backend_.AllocateKv(shape));
  kv_shape_ = shape;
  return absl::OkStatus();
}

int64_t ModelRunner::kv_bytes_per_token() const {
  const ModelConfig& c = model_.config();
  return c.n_layer * 2 * c.kv_dim() * static_cast<int64_t>(backend_.kv_element_bytes());
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
  const Schedules sc = batch.schedules.empty() ? Schedules(batch.schedule) : Schedules(batch.schedules.data());
  const auto m = static_cast<int64_t>(batch.tokens.size());
  const int64_t e = c.n_embd, qd = c.q_dim(), kv = c.kv_dim(), ff = c.n_ff;
  const auto um = static_cast<size_t>(m);
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
  tables_.resize(um);
  for (size_t i = 0; i < um; ++i) tables_[i] = cache.block_table(batch.seqs[i]);

  LLM42_RETURN_IF_ERROR(be.BeginBatch(BatchPlan{batch.tokens, batch.positions, tables_, sc}));
  LLM42_RETURN_IF_ERROR(be.Embed(token_embd_, x));
  const AttentionShape heads{c.n_head, c.n_head_kv, c.head_dim};
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    LLM42_RETURN_IF_ERROR(be.RmsNorm(x, L.attn_norm, m, e, c.rms_eps, xn, sc));
    const Backend::MatMulOutput qkv[] = {{&L.wq, q}, {&L.wk, k}, {&L.wv, v}};
    LLM42_RETURN_IF_ERROR(be.MatMulShared(xn, m, qkv, sc));
    if (L.bq != nullptr) LLM42_RETURN_IF_ERROR(be.AddBias(q, m, qd, L.bq));
    if (L.bk != nullptr) LLM42_RETURN_IF_ERROR(be.AddBias(k, m, kv, L.bk));
    if (L.bv != nullptr) LLM42_RETURN_IF_ERROR(be.AddBias(v, m, kv, L.bv));
    // Per-head norms: rows of head_dim, m * heads of them. RmsNorm's schedules index batch rows,
    // so these run under fixed for every row (valid for both schedules: fixed's bits are a
    // row's alone).
    if (L.q_norm != nullptr) LLM42_RETURN_IF_ERROR(be.RmsNorm(q, L.q_norm, m * c.n_head, c.head_dim, c.rms_eps, q, Schedule::kFixed));
    if (L.k_norm != nullptr) LLM42_RETURN_IF_ERROR(be.RmsNorm(k, L.k_norm, m * c.n_head_kv, c.head_dim, c.rms_eps, k, Schedule::kFixed));
    LLM42_RETURN_IF_ERROR(be.Rope(q, c.n_head, c.head_dim, rope_, sc));
    LLM42_RETURN_IF_ERROR(be.Rope(k, c.n_head_kv, c.head_dim, rope_, sc));
    // Every token's K/V lands in the cache before any token of the batch attends.
    LLM42_RETURN_IF_ERROR(be.StoreKv(static_cast<int64_t>(l), k, v));
    LLM42_RETURN_IF_ERROR(be.Attention(static_cast<int64_t>(l), q, heads, attn, sc));
    LLM42_RETURN_IF_ERROR(be.MatMul(attn, m, L.wo, proj, sc));
    LLM42_RETURN_IF_ERROR(be.Add(x, proj, um * static_cast<size_t>(e)));

    LLM42_RETURN_IF_ERROR(be.RmsNorm(x, L.ffn_norm, m, e, c.rms_eps, xn, sc));
    const Backend::MatMulOutput gate_up[] = {{&L.w_gate, gate}, {&L.w_up, up}};
    LLM42_RETURN_IF_ERROR(be.MatMulShared(xn, m, gate_up, sc));
    LLM42_RETURN_IF_ERROR(be.SwiGlu(gate, up, m, ff, gate, sc));
    LLM42_RETURN_IF_ERROR(be.MatMul(gate, m, L.w_down, proj, sc));
    LLM42_RETURN_IF_ERROR(be.Add(x, proj, um * static_cast<size_t>(e)));
  }

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
  for (size_t r = 0; r < n_out; ++r) {
    (!batch.argmax_only.empty() && batch.argmax_only[r] ? summarized_ : full_).push_back(static_cast<int32_t>(r));
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
