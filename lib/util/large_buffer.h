#ifndef LLM42_UTIL_LARGE_BUFFER_H_
#define LLM42_UTIL_LARGE_BUFFER_H_

#include <cstddef>
#include <cstdint>

namespace llm42 {

// Zero-filled memory of a fixed size, mapped anonymously so that pages are touched (and
// counted) lazily, and advised for transparent huge pages where the kernel offers them
// (Linux's "madvise" mode). For the KV cache: attention walks one head's keys at a stride of
// the whole KV row, touching a new 4 KiB page every position or two, and on 2 MiB pages those
// walks stop missing the TLB. Move-only.
class LargeBuffer {
 public:
  LargeBuffer() = default;
  ~LargeBuffer();
  LargeBuffer(LargeBuffer&& other) noexcept;
  LargeBuffer& operator=(LargeBuffer&& other) noexcept;
  LargeBuffer(const LargeBuffer&) = delete;
  LargeBuffer& operator=(const LargeBuffer&) = delete;

  // An empty buffer when the memory cannot be mapped.
  static LargeBuffer Allocate(size_t bytes);

  // Makes every page resident now rather than at its first touch (the kernel's zeroing of a
  // fresh page, or of a 2 MiB huge page, then happens here); the contents do not change. False
  // where the system has not the memory for all of it (what it could page in stays).
  bool Prefault();

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  explicit operator bool() const { return data_ != nullptr; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace llm42

#endif  // LLM42_UTIL_LARGE_BUFFER_H_
