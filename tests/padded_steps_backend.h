#ifndef LLM42_TESTS_PADDED_STEPS_BACKEND_H_
#define LLM42_TESTS_PADDED_STEPS_BACKEND_H_

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "lib/backend/backend.h"
#include "lib/backend/step_recordings.h"

namespace llm42::testing {

// Another backend as a device that records steps sees it: its steps padded to StepRowBucket's
// buckets (one KV block more than the cache's for the padding rows, as CUDA keeps), each
// step's ops run through RunStep once (counted), everything else passed through. So that the
// model runner's padding is tested on the CPU.
class PaddedStepsBackend final : public Backend {
 public:
  explicit PaddedStepsBackend(Backend& inner) : in_(inner) {}

  int steps_run() const { return steps_run_; }
  int64_t last_rows() const { return last_rows_; }

  const char* name() const override { return in_.name(); }
  std::string device_name() const override { return in_.device_name(); }
  absl::StatusOr<WeightMatrix> UploadWeight(const WeightMatrix& host) override { return in_.UploadWeight(host); }
  absl::StatusOr<std::vector<WeightMatrix>> UploadWeights(std::span<const WeightMatrix* const> hosts) override {
    return in_.UploadWeights(hosts);
  }
  absl::StatusOr<const float*> UploadVector(std::span<const float> host) override { return in_.UploadVector(host); }
  absl::StatusOr<float*> Workspace(int slot, size_t n_floats) override { return in_.Workspace(slot, n_floats); }
  absl::Status AllocateKv(const KvShape& shape) override {
    KvShape more = shape;
    more.n_blocks += 1;
    padding_block_ = -1;
    if (absl::Status s = in_.AllocateKv(more); !s.ok()) return s;
    padding_block_ = static_cast<int32_t>(shape.n_blocks);
    return absl::OkStatus();
  }
  absl::Status PrefaultKv() override { return in_.PrefaultKv(); }
  KvDtype kv_dtype() const override { return in_.kv_dtype(); }
  absl::Status ReadKvBlock(int32_t block, std::span<uint8_t> host) override { return in_.ReadKvBlock(block, host); }
  absl::Status WriteKvBlock(int32_t block, std::span<const uint8_t> host) override {
    return in_.WriteKvBlock(block, host);
  }
  int64_t available_memory_bytes() const override { return in_.available_memory_bytes(); }
  absl::Status CopyFromHost(float* dst, const float* host, size_t n) override { return in_.CopyFromHost(dst, host, n); }
  absl::Status CopyToHost(float* host, const float* src, size_t n) override { return in_.CopyToHost(host, src, n); }
  absl::StatusOr<float*> HostView(float* x, size_t n) override { return in_.HostView(x, n); }
  absl::Status Synchronize() override { return in_.Synchronize(); }
  void HostParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) override {
    in_.HostParallelFor(n, fn);
  }
  absl::Status BeginBatch(const BatchPlan& plan) override {
    last_rows_ = static_cast<int64_t>(plan.tokens.size());
    return in_.BeginBatch(plan);
  }
  absl::Status RunStep(const void* owner, const std::function<absl::Status()>& ops) override {
    ++steps_run_;
    return in_.RunStep(owner, ops);
  }
  int64_t StepRows(int64_t m) const override { return padding_block_ >= 0 ? StepRowBucket(m, 512) : m; }
  int32_t PaddingBlock() const override { return padding_block_; }
  absl::Status Embed(const WeightMatrix& table, float* out) override { return in_.Embed(table, out); }
  absl::Status RmsNorm(const float* x, const float* weight, int64_t m, int64_t n, float eps, float* y,
                       Schedules s) override {
    return in_.RmsNorm(x, weight, m, n, eps, y, s);
  }
  absl::Status AddRmsNorm(float* x, const float* add, const float* weight, int64_t m, int64_t n, float eps, float* y,
                          Schedules s) override {
    return in_.AddRmsNorm(x, add, weight, m, n, eps, y, s);
  }
  absl::Status MatMul(const float* x, int64_t m, const WeightMatrix& w, float* y, Schedules s) override {
    return in_.MatMul(x, m, w, y, s);
  }
  absl::Status MatMulShared(const float* x, int64_t m, std::span<const MatMulOutput> outs, Schedules s) override {
    return in_.MatMulShared(x, m, outs, s);
  }
  absl::Status AddBias(float* y, int64_t m, int64_t n, const float* bias) override { return in_.AddBias(y, m, n, bias); }
  absl::Status Add(float* y, const float* x, size_t n) override { return in_.Add(y, x, n); }
  absl::Status Rope(float* x, int64_t n_heads, int64_t head_dim, const RopeParams& rope, Schedules s) override {
    return in_.Rope(x, n_heads, head_dim, rope, s);
  }
  absl::Status StoreKv(int64_t layer, const float* k, const float* v) override { return in_.StoreKv(layer, k, v); }
  absl::Status RopeStoreKv(int64_t layer, float* q, float* k, const float* v, const AttentionShape& shape,
                           const RopeParams& rope, Schedules s) override {
    return in_.RopeStoreKv(layer, q, k, v, shape, rope, s);
  }
  absl::Status Attention(int64_t layer, const float* q, const AttentionShape& shape, float* out, Schedules s) override {
    return in_.Attention(layer, q, shape, out, s);
  }
  absl::Status SwiGlu(const float* gate, const float* up, int64_t m, int64_t n, float* out, Schedules s) override {
    return in_.SwiGlu(gate, up, m, n, out, s);
  }
  absl::Status GeluGlu(const float* gate, const float* up, int64_t m, int64_t n, float* out) override {
    return in_.GeluGlu(gate, up, m, n, out);
  }
  absl::Status Scale(float* x, size_t n, float s) override { return in_.Scale(x, n, s); }
  absl::Status SoftCap(float* x, size_t n, float cap) override { return in_.SoftCap(x, n, cap); }
  absl::Status Columns(const float* x, int64_t m, int64_t stride, int64_t n, float* out) override {
    return in_.Columns(x, m, stride, n, out);
  }
  absl::Status GatherRows(const float* x, int64_t n_cols, std::span<const int32_t> rows, float* out) override {
    return in_.GatherRows(x, n_cols, rows, out);
  }
  absl::Status ArgmaxRows(const float* x, int64_t n_cols, std::span<const int32_t> rows,
                          ArgmaxSummary* host_out) override {
    return in_.ArgmaxRows(x, n_cols, rows, host_out);
  }
  absl::Status DrawRows(const float* x, int64_t n_cols, std::span<const RowDraw> draws, DrawnRow* host_out) override {
    return in_.DrawRows(x, n_cols, draws, host_out);
  }
  absl::Status ControlRows(float* x, int64_t n_cols, std::span<const RowControl> controls) override {
    return in_.ControlRows(x, n_cols, controls);
  }

 private:
  Backend& in_;
  int32_t padding_block_ = -1;
  int steps_run_ = 0;
  int64_t last_rows_ = 0;
};

}  // namespace llm42::testing

#endif  // LLM42_TESTS_PADDED_STEPS_BACKEND_H_
