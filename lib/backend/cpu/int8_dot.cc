#include "lib/backend/cpu/int8_dot.h"

#include <cmath>

#include "lib/backend/cpu/fixed_tree.h"
#include "lib/backend/cpu/row_dot.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define LLM42_X86 1
#endif

namespace llm42::internal {

void QuantizeActivations(const float* x, int64_t k, ActivationBlockQ8* out) {
  for (int64_t b = 0; b < k / 32; ++b) {
    const float* xb = x + 32 * b;
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    const float inv = d > 0 ? 1.0f / d : 0.0f;
    out[b].d = d;
    for (int i = 0; i < 32; ++i) out[b].q[i] = static_cast<int8_t>(std::lround(xb[i] * inv));
  }
}

#if LLM42_X86
namespace {

#define LLM42_AVX2 __attribute__((target("avx2,fma,f16c")))

// 32 signed weights times 32 signed activations, summed in pairs to eight int32 lanes, as f32.
// maddubs multiplies unsigned by signed: |w| times x with w's sign moved onto x (|w| <= 128,
// |x| <= 127, so a pair sum fits int16).
LLM42_AVX2 inline __m256 DotBlock(__m256i w, __m256i x) {
  const __m256i aw = _mm256_sign_epi8(w, w);
  const __m256i sx = _mm256_sign_epi8(x, w);
  const __m256i pairs = _mm256_maddubs_epi16(aw, sx);
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}


// The 32 integer weights of a block, and its scale.
struct Q8_0Weights {
  using Block = BlockQ8_0;
  LLM42_AVX2 static __m256i Load(const Block& b) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.q)); }
};
// ggml's q4_0 layout: element j < 16 is the low nibble of q[j], j >= 16 the high nibble of
// q[j - 16]; weight = nibble - 8.
struct Q4_0Weights {
  using Block = BlockQ4_0;
  LLM42_AVX2 static __m256i Load(const Block& b) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.q));
    const __m128i mask = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_and_si128(bytes, mask), hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
    return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
  }
};

// Block b's contribution: its integer dot product times both scales, into acc.
template <typename W>
LLM42_AVX2 inline __m256 Step(const typename W::Block* w, const ActivationBlockQ8* x, int64_t b, __m256 acc) {
  const __m256 p = DotBlock(W::Load(w[b]), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].q)));
  return _mm256_fmadd_ps(p, _mm256_set1_ps(_cvtsh_ss(w[b].scale) * x[b].d), acc);
}

// Two accumulators over alternate blocks, to halve the loop-carried chain.
template <typename W>
LLM42_AVX2 float BlockInt8Dot(const uint8_t* w_row, const ActivationBlockQ8* x, int64_t k) {
  const auto* w = reinterpret_cast<const typename W::Block*>(w_row);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  const int64_t n = k / 32;
  int64_t b = 0;
  for (; b + 1 < n; b += 2) {
    acc0 = Step<W>(w, x, b, acc0);
    acc1 = Step<W>(w, x, b + 1, acc1);
  }
  if (b < n) acc0 = Step<W>(w, x, b, acc0);
  return FixedTreeSum(_mm256_add_ps(acc0, acc1));
}

template <typename W>
LLM42_AVX2 void BlockInt8Dot2(const uint8_t* w_row, const ActivationBlockQ8* x0, const ActivationBlockQ8* x1,
                              int64_t k, float* out) {
  const auto* w = reinterpret_cast<const typename W::Block*>(w_row);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (int64_t b = 0; b < k / 32; ++b) {
    const __m256i wq = W::Load(w[b]);
    const float d = _cvtsh_ss(w[b].scale);
    const __m256 p0 = DotBlock(wq, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x0[b].q)));
    const __m256 p1 = DotBlock(wq, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x1[b].q)));
    acc0 = _mm256_fmadd_ps(p0, _mm256_set1_ps(d * x0[b].d), acc0);
    acc1 = _mm256_fmadd_ps(p1, _mm256_set1_ps(d * x1[b].d), acc1);
  }
  out[0] = FixedTreeSum(acc0);
  out[1] = FixedTreeSum(acc1);
}

}  // namespace
#endif  // LLM42_X86

Int8Kernels SelectInt8Kernels(GgmlType type, bool allow_simd) {
#if LLM42_X86
  if (allow_simd && CpuHasAvx2()) {
    if (type == GgmlType::kQ8_0) return {BlockInt8Dot<Q8_0Weights>, BlockInt8Dot2<Q8_0Weights>};
    if (type == GgmlType::kQ4_0) return {BlockInt8Dot<Q4_0Weights>, BlockInt8Dot2<Q4_0Weights>};
  }
#endif
  (void)type;
  (void)allow_simd;
  return {};
}

}  // namespace llm42::internal
