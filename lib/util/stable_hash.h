#ifndef LLM42_UTIL_STABLE_HASH_H_
#define LLM42_UTIL_STABLE_HASH_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace llm42 {

// A 64-bit hash whose value is the same in every process and build (unlike absl::Hash, which is
// seeded per process): for what is written to files or compared across runs — model identities,
// saved-conversation checksums — and for the prefix cache's block keys. FNV-1a's constants over
// 8-byte words with a shift folding high bits down; not cryptographic.
class StableHash {
 public:
  StableHash& Mix(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      h_ = (h_ ^ w) * 0x100000001b3ull;
      h_ ^= h_ >> 29;
    }
    for (; i < n; ++i) h_ = (h_ ^ p[i]) * 0x100000001b3ull;
    return *this;
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

}  // namespace llm42

#endif  // LLM42_UTIL_STABLE_HASH_H_
