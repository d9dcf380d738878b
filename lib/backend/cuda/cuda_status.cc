#include "lib/backend/cuda/cuda_status.h"

#include "absl/strings/str_cat.h"

namespace llm42::cuda {

absl::Status FromCuda(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return absl::OkStatus();
  const std::string what = absl::StrCat(call, ": ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
  switch (e) {
    case cudaErrorMemoryAllocation: return absl::ResourceExhaustedError(what);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNoKernelImageForDevice: return absl::UnimplementedError(what);
    default: return absl::InternalError(what);
  }
}

absl::Status FromCublas(cublasStatus_t s, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string what = absl::StrCat(call, ": cuBLAS status ", static_cast<int>(s));
  switch (s) {
    case CUBLAS_STATUS_ALLOC_FAILED: return absl::ResourceExhaustedError(what);
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH: return absl::UnimplementedError(what);
    default: return absl::InternalError(what);
  }
}

}  // namespace llm42::cuda
