#ifndef LLM42_BACKEND_BACKEND_H_
#define LLM42_BACKEND_BACKEND_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "lib/numerics/argmax.h"
#include "lib/numerics/draw_rule.h"
#include "lib/numerics/expert_routing.h"
#include "lib/numerics/logit_edit.h"
#include "lib/util/ggml_types.h"

namespace llm42 {

// How an op may compute (docs/design.md §2).
enum class Schedule {
  // As fast as possible; results may depend on batch size and composition, thread count and
  // how work was split.
  kFast,
  // A row's result depends only on that row's inputs and its own KV prefix: not on the batch,
  // the row's place in it, thread count, chunk boundaries, prefill versus decode, or the
  // machine's SIMD width.
  kFixed,
};

// The schedule of each row of a batch: one for all rows, or one per row (deterministic requests
// verify under fixed in the same pass that decodes everyone else under fast). Converts from a
// single Schedule. Always host memory: backends choose kernels from it.
class Schedules {
 public:
  Schedules(Schedule all) : all_(all) {}  // NOLINT: implicit on purpose
  explicit Schedules(const Schedule* per_row) : per_row_(per_row) {}
  Schedule operator[](int64_t row) const { return per_row_ != nullptr ? per_row_[row] : all_; }
  bool uniform() const { return per_row_ == nullptr; }

 private:
  Schedule all_ = Schedule::kFast;
  const Schedule* per_row_ = nullptr;
};

// A weight matrix: `rows` output rows of `cols` inputs each, every row contiguous in `type`'s
// layout (ggml order: dims[0] = cols, dims[1] = rows). As the model file holds it (host
// memory), or as a backend holds it after UploadWeight (its memory; only the backend reads it,
// and its type may differ: a GPU keeps f32 as bf16).
struct WeightMatrix {
  GgmlType type = GgmlType::kF32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
};

// Rotary position embedding of the first n_rot dims of every head: pair i (of n_rot / 2) turns by
// position * freq_scale * base^(-2i/n_rot) / freq_factors[i].
struct RopeParams {
  int64_t n_rot = 0;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;  // linear position scaling (1 = none)
  // false: adjacent pairs (2i, 2i+1), GGUF/ggml "normal" (Llama); true: (i, i + n_rot/2),
  // "NeoX" (Qwen2, and Hugging Face's rotate_half).
  bool neox = false;
  const float* freq_factors = nullptr;  // n_rot / 2 divisors in backend memory, or none
  // Every cosine and sine multiplied by it (LongRoPE's attention factor, Phi-3 128k; 1 = none).
  float attn_factor = 1.0f;
  bool operator==(const RopeParams&) const = default;
};

// Element type of the paged KV storage. kAuto is the backend's choice (f32 on the CPU, bf16 on
// CUDA). Narrower types halve the KV memory and the bytes attention reads per token; keys and
// values are rounded to them (to nearest, ties to even) when stored, and attention computes on
// the rounded values exactly as on f32 ones, so `fixed` stays row-invariant.
enum class KvDtype { kAuto, kF32, kF16, kBf16 };

inline const char* KvDtypeName(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kAuto: return "auto";
    case KvDtype::kF32: return "f32";
    case KvDtype::kF16: return "f16";
    case KvDtype::kBf16: return "bf16";
  }
  return "auto";
}

// "auto", "f32", "f16", "bf16"; nullopt for anything else.
inline std::optional<KvDtype> ParseKvDtype(std::string_view name) {
  for (KvDtype d : {KvDtype::kAuto, KvDtype::kF32, KvDtype::kF16, KvDtype::kBf16}) {
    if (name == KvDtypeName(d)) return d;
  }
  return std::nullopt;
}

// The version of the fixed schedule's arithmetic, bumped whenever any backend's fixed bits
// change (saved conversations and receipts name it). 2: q8_0/q4_0 rows through 8-bit
// activations (int8_dot.h). 3: their blocks' whole integer products in eight chains (int8_dot.h).
// 4: sampling's and logprobs' sums exact, in fixed point (lib/numerics/draw_rule.h). 5 (CUDA):
// the query/key/value and gate/up projections as one GEMM each, and cuBLASLt algorithms that
// want a small workspace among the fixed GEMM's candidates, and attention over a context past
// 256 positions in spans of 256 merged in order (attention_splits.h), and RoPE's products and
// sums rounded one by one (never contracted into FMAs), and RMSNorm's squares summed by explicit
// FMAs (so that its kernel and the one fused with the residual add agree).
inline constexpr uint32_t kFixedScheduleVersion = 5;

// The paged KV storage a backend allocates: n_blocks blocks of block_size positions, each
// position holding the keys and values of each of n_layers storage layers: kv_dim of each, or
// layer_dims[l] of layer l where the widths differ (Gemma 4's sliding and global layers; a
// model's layers that share an earlier layer's K/V have none of their own). The element type is
// the backend's (KvDtype).
struct KvShape {
  int64_t n_layers = 0;
  int64_t n_blocks = 0;
  int32_t block_size = 0;
  int64_t kv_dim = 0;
  std::vector<int64_t> layer_dims = {};  // empty: kv_dim each
  // The keys' (or values') width of layer l.
  int64_t width(int64_t l) const { return layer_dims.empty() ? kv_dim : layer_dims[static_cast<size_t>(l)]; }
  // Elements from a block's start to layer l's keys (its values follow block_size rows later).
  int64_t layer_offset(int64_t l) const {
    if (layer_dims.empty()) return l * 2 * block_size * kv_dim;
    int64_t at = 0;
    for (int64_t j = 0; j < l; ++j) at += 2 * block_size * layer_dims[static_cast<size_t>(j)];
    return at;
  }
  // Elements of one block: every layer's keys and values of block_size positions.
  int64_t block_elements() const { return layer_offset(n_layers); }
  bool operator==(const KvShape&) const = default;
};

// The byte offset of KV block `block` in a block-major storage of `shape` (every backend's
// layout: [block][layer][k|v][block_size][width(layer)]), checking that `bytes` is one block's size;
// InvalidArgument otherwise (ReadKvBlock / WriteKvBlock).
absl::StatusOr<size_t> KvBlockOffset(const KvShape& shape, size_t element_bytes, int32_t block, size_t bytes);

// The recurrent state a backend holds beside the KV storage for models with linear-attention
// layers (gated DeltaNet: Qwen3.5): n_slots slots, each holding every recurrent layer's state of
// one sequence at one position — the causal convolution's last conv_kernel - 1 inputs
// ([conv_kernel - 1][conv_channels], oldest first) and the delta rule's matrix per value head
// ([heads][head_dim][head_dim], key index major), f32. Which slot is what (a sequence's live
// state, a checkpoint, a snapshot) is the engine's business.
struct RecurrentShape {
  int64_t n_layers = 0;  // recurrent layers
  int64_t n_slots = 0;
  int64_t conv_kernel = 0, conv_channels = 0;
  int64_t heads = 0, head_dim = 0;  // value heads of head_dim keys and values each
  int64_t conv_floats() const { return (conv_kernel - 1) * conv_channels; }
  int64_t layer_floats() const { return conv_floats() + heads * head_dim * head_dim; }
  int64_t slot_floats() const { return n_layers * layer_floats(); }
  bool operator==(const RecurrentShape&) const = default;
};

// A batch row's recurrent state (RecurrentShape): the rows of a sequence come together, in
// position order, with the same `slot`, which holds the state before the first of them and after
// each op the state after the last. The first row may read its state from `from` instead
// (kZeroState: a sequence's start; a snapshot or checkpoint slot), and any row may leave a copy of
// the state after it in `snapshot`.
struct RecurrentRow {
  static constexpr int32_t kNone = -1;
  static constexpr int32_t kZeroState = -2;
  int32_t slot = kNone;
  int32_t from = kNone;
  int32_t snapshot = kNone;
  bool operator==(const RecurrentRow&) const = default;
};

// What a forward pass computes, in host memory: row i feeds tokens[i] at positions[i] of the
// sequence whose block table is block_tables[i] (at least positions[i] / block_size + 1
// entries), under schedules[i], with recurrent state recurrent[i] (empty for a model without
// recurrent layers).
struct BatchPlan {
  std::span<const int32_t> tokens;
  std::span<const int32_t> positions;
  std::span<const int32_t* const> block_tables;
  Schedules schedules = Schedule::kFast;
  std::span<const RecurrentRow> recurrent = {};
};

// A gated DeltaNet layer's heads (Qwen3.5): key heads and value heads (a multiple of them; value
// head h reads key head h % key_heads, as llama.cpp's GGUF files order them) of head_dim each.
struct DeltaRuleShape {
  int64_t key_heads = 0, value_heads = 0, head_dim = 0;
  float eps = 1e-6f;  // the L2 norms' (of queries and keys)
  int64_t conv_channels() const { return (2 * key_heads + value_heads) * head_dim; }
};

// Grouped-query attention heads, and how a layer's attention scores its positions.
struct AttentionShape {
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  float scale = 0;    // scores are q . k * scale; 0: 1 / sqrt(head_dim)
  float softcap = 0;  // scores become softcap * tanh(score / softcap) (Gemma 2); 0: none
  // A query at position p attends to positions (p - window, p] (sliding-window layers); 0: [0, p].
  int64_t window = 0;
  // One logit per query head (backend memory) that each head's softmax also counts, with no value
  // behind it: the weights of the positions sum to less than 1 (gpt-oss's attention sinks);
  // nullptr: none.
  const float* sinks = nullptr;
  float score_scale() const { return scale != 0 ? scale : 1.0f / std::sqrt(static_cast<float>(head_dim)); }
  // The first position a query at `position` attends to.
  int64_t first_position(int64_t position) const { return window > 0 && position >= window ? position - window + 1 : 0; }
};

// Where a forward pass runs. A backend owns its memory: weights (uploaded once), the paged KV
// storage, and activation workspace; pointers into that memory (device memory on a GPU) pass
// between its ops but are never dereferenced by the caller. Activations are f32, row-major
// [rows][features]. Ops may run asynchronously: CopyToHost and Synchronize wait for them.
// Every failure is a Status naming what failed, never an abort. One thread drives a backend at
// a time. The CPU backend is the reference and always built (backend_registry.h picks one).
class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // What it runs on, as receipts name it: the backend's name on the CPU, the device's on a GPU.
  virtual std::string device_name() const { return name(); }

  // --- Memory ---------------------------------------------------------------------------
  // The backend's copy of a host weight (the CPU maps the file's bytes as they are).
  virtual absl::StatusOr<WeightMatrix> UploadWeight(const WeightMatrix& host) = 0;
  // Copies of several host weights of one width that MatMulShared will take together, in this
  // order (a layer's query, key and value; its gate and up): a backend may hold them back to
  // back and run them as one matrix (CUDA does). The default uploads each.
  virtual absl::StatusOr<std::vector<WeightMatrix>> UploadWeights(std::span<const WeightMatrix* const> hosts) {
    std::vector<WeightMatrix> out;
    for (const WeightMatrix* h : hosts) {
      absl::StatusOr<WeightMatrix> w = UploadWeight(*h);
      if (!w.ok()) return w.status();
      out.push_back(*w);
    }
    return out;
  }
  // A constant f32 vector (norm weights, biases, RoPE frequency factors) in backend memory.
  virtual absl::StatusOr<const float*> UploadVector(std::span<const float> host) = 0;
  // Activation buffer number `slot`, at least n_floats long; its contents do not survive a
  // call that grows it. Valid until the next call for the same slot or the backend's end.
  virtual absl::StatusOr<float*> Workspace(int slot, size_t n_floats) = 0;
  // (Re)allocates the paged KV storage; what it held is gone.
  virtual absl::Status AllocateKv(const KvShape& shape) = 0;
  // Makes the whole KV storage resident now (SessionOptions::kv_prefault) where the backend's
  // memory is paged in lazily, at each page's first store; its contents do not change. Device
  // memory is resident once allocated: nothing to do.
  virtual absl::Status PrefaultKv() { return absl::OkStatus(); }
  virtual KvDtype kv_dtype() const = 0;  // never kAuto
  // Bytes of one stored key or value element (4 for f32, 2 for f16 and bf16).
  size_t kv_element_bytes() const { return kv_dtype() == KvDtype::kF32 ? 4 : 2; }
  // KV block `block` — every layer's keys and values, KvShape::block_elements() elements,
  // in the backend's layout — to or from host memory of exactly that many bytes, after the ops
  // before it (saved conversations).
  virtual absl::Status ReadKvBlock(int32_t block, std::span<uint8_t> host) = 0;
  virtual absl::Status WriteKvBlock(int32_t block, std::span<const uint8_t> host) = 0;
  // Memory available for the KV storage now (the machine's RAM on the CPU, free device memory
  // on a GPU), to size a default cache.
  virtual int64_t available_memory_bytes() const = 0;
  virtual absl::Status CopyFromHost(float* dst, const float* host, size_t n) = 0;
  // Waits for the ops before it, then copies.
  virtual absl::Status CopyToHost(float* host, const float* src, size_t n) = 0;
  // n floats at x (backend memory), readable and writable by the host after the ops before it:
  // x itself where the backend's memory is the host's (the CPU: no copy), else a copy in host
  // memory the backend owns (page-locked on a GPU, which copies there fastest), valid until the
  // next call. For what crosses every step: the logits.
  virtual absl::StatusOr<float*> HostView(float* x, size_t n) = 0;
  virtual absl::Status Synchronize() = 0;
  // Host work between forward passes (sampling a step's rows): fn(begin, end) over [0, n) on
  // the host threads this backend has and leaves idle meanwhile, returning when all is done.
  // The default runs it on the caller's thread.
  virtual void HostParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    if (n > 0) fn(0, n);
  }

  // --- Ops ------------------------------------------------------------------------------
  // The batch that Embed, Rope, StoreKv and Attention work on, until the next call; the plan's
  // memory must stay valid until then.
  virtual absl::Status BeginBatch(const BatchPlan& plan) = 0;
  // Runs `ops`: a pass's ops after BeginBatch, on buffers sized before them (Workspace), that
  // reach the host only through what BeginBatch took — no copies to or from the host, no
  // waits. A device may record them and replay the recording for a later batch it plans
  // alike (CUDA graphs: one launch for a step's hundreds of kernels), so they must do the same
  // for the same plan; `owner` tells callers (whose ops differ) apart. By default they run.
  virtual absl::Status RunStep(const void* owner, const std::function<absl::Status()>& ops) { return ops(); }
  // The rows a batch of m rows runs as: m, or more where a backend records steps per bucket of
  // row counts; the caller then adds padding rows, each token 0 at position 0 of PaddingBlock()
  // under the batch's last row's schedule, and ignores their results. Rows are independent in
  // every op (fixed rows' bits are their own in any batch), so padding never changes a fixed
  // row's bits.
  virtual int64_t StepRows(int64_t m) const { return m; }
  // The KV block padding rows use, beside the cache's blocks (AllocateKv keeps it); -1 where
  // StepRows never pads.
  virtual int32_t PaddingBlock() const { return -1; }
  // out[i] = row tokens[i] of the table, as f32, for every row of the batch.
  virtual absl::Status Embed(const WeightMatrix& table, float* out) = 0;
  // y = x / sqrt(mean(x^2) + eps) * weight, per row of n.
  virtual absl::Status RmsNorm(const float* x, const float* weight, int64_t m, int64_t n,
                               float eps, float* y, Schedules s) = 0;
  // x += add (m rows of n), then y = RmsNorm(x): a residual connection and the next block's norm
  // as one op, so that a device may run them as one kernel, with the bits of the two.
  virtual absl::Status AddRmsNorm(float* x, const float* add, const float* weight, int64_t m, int64_t n, float eps,
                                  float* y, Schedules s) {
    if (absl::Status st = Add(x, add, static_cast<size_t>(m * n)); !st.ok()) return st;
    return RmsNorm(x, weight, m, n, eps, y, s);
  }
  // y[m][w.rows] = x[m][w.cols] * w^T.
  virtual absl::Status MatMul(const float* x, int64_t m, const WeightMatrix& w, float* y,
                              Schedules s) = 0;
  // Several matrices of one width (cols) against the same activations: *outs[i].w into
  // outs[i].y, as MatMul does each, in one op so that a backend may run them together (the
  // query, key and value projections; the gate and up ones). Matrices uploaded together
  // (UploadWeights) and taken in that order may run as one matrix: then a fixed row's bits are
  // that matrix's (the same in every batch, though not MatMul's of each part); else they are
  // MatMul's of each. Matrices of different widths are an InvalidArgument error. The default
  // runs MatMul per matrix.
  struct MatMulOutput {
    const WeightMatrix* w;
    float* y;
  };
  virtual absl::Status MatMulShared(const float* x, int64_t m, std::span<const MatMulOutput> outs, Schedules s) {
    absl::Status st = SameWidth(outs);
    for (size_t i = 0; st.ok() && i < outs.size(); ++i) st = MatMul(x, m, *outs[i].w, outs[i].y, s);
    return st;
  }
  // y[i][j] += bias[j] for m rows of n.
  virtual absl::Status AddBias(float* y, int64_t m, int64_t n, const float* bias) = 0;
  // y[i] += x[i] for n values.
  virtual absl::Status Add(float* y, const float* x, size_t n) = 0;
  // Rotates every head of every row of the batch in place (x is [rows][n_heads][head_dim]).
  virtual absl::Status Rope(float* x, int64_t n_heads, int64_t head_dim, const RopeParams& rope,
                            Schedules s) = 0;
  // Writes every batch row's keys and values (k, v: [rows][kv_dim]) into layer `layer` of the
  // KV storage, at the row's position.
  virtual absl::Status StoreKv(int64_t layer, const float* k, const float* v) = 0;
  // Rope of q (shape.n_head heads) and k (shape.n_head_kv), then StoreKv(layer, k, v): one op,
  // so that a device may run it as one kernel, with the bits of the three.
  virtual absl::Status RopeStoreKv(int64_t layer, float* q, float* k, const float* v, const AttentionShape& shape,
                                   const RopeParams& rope, Schedules s) {
    if (absl::Status st = Rope(q, shape.n_head, shape.head_dim, rope, s); !st.ok()) return st;
    if (absl::Status st = Rope(k, shape.n_head_kv, shape.head_dim, rope, s); !st.ok()) return st;
    return StoreKv(layer, k, v);
  }
  // Causal attention of layer `layer` for every batch row: out[i] = softmax(capped(q[i] K^T *
  // scale)) V over positions [shape.first_position(positions[i]), positions[i]] of the row's
  // sequence, per head (AttentionShape; with sinks, the softmax's sum also has the head's
  // exp(sink)); every row's own K/V must have been stored first.
  virtual absl::Status Attention(int64_t layer, const float* q, const AttentionShape& shape,
                                 float* out, Schedules s) = 0;
  // out = silu(gate) * up, for m rows of n (out may be gate).
  virtual absl::Status SwiGlu(const float* gate, const float* up, int64_t m, int64_t n,
                              float* out, Schedules s) = 0;
  // out = gelu(gate) * up with GELU's tanh form, 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))
  // (Gemma), for m rows of n (out may be gate). Both schedules: one arithmetic per element.
  virtual absl::Status GeluGlu(const float* gate, const float* up, int64_t m, int64_t n, float* out) = 0;
  // x[i] *= s for n values (Gemma's embeddings, by sqrt(n_embd)).
  virtual absl::Status Scale(float* x, size_t n, float s) = 0;
  // x[i] = cap * tanh(x[i] / cap) for n values (Gemma 2's final logits).
  virtual absl::Status SoftCap(float* x, size_t n, float cap) = 0;
  // out[r][j] = x[r * stride + j] for m rows of n (j < n <= stride): n columns of a wider
  // activation (the caller offsets x to the first), packed (Gemma 4's per-layer inputs).
  virtual absl::Status Columns(const float* x, int64_t m, int64_t stride, int64_t n, float* out) = 0;
  // --- Recurrent layers (RecurrentShape, BatchPlan::recurrent) -------------------------------
  // The defaults are for a backend without them: UNIMPLEMENTED, which a model with recurrent
  // layers reports when it is loaded there.
  virtual bool runs_recurrent() const { return false; }
  // (Re)allocates the slots, every one zero; what they held is gone.
  virtual absl::Status AllocateRecurrent(const RecurrentShape& shape) { return NoRecurrent(); }
  // Slot `to` = slot `from` (RecurrentRow::kZeroState: zeros), after the ops before it.
  virtual absl::Status CopyRecurrent(int32_t from, int32_t to) { return NoRecurrent(); }
  // A slot's RecurrentShape::slot_floats() values to or from host memory (saved conversations).
  virtual absl::Status ReadRecurrent(int32_t slot, std::span<float> host) { return NoRecurrent(); }
  virtual absl::Status WriteRecurrent(int32_t slot, std::span<const float> host) { return NoRecurrent(); }
  // Recurrent layer `layer`'s causal depthwise convolution and SiLU, per batch row in order:
  // out[c] = silu(sum_i weight[c][i] * w[i]) over the window w of the row's sequence's last
  // conv_kernel - 1 inputs of channel c then x[c] (rows of RecurrentShape::conv_channels), the
  // window then shifted by one. One arithmetic for both schedules (a row's bits are its own).
  virtual absl::Status CausalConv(int64_t layer, const float* x, const float* weight, float* out) {
    return NoRecurrent();
  }
  // Recurrent layer `layer`'s gated delta rule, per batch row in order (llama.cpp's
  // gated_delta_net; the recurrent form, token by token, for both schedules): from `qkv` (rows of
  // the convolution's output: queries, keys, values) each query and key head L2-normalized
  // (x / sqrt(sum x^2 + eps)); from alpha and beta (rows of value_heads) each value head's decay
  // exp(softplus(alpha + dt_bias) * a) and its rate sigmoid(beta); then per value head, S being its
  // state: S *= decay; S += k (rate (v - S^T k))^T; out = S^T q / sqrt(head_dim) (rows of
  // value_heads * head_dim).
  struct DeltaRuleArgs {
    DeltaRuleShape shape;
    const float *qkv, *alpha, *beta;
    const float *dt_bias, *a;  // value_heads each (backend memory)
  };
  virtual absl::Status DeltaRule(int64_t layer, const DeltaRuleArgs& args, float* out) { return NoRecurrent(); }
  // x[i] *= sigmoid(gate[i]) for n values (gated attention's output: Qwen3.5). One arithmetic for
  // both schedules.
  virtual absl::Status SigmoidMul(float* x, const float* gate, size_t n) { return NoRecurrent(); }

  // Mixture-of-experts layers (lib/model/arch/experts.h); a model with experts is refused where a
  // backend does not run them. Each op has one arithmetic for both schedules.
  virtual bool runs_experts() const { return false; }
  // Each of m rows of router logits (routing.n_expert each) routed by lib/numerics/
  // expert_routing.h's RouteToken, to the bit: the chosen experts to host_ids[row * n_used +
  // slot] (host memory) and their weights to `weights` (backend memory), in the same order.
  virtual absl::Status RouteExperts(const float* logits, int64_t m, const ExpertRouting& routing, int32_t* host_ids,
                                    float* weights) {
    return NoExperts();
  }
  // out[rows[r]] = x[r] for rows of n_cols (rows in host memory): GatherRows' inverse.
  virtual absl::Status ScatterRows(const float* x, int64_t n_cols, std::span<const int32_t> rows, float* out) {
    return NoExperts();
  }
  // x[r][i] *= sigmoid(gate[r]) for m rows of n (a shared expert's output by its gate).
  virtual absl::Status SigmoidScaleRows(float* x, int64_t m, int64_t n, const float* gate) { return NoExperts(); }
  // out = g sigmoid(alpha g) (clamp(u, -limit, limit) + 1), g being min(gate, limit) and u up,
  // element by element for m rows of n (out may be gate): gpt-oss's experts' clamped SwiGLU
  // (llama.cpp's swiglu_oai), g / (1 + exp(alpha * -g)) * (u + 1) in that order.
  virtual absl::Status ClampedSwiGlu(const float* gate, const float* up, int64_t m, int64_t n, float alpha, float limit,
                                     float* out) {
    return NoExperts();
  }
  // out[r] = y[r k] w[r k] + y[r k + 1] w[r k + 1] + ... + y[r k + k - 1] w[r k + k - 1] for m
  // rows of n: each product rounded, the sum in slot order from the first product (llama.cpp's
  // order: the token's experts by decreasing weight).
  virtual absl::Status MixExperts(const float* y, const float* weights, int64_t m, int64_t k, int64_t n, float* out) {
    return NoExperts();
  }

  // out[r] = x[rows[r]] for rows of n_cols (rows in host memory).
  virtual absl::Status GatherRows(const float* x, int64_t n_cols, std::span<const int32_t> rows,
                                  float* out) = 0;
  // host_out[r] = SummarizeArgmax(x[rows[r]]) for rows of n_cols (rows and host_out in host
  // memory), after the ops before it, to the bit: what a greedy draw needs of its row without
  // the row crossing to the host.
  virtual absl::Status ArgmaxRows(const float* x, int64_t n_cols, std::span<const int32_t> rows,
                                  ArgmaxSummary* host_out) = 0;
  // host_out[r] = the draw of row draws[r].row of x (rows of n_cols) under its sampling params
  // (not greedy: ArgmaxRows is greedy's) at its position, its logprob and its top_n (at most
  // kMaxTopLogprobs; RowDraw, DrawnRow) by lib/numerics/draw_rule.h's DrawRow, to the bit: what a sampled draw
  // needs of its row without the row crossing to the host (draws and host_out in host memory).
  virtual absl::Status DrawRows(const float* x, int64_t n_cols, std::span<const RowDraw> draws,
                                DrawnRow* host_out) = 0;
  // What a request's controls do to row `row` of a batch's logits before its draw: its token
  // edits (lib/sampling/logit_controls.h's LogitEditsOf: sorted, one per token, within the row)
  // under `rule`, and the grammar's allowed tokens ((n_cols + 63) / 64 words; empty: all), all
  // in host memory.
  struct RowControl {
    int32_t row = 0;
    PenaltyRule rule;
    std::span<const LogitEdit> edits;
    std::span<const uint64_t> allowed;
  };
  // Applies each control to its row of x (rows of n_cols) in place, as the host does
  // (lib/numerics/logit_edit.h's EditedLogit, then -infinity where a bit of `allowed` is clear),
  // to the bit; rows not named are left as they are. A token outside the row or a mask of
  // another size is an InvalidArgument error.
  virtual absl::Status ControlRows(float* x, int64_t n_cols, std::span<const RowControl> controls) = 0;

 protected:
  // DrawRows' precondition: sampled (not greedy) draws of at most kMaxTopLogprobs top tokens.
  static absl::Status CheckDraws(std::span<const RowDraw> draws) {
    for (const RowDraw& d : draws) {
      if (IsGreedy(d.params) || d.top_n < 0 || d.top_n > kMaxTopLogprobs) {
        return absl::InvalidArgumentError(absl::StrCat("DrawRows takes sampled rows with 0..", kMaxTopLogprobs,
                                                       " top tokens; row ", d.row, " is greedy or asks for ", d.top_n));
      }
    }
    return absl::OkStatus();
  }
  // ControlRows' precondition.
  static absl::Status CheckControls(int64_t n_cols, std::span<const RowControl> controls) {
    for (const RowControl& c : controls) {
      for (const LogitEdit& e : c.edits) {
        if (e.token < 0 || e.token >= n_cols) {
          return absl::InvalidArgumentError(absl::StrCat("ControlRows: row ", c.row, " edits token ", e.token,
                                                         " of a row of ", n_cols));
        }
      }
      if (!c.allowed.empty() && static_cast<int64_t>(c.allowed.size()) != (n_cols + 63) / 64) {
        return absl::InvalidArgumentError(absl::StrCat("ControlRows: row ", c.row, "'s mask has ", c.allowed.size(),
                                                       " words for a row of ", n_cols));
      }
    }
    return absl::OkStatus();
  }
  absl::Status NoRecurrent() const {
    return absl::UnimplementedError(absl::StrCat("the ", name(), " backend does not run recurrent (linear-attention) layers"));
  }
  absl::Status NoExperts() const {
    return absl::UnimplementedError(absl::StrCat("the ", name(), " backend does not run mixture-of-experts layers"));
  }
  // MatMulShared's precondition: every matrix as wide as the first.
  static absl::Status SameWidth(std::span<const MatMulOutput> outs) {
    for (const MatMulOutput& o : outs) {
      if (o.w->cols != outs[0].w->cols) {
        return absl::InvalidArgumentError(absl::StrCat("MatMulShared: a matrix of ", o.w->cols, " columns beside one of ",
                                                       outs[0].w->cols));
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace llm42

#endif  // LLM42_BACKEND_BACKEND_H_
