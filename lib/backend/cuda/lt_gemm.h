#ifndef LLM42_BACKEND_CUDA_LT_GEMM_H_
#define LLM42_BACKEND_CUDA_LT_GEMM_H_

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "lib/backend/cuda/device_buffer.h"

namespace llm42::cuda {

// Row-major y[m][n] (f32) = x[m][k] * w[n][k]^T with x and w both bf16 or both f16, f32
// accumulation, through cuBLASLt. Plans (descriptors and the heuristic's algorithm) are cached
// per shape.
//
// `fast` lets the heuristic use a 32 MiB workspace (split-K where it pays: results may depend on
// m). `fixed` gives it no workspace: on cuBLAS 13.1 and an H200 (shared/docs/GPU.md) that kept
// every row bitwise independent of m for the Llama-8B shapes, which cuBLAS does not document;
// the device tests check it (issue 13 adds the check at load and a fallback).
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
    ~Plan();
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, int, bool>;
  absl::Status MakePlan(const Key& key, Plan& plan);

  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  cublasLtHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  DeviceBuffer workspace_;
  absl::flat_hash_map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace llm42::cuda

#endif  // LLM42_BACKEND_CUDA_LT_GEMM_H_
