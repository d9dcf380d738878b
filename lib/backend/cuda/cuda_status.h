#ifndef LLM42_BACKEND_CUDA_CUDA_STATUS_H_
#define LLM42_BACKEND_CUDA_CUDA_STATUS_H_

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "absl/status/status.h"

namespace llm42::cuda {

// A CUDA runtime or cuBLAS result as a Status naming the call: OK, RESOURCE_EXHAUSTED for out
// of memory, UNSUPPORTED (kUnimplemented) for a missing driver or device, INTERNAL otherwise.
absl::Status FromCuda(cudaError_t e, const char* call);
absl::Status FromCublas(cublasStatus_t s, const char* call);

}  // namespace llm42::cuda

#define LLM42_CUDA_RETURN_IF_ERROR(call)                                        \
  do {                                                                          \
    if (::absl::Status llm42_cuda_s_ = ::llm42::cuda::FromCuda((call), #call);  \
        !llm42_cuda_s_.ok()) {                                                  \
      return llm42_cuda_s_;                                                     \
    }                                                                           \
  } while (0)

#define LLM42_CUBLAS_RETURN_IF_ERROR(call)                                        \
  do {                                                                            \
    if (::absl::Status llm42_cuda_s_ = ::llm42::cuda::FromCublas((call), #call);  \
        !llm42_cuda_s_.ok()) {                                                    \
      return llm42_cuda_s_;                                                       \
    }                                                                             \
  } while (0)

#endif  // LLM42_BACKEND_CUDA_CUDA_STATUS_H_
