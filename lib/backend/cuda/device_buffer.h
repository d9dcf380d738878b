#ifndef LLM42_BACKEND_CUDA_DEVICE_BUFFER_H_
#define LLM42_BACKEND_CUDA_DEVICE_BUFFER_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "absl/status/statusor.h"
#include "lib/backend/cuda/cuda_status.h"

namespace llm42::cuda {

// Owns one device allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      p_ = std::exchange(o.p_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { Reset(); }

  static absl::StatusOr<DeviceBuffer> Allocate(size_t bytes) {
    DeviceBuffer b;
    if (bytes == 0) return b;
    LLM42_CUDA_RETURN_IF_ERROR(cudaMalloc(&b.p_, bytes));
    b.bytes_ = bytes;
    return b;
  }

  // Grows to at least `bytes` (256 at least); the contents are not kept.
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
    if (p_ != nullptr) cudaFree(p_);
    p_ = nullptr;
    bytes_ = 0;
  }

  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// Owns page-locked host memory (cudaMallocHost): what the device copies to and from fastest.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { Reset(); }

  // Grows to at least `bytes`; the contents are not kept. The caller makes sure no copy into the
  // old memory is still queued.
  absl::Status Grow(size_t bytes) {
    if (bytes_ >= bytes) return absl::OkStatus();
    Reset();
    LLM42_CUDA_RETURN_IF_ERROR(cudaMallocHost(&p_, bytes));
    bytes_ = bytes;
    return absl::OkStatus();
  }
  template <typename T>
  T* as() const { return static_cast<T*>(p_); }

 private:
  void Reset() {
    if (p_ != nullptr) cudaFreeHost(p_);
    p_ = nullptr;
    bytes_ = 0;
  }

  void* p_ = nullptr;
  size_t bytes_ = 0;
};

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
