#ifndef LLM42_MODEL_MODEL_RUNNER_H_
#define LLM42_MODEL_MODEL_RUNNER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/model/arch/experts.h"
#include "lib/model/model_weights.h"

namespace llm42 {

class KvCache;

// One forward pass's input: token i is `tokens[i]` at `positions[i]` of KV-cache sequence
// `seqs[i]` (which must have room reserved for it). Logits are produced for the token indices in
// `logit_rows`, in that order. Token i runs under schedules[i], or all under `schedule` when
// `schedules` is empty.
struct ForwardBatch {
  std::span<const int32_t> tokens;
  std::span<const int32_t> positions;
  std::span<const int32_t> seqs;
  std::span<const int32_t> logit_rows;
  Schedule schedule = Schedule::kFast;
  std::span<const Schedule> schedules = {};
  // Per logit row, whether its draw needs only the row's ArgmaxSummary (a greedy draw without
  // logprobs): those rows' summaries go to argmax[r] (host, one slot per logit row) and their
  // logits stay on the backend; the other rows' logits come back packed, in logit-row order.
  // Empty: every row's logits.
  std::span<const uint8_t> argmax_only = {};
  ArgmaxSummary* argmax = nullptr;
  // Per logit row (empty: none), whether the backend draws its token where its logits are
  // (Backend::DrawRows: lib/numerics/draw_rule.h's rule, the host sampler's bits) under draws[r]
  // (its `row` is the runner's to set): the draw, its logprob and top logprobs go to drawn[r]
  // (host, one slot per logit row) and the row's logits stay on the backend. Never with
  // argmax_only for the same row.
  std::span<const uint8_t> device_draw = {};
  std::span<const RowDraw> draws = {};
  DrawnRow* drawn = nullptr;
  // Changes requests make to the logits of rows drawn or summarized on the backend
  // (Backend::ControlRows; each one's `row` a logit row), applied before their draws.
  std::span<const Backend::RowControl> controls = {};
  // When set, receives the seconds that bringing the logits (and summaries) to the host took once
  // the device had finished the pass (a step's time split: EngineStats::StepTimes).
  double* logits_copy_seconds = nullptr;
  // Per token, its recurrent state (Backend's RecurrentRow) where the model has recurrent layers
  // (empty otherwise).
  std::span<const RecurrentRow> recurrent = {};
};

// A ModelWeights on a Backend: its weights uploaded there, the backend's KV storage sized for a
// KvCache's blocks, and the pass every architecture shares (embeddings, the architecture's layers, the
// output norm and matrix; lib/model/arch) over the backend's ops. Between the batch
// plan going in and the logits coming out, no activation touches the host.
class ModelRunner {
 public:
  // Uploads the weights; the model and backend must outlive the runner. A backend error (out of
  // memory, a type it cannot hold) is returned as it is. `context_length` (0: the model's
  // training context) picks LongRoPE's factors where the model has them: the long ones past the
  // original context.
  // `after_layer` (optional) runs after each layer's weights are in, with the layers done and
  // their total; a status it returns other than OK stops the creation with that status (a
  // cancelled load).
  static absl::StatusOr<std::unique_ptr<ModelRunner>> Create(
      const ModelWeights& model, Backend& backend, int64_t context_length = 0,
      const std::function<absl::Status(int64_t done, int64_t total)>& after_layer = nullptr);

  // Allocates the backend's KV storage for the cache's blocks (what it held is gone).
  absl::Status AllocateKv(const KvCache& cache);
  // Bytes of KV storage one position of one sequence takes on this backend.
  int64_t kv_bytes_per_token() const;
  // Where the model has recurrent layers (ModelConfig::n_recurrent): allocates n_slots slots of
  // their state on the backend (all zero), the last of them kept for padding rows; the shape of
  // that many slots (bytes: slot_floats() * 4 each).
  absl::Status AllocateRecurrent(int64_t n_slots);
  RecurrentShape recurrent_shape(int64_t n_slots) const;

  // Runs the batch over `cache`'s block tables (the cache AllocateKv last saw), writing each
  // token's K/V at its position before attention reads it, and returns the logits [row][n_vocab]
  // of batch.logit_rows (packed: only the rows not batch.argmax_only) where the host reads
  // them (Backend::HostView: on the CPU where the pass left them), valid until the next call;
  // nullptr when no row's logits were asked for. Not thread-safe.
  absl::StatusOr<float*> ForwardView(const KvCache& cache, const ForwardBatch& batch);
  // The same, the logits copied into `logits` (host memory).
  absl::Status Forward(const KvCache& cache, const ForwardBatch& batch, float* logits);

 private:
  using Layer = BackendLayer;

  ModelRunner(const ModelWeights& model, Backend& backend) : model_(model), backend_(backend) {}

  const ModelWeights& model_;
  Backend& backend_;
  KvShape kv_shape_;
  WeightMatrix token_embd_, output_;
  const float* output_norm_ = nullptr;
  RopeParams rope_;        // the model's
  RopeParams rope_local_;  // sliding layers' where the model rotates them otherwise (Gemma 3)
  std::vector<Layer> layers_;
  PerLayerInputTensors<const float*> per_layer_inputs_;  // where the model has per-layer embeddings
  // Host-side per-batch inputs, kept to avoid allocating per step.
  // Forward's last part: the summaries of batch.argmax_only's rows, the draws of
  // batch.device_draw's, and the other rows' logits (from `out`, the backend's
  // [logit rows][n_vocab]) to the host.
  absl::StatusOr<float*> FetchLogits(const ForwardBatch& batch, float* out);

  std::vector<const int32_t*> tables_;
  // A step padded to the backend's row bucket (Backend::StepRows): its rows and schedules, and
  // the padding rows' block table.
  std::vector<int32_t> step_tokens_, step_positions_;
  std::vector<Schedule> step_schedules_;
  std::vector<RecurrentRow> step_recurrent_;
  ExpertWork experts_;  // the experts block's memory (models with experts)
  RecurrentShape recurrent_shape_;
  int32_t padding_table_[1] = {0};
  std::vector<Schedule> logit_schedules_;
  std::vector<int32_t> summarized_, full_;  // the last pass's logit rows, by what crosses to the host
  std::vector<ArgmaxSummary> summaries_;
  std::vector<int32_t> drawn_rows_;  // the last pass's device-drawn logit rows
  std::vector<RowDraw> draws_;
  std::vector<DrawnRow> drawn_;
};

}  // namespace llm42

#endif  // LLM42_MODEL_MODEL_RUNNER_H_
