#ifndef LLM42_BACKEND_CUDA_CUDA_BACKEND_H_
#define LLM42_BACKEND_CUDA_CUDA_BACKEND_H_

#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "lib/backend/attention_splits.h"
#include "lib/backend/backend.h"
#include "lib/backend/step_recordings.h"
#include "lib/backend/cuda/device_buffer.h"
#include "lib/backend/cuda/kernels.cuh"
#include "lib/backend/cuda/lt_gemm.h"
#include "lib/util/thread_pool.h"

namespace llm42::cuda {

// The NVIDIA backend: weights resident on the device as bf16 (f16 files stay f16; f32, q8_0 and
// q4_0 are converted at load), the paged KV storage in bf16, activations in f32, GEMMs through
// cuBLASLt (16-bit inputs, f32 accumulation and output), the rest in this folder's kernels, all
// on one stream. Ops are asynchronous; CopyToHost and Synchronize wait.
class CudaBackend final : public Backend {
 public:
  CudaBackend() = default;
  absl::Status Init();

  const char* name() const override { return "cuda"; }
  std::string device_name() const override;

  absl::StatusOr<WeightMatrix> UploadWeight(const WeightMatrix& host) override;
  // Back to back in one allocation; MatMulShared then runs them as one matrix (one GEMM, its
  // columns split into the outputs) when they share a width and a 16-bit type.
  absl::StatusOr<std::vector<WeightMatrix>> UploadWeights(std::span<const WeightMatrix* const> hosts) override;
  absl::StatusOr<const float*> UploadVector(std::span<const float> host) override;
  absl::StatusOr<float*> Workspace(int slot, size_t n_floats) override;
  absl::Status AllocateKv(const KvShape& shape) override;
  KvDtype kv_dtype() const override { return KvDtype::kBf16; }
  absl::Status ReadKvBlock(int32_t block, std::span<uint8_t> host) override;
  absl::Status WriteKvBlock(int32_t block, std::span<const uint8_t> host) override;
  int64_t available_memory_bytes() const override;
  absl::Status CopyFromHost(float* dst, const float* host, size_t n) override;
  absl::Status CopyToHost(float* host, const float* src, size_t n) override;
  // Into page-locked host memory (grown as needed), the fastest copy the device makes.
  absl::StatusOr<float*> HostView(float* x, size_t n) override;
  absl::Status Synchronize() override;
  // On a pool of the host's cores (up to 16), made at the first call.
  void HostParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) override;

  // Also plans attention for the layer shapes seen so far and uploads a mixed batch's row
  // sets, so that a step's ops need nothing more from the host (RunStep).
  absl::Status BeginBatch(const BatchPlan& plan) override;
  // A CUDA graph per step key (StepRecordings: the rows and how many are fixed, the
  // block-table width, the attention plans' shape, the owner), recorded at a key's second step and
  // replayed after; steps of more than kMaxRecordedRows rows (prefill: compute-bound) and a
  // key that cannot be recorded run as they are. LLM42_CUDA_GRAPHS=0 turns recording off.
  absl::Status RunStep(const void* owner, const std::function<absl::Status()>& ops) override;
  // StepRowBucket's, up to kMaxRecordedRows, while recording is on.
  int64_t StepRows(int64_t m) const override;
  int32_t PaddingBlock() const override;
  absl::Status Embed(const WeightMatrix& table, float* out) override;
  absl::Status RmsNorm(const float* x, const float* weight, int64_t m, int64_t n, float eps, float* y,
                       Schedules s) override;
  // One kernel (LaunchAddRmsNorm).
  absl::Status AddRmsNorm(float* x, const float* add, const float* weight, int64_t m, int64_t n, float eps, float* y,
                          Schedules s) override;
  // fast rows: cuBLASLt's heuristic with a workspace; fixed rows: gathered and run with no
  // workspace (LtGemm).
  absl::Status MatMul(const float* x, int64_t m, const WeightMatrix& w, float* y, Schedules s) override;
  // The activations rounded to 16 bits once for every matrix (where all rows share a schedule
  // and the matrices a type; else as MatMul per matrix).
  absl::Status MatMulShared(const float* x, int64_t m, std::span<const MatMulOutput> outs, Schedules s) override;
  absl::Status AddBias(float* y, int64_t m, int64_t n, const float* bias) override;
  absl::Status Add(float* y, const float* x, size_t n) override;
  absl::Status Rope(float* x, int64_t n_heads, int64_t head_dim, const RopeParams& rope, Schedules s) override;
  absl::Status StoreKv(int64_t layer, const float* k, const float* v) override;
  // One kernel (LaunchRopeStoreKv).
  absl::Status RopeStoreKv(int64_t layer, float* q, float* k, const float* v, const AttentionShape& shape,
                           const RopeParams& rope, Schedules s) override;
  // A block per (row, head, span): fixed rows past kFixedAttentionSpan positions split by that
  // size, fast rows of a batch too small to fill the device over several (flash-decoding), fast
  // prefill chunks as query tiles (lib/backend/attention_splits.h).
  absl::Status Attention(int64_t layer, const float* q, const AttentionShape& shape, float* out,
                         Schedules s) override;
  absl::Status SwiGlu(const float* gate, const float* up, int64_t m, int64_t n, float* out, Schedules s) override;
  absl::Status GeluGlu(const float* gate, const float* up, int64_t m, int64_t n, float* out) override;
  absl::Status Scale(float* x, size_t n, float s) override;
  absl::Status SoftCap(float* x, size_t n, float cap) override;
  absl::Status Columns(const float* x, int64_t m, int64_t stride, int64_t n, float* out) override;
  absl::Status GatherRows(const float* x, int64_t n_cols, std::span<const int32_t> rows, float* out) override;
  // On the device (kernels.cuh's LaunchArgmaxRows): three numbers a row cross to the host.
  absl::Status ArgmaxRows(const float* x, int64_t n_cols, std::span<const int32_t> rows,
                          ArgmaxSummary* host_out) override;
  // On the device (draw_rows.cuh): a block a row runs lib/numerics/draw_rule.h's DrawRow.
  absl::Status DrawRows(const float* x, int64_t n_cols, std::span<const RowDraw> draws, DrawnRow* host_out) override;
  // On the device (control_rows.cuh): the controls, edits and masks cross in one copy.
  absl::Status ControlRows(float* x, int64_t n_cols, std::span<const RowControl> controls) override;

 private:
  // The 16-bit rows of a host weight: its own bytes (f16, bf16), or converted to bf16 into
  // *converted; *type is theirs.
  absl::StatusOr<const void*> HalfWeight(const WeightMatrix& host, std::vector<uint16_t>* converted, GgmlType* type);
  // Matrices UploadWeights placed back to back: the whole, and its parts' rows in order.
  struct Together {
    WeightMatrix whole;
    std::vector<int64_t> parts;
  };
  // The group `outs` is, in its order; else nullptr.
  const Together* TogetherOf(std::span<const MatMulOutput> outs) const;
  // Copies host ints into `b` (grown as needed) on the stream.
  absl::Status UploadInts(DeviceBuffer& b, std::span<const int32_t> host);
  // One GEMM over rows that all run under one schedule.
  absl::Status Gemm(const float* x, int64_t m, const WeightMatrix& w, float* y, bool fixed);
  // Which schedules the m rows take; fast_rows_ and fixed_rows_ list each one's rows when both
  // do (a uniform batch is not scanned).
  enum class RowMix { kFast, kFixed, kBoth };
  RowMix SplitRows(int64_t m, Schedules s);
  KvArgs Kv(int64_t layer) const;
  // The attention plan of the batch for one layer shape (PlanAttentionSplits), its rows and
  // tiles on the device.
  struct ShapePlan {
    int64_t n_head = 0, head_dim = 0, window = 0;
    std::vector<Schedule> schedules;  // what it was planned for; empty: not this batch's
    AttentionSplits splits;
    DeviceBuffer rows, tiles;
  };
  // The plan for this shape under s: the one BeginBatch made, else made now.
  absl::StatusOr<const ShapePlan*> PlanFor(const AttentionShape& shape, Schedules s);
  // Plans p's shape for the batch under s, uploads it, and grows the partial states' room.
  absl::Status Plan(ShapePlan& p, Schedules s);
  // Records ops as a graph (nullptr when a recording cannot hold them).
  cudaGraphExec_t Record(const std::function<absl::Status()>& ops);
  // An error while a step is being recorded: `what` reaches the host.
  absl::Status NotWhileRecording(const char* what) const;

  Stream stream_;
  LtGemm gemm_;
  std::deque<DeviceBuffer> weights_;
  absl::flat_hash_map<const uint8_t*, Together> together_;  // by the first part's data
  DeviceBuffer together_y_;                                  // a group's outputs before the split
  std::vector<DeviceBuffer> workspace_;
  KvShape kv_shape_;
  // kv_shape_.layer_offset(l) for l in [0, n_layers]: the last is a block's elements.
  std::vector<int64_t> kv_layer_offsets_;
  DeviceBuffer kv_;
  // The current batch on the device, and its row count.
  DeviceBuffer tokens_, positions_, tables_;
  int64_t batch_rows_ = 0, max_blocks_ = 0;
  std::vector<int32_t> tables_host_, positions_host_;
  std::vector<const void*> sequences_host_;  // per row: its block table, which tells sequences apart
  // Attention's plans: the device's blocks in flight they aim to fill, and per shape.
  static constexpr int64_t kAttentionBlocksPerSm = 4;
  int64_t device_blocks_ = 0;
  // Room for split rows' partial states (a wave's); a fixed prefill chunk of 2048 rows at 4k
  // context needs a few waves.
  int64_t attention_scratch_bytes_ = int64_t{64} << 20;
  std::deque<ShapePlan> plans_;  // per attention shape seen, in the order seen
  std::vector<Schedule> schedules_scratch_;
  DeviceBuffer span_partial_;
  // Recorded steps (CUDA graphs): whether on, whether one is being recorded now, the batch's
  // key (BeginBatch; the owner is its last entry), the KV block padding rows use.
  static constexpr int64_t kMaxRecordedRows = 512;
  bool graphs_ = true;
  bool recording_ = false;
  bool logged_refusal_ = false;
  StepRecordings::Key step_key_;
  StepRecordings recordings_{[](void* g) { cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(g)); }};
  int32_t padding_block_ = -1;
  // MatMul's scratch: gathered rows when schedules mix.
  DeviceBuffer rows_idx_, gathered_x_, gathered_y_;
  // The row sets of a mixed batch on the device, and what they hold.
  DeviceBuffer fast_idx_, fixed_idx_;
  std::vector<int32_t> fast_uploaded_, fixed_uploaded_;
  // ArgmaxRows' row indices and summaries.
  DeviceBuffer argmax_rows_, argmax_out_;
  // DrawRows' requests and results.
  DeviceBuffer draw_in_, draw_out_;
  // ControlRows' controls, edits and mask words, packed on the host and on the device.
  std::vector<uint8_t> control_host_;
  DeviceBuffer control_in_;
  std::vector<int32_t> fast_rows_, fixed_rows_;
  bool logged_conversion_ = false;
  std::unique_ptr<ThreadPool> host_pool_;
  PinnedBuffer host_view_;
};

}  // namespace llm42::cuda

#endif  // LLM42_BACKEND_CUDA_CUDA_BACKEND_H_
