#include "lib/backend/cpu/round_row.h"

#include <cstring>

#include "lib/backend/cpu/row_dot.h"
#include "lib/backend/cpu/simd_targets.h"
#include "lib/util/ggml_types.h"

namespace llm42::internal {
namespace {

#if LLM42_X86
LLM42_AVX2 int64_t RoundRowToF16Avx2(const float* src, int64_t n, uint8_t* dst) {
  const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
  const __m256 quiet_nan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_loadu_ps(src + i);
    // A NaN becomes the quiet NaN of its sign, whose f16 is sign | 0x7E00 (the scalar result).
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    x = _mm256_blendv_ps(x, _mm256_or_ps(_mm256_and_ps(x, sign), quiet_nan), nan);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
  }
  return i;
}

LLM42_AVX2 int64_t RoundRowToBf16Avx2(const float* src, int64_t n, uint8_t* dst) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
  const __m256i half = _mm256_set1_epi32(0x7FFF), one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i high = _mm256_srli_epi32(x, 16);
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(half, _mm256_and_si256(high, one))), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf);
    const __m256i r = _mm256_blendv_epi8(rounded, _mm256_or_si256(high, quiet), nan);
    // Lanes hold 0..0xFFFF: the unsigned-saturating pack keeps them as they are.
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i),
                     _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)));
  }
  return i;
}
#endif

using Avx2Round = int64_t (*)(const float* src, int64_t n, uint8_t* dst);
#if LLM42_X86
constexpr Avx2Round kF16Avx2 = RoundRowToF16Avx2, kBf16Avx2 = RoundRowToBf16Avx2;
#else
constexpr Avx2Round kF16Avx2 = nullptr, kBf16Avx2 = nullptr;
#endif

// The AVX2 kernel's values where allowed and the CPU has it (it returns how many it rounded),
// kScalar's for the rest.
template <uint16_t (*kScalar)(float)>
void RoundRow(Avx2Round avx2, const float* src, int64_t n, uint8_t* dst, bool allow_simd) {
  const int64_t done = avx2 != nullptr && allow_simd && CpuHasAvx2() ? avx2(src, n, dst) : 0;
  for (int64_t i = done; i < n; ++i) {
    const uint16_t h = kScalar(src[i]);
    std::memcpy(dst + 2 * i, &h, sizeof(h));
  }
}

}  // namespace

void RoundRowToF16(const float* src, int64_t n, uint8_t* dst, bool allow_simd) {
  RoundRow<Fp32ToFp16>(kF16Avx2, src, n, dst, allow_simd);
}

void RoundRowToBf16(const float* src, int64_t n, uint8_t* dst, bool allow_simd) {
  RoundRow<Fp32ToBf16>(kBf16Avx2, src, n, dst, allow_simd);
}

}  // namespace llm42::internal
