#ifndef LLM42_BACKEND_CPU_CPU_BACKEND_H_
#define LLM42_BACKEND_CPU_CPU_BACKEND_H_

#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "lib/backend/backend.h"
#include "lib/backend/cpu/attention.h"
#include "lib/backend/cpu/int8_dot.h"
#include "lib/backend/cpu/kquant_gemv.h"
#include "lib/backend/cpu/recurrent.h"
#include "lib/util/aligned_vector.h"
#include "lib/util/large_buffer.h"
#include "lib/util/thread_pool.h"

namespace llm42 {

// The reference backend: multi-threaded, AVX-512 (F/DQ/VL, VNNI for quantized weights) or
// AVX2/FMA/F16C kernels chosen at run time, with a portable fallback; the fixed schedule's bits
// are the same on all three. Its memory is host memory: weights stay in the mapped model file, the KV
// storage is f32 (or f16 or bf16, by choice), and every op runs synchronously on the calling
// thread and the pool.
class CpuBackend final : public Backend {
 public:
  // n_threads 0 = all cores. allow_simd false forces the portable kernels (tests).
  // kv_dtype: f32, f16 or bf16 (kAuto means f32).
  explicit CpuBackend(int n_threads, bool allow_simd = true, KvDtype kv_dtype = KvDtype::kF32);

  const char* name() const override { return "cpu"; }
  int threads() const { return pool_.size(); }
  // On the forward pass's pool: its threads are idle between passes.
  void HostParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) override {
    pool_.ParallelFor(n, 1, fn);
  }
  bool simd() const { return simd_; }

  absl::StatusOr<WeightMatrix> UploadWeight(const WeightMatrix& host) override;
  absl::StatusOr<const float*> UploadVector(std::span<const float> host) override;
  absl::StatusOr<float*> Workspace(int slot, size_t n_floats) override;
  absl::Status AllocateKv(const KvShape& shape) override;
  absl::Status PrefaultKv() override;
  KvDtype kv_dtype() const override { return kv_dtype_; }
  absl::Status ReadKvBlock(int32_t block, std::span<uint8_t> host) override;
  absl::Status WriteKvBlock(int32_t block, std::span<const uint8_t> host) override;
  int64_t available_memory_bytes() const override;
  absl::Status CopyFromHost(float* dst, const float* host, size_t n) override;
  absl::Status CopyToHost(float* host, const float* src, size_t n) override;
  // The CPU's memory is the host's: x itself.
  absl::StatusOr<float*> HostView(float* x, size_t) override { return x; }
  absl::Status Synchronize() override { return absl::OkStatus(); }

  absl::Status BeginBatch(const BatchPlan& plan) override;
  absl::Status Embed(const WeightMatrix& table, float* out) override;
  // Per-row sequential reductions: already fixed, so both schedules run the same code.
  absl::Status RmsNorm(const float* x, const float* weight, int64_t m, int64_t n, float eps,
                       float* y, Schedules s) override;
  // fast: 1-row GEMV kernel or 4-row register tiles; fixed: the fixed dot family (row_dot.h)
  // in groups of up to 4 rows, each row's bits independent of its group. Where the CPU has
  // AVX2, 2 or more rows of a schedule go through the register-blocked GEMM (packed_gemm.h:
  // weights read directly below 96 rows, packed from there), which computes the fixed family's
  // arithmetic. Rows of q8_0/q4_0 weights take integer dot products against 8-bit activations
  // (int8_dot.h).
  absl::Status MatMul(const float* x, int64_t m, const WeightMatrix& w, float* y,
                      Schedules s) override;
  // One pass over the thread pool for all the matrices (one activation quantization for q8_0 and
  // q4_0), each row computed by MatMul's kernels; matrices of different types go one at a time
  // (of different widths: InvalidArgument, as Backend says).
  absl::Status MatMulShared(const float* x, int64_t m, std::span<const MatMulOutput> outs, Schedules s) override;
  absl::Status AddBias(float* y, int64_t m, int64_t n, const float* bias) override;
  absl::Status Add(float* y, const float* x, size_t n) override;
  absl::Status Rope(float* x, int64_t n_heads, int64_t head_dim, const RopeParams& rope,
                    Schedules s) override;
  absl::Status StoreKv(int64_t layer, const float* k, const float* v) override;
  // Both schedules: the prefix in chunks of kAttentionChunk positions, combined in order (the
  // kernels give every CPU's bits, attention.h, so fast has nothing to gain from another
  // order); decode rows' chunks spread over the threads, all heads of a chunk reading its KV rows
  // once (AttendDecodeRows).
  absl::Status Attention(int64_t layer, const float* q, const AttentionShape& shape, float* out,
                         Schedules s) override;
  absl::Status SwiGlu(const float* gate, const float* up, int64_t m, int64_t n, float* out,
                      Schedules s) override;
  absl::Status GeluGlu(const float* gate, const float* up, int64_t m, int64_t n, float* out) override;
  absl::Status Scale(float* x, size_t n, float s) override;
  absl::Status SoftCap(float* x, size_t n, float cap) override;
  absl::Status Columns(const float* x, int64_t m, int64_t stride, int64_t n, float* out) override;
  absl::Status GatherRows(const float* x, int64_t n_cols, std::span<const int32_t> rows,
                          float* out) override;
  // Recurrent layers: internal::RecurrentState's (its runs' channels or heads on the pool).
  bool runs_recurrent() const override { return true; }
  absl::Status AllocateRecurrent(const RecurrentShape& shape) override { return recurrent_.Allocate(shape); }
  absl::Status CopyRecurrent(int32_t from, int32_t to) override { return recurrent_.Copy(from, to); }
  absl::Status ReadRecurrent(int32_t slot, std::span<float> host) override { return recurrent_.Read(slot, host); }
  absl::Status WriteRecurrent(int32_t slot, std::span<const float> host) override { return recurrent_.Write(slot, host); }
  absl::Status CausalConv(int64_t layer, const float* x, const float* weight, float* out) override;
  absl::Status DeltaRule(int64_t layer, const DeltaRuleArgs& args, float* out) override;
  absl::Status SigmoidMul(float* x, const float* gate, size_t n) override;
  // Mixture-of-experts layers: tokens routed a row per task on the pool, rows scattered and mixed
  // as the rows of ForRows.
  bool runs_experts() const override { return true; }
  absl::Status RouteExperts(const float* logits, int64_t m, const ExpertRouting& routing, int32_t* host_ids,
                            float* weights) override;
  absl::Status ScatterRows(const float* x, int64_t n_cols, std::span<const int32_t> rows, float* out) override;
  absl::Status MixExperts(const float* y, const float* weights, int64_t m, int64_t k, int64_t n, float* out) override;
  absl::Status SigmoidScaleRows(float* x, int64_t m, int64_t n, const float* gate) override;
  absl::Status ClampedSwiGlu(const float* gate, const float* up, int64_t m, int64_t n, float alpha, float limit,
                             float* out) override;
  // In place (the rows are host memory), a row per task on the pool.
  absl::Status ArgmaxRows(const float* x, int64_t n_cols, std::span<const int32_t> rows,
                          ArgmaxSummary* host_out) override;
  // One row a host thread, each by the rule's serial group (the reference the device is held to;
  // the engine samples the CPU backend's rows from their logits, lib/sampling/sampler.h).
  absl::Status DrawRows(const float* x, int64_t n_cols, std::span<const RowDraw> draws, DrawnRow* host_out) override;
  // A row per task on the pool, by lib/numerics/logit_edit.h's host loops.
  absl::Status ControlRows(float* x, int64_t n_cols, std::span<const RowControl> controls) override;

  static constexpr int64_t kAttentionChunk = 256;

 private:
  // fn over row ranges of [0, m) of n elements each: on the pool when the work pays for it.
  // Row-wise ops keep their bits (each row's arithmetic is the same wherever it runs).
  void ForRows(int64_t m, int64_t n, const std::function<void(int64_t, int64_t)>& fn);
  // Keys of position p of a sequence with block table `table` in layer `layer`; its values
  // follow block_size * kv_dim floats later.
  uint8_t* Key(int64_t layer, const int32_t* table, int64_t p) const;
  // Weight rows [r0, r1) against the quantized activation rows `rows` (act_q8_) with int8 kernels,
  // into y[rows[j] * ldy + r].
  void Int8Rows(const internal::Int8Kernels& kernels, const WeightMatrix& w, int64_t r0, int64_t r1,
                const int64_t* rows, int64_t count, float* y, int64_t ldy) const;
  // Attention of the decode rows (BeginBatch: each its sequence's only query in the step) with
  // the heads kernel: a token's heads at once over each kAttentionChunk chunk of its prefix, the
  // chunks on the pool, then combined in order per head (the blocked path's arithmetic).
  void AttendDecodeRows(internal::AttendHeadsFn heads, const internal::KvLayerView& kv, const float* q,
                        const AttentionShape& shape, float* out);

  ThreadPool pool_;
  bool simd_;
  // MatMul's split of a batch's rows by schedule, kept to avoid allocating per op. The backend
  // is driven by one thread (the session's engine), like the pool.
  std::vector<int64_t> fast_rows_, fixed_rows_;
  std::vector<internal::ActivationPairQ8> act_q8_;  // MatMul's activation rows, quantized (int8_dot.h)
  std::vector<int32_t> act_bias_;                    // their Int8GemmBiases (int8_gemm.h)
  AlignedVector<internal::ActivationQ8K> act_k8_;   // fast decode rows for Q4_K/Q6_K (kquant_gemv.h)
  AlignedVector<uint8_t> act_panels_[2];             // fast's and fixed's rows for Int8GemmFewRows
  std::vector<uint32_t> act_bf16_;                   // fast's rows rounded to bf16 pairs (bf16_gemm.h)
  // Attention's blocks of queries (token * n_head + head): block b is attention_queries_[
  // attention_blocks_[b], attention_blocks_[b + 1]).
  std::vector<int64_t> attention_queries_, attention_blocks_;
  // The step's decode rows (BeginBatch): decode_row_[i] != 0 for each, decode_tokens_ in order,
  // their chunks (token, begin, end) with token j's from decode_ranges_[decode_first_[j]] to
  // decode_ranges_[decode_first_[j + 1]]; AttendDecodeRows' softmax states and outputs per chunk.
  struct DecodeRange {
    int64_t token, begin, end;
  };
  std::vector<char> decode_row_;
  std::vector<int64_t> decode_tokens_, decode_first_;
  std::vector<DecodeRange> decode_ranges_;
  // A sliding-window layer's decode chunks: decode_ranges_ trimmed to each token's window of
  // window_ranges_for_ positions (built once a step and window, for every layer of that window;
  // 0: not built this step).
  std::vector<DecodeRange> window_ranges_;
  std::vector<int64_t> window_first_;
  int64_t window_ranges_for_ = 0;
  std::vector<internal::Partial> decode_parts_;
  std::vector<float> decode_out_;
  std::deque<std::vector<float>> vectors_;
  std::vector<AlignedVector<float>> workspace_;
  KvShape kv_shape_;
  int64_t kv_block_elements_ = 0;          // kv_shape_.block_elements()
  std::vector<int64_t> kv_layer_offsets_;  // kv_shape_.layer_offset(l) per layer
  KvDtype kv_dtype_;
  LargeBuffer kv_;  // [block][layer][k|v][block_size][width(layer)] of kv_dtype_, pages touched lazily
  BatchPlan batch_;
  // The step's rotary cos/sin, cs[i * n_rot + 2p] = cos and + 1 = sin of row i's pair p: the same
  // for every layer and for queries and keys, so computed by the step's first Rope and reused
  // per set of parameters (a model may rotate some layers with another base; BeginBatch clears them).
  struct RopeAngles {
    RopeParams params;
    std::vector<float> cs;
  };
  std::vector<RopeAngles> rope_cs_;
  internal::RecurrentState recurrent_;
};

int DefaultThreadCount();

}  // namespace llm42

#endif  // LLM42_BACKEND_CPU_CPU_BACKEND_H_
