#ifndef LLM42_BACKEND_CUDA_LT_GEMM_H_
#define LLM42_BACKEND_CUDA_LT_GEMM_H_

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/backend/cuda/device_buffer.h"
#include "lib/backend/cuda/fixed_gemm.cuh"
#include "lib/backend/fixed_gemm_choice.h"

namespace llm42::cuda {

// Row-major y[m][n] (f32) = x[m][k] * w[n][k]^T with x (f32) rounded to w's type (bf16 or f16),
// f32 accumulation, through cuBLASLt.
//
// `fast` takes the heuristic's first algorithm for each (m, n, k) with a 32 MiB workspace:
// split-K where it pays, so a row's bits may depend on m (measured: docs/gpu-determinism.md and
// GpuEndToEndTest.FixedGemmRowsIgnoreTheBatchAtLlama8BShapes).
//
// `fixed` must give every row the same bits whatever m is. cuBLAS promises nothing about that,
// and its heuristic picks different kernels for different m (on an H200, a 50x96 weight's row
// differed between m = 1 and m = 256 even with no workspace). So fixed runs, per (n, k, type),
// what ChooseFixedGemm (lib/backend/fixed_gemm_choice.h) picks at the shape's first fixed GEMM by
// experiment on the real weight: cuBLASLt algorithms (split-K off, at most 1 MiB of workspace)
// at checked row counts, a call padded up to the next one; else llm42's tensor-core kernel; else its FMA
// chains (fixed_gemm.cuh). The choice is made once per process, device and shape, so it never
// changes during a session and every session of a process shares it. LLM42_CUDA_OWN_FIXED_GEMM=1
// skips cuBLASLt, =fma the tensor-core kernel too (the device script tests each).
// docs/gpu-determinism.md says which of this cuBLAS documents (none of the invariance) and what
// we rely on.
class LtGemm {
 public:
  LtGemm() = default;
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;
  ~LtGemm();

  absl::Status Init(cudaStream_t stream);
  // One weight's output: y[m][n] for the weight w[n][k].
  struct Output {
    const void* w;
    int64_t n;
    float* y;
  };
  // Every output's GEMM against the same activations x[m][k], rounded to `type` once.
  absl::Status Run(const float* x, int64_t m, int64_t k, cudaDataType_t type, std::span<const Output> outs,
                   bool fixed);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    size_t workspace = 0;  // bytes of workspace_ the launch passes: all for fast, the algorithm's need for fixed
    ~Plan();
  };
  // The workspace `algo` needs in plan p, when it runs there at all and needs at most
  // kFixedWorkspaceBytes; else why not.
  absl::StatusOr<size_t> FixedWorkspace(const Plan& p, const cublasLtMatmulAlgo_t& algo);
  // A fixed (n, k, type)'s choice, and the cuBLASLt algorithms its GemmWay ids name.
  struct Fixed {
    FixedGemmChoice choice;
    std::vector<cublasLtMatmulAlgo_t> algos;
  };
  class CheckDevice;  // ChooseFixedGemm's view of one shape (lt_gemm.cc)
  using Key = std::tuple<int64_t, int64_t, int64_t, int, bool>;  // m, n, k, type, fixed
  using ShapeKey = std::tuple<int64_t, int64_t, int>;             // n, k, type
  // Descriptors and layouts of a plan (no algorithm yet).
  absl::Status Describe(const Key& key, Plan& plan);
  absl::StatusOr<const Fixed*> ChooseFixed(const void* w, int64_t n, int64_t k, cudaDataType_t type);
  // One weight's GEMM over the rounded activations (half_x_).
  absl::Status RunFixed(const Fixed& f, int64_t m, const void* w, int64_t n, int64_t k, cudaDataType_t type, float* y);
  absl::Status RunFast(int64_t m, const void* w, int64_t n, int64_t k, cudaDataType_t type, float* y);
  // One fixed GEMM of m rows, run as `way` (a chunk of a call, padded to a checked row count).
  absl::Status RunFixedWay(const Fixed& f, const GemmWay& way, const void* x, int64_t m, const void* w, int64_t n,
                           int64_t k, cudaDataType_t type, float* y);
  // The plan of `key`, made at its first use (described, then its algorithm set by `choose`).
  absl::StatusOr<const Plan*> CachedPlan(const Key& key, const std::function<absl::Status(Plan&)>& choose);
  absl::Status Launch(const Plan& p, const void* x, const void* w, float* y, bool fixed);

  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  // The most workspace a fixed algorithm may use (from workspace_: the stream runs one GEMM at a
  // time). Some of cuBLASLt's kernels want a few bytes even with split-K off.
  static constexpr size_t kFixedWorkspaceBytes = size_t{1} << 20;
  cublasLtHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  DeviceBuffer workspace_;
  absl::flat_hash_map<Key, std::unique_ptr<Plan>> plans_;
  // This instance's view of the process's choices (ChooseFixed), which stay where they are.
  absl::flat_hash_map<ShapeKey, const Fixed*> fixed_;
  // The activations rounded to 16 bits (as many rows as the fixed GEMM's padding reads), and a
  // padded fixed chunk's outputs.
  DeviceBuffer half_x_, pad_y_;
};

}  // namespace llm42::cuda

#endif  // LLM42_BACKEND_CUDA_LT_GEMM_H_
