#ifndef LLM42_BACKEND_CUDA_DRAW_ROWS_CUH_
#define LLM42_BACKEND_CUDA_DRAW_ROWS_CUH_

// The sampled draw on the device: lib/numerics/draw_rule.h's DrawRow, one block a row, its
// threads a Group over shared memory. Compiled without fused multiply-adds, so its weights and
// logprobs have the host's bits.
#include <cuda_runtime.h>

#include <cstdint>

#include "lib/numerics/draw_rule.h"

namespace llm42::cuda {

// out[r] = DrawRow of row draws[r].row of x (rows of n_cols); draws and out in device memory.
cudaError_t LaunchDrawRows(const float* x, int64_t n_cols, const RowDraw* draws, int64_t n_draws, DrawnRow* out,
                           cudaStream_t stream);

}  // namespace llm42::cuda

#endif  // LLM42_BACKEND_CUDA_DRAW_ROWS_CUH_
