#ifndef LLM42_UTIL_ALIGNED_VECTOR_H_
#define LLM42_UTIL_ALIGNED_VECTOR_H_

#include <cstddef>
#include <new>
#include <vector>

namespace llm42 {

// A std::vector whose storage starts on a 64-byte cache line. For the CPU kernels' activation
// and panel buffers: glibc's malloc returns large blocks 16 bytes past a page, so every other
// 32-byte vector load of such a row straddled two cache lines (a Zen 3 register tile on
// L1-resident rows: 0.77-0.79 of the FMA peak at a 16-byte offset, 0.81-0.91 aligned).
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};

  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}  // NOLINT: rebinding converts implicitly

  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, size_t) noexcept { ::operator delete(p, kAlign); }

  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept {
    return true;
  }
};

template <typename T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace llm42

#endif  // LLM42_UTIL_ALIGNED_VECTOR_H_
