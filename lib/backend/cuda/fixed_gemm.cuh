#ifndef LLM42_BACKEND_CUDA_FIXED_GEMM_CUH_
#define LLM42_BACKEND_CUDA_FIXED_GEMM_CUH_

// llm42's own batch-invariant GEMMs, for the `fixed` schedule where no cuBLASLt algorithm passes
// LtGemm's row-invariance check (lib/backend/fixed_gemm_choice.h; on an H200 with cuBLAS 13.1
// none passed its first version: docs/gpu-determinism.md).
//
// Both compute y[m][n] (f32) = x[m][k] * w[n][k]^T with x and w of the same 16-bit type, and
// both are row-invariant by construction: an output's arithmetic is a fixed sequence of
// operations on its own x row and w row, whatever m is and wherever the row sits in the batch.
// They differ in that sequence, so one session never mixes them for one weight (LtGemm pins one
// kernel per shape).
#include <cuda_runtime.h>

#include <cstdint>

#include "lib/backend/cuda/kernels.cuh"

namespace llm42::cuda {

enum class FixedGemmKind {
  // Tensor cores (WMMA 16x16x16, f32 accumulation): an output is the f32 accumulator of one
  // mma per 16-wide k step, k steps in ascending order from 0, k padded to a multiple of 16 with
  // zeros. The block tile shape depends on m (narrow tiles for decode, wide for prefill), but
  // every output's 16-row, 16-column fragment position and its k steps do not, so its bits do
  // not either. Needs sm_80 or newer (bf16 mma).
  kTensorCore,
  // One thread's f32 FMA chain over k = 0 .. k-1 per output, on CUDA cores: the slow reference
  // that a device can always run.
  kFmaChain,
};

cudaError_t LaunchFixedGemm(FixedGemmKind kind, const void* x, const void* w, Half type, float* y, int64_t m,
                            int64_t n, int64_t k, cudaStream_t stream);

}  // namespace llm42::cuda

#endif  // LLM42_BACKEND_CUDA_FIXED_GEMM_CUH_
