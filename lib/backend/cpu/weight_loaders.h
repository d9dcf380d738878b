#ifndef LLM42_BACKEND_CPU_WEIGHT_LOADERS_H_
#define LLM42_BACKEND_CPU_WEIGHT_LOADERS_H_

// Access to the elements of a weight row or a stored K/V row in their storage type, as f32
// (exact conversions): scalar (the portable kernels of row_dot.cc and int8_dot.cc, the embedding
// lookup, attention) and eight at a time on AVX2.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "lib/util/ggml_types.h"

#include "lib/backend/cpu/quant_formats.h"
#include "lib/backend/cpu/simd_targets.h"

namespace llm42::internal {

// Element loaders: weight i of a row as f32.
struct F32Loader {
  static float At(const uint8_t* w, int64_t i) {
    float f;
    std::memcpy(&f, w + 4 * i, 4);
    return f;
  }
};
struct F16Loader {
  static float At(const uint8_t* w, int64_t i) {
    uint16_t h;
    std::memcpy(&h, w + 2 * i, 2);
    return Fp16ToFp32(h);
  }
};
struct Bf16Loader {
  static float At(const uint8_t* w, int64_t i) {
    uint16_t h;
    std::memcpy(&h, w + 2 * i, 2);
    return Bf16ToFp32(h);
  }
};
// Quantized types: weight i is Scale(block) * Q(i), Q an integer.
struct Q8_0Loader {
  static float Q(const uint8_t* w, int64_t i) {
    return static_cast<float>((reinterpret_cast<const BlockQ8_0*>(w) + i / 32)->q[i % 32]);
  }
  static float Scale(const uint8_t* w, int64_t block) {
    return Fp16ToFp32((reinterpret_cast<const BlockQ8_0*>(w) + block)->scale);
  }
  static float At(const uint8_t* w, int64_t i) { return Scale(w, i / 32) * Q(w, i); }
};

struct Q4_0Loader {
  static float Q(const uint8_t* w, int64_t i) {
    const auto* b = reinterpret_cast<const BlockQ4_0*>(w) + i / 32;
    const int64_t j = i % 32;
    return static_cast<float>((j < 16 ? (b->q[j] & 0x0F) : (b->q[j - 16] >> 4)) - 8);
  }
  static float Scale(const uint8_t* w, int64_t block) {
    return Fp16ToFp32((reinterpret_cast<const BlockQ4_0*>(w) + block)->scale);
  }
  static float At(const uint8_t* w, int64_t i) { return Scale(w, i / 32) * Q(w, i); }
};

// fn(Loader{}) with the element loader of `type` (f32, f16, bf16, q8_0, q4_0, and quant_formats.h's
// types), and true; false, without calling fn, for any other type. The one type-to-loader dispatch.
template <typename Fn>
bool WithElementLoader(GgmlType type, Fn&& fn) {
  switch (type) {
    case GgmlType::kF32: fn(F32Loader{}); return true;
    case GgmlType::kF16: fn(F16Loader{}); return true;
    case GgmlType::kBF16: fn(Bf16Loader{}); return true;
    case GgmlType::kQ8_0: fn(Q8_0Loader{}); return true;
    case GgmlType::kQ4_0: fn(Q4_0Loader{}); return true;
    case GgmlType::kQ4_1: fn(FormatLoader<Q4_1Format>{}); return true;
    case GgmlType::kQ5_0: fn(FormatLoader<Q5_0Format>{}); return true;
    case GgmlType::kQ5_1: fn(FormatLoader<Q5_1Format>{}); return true;
    case GgmlType::kQ2_K: fn(FormatLoader<Q2_KFormat>{}); return true;
    case GgmlType::kQ3_K: fn(FormatLoader<Q3_KFormat>{}); return true;
    case GgmlType::kQ4_K: fn(FormatLoader<Q4_KFormat>{}); return true;
    case GgmlType::kQ5_K: fn(FormatLoader<Q5_KFormat>{}); return true;
    case GgmlType::kQ6_K: fn(FormatLoader<Q6_KFormat>{}); return true;
    case GgmlType::kIQ4_NL: fn(FormatLoader<IQ4_NLFormat>{}); return true;
    case GgmlType::kIQ4_XS: fn(FormatLoader<IQ4_XSFormat>{}); return true;
    case GgmlType::kMXFP4: fn(FormatLoader<MXFP4Format>{}); return true;
    default: return false;
  }
}

// Whether loader L's type runs the float kernels (row_dot.h, packed_gemm.h): every type but q8_0
// and q4_0, whose kernels are int8_dot.h's.
template <typename L>
inline constexpr bool kFloatKernels = !std::is_same_v<L, Q8_0Loader> && !std::is_same_v<L, Q4_0Loader>;

// True for the types quant_formats.h decodes (their kernels are the float ones on exact values).
inline bool IsFormatType(GgmlType type) {
  bool format = false;
  WithElementLoader(type, [&](auto l) { format = requires { typename decltype(l)::Format; }; });
  return format;
}

#if defined(__x86_64__)

// How far ahead of the weights it reads a decode kernel asks for more (software prefetch, one
// per cache line). Decode streams every weight from memory once per token; the hardware
// prefetchers alone left llama-110m f16's GEMVs at 0.65 of the read bandwidth on a Zen 3 with 8
// interleaved rows, 0.70 one row at a time; one row with a 4 KiB lead reached 0.90-0.97 (1 KiB:
// 0.80-0.96, 16 KiB: 0.89-0.91), in a microbenchmark of the same loop.
inline constexpr int64_t kStreamPrefetchBytes = 4096;

// Asks for every cache line that [p, p + bytes) touches (software prefetch into L1), once each.
inline void PrefetchSpan(const uint8_t* p, int64_t bytes) {
  const auto first = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63};
  for (uintptr_t a = first; a < reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(bytes); a += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(a), _MM_HINT_T0);
  }
}

// Asks for the cache lines of [p, p + kBytes) (kBytes a compile-time span of a few lines): every
// 64 bytes from p and the last byte, so the loop unrolls to a few prefetches and no alignment test.
template <int64_t kBytes>
inline void PrefetchLines(const void* p) {
  const char* c = static_cast<const char*>(p);
  for (int64_t i = 0; i < kBytes; i += 64) _mm_prefetch(c + i, _MM_HINT_T0);
  if constexpr (kBytes % 64 != 1) _mm_prefetch(c + kBytes - 1, _MM_HINT_T0);
}

// Eight weights starting at i (i a multiple of 8) as f32.
struct F32Vec {
  static constexpr int kBytes = 4;  // per element in the row
  LLM42_AVX2 static __m256 Load8(const uint8_t* w, int64_t i) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(w) + i);
  }
};
struct F16Vec {
  static constexpr int kBytes = 2;
  LLM42_AVX2 static __m256 Load8(const uint8_t* w, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * i)));
  }
};
struct Bf16Vec {
  static constexpr int kBytes = 2;
  LLM42_AVX2 static __m256 Load8(const uint8_t* w, int64_t i) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  }
};

// Eight weights of a quantized row from i (i a multiple of 8) as f32: scale * integer, the
// loaders' At() bits (the product of an f16 scale and a small integer is exact in f32).
struct Q8_0Vec {
  LLM42_AVX2 static __m256 Load8(const uint8_t* w, int64_t i) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(w) + i / 32;
    const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b->q + i % 32)));
    return _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(b->scale)), _mm256_cvtepi32_ps(q));
  }
};
struct Q4_0Vec {
  LLM42_AVX2 static __m256 Load8(const uint8_t* w, int64_t i) {
    const auto* b = reinterpret_cast<const BlockQ4_0*>(w) + i / 32;
    const int64_t j = i % 32;
    __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b->q + j % 16));
    if (j >= 16) bytes = _mm_srli_epi16(bytes, 4);
    const __m256i q = _mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_and_si128(bytes, _mm_set1_epi8(0x0F))), _mm256_set1_epi32(8));
    return _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(b->scale)), _mm256_cvtepi32_ps(q));
  }
};

// The eight-wide loader of element loader L's type (WithElementLoader then dispatches both).
template <typename L>
struct VecOfLoader;
template <>
struct VecOfLoader<F32Loader> { using type = F32Vec; };
template <>
struct VecOfLoader<F16Loader> { using type = F16Vec; };
template <>
struct VecOfLoader<Bf16Loader> { using type = Bf16Vec; };
template <>
struct VecOfLoader<Q8_0Loader> { using type = Q8_0Vec; };
template <>
struct VecOfLoader<Q4_0Loader> { using type = Q4_0Vec; };
template <typename F>
struct VecOfLoader<FormatLoader<F>> { using type = FormatVec<F>; };
template <typename L>
using VecOf = typename VecOfLoader<L>::type;

// Sixteen elements of a row in L's type from i, as f32 (AVX-512 F).
template <typename L>
LLM42_AVX512 inline __m512 Load16(const uint8_t* p, int64_t i) {
  if constexpr (std::is_same_v<L, F16Loader>) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * i)));
  } else if constexpr (std::is_same_v<L, Bf16Loader>) {
    const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * i)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
  } else if constexpr (std::is_same_v<L, F32Loader>) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(p) + i);
  } else {  // two eight-element loads (quant_formats.h's types)
    return _mm512_insertf32x8(_mm512_castps256_ps512(VecOf<L>::Load8(p, i)), VecOf<L>::Load8(p, i + 8), 1);
  }
}
#endif

}  // namespace llm42::internal

#endif  // LLM42_BACKEND_CPU_WEIGHT_LOADERS_H_
