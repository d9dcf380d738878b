#ifndef LLM42_BACKEND_CUDA_CUDA_FACTORY_H_
#define LLM42_BACKEND_CUDA_CUDA_FACTORY_H_

// The CUDA backend's entry points for the registry. Plain C++: no CUDA header leaves
// lib/backend/cuda/.
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/backend/backend_registry.h"

namespace llm42 {

// OK when a CUDA device of compute capability 8.0 (Ampere) or newer is usable; else
// UNSUPPORTED saying why: no driver (or one too old for this toolkit), no device, or the
// device's compute capability.
absl::Status CudaUsable();

// A backend on device 0.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const BackendOptions& options);

}  // namespace llm42

#endif  // LLM42_BACKEND_CUDA_CUDA_FACTORY_H_
