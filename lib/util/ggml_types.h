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
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
  kIQ1_M = 29,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

struct GgmlTypeInfo {
  const char* name;
  int64_t block_size;   // elements per block
  int64_t block_bytes;  // bytes per block
  bool computable;      // llm42 has kernels for it
};

// Layout of a known type; nullopt for ids ggml does not define (or that it retired).
std::optional<GgmlTypeInfo> GetGgmlTypeInfo(uint32_t type);

// The type whose name (GgmlTypeInfo::name: "q4_k", "iq4_xs", ...) is `name`, in either case.
std::optional<GgmlType> GgmlTypeByName(std::string_view name);

// The first of n_blocks blocks of a computable block type at `data` whose f16 scale (or minimum)
// is infinite or NaN, or -1 where every block's are finite (and for types without such fields).
int64_t FirstNonFiniteBlock(GgmlType type, const uint8_t* data, int64_t n_blocks);

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

// The other block layouts llm42 computes with, as ggml defines them (ggml-common.h); f16 fields
// as uint16_t. Their decoding (weight = sub-block scale x integer [+ offset]) is the CPU
// backend's quant_formats.h.
struct BlockQ4_1 {  // weight = d * q + m, q a nibble (element j < 16 low of qs[j], else high of qs[j - 16])
  uint16_t d, m;
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_1) == 20);
struct BlockQ5_0 {  // weight = d * (q - 16), q = nibble | bit j of qh (little-endian) << 4
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_0) == 22);
struct BlockQ5_1 {  // weight = d * q + m, q = nibble | bit j of qh << 4
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == 24);
inline constexpr int64_t kSuperBlock = 256;  // the k-quants' and IQ4_XS's block
struct BlockQ2_K {  // 16 sub-blocks of 16: scales[s] low nibble scale, high nibble min; 2-bit q
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d, dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);
struct BlockQ3_K {  // 16 sub-blocks of 16: 6-bit scales (minus 32) packed in 12 bytes; q = 2 bits + hmask bit
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);
struct BlockQ4_K {  // 8 sub-blocks of 32: 6-bit scales and mins packed in 12 bytes; 4-bit q
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_K) == 144);
struct BlockQ5_K {  // as Q4_K, a fifth bit of q in qh
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ5_K) == 176);
struct BlockQ6_K {  // 16 sub-blocks of 16: int8 scales; q = 4 low bits (ql) + 2 high (qh), minus 32
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);
struct BlockIQ4_NL {  // weight = d * kIq4NlValues[nibble]
  uint16_t d;
  uint8_t qs[16];
};
static_assert(sizeof(BlockIQ4_NL) == 18);
struct BlockIQ4_XS {  // 8 sub-blocks of 32: 6-bit scales (minus 32), low 4 bits in scales_l, high 2 in scales_h
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
static_assert(sizeof(BlockIQ4_XS) == 136);
struct BlockMXFP4 {  // weight = 2^(e - 128) * kMxfp4Values[nibble] (OCP MX FP4 E2M1, doubled; E8M0 scale)
  uint8_t e;
  uint8_t qs[16];
};
static_assert(sizeof(BlockMXFP4) == 17);
// FP4 E2M1's values times two (ggml's kvalues_mxfp4): the scale below is halved to match.
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// Half of an E8M0 scale, 2^(e - 128), exactly (ggml's ggml_e8m0_to_fp32_half: 2^-128 and 2^-127 as
// f32 subnormals). e = 255 is the format's NaN, which a model file must not hold (FirstNonFiniteBlock).
inline float E8M0Half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
// The non-linear 4-bit grid of IQ4_NL and IQ4_XS.
inline constexpr int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                             1,    13,   25,  38,  53,  69,  89,  113};

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
