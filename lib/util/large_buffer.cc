#include "lib/util/large_buffer.h"

#include <utility>

#include "lib/util/platform.h"

namespace llm42 {

LargeBuffer LargeBuffer::Allocate(size_t bytes) {
  LargeBuffer b;
  if (bytes == 0) return b;
  void* p = platform::AllocatePages(bytes);
  if (p == nullptr) return b;
  b.data_ = static_cast<uint8_t*>(p);
  b.size_ = bytes;
  return b;
}

bool LargeBuffer::Prefault() { return data_ == nullptr || platform::PopulatePages(data_, size_); }

LargeBuffer::~LargeBuffer() {
  if (data_ != nullptr) platform::FreePages(data_, size_);
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
