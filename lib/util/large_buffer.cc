#include "lib/util/large_buffer.h"

#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
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

bool LargeBuffer::Prefault() {
  if (data_ == nullptr) return true;
#if defined(__linux__)
#if !defined(MADV_POPULATE_WRITE)
#define MADV_POPULATE_WRITE 23  // Linux 5.14's; older kernels refuse it (EINVAL) and we touch
#endif
  int rc;
  do {
    rc = madvise(data_, size_, MADV_POPULATE_WRITE);
  } while (rc != 0 && errno == EINTR);
  if (rc == 0) return true;
  // Out of memory (ENOMEM) or anything but an older kernel's refusal: touching the pages would
  // end in the OOM killer instead.
  if (errno != EINVAL) return false;
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
#else
  const size_t page = 4096;
#endif
  // A write per page, of the byte already there.
  volatile uint8_t* p = data_;
  for (size_t i = 0; i < size_; i += page) p[i] = p[i];
  return true;
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
