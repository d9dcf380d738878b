#ifndef LLM42_BACKEND_CPU_FIXED_TREE_H_
#define LLM42_BACKEND_CPU_FIXED_TREE_H_

// The fixed family's reduction of an 8-lane accumulator, ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))
// (row_dot.h), on a 256-bit register: the one definition every AVX2/AVX-512 kernel uses, so
// their bits stay the portable code's.
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

}  // namespace llm42::internal
#endif

#endif  // LLM42_BACKEND_CPU_FIXED_TREE_H_
