#ifndef LLM42_BACKEND_CPU_QUANT_FORMATS_H_
#define LLM42_BACKEND_CPU_QUANT_FORMATS_H_

// The block-quantized weight types llm42 computes on through their exact f32 values: q4_1, q5_0,
// q5_1, the k-quants q2_k ... q6_k, iq4_nl, iq4_xs and mxfp4 (layouts in ggml_types.h, as ggml defines
// them). Each is a Format: blocks of kBlock weights, sub-blocks of kSub sharing one scale, and
//
//   weight j of a block = fl(a * q_j)            (kOffset false)
//                       = fl(fl(a * q_j) + c)    (kOffset true)
//
// with q_j a small integer (Q) and a, c the sub-block's f32 scale and offset (Scale), each
// computed from the block's f16 and integer fields by the f32 products written in Scale (a
// minimum subtracted is an offset added: x - y and x + (-y) are the same IEEE operation). These
// are ggml's dequantized values (dequantize_row_*), but for the sign of a zero weight. Every
// kernel reads these values, scalar (At) or eight at a time on AVX2 (Q8: the same integers), so
// a weight is the same f32 on every machine, and the fixed schedule's arithmetic over them is
// row_dot.h's, the same as for f16 weights (docs/design.md, "weight types").
#include <cstdint>
#include <cstring>

#include "lib/backend/cpu/simd_targets.h"
#include "lib/util/ggml_types.h"

namespace llm42::internal {

struct SubBlockScale {
  float a = 0, c = 0;
};

// f16 to f32, exactly (Fp16ToFp32's values, every one of the 65536), without branches: the
// block scales are converted once per sub-block inside the kernels' loops, where the portable
// conversion's renormalizing loop cost more than the sub-block's arithmetic. The exponent is
// rebased by an integer add and a multiply by 2^-112 (exact: the product is a normal or, for f16
// subnormals, computed by a subtraction of a magic bias, also exact), infinities and NaNs kept.
inline float HalfToFloat(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  auto from_bits = [](uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  };
  auto to_bits = [](float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
  };
  const float normalized = from_bits((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  const float denormalized = from_bits((two_w >> 17) | (126u << 23)) - 0.5f;
  return from_bits(sign | (two_w < (1u << 27) ? to_bits(denormalized) : to_bits(normalized)));
}

// Helpers: a nibble of byte p[j] (low for element j < half, high past it), eight at a time.
inline int32_t Nibble(const uint8_t* p, int64_t j, int64_t half) {
  return j < half ? p[j] & 0x0F : p[j - half] >> 4;
}
// Q4_K/Q5_K's packed 6-bit scale and min of sub-block s (ggml's get_scale_min_k4).
inline void ScaleMinK4(const uint8_t* q, int64_t s, int32_t* sc, int32_t* m) {
  if (s < 4) {
    *sc = q[s] & 63;
    *m = q[s + 4] & 63;
  } else {
    *sc = (q[s + 4] & 0x0F) | ((q[s - 4] >> 6) << 4);
    *m = (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
  }
}
// Q3_K's 6-bit scale of sub-block s (0..15), before its -32.
inline int32_t ScaleQ3K(const uint8_t* scales, int64_t s) {
  const int32_t low = s < 8 ? scales[s] & 0x0F : scales[s - 8] >> 4;
  const int32_t high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return low | (high << 4);
}
inline uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
// ScaleMinK4 for all eight sub-blocks as bytes, four at a time (the integer decode GEMVs' form,
// kquant_gemv.h): with words a, b, c of the 12 bytes, scales 0-3 are a's low six bits, mins 0-3
// b's, and scales (mins) 4-7 c's low (high) nibbles with a's (b's) top two bits above them.
inline void ScalesMinsK4(const uint8_t* q, uint8_t* sc, uint8_t* m) {
  const uint32_t a = Load32(q), b = Load32(q + 4), c = Load32(q + 8);
  const uint32_t words[4] = {a & 0x3F3F3F3Fu, (c & 0x0F0F0F0Fu) | (((a >> 6) & 0x03030303u) << 4), b & 0x3F3F3F3Fu,
                             ((c >> 4) & 0x0F0F0F0Fu) | (((b >> 6) & 0x03030303u) << 4)};
  std::memcpy(sc, words, 8);
  std::memcpy(m, words + 2, 8);
}
// Q5_0's and Q5_1's five bits of element j: its nibble, and bit j of qh (little-endian) above it.
inline int32_t Five(const uint8_t* qs, const uint8_t* qh, int64_t j) {
  return Nibble(qs, j, 16) | static_cast<int32_t>(((Load32(qh) >> j) & 1) << 4);
}

// Q4_K's and Q5_K's sub-block s: a = d * scale, c = -(dmin * min).
inline SubBlockScale KQuantScaleMin(uint16_t d, uint16_t dmin, const uint8_t* scales, int64_t s) {
  int32_t sc, m;
  ScaleMinK4(scales, s, &sc, &m);
  return {HalfToFloat(d) * static_cast<float>(sc), -(HalfToFloat(dmin) * static_cast<float>(m))};
}

#if LLM42_X86
// Eight bytes from p as int32 lanes, shifted right by `shift` and masked.
LLM42_AVX2 inline __m256i Bytes8(const uint8_t* p, int shift, int mask) {
  const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_and_si256(_mm256_srli_epi32(b, shift), _mm256_set1_epi32(mask));
}
// Lane l = bit l of `bits` (the low eight).
LLM42_AVX2 inline __m256i Bits8(uint32_t bits) {
  return _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(bits)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
                          _mm256_set1_epi32(1));
}
// Eight nibbles of a block whose element j < half is the low nibble of p[j], else the high one of
// p[j - half] (j a multiple of 8).
LLM42_AVX2 inline __m256i Nibbles8(const uint8_t* p, int64_t j, int64_t half) {
  return j < half ? Bytes8(p + j, 0, 0x0F) : Bytes8(p + j - half, 4, 0x0F);
}
// A 16-value grid's values (IQ4's, MXFP4's) of eight nibbles (as Nibbles8).
LLM42_AVX2 inline __m256i GridValues8(const int8_t* values, const uint8_t* p, int64_t j, int64_t half) {
  __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + (j < half ? j : j - half)));
  if (j >= half) b = _mm_srli_epi16(b, 4);
  b = _mm_and_si128(b, _mm_set1_epi8(0x0F));
  const __m128i grid = _mm_loadu_si128(reinterpret_cast<const __m128i*>(values));
  return _mm256_cvtepi8_epi32(_mm_shuffle_epi8(grid, b));
}
LLM42_AVX2 inline __m256i Iq4Values8(const uint8_t* p, int64_t j, int64_t half) {
  return GridValues8(kIq4NlValues, p, j, half);
}
// Five() of eight elements from j.
LLM42_AVX2 inline __m256i Five8(const uint8_t* qs, const uint8_t* qh, int64_t j) {
  return _mm256_or_si256(Nibbles8(qs, j, 16), _mm256_slli_epi32(Bits8(Load32(qh) >> j), 4));
}
#endif

struct Q4_1Format {
  using Block = BlockQ4_1;
  static constexpr int64_t kBlock = 32, kSub = 32;
  static constexpr bool kOffset = true;
  static SubBlockScale Scale(const Block& b, int64_t) { return {HalfToFloat(b.d), HalfToFloat(b.m)}; }
  static int32_t Q(const Block& b, int64_t j) { return Nibble(b.qs, j, 16); }
#if LLM42_X86
  LLM42_AVX2 static __m256i Q8(const Block& b, int64_t j) { return Nibbles8(b.qs, j, 16); }
#endif
};

struct Q5_0Format {
  using Block = BlockQ5_0;
  static constexpr int64_t kBlock = 32, kSub = 32;
  static constexpr bool kOffset = false;
  static SubBlockScale Scale(const Block& b, int64_t) { return {HalfToFloat(b.d), 0}; }
  static int32_t Q(const Block& b, int64_t j) { return Five(b.qs, b.qh, j) - 16; }
#if LLM42_X86
  LLM42_AVX2 static __m256i Q8(const Block& b, int64_t j) {
    return _mm256_sub_epi32(Five8(b.qs, b.qh, j), _mm256_set1_epi32(16));
  }
#endif
};

struct Q5_1Format {
  using Block = BlockQ5_1;
  static constexpr int64_t kBlock = 32, kSub = 32;
  static constexpr bool kOffset = true;
  static SubBlockScale Scale(const Block& b, int64_t) { return {HalfToFloat(b.d), HalfToFloat(b.m)}; }
  static int32_t Q(const Block& b, int64_t j) { return Five(b.qs, b.qh, j); }
#if LLM42_X86
  LLM42_AVX2 static __m256i Q8(const Block& b, int64_t j) { return Five8(b.qs, b.qh, j); }
#endif
};

// Q2_K: element j = 128h + 32t + l takes bits 2t..2t+1 of qs[32h + l]; sub-block j / 16 has
// a = d * (scales & 15), c = -(dmin * (scales >> 4)).
struct Q2_KFormat {
  using Block = BlockQ2_K;
  static constexpr int64_t kBlock = 256, kSub = 16;
  static constexpr bool kOffset = true;
  static SubBlockScale Scale(const Block& b, int64_t s) {
    const int32_t sc = b.scales[s];
    return {HalfToFloat(b.d) * static_cast<float>(sc & 15), -(HalfToFloat(b.dmin) * static_cast<float>(sc >> 4))};
  }
  static int32_t Q(const Block& b, int64_t j) { return (b.qs[32 * (j / 128) + j % 32] >> (2 * (j % 128 / 32))) & 3; }
#if LLM42_X86
  LLM42_AVX2 static __m256i Q8(const Block& b, int64_t j) {
    return Bytes8(b.qs + 32 * (j / 128) + j % 32, static_cast<int>(2 * (j % 128 / 32)), 3);
  }
#endif
};

// Q3_K: Q2_K's two bits, minus 4 where bit 4h + t of hmask[l] is clear; a = d * (scale - 32).
struct Q3_KFormat {
  using Block = BlockQ3_K;
  static constexpr int64_t kBlock = 256, kSub = 16;
  static constexpr bool kOffset = false;
  static SubBlockScale Scale(const Block& b, int64_t s) {
    return {HalfToFloat(b.d) * static_cast<float>(ScaleQ3K(b.scales, s) - 32), 0};
  }
  static int32_t Q(const Block& b, int64_t j) {
    const int64_t h = j / 128, t = j % 128 / 32, l = j % 32;
    const int32_t low = (b.qs[32 * h + l] >> (2 * t)) & 3;
    return low - (((b.hmask[l] >> (4 * h + t)) & 1) != 0 ? 0 : 4);
  }
#if LLM42_X86
  LLM42_AVX2 static __m256i Q8(const Block& b, int64_t j) {
    const int64_t h = j / 128, t = j % 128 / 32, l = j % 32;
    const __m256i low = Bytes8(b.qs + 32 * h + l, static_cast<int>(2 * t), 3);
    const __m256i high = Bytes8(b.hmask + l, static_cast<int>(4 * h + t), 1);
    return _mm256_sub_epi32(_mm256_add_epi32(low, _mm256_slli_epi32(high, 2)), _mm256_set1_epi32(4));
  }
#endif
};

// Q4_K: element j = 64p + 32u + l is nibble u of qs[32p + l]; sub-block j / 32 has
// a = d * scale, c = -(dmin * min).
struct Q4_KFormat {
  using Block = BlockQ4_K;
  static constexpr int64_t kBlock = 256, kSub = 32;
  static constexpr bool kOffset = true;
  static SubBlockScale Scale(const Block& b, int64_t s) { return KQuantScaleMin(b.d, b.dmin, b.scales, s); }
  static int32_t Q(const Block& b, int64_t j) { return Nibble(b.qs + 32 * (j / 64), j % 64, 32); }
#if LLM42_X86
  LLM42_AVX2 static __m256i Q8(const Block& b, int64_t j) { return Nibbles8(b.qs + 32 * (j / 64), j % 64, 32); }
#endif
};

// Q5_K: Q4_K plus 16 where bit j / 32 of qh[j % 32] is set.
struct Q5_KFormat {
  using Block = BlockQ5_K;
  static constexpr int64_t kBlock = 256, kSub = 32;
  static constexpr bool kOffset = true;
  static SubBlockScale Scale(const Block& b, int64_t s) { return KQuantScaleMin(b.d, b.dmin, b.scales, s); }
  static int32_t Q(const Block& b, int64_t j) {
    return Nibble(b.qs + 32 * (j / 64), j % 64, 32) | (((b.qh[j % 32] >> (j / 32)) & 1) << 4);
  }
#if LLM42_X86
  LLM42_AVX2 static __m256i Q8(const Block& b, int64_t j) {
    const __m256i high = Bytes8(b.qh + j % 32, static_cast<int>(j / 32), 1);
    return _mm256_or_si256(Nibbles8(b.qs + 32 * (j / 64), j % 64, 32), _mm256_slli_epi32(high, 4));
  }
#endif
};

// Q6_K: element j = 128h + 32t + l: low nibble (t < 2) or high of ql[64h + 32(t % 2) + l], bits
// 2t..2t+1 of qh[32h + l] above it, minus 32; a = d * scales[j / 16].
struct Q6_KFormat {
  using Block = BlockQ6_K;
  static constexpr int64_t kBlock = 256, kSub = 16;
  static constexpr bool kOffset = false;
  static SubBlockScale Scale(const Block& b, int64_t s) {
    return {HalfToFloat(b.d) * static_cast<float>(b.scales[s]), 0};
  }
  static int32_t Q(const Block& b, int64_t j) {
    const int64_t h = j / 128, t = j % 128 / 32, l = j % 32;
    const int32_t low = (b.ql[64 * h + 32 * (t % 2) + l] >> (4 * (t / 2))) & 0x0F;
    const int32_t high = (b.qh[32 * h + l] >> (2 * t)) & 3;
    return (low | (high << 4)) - 32;
  }
#if LLM42_X86
  LLM42_AVX2 static __m256i Q8(const Block& b, int64_t j) {
    const int64_t h = j / 128, t = j % 128 / 32, l = j % 32;
    const __m256i low = Bytes8(b.ql + 64 * h + 32 * (t % 2) + l, static_cast<int>(4 * (t / 2)), 0x0F);
    const __m256i high = Bytes8(b.qh + 32 * h + l, static_cast<int>(2 * t), 3);
    return _mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(high, 4)), _mm256_set1_epi32(32));
  }
#endif
};

struct IQ4_NLFormat {
  using Block = BlockIQ4_NL;
  static constexpr int64_t kBlock = 32, kSub = 32;
  static constexpr bool kOffset = false;
  static SubBlockScale Scale(const Block& b, int64_t) { return {HalfToFloat(b.d), 0}; }
  static int32_t Q(const Block& b, int64_t j) { return kIq4NlValues[Nibble(b.qs, j, 16)]; }
#if LLM42_X86
  LLM42_AVX2 static __m256i Q8(const Block& b, int64_t j) { return Iq4Values8(b.qs, j, 16); }
#endif
};

// IQ4_XS: sub-block s of 32 is an IQ4_NL block (qs[16s..16s+15]) with a = d * (scale - 32), the
// 6-bit scale's low nibble in scales_l[s / 2] (low half for even s), its high two bits at 2s of
// scales_h.
struct IQ4_XSFormat {
  using Block = BlockIQ4_XS;
  static constexpr int64_t kBlock = 256, kSub = 32;
  static constexpr bool kOffset = false;
  static SubBlockScale Scale(const Block& b, int64_t s) {
    const int32_t ls = ((b.scales_l[s / 2] >> (4 * (s % 2))) & 0x0F) | (((b.scales_h >> (2 * s)) & 3) << 4);
    return {HalfToFloat(b.d) * static_cast<float>(ls - 32), 0};
  }
  static int32_t Q(const Block& b, int64_t j) { return kIq4NlValues[Nibble(b.qs + 16 * (j / 32), j % 32, 16)]; }
#if LLM42_X86
  LLM42_AVX2 static __m256i Q8(const Block& b, int64_t j) { return Iq4Values8(b.qs + 16 * (j / 32), j % 32, 16); }
#endif
};

// MXFP4 (gpt-oss's experts): a block of 32 FP4 E2M1 values with one E8M0 scale; a = 2^(e - 128)
// (exact), q the doubled E2M1 value of the nibble.
struct MXFP4Format {
  using Block = BlockMXFP4;
  static constexpr int64_t kBlock = 32, kSub = 32;
  static constexpr bool kOffset = false;
  static SubBlockScale Scale(const Block& b, int64_t) { return {E8M0Half(b.e), 0}; }
  static int32_t Q(const Block& b, int64_t j) { return kMxfp4Values[Nibble(b.qs, j, 16)]; }
#if LLM42_X86
  LLM42_AVX2 static __m256i Q8(const Block& b, int64_t j) { return GridValues8(kMxfp4Values, b.qs, j, 16); }
#endif
};

// The element loader of a Format (weight_loaders.h's interface): weight i of a row.
template <typename F>
struct FormatLoader {
  using Format = F;
  static float At(const uint8_t* w, int64_t i) {
    const auto& b = reinterpret_cast<const typename F::Block*>(w)[i / F::kBlock];
    const int64_t j = i % F::kBlock;
    const SubBlockScale s = F::Scale(b, j / F::kSub);
    const float v = s.a * static_cast<float>(F::Q(b, j));
    return F::kOffset ? v + s.c : v;
  }
};

#if LLM42_X86
// Eight weights of a Format's row from i (a multiple of 8: never across a sub-block), At()'s bits.
template <typename F>
struct FormatVec {
  // About a byte per weight: the unit of the decode kernels' read-ahead distances, which need
  // not be exact.
  static constexpr int kBytes = 1;
  LLM42_AVX2 static __m256 Load8(const uint8_t* w, int64_t i) {
    const auto& b = reinterpret_cast<const typename F::Block*>(w)[i / F::kBlock];
    const int64_t j = i % F::kBlock;
    const SubBlockScale s = F::Scale(b, j / F::kSub);
    const __m256 v = _mm256_mul_ps(_mm256_set1_ps(s.a), _mm256_cvtepi32_ps(F::Q8(b, j)));
    return F::kOffset ? _mm256_add_ps(v, _mm256_set1_ps(s.c)) : v;
  }
};
#endif

}  // namespace llm42::internal

#endif  // LLM42_BACKEND_CPU_QUANT_FORMATS_H_
