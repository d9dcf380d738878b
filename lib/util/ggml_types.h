#ifndef LLM42_UTIL_GGML_TYPES_H_
#define LLM42_UTIL_GGML_TYPES_H_

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace llm42 {

// Tensor element types as numbered by ggml (and so by GGUF files).
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

struct GgmlTypeInfo {
  const char* name;
  int64_t block_size;   // elements per block
  int64_t block_bytes;  // bytes per block
  bool computable;      // llm42 has kernels for it
};

// Layout of a known type; nullopt for ids ggml does not define (or that it retired).
std::optional<GgmlTypeInfo> GetGgmlTypeInfo(uint32_t type);

inline constexpr int64_t kQ8_0BlockSize = 32;
struct BlockQ8_0 {
  uint16_t scale;  // f16
  int8_t q[kQ8_0BlockSize];
};
static_assert(sizeof(BlockQ8_0) == 34);

// 32 weights as 4-bit values around 8: element j < 16 is the low nibble of q[j], element j >= 16
// the high nibble of q[j - 16]; weight = (nibble - 8) * scale.
inline constexpr int64_t kQ4_0BlockSize = 32;
struct BlockQ4_0 {
  uint16_t scale;  // f16
  uint8_t q[kQ4_0BlockSize / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

inline float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3FF;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round to nearest even, as F16C's _mm256_cvtps_ph with rounding mode 0.
inline uint16_t Fp32ToFp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t abs = x & 0x7FFFFFFF;
  if (abs >= 0x7F800000) return static_cast<uint16_t>(sign | 0x7C00 | (abs > 0x7F800000 ? 0x200 : 0));
  if (abs >= 0x477FF000) return static_cast<uint16_t>(sign | 0x7C00);  // overflow to inf
  if (abs < 0x38800000) {  // subnormal or zero in f16
    if (abs < 0x33000000) return static_cast<uint16_t>(sign);
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7FFFFF) | 0x800000;
    const uint32_t shift = 126 - e;  // f16 subnormals count units of 2^-24
    uint32_t val = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (val & 1))) ++val;
    return static_cast<uint16_t>(sign | val);
  }
  uint32_t val = ((abs - 0x38000000) >> 13);
  const uint32_t rem = abs & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (val & 1))) ++val;
  return static_cast<uint16_t>(sign | val);
}

inline float Bf16ToFp32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t Fp32ToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  x += 0x7FFF + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace llm42

#endif  // LLM42_UTIL_GGML_TYPES_H_
