#ifndef LLM42_BACKEND_CUDA_LT_GEMM_H_
#define LLM42_BACKEND_CUDA_LT_GEMM_H_

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "lib/backend/cuda/device_buffer.h"
#include "lib/backend/cuda/fixed_gemm.cuh"

namespace llm42::cuda {

// Row-major y[m][n] (f32) = x[m][k] * w[n][k]^T with x and w both bf16 or both f16, f32
// accumulation, through cuBLASLt.
//
// `fast` takes the heuristic's first algorithm for each (m, n, k) with a 32 MiB workspace:
// split-K where it pays, so a row's bits may depend on m (measured: shared/docs/GPU.md and
// GpuEndToEndTest.FixedGemmRowsIgnoreTheBatchAtLlama8BShapes).
//
// `fixed` must give every row the same bits whatever m is. cuBLAS promises nothing about that,
// and its heuristic picks different kernels for different m (on an H200, a 50x96 weight's row
// differed between m = 1 and m = 256 even with no workspace). So fixed pins ONE GEMM per
// (n, k, type), chosen at its first use, in this order:
//  1. the first of the heuristic's candidates for m = 256 with no workspace that, with split-K
//     forced to 1, is supported at every m of a probe list (1 to 16384) and passes a bitwise
//     self-check on the real weight (rows of m = 1, 7 and 64 against m = 256);
//  2. else llm42's tensor-core kernel (fixed_gemm.cuh), if it passes the same self-check and
//     agrees with the FMA-chain kernel to within rounding (a guard against a kernel that is
//     invariant but wrong, or compiled out on a device older than sm_80);
//  3. else the FMA-chain kernel (slow, invariant by construction).
// LLM42_CUDA_OWN_FIXED_GEMM=1 skips step 1, =fma steps 1 and 2 (the device script tests each).
// docs/gpu-determinism.md says which of this cuBLAS documents (none of the invariance) and what
// we rely on.
class LtGemm {
 public:
  LtGemm() = default;
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;
  ~LtGemm();

  absl::Status Init(cudaStream_t stream);
  absl::Status Run(const void* x, int64_t m, const void* w, int64_t n, int64_t k, cudaDataType_t type, float* y,
                   bool fixed);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    std::optional<FixedGemmKind> own;  // fixed only: an own kernel instead of cuBLASLt
    ~Plan();
  };
  // The pinned choice for a fixed (n, k, type).
  struct Fixed {
    std::optional<FixedGemmKind> own = FixedGemmKind::kFmaChain;
    cublasLtMatmulAlgo_t algo{};
    std::string why;
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, int, bool>;  // m, n, k, type, fixed
  using ShapeKey = std::tuple<int64_t, int64_t, int>;             // n, k, type
  // Descriptors and layouts of a plan (no algorithm yet).
  absl::Status Describe(const Key& key, Plan& plan);
  absl::StatusOr<const Fixed*> ChooseFixed(const void* w, int64_t n, int64_t k, cudaDataType_t type);
  absl::Status Launch(const Plan& p, const void* x, int64_t m, const void* w, int64_t n, int64_t k,
                      cudaDataType_t type, float* y, bool fixed);

  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  cublasLtHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  DeviceBuffer workspace_;
  absl::flat_hash_map<Key, std::unique_ptr<Plan>> plans_;
  absl::flat_hash_map<ShapeKey, Fixed> fixed_;
};

}  // namespace llm42::cuda

#endif  // LLM42_BACKEND_CUDA_LT_GEMM_H_
