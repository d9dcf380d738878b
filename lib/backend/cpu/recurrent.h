#ifndef LLM42_BACKEND_CPU_RECURRENT_H_
#define LLM42_BACKEND_CPU_RECURRENT_H_

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "lib/backend/backend.h"

namespace llm42::internal {

// The CPU backend's recurrent state (Backend::AllocateRecurrent) and its two ops, over the
// batch's runs of rows (RecurrentRow). Each value is computed by scalar IEEE operations in the
// order written (no reassociation, no contraction: the build's -ffp-contract=off), the loops
// over a head's value index independent lanes, so every CPU and thread count gives the same bits,
// and a row's bits are its own (its sequence's state and its inputs): one arithmetic serves both
// schedules, and a prompt chunk and a decode step agree.
class RecurrentState {
 public:
  absl::Status Allocate(const RecurrentShape& shape);
  const RecurrentShape& shape() const { return shape_; }
  absl::Status Copy(int32_t from, int32_t to);
  absl::Status Read(int32_t slot, std::span<float> host) const;
  absl::Status Write(int32_t slot, std::span<const float> host);

  // The batch's runs of rows sharing a slot (BeginBatch): InvalidArgument for a slot out of range
  // or rows of one slot apart.
  absl::Status Plan(std::span<const RecurrentRow> rows);

  // `parallel(n, fn)` runs fn(begin, end) over [0, n) (the backend's pool).
  using ParallelFn = std::function<void(int64_t, const std::function<void(int64_t, int64_t)>&)>;
  absl::Status CausalConv(int64_t layer, const float* x, const float* weight, float* out, const ParallelFn& parallel);
  absl::Status DeltaRule(int64_t layer, const Backend::DeltaRuleArgs& args, float* out, const ParallelFn& parallel);

 private:
  struct Run {
    int64_t begin, end;  // batch rows
    int32_t slot, from;
  };
  float* Layer(int32_t slot, int64_t layer) {
    return state_.data() + static_cast<size_t>(slot) * static_cast<size_t>(shape_.slot_floats()) +
           static_cast<size_t>(layer * shape_.layer_floats());
  }
  absl::Status CheckSlot(int32_t slot, bool zero_ok) const;

  RecurrentShape shape_;
  std::vector<float> state_;
  std::vector<Run> runs_;
  std::vector<int32_t> snapshots_;  // per batch row (RecurrentRow::snapshot)
};

}  // namespace llm42::internal

#endif  // LLM42_BACKEND_CPU_RECURRENT_H_
