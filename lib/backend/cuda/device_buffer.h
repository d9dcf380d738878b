#ifndef LLM42_BACKEND_CUDA_DEVICE_BUFFER_H_
#define LLM42_BACKEND_CUDA_DEVICE_BUFFER_H_

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"
#include "lib/backend/cuda/cuda_status.h"

namespace llm42::cuda {

// Device allocations and frees of this process so far: a recorded step (a CUDA graph) holds
// device addresses, and is replayed only while this count has not moved (StepRecordings).
inline std::atomic<uint64_t>& DeviceAllocationChanges() {
  static std::atomic<uint64_t> changes{0};
  return changes;
}
inline cudaError_t DeviceMalloc(void** p, size_t bytes) {
  DeviceAllocationChanges().fetch_add(1, std::memory_order_relaxed);
  return cudaMalloc(p, bytes);
}
inline cudaError_t DeviceFree(void* p) {
  DeviceAllocationChanges().fetch_add(1, std::memory_order_relaxed);
  return cudaFree(p);
}
inline cudaError_t PinnedMalloc(void** p, size_t bytes) { return cudaMallocHost(p, bytes); }
inline cudaError_t PinnedFree(void* p) { return cudaFreeHost(p); }

// Owns one allocation that kMalloc made and kFree releases: DeviceBuffer (device memory) or
// PinnedBuffer (page-locked host memory, what a device copies to and from fastest).
template <cudaError_t (*kMalloc)(void**, size_t), cudaError_t (*kFree)(void*)>
class CudaMemory {
 public:
  CudaMemory() = default;
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;
  CudaMemory(CudaMemory&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  CudaMemory& operator=(CudaMemory&& o) noexcept {
    if (this != &o) {
      Reset();
      p_ = std::exchange(o.p_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  ~CudaMemory() { Reset(); }

  static absl::StatusOr<CudaMemory> Allocate(size_t bytes) {
    CudaMemory b;
    if (bytes == 0) return b;
    LLM42_CUDA_RETURN_IF_ERROR(kMalloc(&b.p_, bytes));
    b.bytes_ = bytes;
    return b;
  }

  // Grows to at least `bytes` (256 at least); the contents are not kept. Freeing device memory
  // waits for the device; the caller of a PinnedBuffer's makes sure no copy into it is queued.
  absl::Status Grow(size_t bytes) {
    if (bytes_ >= bytes) return absl::OkStatus();
    Reset();  // free first: the old contents are not kept
    auto grown = Allocate(bytes < 256 ? 256 : bytes);
    if (!grown.ok()) return grown.status();
    *this = std::move(grown).value();
    return absl::OkStatus();
  }

  void* get() const { return p_; }
  template <typename T>
  T* as() const { return static_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }

 private:
  void Reset() {
    if (p_ != nullptr) kFree(p_);
    p_ = nullptr;
    bytes_ = 0;
  }

  void* p_ = nullptr;
  size_t bytes_ = 0;
};

using DeviceBuffer = CudaMemory<DeviceMalloc, DeviceFree>;
using PinnedBuffer = CudaMemory<PinnedMalloc, PinnedFree>;

// Owns a stream.
class Stream {
 public:
  Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    if (s_ != nullptr) cudaStreamDestroy(s_);
  }
  absl::Status Create() { return FromCuda(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreate"); }
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

}  // namespace llm42::cuda

#endif  // LLM42_BACKEND_CUDA_DEVICE_BUFFER_H_
