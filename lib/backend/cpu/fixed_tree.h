#ifndef LLM42_BACKEND_CPU_FIXED_TREE_H_
#define LLM42_BACKEND_CPU_FIXED_TREE_H_

// The fixed family's reduction of an 8-lane accumulator, ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))
// (row_dot.h), on a 256-bit register, eight of them at once on 256-bit registers and sixteen on
// 512-bit ones: the definitions every AVX2/AVX-512 kernel uses, so their bits stay the portable
// code's.
namespace llm42::internal {

// The tree on eight values in scalar code (the portable kernels).
inline float FixedTreeSum(const float (&v)[8]) {
  float h[4];
  for (int l = 0; l < 4; ++l) h[l] = v[l] + v[l + 4];
  return (h[0] + h[2]) + (h[1] + h[3]);
}

}  // namespace llm42::internal

#if defined(__x86_64__)
#include "lib/backend/cpu/simd_targets.h"

namespace llm42::internal {

__attribute__((target("avx2"))) inline float FixedTreeSum(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);              // l0+l4, l1+l5, l2+l6, l3+l7
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));     // (l0+l4)+(l2+l6), (l1+l5)+(l3+l7)
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Eight 8-lane accumulators reduced with the fixed tree at once on 256-bit registers: lane j of
// the result is a[j]'s sum. Halves first add lanes l and l + 4, then (l0+l4)+(l2+l6) and
// (l1+l5)+(l3+l7), then those two (the order above; addition commutes bit for bit).
__attribute__((target("avx2"))) inline __m256 FixedTreeSum8(const __m256 (&a)[8]) {
  __m256 s1[4];  // 128-bit lane 0: a[2i]'s (l0+l4, l1+l5, l2+l6, l3+l7), lane 1: a[2i + 1]'s
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    s1[i] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x20),
                          _mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x31));
  }
  // Lane 0: a0's (even, odd) sums, a2's; lane 1: a1's, a3's (then a4..a7 likewise).
  const __m256 s2a = _mm256_add_ps(_mm256_shuffle_ps(s1[0], s1[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(s1[0], s1[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 s2b = _mm256_add_ps(_mm256_shuffle_ps(s1[2], s1[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(s1[2], s1[3], _MM_SHUFFLE(3, 2, 3, 2)));
  // Lane 0: a0, a2, a4, a6; lane 1: a1, a3, a5, a7; then in order.
  const __m256 sums = _mm256_add_ps(_mm256_shuffle_ps(s2a, s2b, _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm256_shuffle_ps(s2a, s2b, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm256_permutevar8x32_ps(sums, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Four 8-lane accumulators reduced with the fixed tree at once: lane j of the result is a[j]'s
// sum (FixedTreeSum8's steps on half as many registers).
__attribute__((target("avx2"))) inline __m128 FixedTreeSum4(const __m256 (&a)[4]) {
  // 128-bit lane 0: a0's (l0+l4, l1+l5, l2+l6, l3+l7), lane 1: a1's (then a2, a3).
  const __m256 s01 = _mm256_add_ps(_mm256_permute2f128_ps(a[0], a[1], 0x20), _mm256_permute2f128_ps(a[0], a[1], 0x31));
  const __m256 s23 = _mm256_add_ps(_mm256_permute2f128_ps(a[2], a[3], 0x20), _mm256_permute2f128_ps(a[2], a[3], 0x31));
  // Lane 0: a0's ((l0+l4)+(l2+l6), (l1+l5)+(l3+l7)), a2's; lane 1: a1's, a3's.
  const __m256 s2 = _mm256_add_ps(_mm256_shuffle_ps(s01, s23, _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm256_shuffle_ps(s01, s23, _MM_SHUFFLE(3, 2, 3, 2)));
  // Lane 0: a0, a2 (twice); lane 1: a1, a3.
  const __m256 sums = _mm256_add_ps(_mm256_shuffle_ps(s2, s2, _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm256_shuffle_ps(s2, s2, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm_unpacklo_ps(_mm256_castps256_ps128(sums), _mm256_extractf128_ps(sums, 1));
}

// Sixteen 8-lane accumulators reduced with the fixed tree at once, on transposed registers:
// input c of (x[j], y[j]) — c = 0: x[j]'s low half, 1: its high half, 2 and 3: y[j]'s — lands in
// quarter c, lane j of the result. Quarters first add lanes l and l + 4, then pairs add
// (l0+l4)+(l2+l6) and (l1+l5)+(l3+l7), then those two add.
LLM42_AVX512 inline __m512 FixedTreeSum16(const __m512 (&x)[4], const __m512 (&y)[4]) {
  __m512 s1[4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    // Quarters c = the four inputs of j: (l0+l4, l1+l5, l2+l6, l3+l7).
    s1[j] = _mm512_add_ps(_mm512_shuffle_f32x4(x[j], y[j], _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_f32x4(x[j], y[j], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // Per quarter: j = 0, 1 (then 2, 3) as ((l0+l4)+(l2+l6), (l1+l5)+(l3+l7)) pairs.
  const __m512 s2a = _mm512_add_ps(_mm512_shuffle_ps(s1[0], s1[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_ps(s1[0], s1[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 s2b = _mm512_add_ps(_mm512_shuffle_ps(s1[2], s1[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_ps(s1[2], s1[3], _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_shuffle_ps(s2a, s2b, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(s2a, s2b, _MM_SHUFFLE(3, 1, 3, 1)));
}

}  // namespace llm42::internal
#endif

#endif  // LLM42_BACKEND_CPU_FIXED_TREE_H_
