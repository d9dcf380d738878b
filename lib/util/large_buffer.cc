#include "lib/util/large_buffer.h"

#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#else
#include <cstdlib>
#include <cstring>
#endif

namespace llm42 {

LargeBuffer LargeBuffer::Allocate(size_t bytes) {
  LargeBuffer b;
  if (bytes == 0) return b;
#if defined(__linux__)
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return b;
#if defined(MADV_HUGEPAGE)
  madvise(p, bytes, MADV_HUGEPAGE);  // advice only: without huge pages the buffer works the same
#endif
#else
  void* p = std::calloc(bytes, 1);
  if (p == nullptr) return b;
#endif
  b.data_ = static_cast<uint8_t*>(p);
  b.size_ = bytes;
  return b;
}

LargeBuffer::~LargeBuffer() {
  if (data_ == nullptr) return;
#if defined(__linux__)
  munmap(data_, size_);
#else
  std::free(data_);
#endif
}

LargeBuffer::LargeBuffer(LargeBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

LargeBuffer& LargeBuffer::operator=(LargeBuffer&& other) noexcept {
  if (this != &other) {
    LargeBuffer old(std::move(*this));
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace llm42
