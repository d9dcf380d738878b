#ifndef LLM42_BACKEND_CUDA_CONTROL_ROWS_CUH_
#define LLM42_BACKEND_CUDA_CONTROL_ROWS_CUH_

// A request's controls applied to its row of logits on the device: lib/numerics/logit_edit.h's
// EditedLogit for each token edit, -infinity where the grammar's mask refuses a token. Compiled
// without fused multiply-adds, so the row has the host's bits.
#include <cuda_runtime.h>

#include <cstdint>

#include "lib/numerics/logit_edit.h"

namespace llm42::cuda {

// One row's control, its edits and mask found in the arrays passed beside it.
struct DeviceRowControl {
  int32_t row = 0;
  int32_t n_edits = 0;
  int64_t first_edit = 0;  // index into the edits
  int64_t first_word = -1;  // index into the mask words; -1: every token allowed
  PenaltyRule rule;
};

// Applies controls[0, n_controls) to x (rows of n_cols) in place; every array in device memory.
cudaError_t LaunchControlRows(float* x, int64_t n_cols, const DeviceRowControl* controls, int64_t n_controls,
                              const LogitEdit* edits, const uint64_t* words, cudaStream_t stream);

}  // namespace llm42::cuda

#endif  // LLM42_BACKEND_CUDA_CONTROL_ROWS_CUH_
